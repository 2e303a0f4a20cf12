"""Kafka's zigzag varints decoded at many positions of a byte array at once (numpy): the Arrow decode path
and the cleaner read every record's fields this way, so per-record fields never pass through a Python loop.
One varint at a time is ``varint``.
"""

from __future__ import annotations

import numpy as np

from .errors import CorruptRecordError
from .varint import VARLONG_MAX_BYTES


def _pair_tables() -> tuple[np.ndarray, np.ndarray]:
    """A varint's value and size by its first two bytes (the second as the high byte of a uint16); size 0
    where it runs past two bytes."""
    pair = np.arange(1 << 16, dtype=np.int64)
    low, high = pair & 0xFF, pair >> 8
    raw = np.where(low < 0x80, low, (low & 0x7F) | (high << 7))
    size = np.where(low < 0x80, 1, np.where(high < 0x80, 2, 0))
    return (raw >> 1) ^ -(raw & 1), size


_VALUE_BY_PAIR, _SIZE_BY_PAIR = _pair_tables()


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
    if max_bytes >= 2 and positions.size and positions.min() >= 0 and positions.max() < n - 1:
        # Lengths, deltas and counts under 8 KiB take one or two bytes: the two bytes at every position,
        # as one uint16, look up the varint's value and size.
        pair = data[1:].take(positions).astype(np.uint16)
        pair <<= 8
        pair |= data.take(positions)
        size = _SIZE_BY_PAIR.take(pair)
        if size.all():
            return _VALUE_BY_PAIR.take(pair), positions + size
    if positions.size and (positions.min() < 0 or positions.max() >= n):
        bad = int(positions[(positions < 0) | (positions >= n)][0])
        raise CorruptRecordError("varint starts outside the buffer", position=bad)
    first = data[positions]
    more = first >= 0x80
    if not more.any():
        raw = first.astype(np.int64)
        return (raw >> 1) ^ -(raw & 1), positions + 1
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
