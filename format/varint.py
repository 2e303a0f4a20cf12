"""Kafka's variable-length integers (protobuf style, zigzag-signed).

Scalar encode/decode for building records, and a vectorized decoder that reads
one varint at each of many positions of a byte array at once, used by the Arrow
decode path so per-record fields never pass through a Python loop.
"""

from __future__ import annotations

import numpy as np

from .errors import CorruptRecordError

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def zigzag_encode(value: int) -> int:
    """Map a signed integer onto an unsigned one so small magnitudes stay small."""
    return (value << 1) ^ (value >> 63) if value < 0 else value << 1


def zigzag_decode(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def _encode_unsigned(raw: int) -> bytes:
    if raw < 0x80:
        return bytes((raw,))
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """A signed 32-bit value as a zigzag varint (Kafka's ``ByteUtils.writeVarint``)."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint {value} is outside int32")
    return _encode_unsigned(zigzag_encode(value) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    """A signed 64-bit value as a zigzag varlong (Kafka's ``ByteUtils.writeVarlong``)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong {value} is outside int64")
    return _encode_unsigned(zigzag_encode(value) & 0xFFFFFFFFFFFFFFFF)


def encode_unsigned_varint(value: int) -> bytes:
    """An unsigned varint, as the flexible protocol versions use for lengths."""
    if value < 0:
        raise ValueError(f"unsigned varint {value} is negative")
    return _encode_unsigned(value)


def size_of_varint(value: int) -> int:
    return len(encode_varint(value))


def size_of_varlong(value: int) -> int:
    return len(encode_varlong(value))


def _decode_unsigned(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    for i in range(max_bytes):
        try:
            b = buf[pos + i]
        except IndexError:
            raise CorruptRecordError("varint runs past the end of the buffer", position=pos) from None
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position=pos)


def decode_varint(buf, pos: int) -> tuple[int, int]:
    """Read a zigzag varint at ``pos``; returns (value, position after it)."""
    raw, end = _decode_unsigned(buf, pos, VARINT_MAX_BYTES)
    if raw >> 32:
        raise CorruptRecordError("varint overflows int32", position=pos)
    return zigzag_decode(raw), end


def decode_varlong(buf, pos: int) -> tuple[int, int]:
    """Read a zigzag varlong at ``pos``; returns (value, position after it)."""
    raw, end = _decode_unsigned(buf, pos, VARLONG_MAX_BYTES)
    if raw >> 64:
        raise CorruptRecordError("varlong overflows int64", position=pos)
    return zigzag_decode(raw), end


def decode_unsigned_varint(buf, pos: int) -> tuple[int, int]:
    return _decode_unsigned(buf, pos, VARINT_MAX_BYTES)


def decode_varints_at(data: np.ndarray, positions: np.ndarray, max_bytes: int = VARLONG_MAX_BYTES
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Decode one zigzag varint at every position of ``positions`` in ``data``.

    ``data`` is a uint8 array, ``positions`` an int64 array. Returns (values as
    int64, positions just after each varint). Work is proportional to the
    number of varint bytes: each round only touches the varints still open, so
    the usual one- and two-byte varints cost one or two vectorized gathers.
    Raises CorruptRecordError (position = the varint's start) on a varint that
    runs off the end or past ``max_bytes``.
    """
    n = len(data)
    if positions.size and (positions.min() < 0 or positions.max() >= n):
        bad = int(positions[(positions < 0) | (positions >= n)][0])
        raise CorruptRecordError("varint starts outside the buffer", position=bad)
    first = data[positions]
    more = first >= 0x80
    if not more.any():
        raw = first.astype(np.int64)
        return (raw >> 1) ^ -(raw & 1), positions + 1
    if max_bytes >= 2 and positions.max() < n - 1:
        # Lengths, deltas and counts under 8 KiB take one or two bytes: decoded on every
        # position at once, without gathering the open ones by index. A second byte counts
        # only after a first with its continuation bit set (multiplied by ``more``).
        second = data[positions + 1]
        if not (first & second & 0x80).any():
            raw = (first & 0x7F).astype(np.int64)
            raw |= second.astype(np.int64) * (more * 0x80)
            ends = positions + more
            ends += 1
            return (raw >> 1) ^ -(raw & 1), ends
    return _decode_varints_in_rounds(data, positions, first, max_bytes)


def _decode_varints_in_rounds(data: np.ndarray, positions: np.ndarray, first: np.ndarray, max_bytes: int
                              ) -> tuple[np.ndarray, np.ndarray]:
    """``decode_varints_at`` for varints of any length: one round per byte, over the varints still open."""
    n = len(data)
    raw = (first & 0x7F).astype(np.uint64)
    ends = positions + 1
    open_idx = np.flatnonzero(first & 0x80)
    shift = 7
    while open_idx.size:
        if shift >= 7 * max_bytes:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes",
                                     position=int(positions[open_idx[0]]))
        at = ends[open_idx]
        if at.max() >= n:
            raise CorruptRecordError("varint runs past the end of the buffer",
                                     position=int(positions[open_idx[at >= n][0]]))
        b = data[at]
        raw[open_idx] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        ends[open_idx] = at + 1
        open_idx = open_idx[(b & 0x80) != 0]
        shift += 7
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, ends
