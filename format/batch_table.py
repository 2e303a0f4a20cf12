"""The batches of a buffer as columns: their positions and every header field as numpy arrays.

A reader decoding a chunk of a segment into Arrow needs each batch's header,
never a Python object per batch. The walk from one length prefix to the next
is serial and stays in Python (one unpack per batch, with ``iter_batches``'
checks of length and magic in the same order); the header fields are then
gathered for every batch at once, and the checks of ``RecordBatch.ensure_valid``
run over the columns, only the CRC calling out once per batch. Where a check
fails, the failing batch is handed to the per-batch code, so the error and the
batch it names are those ``iter_batches`` and ``ensure_valid`` give.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c as _crc32c
import numpy as np

from .errors import CorruptRecordError
from .record_batch import (ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, CURRENT_MAGIC,
                           LOG_OVERHEAD, MAGIC_OFFSET, MIN_BATCH_LENGTH, RECORD_BATCH_OVERHEAD,
                           TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK, BatchHeader, RecordBatch)

# The 61-byte header of a v2 batch (``record_batch.HEADER``), as a numpy record.
HEADER_DTYPE = np.dtype([
    ("base_offset", ">i8"), ("batch_length", ">i4"), ("partition_leader_epoch", ">i4"), ("magic", "i1"),
    ("crc", ">u4"), ("attributes", ">i2"), ("last_offset_delta", ">i4"), ("base_timestamp", ">i8"),
    ("max_timestamp", ">i8"), ("producer_id", ">i8"), ("producer_epoch", ">i2"), ("base_sequence", ">i4"),
    ("records_count", ">i4"),
])
assert HEADER_DTYPE.itemsize == RECORD_BATCH_OVERHEAD

_BASE_AND_LENGTH = struct.Struct(">qi")
_HEADER_BYTES = np.arange(RECORD_BATCH_OVERHEAD, dtype=np.int64)


@dataclass(frozen=True)
class BatchTable:
    """The whole batches of ``data`` a walk found: ``positions`` (in ``data``) and ``headers`` (a
    ``HEADER_DTYPE`` array), one entry per batch in file order. ``base_position`` is where ``data``
    starts in its file and ``path`` names the file; both only serve error messages."""

    data: bytes
    positions: np.ndarray
    headers: np.ndarray
    base_position: int = 0
    path: str | None = None

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, index: slice) -> "BatchTable":
        return BatchTable(self.data, self.positions[index], self.headers[index], self.base_position, self.path)

    @property
    def sizes(self) -> np.ndarray:
        return self.headers["batch_length"].astype(np.int64) + LOG_OVERHEAD

    @property
    def ends(self) -> np.ndarray:
        """Where each batch ends in ``data``."""
        return self.positions + self.sizes

    @property
    def base_offsets(self) -> np.ndarray:
        return self.headers["base_offset"].astype(np.int64)

    @property
    def last_offsets(self) -> np.ndarray:
        return self.base_offsets + self.headers["last_offset_delta"]

    @property
    def file_positions(self) -> np.ndarray:
        return self.positions + self.base_position

    def attribute(self, mask: int) -> np.ndarray:
        return (self.headers["attributes"] & mask) != 0

    @property
    def is_control(self) -> np.ndarray:
        return self.attribute(CONTROL_FLAG_MASK)

    @property
    def is_transactional(self) -> np.ndarray:
        return self.attribute(TRANSACTIONAL_FLAG_MASK)

    @property
    def is_log_append_time(self) -> np.ndarray:
        return self.attribute(TIMESTAMP_TYPE_MASK)

    @property
    def is_compressed(self) -> np.ndarray:
        return self.attribute(COMPRESSION_CODEC_MASK)

    def batch(self, i: int) -> RecordBatch:
        """Batch ``i`` as a ``RecordBatch`` view into ``data``."""
        pos = int(self.positions[i])
        size = int(self.headers["batch_length"][i]) + LOG_OVERHEAD
        view = memoryview(self.data)[pos:pos + size]
        return RecordBatch(view, BatchHeader.parse(view), self.base_position + pos, self.path)

    def batches(self) -> list[RecordBatch]:
        return [self.batch(i) for i in range(len(self))]

    def ensure_valid(self) -> None:
        """``RecordBatch.ensure_valid`` for every batch; raises for the first that fails it."""
        h = self.headers
        count, delta = h["records_count"], h["last_offset_delta"]
        bad = ((h["batch_length"] < MIN_BATCH_LENGTH) | (h["magic"] != CURRENT_MAGIC) | (count < 0) | (delta < 0)
               | ((count > delta.astype(np.int64) + 1) & (count != 0)))
        first_bad = int(np.argmax(bad)) if bad.any() else len(self)
        crc = _crc32c.crc32c
        data = memoryview(self.data)
        starts = (self.positions[:first_bad] + ATTRIBUTES_OFFSET).tolist()
        ends = self.ends[:first_bad].tolist()
        for i, (start, end, stored) in enumerate(zip(starts, ends, h["crc"][:first_bad].tolist())):
            if crc(data[start:end]) != stored:
                first_bad = i
                break
        if first_bad < len(self):
            self.batch(first_bad).ensure_valid()
            raise AssertionError(f"batch {first_bad} of {self.path} failed a check ensure_valid passes")


def walk_batches(data: bytes, *, path: str | None = None, base_position: int = 0, stop_at_partial: bool = True,
                 until_offset: int | None = None) -> BatchTable:
    """The whole batches of ``data`` from its start, as ``iter_batches`` walks them (the same
    checks, raising for the same batch). With ``until_offset``, the walk ends after the first batch
    whose base offset is at or above it (that batch included, so the caller may check it)."""
    unpack = _BASE_AND_LENGTH.unpack_from
    end = len(data)
    positions = []
    append = positions.append
    pos = 0
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if stop_at_partial:
                break
            raise CorruptRecordError(f"truncated batch: {end - pos} bytes left, fewer than the "
                                     f"{LOG_OVERHEAD}-byte log overhead", path=path, position=base_position + pos)
        base_offset, batch_length = unpack(data, pos)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} is below the minimum {MIN_BATCH_LENGTH}",
                                     path=path, position=base_position + pos)
        size = batch_length + LOG_OVERHEAD
        if pos + size > end:
            if stop_at_partial:
                break
            raise CorruptRecordError(f"truncated batch: length {batch_length} needs {size} bytes, "
                                     f"{end - pos} left", path=path, position=base_position + pos)
        if data[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
            raise CorruptRecordError(f"unsupported magic {data[pos + MAGIC_OFFSET]} (expected {CURRENT_MAGIC})",
                                     path=path, position=base_position + pos)
        append(pos)
        if until_offset is not None and base_offset >= until_offset:
            break
        pos += size
    at = np.array(positions, dtype=np.int64)
    raw = np.frombuffer(data, dtype=np.uint8)[at[:, None] + _HEADER_BYTES]
    return BatchTable(data, at, raw.view(HEADER_DTYPE).reshape(len(at)), base_position, path)
