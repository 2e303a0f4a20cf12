"""Kafka's variable-length integers (protobuf style, zigzag-signed), one at a time: encode and decode for
building and reading records. The vectorized decoder, for many records at once, is ``varint_arrays``.
"""

from __future__ import annotations

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
