"""RecordBatch v2 (magic 2): Kafka's batch header, validation, building and iteration.

    offset  field                  type    covered by CRC
    0       baseOffset             int64   no  (the broker assigns it)
    8       batchLength            int32   no  (bytes after this field)
    12      partitionLeaderEpoch   int32   no  (the broker stamps it)
    16      magic                  int8    no
    17      crc                    uint32  —   CRC-32C of bytes 21..end
    21      attributes             int16   yes
    23      lastOffsetDelta        int32   yes
    27      baseTimestamp          int64   yes
    35      maxTimestamp           int64   yes
    43      producerId             int64   yes
    51      producerEpoch          int16   yes
    53      baseSequence           int32   yes
    57      recordsCount           int32   yes
    61      records...

Attributes: bits 0-2 compression, bit 3 timestamp type (1 = LogAppendTime),
bit 4 transactional, bit 5 control, bit 6 delete horizon (baseTimestamp then
holds the delete horizon set by the cleaner).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Iterator, Sequence

import crc32c as _crc32c

from .compression import CompressionType, compress, decompress
from .control import ControlRecordType, EndTransactionMarker
from .errors import CorruptRecordError, InvalidRecordError
from .record import Record, SimpleRecord, decode_record, encode_record

HEADER = struct.Struct(">qiibIhiqqqhii")
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = RECORDS_OFFSET
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the length-counted bytes
MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
CURRENT_MAGIC = 2

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT32_MAX = (1 << 31) - 1
_STRUCT_I32 = struct.Struct(">i")
_STRUCT_I64 = struct.Struct(">q")
_STRUCT_U32 = struct.Struct(">I")
_STRUCT_I16 = struct.Struct(">h")
# baseOffset to lastOffsetDelta: what a walk serving stored batches reads of each (``batch_spans``).
_SPAN = struct.Struct(">qiibIhi")


class TimestampType(enum.IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def crc32c(data) -> int:
    """CRC-32C (Castagnoli), hardware accelerated where the CPU has it."""
    return _crc32c.crc32c(data)


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of a v2 batch, parsed without touching its records."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf, pos: int = 0) -> "BatchHeader":
        return cls(*HEADER.unpack_from(buf, pos))

    def pack(self) -> bytes:
        return HEADER.pack(self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic,
                           self.crc, self.attributes, self.last_offset_delta, self.base_timestamp,
                           self.max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence,
                           self.records_count)

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression_type(self) -> CompressionType:
        return CompressionType.from_id(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon_ms(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon_ms else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % (_INT32_MAX + 1)

    @property
    def first_timestamp(self) -> int:
        """The first record's timestamp; meaningless once a delete horizon replaced it."""
        return NO_TIMESTAMP if self.has_delete_horizon_ms else self.base_timestamp


class RecordBatch:
    """One v2 batch over a buffer, without copying it.

    ``position`` is where the batch starts in its file (or outer buffer) and
    ``path`` names that file; both only serve error messages.
    """

    __slots__ = ("buffer", "header", "position", "path")

    def __init__(self, buffer, header: BatchHeader | None = None, position: int = 0, path: str | None = None):
        self.buffer = memoryview(buffer).cast("B") if not isinstance(buffer, memoryview) else buffer
        self.header = header if header is not None else BatchHeader.parse(self.buffer)
        self.position = position
        self.path = path

    def __repr__(self) -> str:
        h = self.header
        return (f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, count={h.records_count}, "
                f"size={h.size_in_bytes}, position={self.position})")

    def __bytes__(self) -> bytes:
        return bytes(self.buffer)

    @property
    def size_in_bytes(self) -> int:
        return self.header.size_in_bytes

    def compute_checksum(self) -> int:
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:self.header.size_in_bytes])

    def is_valid(self) -> bool:
        try:
            self.ensure_valid()
        except CorruptRecordError:
            return False
        return True

    def _corrupt(self, reason: str) -> CorruptRecordError:
        return CorruptRecordError(reason, path=self.path, position=self.position)

    def ensure_valid(self) -> None:
        """Check size, magic and CRC, as Kafka's ``DefaultRecordBatch.ensureValid``."""
        h = self.header
        if h.batch_length < MIN_BATCH_LENGTH:
            raise self._corrupt(f"batch length {h.batch_length} is below the minimum {MIN_BATCH_LENGTH}")
        if h.size_in_bytes != len(self.buffer):
            raise self._corrupt(f"batch length {h.batch_length} does not match the {len(self.buffer)} "
                                f"bytes of the batch")
        if h.magic != CURRENT_MAGIC:
            raise self._corrupt(f"unsupported magic {h.magic} (expected {CURRENT_MAGIC})")
        actual = self.compute_checksum()
        if actual != h.crc:
            raise self._corrupt(f"CRC mismatch: stored 0x{h.crc:08x}, computed 0x{actual:08x}")
        if h.records_count < 0:
            raise self._corrupt(f"negative record count {h.records_count}")
        if h.last_offset_delta < 0:
            raise self._corrupt(f"negative last offset delta {h.last_offset_delta}")
        if h.records_count > h.last_offset_delta + 1 and h.records_count:
            raise self._corrupt(f"record count {h.records_count} exceeds the offset span "
                                f"{h.last_offset_delta + 1}")

    def records_bytes(self):
        """The records section, decompressed when the batch is compressed."""
        raw = self.buffer[RECORDS_OFFSET:self.header.size_in_bytes]
        codec = self.header.compression_type
        if codec == CompressionType.NONE:
            return raw
        try:
            return memoryview(decompress(codec, raw))
        except CorruptRecordError as exc:
            raise CorruptRecordError(exc.reason, path=self.path,
                                     position=self.position + RECORDS_OFFSET) from None

    def records(self) -> list[Record]:
        """Decode every record; the count must match the header's."""
        h = self.header
        data = self.records_bytes()
        log_append_time = h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else None
        out: list[Record] = []
        pos = 0
        end = len(data)
        try:
            while pos < end:
                record, pos = decode_record(data, pos, h.base_offset, h.base_timestamp, log_append_time)
                out.append(record)
        except CorruptRecordError as exc:
            where = self.position + (RECORDS_OFFSET + (exc.position or 0)
                                     if h.compression_type == CompressionType.NONE else 0)
            raise CorruptRecordError(f"record {len(out)} of the batch at {self.position}: {exc.reason}",
                                     path=self.path, position=where) from None
        if len(out) != h.records_count:
            raise self._corrupt(f"record count mismatch: header says {h.records_count}, found {len(out)}")
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def end_txn_marker(self) -> EndTransactionMarker | None:
        """The transaction marker of a control batch, else None."""
        if not self.header.is_control:
            return None
        records = self.records()
        if not records:
            return None
        control_type = ControlRecordType.parse_key(records[0].key)
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        return EndTransactionMarker.from_record(records[0].key, records[0].value)


def iter_batches(buf, start: int = 0, end: int | None = None, *, path: str | None = None,
                 base_position: int = 0, max_batch_size: int | None = None,
                 stop_at_partial: bool = True, validate: bool = False) -> Iterator[RecordBatch]:
    """Walk the batches of ``buf[start:end]`` by their headers, zero copy.

    A batch whose bytes end past ``end`` is a torn tail: iteration stops there
    when ``stop_at_partial`` (readers, who see a file still being written), or
    raises (recovery and dumps, which must account for every byte). Lengths that
    cannot be right raise at once: they mean corruption, not a short read.
    Positions in errors are ``base_position`` plus the offset in ``buf``.
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf
    end = len(view) if end is None else end
    pos = start
    while pos < end:
        where = base_position + pos
        if end - pos < LOG_OVERHEAD:
            if stop_at_partial:
                return
            raise CorruptRecordError(f"truncated batch: {end - pos} bytes left, fewer than the "
                                     f"{LOG_OVERHEAD}-byte log overhead", path=path, position=where)
        (batch_length,) = _STRUCT_I32.unpack_from(view, pos + LENGTH_OFFSET)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} is below the minimum {MIN_BATCH_LENGTH}",
                                     path=path, position=where)
        size = batch_length + LOG_OVERHEAD
        if max_batch_size is not None and size > max_batch_size:
            raise CorruptRecordError(f"batch size {size} exceeds the largest allowed {max_batch_size}",
                                     path=path, position=where)
        if pos + size > end:
            if stop_at_partial:
                return
            raise CorruptRecordError(f"truncated batch: length {batch_length} needs {size} bytes, "
                                     f"{end - pos} left", path=path, position=where)
        if view[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
            raise CorruptRecordError(f"unsupported magic {view[pos + MAGIC_OFFSET]} "
                                     f"(expected {CURRENT_MAGIC})", path=path, position=where)
        batch = RecordBatch(view[pos:pos + size], BatchHeader.parse(view, pos), where, path)
        if validate:
            batch.ensure_valid()
        yield batch
        pos += size


def batch_spans(buf, *, path: str | None = None, base_position: int = 0
                ) -> Iterator[tuple[int, int, int, int, int]]:
    """(position in ``buf``, size, base offset, last offset, CRC) of each whole batch of ``buf``.

    The walk of ``iter_batches`` (``stop_at_partial``) with its length and magic
    checks, for readers that serve stored batches as they are: one unpack of
    the first 27 bytes per batch and no ``RecordBatch``, so the per-batch cost
    stays small next to the bytes. The CRC covers ``buf[position +
    ATTRIBUTES_OFFSET:position + size]``.
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf
    end = len(view)
    pos = 0
    unpack_length = _STRUCT_I32.unpack_from
    unpack_span = _SPAN.unpack_from
    while end - pos >= LOG_OVERHEAD:
        (batch_length,) = unpack_length(view, pos + LENGTH_OFFSET)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} is below the minimum {MIN_BATCH_LENGTH}",
                                     path=path, position=base_position + pos)
        size = batch_length + LOG_OVERHEAD
        if pos + size > end:
            return
        base_offset, _, _, magic, crc, _, last_offset_delta = unpack_span(view, pos)
        if magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"unsupported magic {magic} (expected {CURRENT_MAGIC})", path=path,
                                     position=base_position + pos)
        yield pos, size, base_offset, base_offset + last_offset_delta, crc
        pos += size


def build_batch(records: Sequence[SimpleRecord], *, base_offset: int = 0,
                compression: CompressionType = CompressionType.NONE,
                timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                log_append_time: int | None = None, default_timestamp: int = NO_TIMESTAMP,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, is_transactional: bool = False, is_control: bool = False,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                offsets: Sequence[int] | None = None, last_offset_delta: int | None = None,
                delete_horizon_ms: int | None = None) -> bytes:
    """Encode one v2 batch as Kafka's MemoryRecordsBuilder does.

    Records without a timestamp take ``default_timestamp``. ``offsets`` gives
    absolute offsets (the cleaner keeps the originals; gaps allowed, strictly
    increasing); by default records take consecutive offsets from
    ``base_offset``. ``last_offset_delta`` may extend the batch's offset span
    past its last record, as compaction leaves it.
    """
    if offsets is None:
        deltas = range(len(records))
    else:
        if len(offsets) != len(records):
            raise ValueError(f"{len(offsets)} offsets for {len(records)} records")
        deltas = [o - base_offset for o in offsets]
        if any(d < 0 for d in deltas) or any(b <= a for a, b in zip(deltas, deltas[1:])):
            raise InvalidRecordError(f"offsets {list(offsets)[:5]}... must be strictly increasing "
                                     f"from base offset {base_offset}")
        if deltas and deltas[-1] > _INT32_MAX:
            raise InvalidRecordError(f"offset {offsets[-1]} is more than int32 past base offset {base_offset}")
    timestamps = [default_timestamp if r.timestamp is None else r.timestamp for r in records]
    first_timestamp = timestamps[0] if timestamps else NO_TIMESTAMP
    base_timestamp = delete_horizon_ms if delete_horizon_ms is not None else first_timestamp
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        if log_append_time is None:
            raise ValueError("a LogAppendTime batch needs log_append_time")
        max_timestamp = log_append_time
    else:
        max_timestamp = max(timestamps) if timestamps else NO_TIMESTAMP
    body = b"".join(encode_record(d, t - base_timestamp, r.key, r.value, r.headers)
                    for d, t, r in zip(deltas, timestamps, records))
    if last_offset_delta is None:
        last_offset_delta = deltas[-1] if len(records) else 0
    elif records and last_offset_delta < deltas[-1]:
        raise InvalidRecordError(f"last offset delta {last_offset_delta} is below the last record's "
                                 f"delta {deltas[-1]}")
    if last_offset_delta > _INT32_MAX:
        raise InvalidRecordError(f"offset delta {last_offset_delta} overflows int32")
    body = compress(compression, body)
    attributes = int(compression)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    header = bytearray(HEADER.pack(base_offset, RECORDS_OFFSET - LOG_OVERHEAD + len(body),
                                   partition_leader_epoch, CURRENT_MAGIC, 0, attributes, last_offset_delta,
                                   base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
                                   len(records)))
    out = header + body
    _STRUCT_U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_end_txn_marker_batch(marker: EndTransactionMarker, *, producer_id: int, producer_epoch: int,
                               base_offset: int = 0, timestamp: int,
                               partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, as the coordinator writes it."""
    return build_batch([SimpleRecord(marker.value_bytes(), marker.key_bytes(), timestamp)],
                       base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                       is_transactional=True, is_control=True, partition_leader_epoch=partition_leader_epoch)


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite a batch's baseOffset in place; it lies outside the CRC."""
    _STRUCT_I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place; it lies outside the CRC."""
    _STRUCT_I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Turn a batch into LogAppendTime at ``timestamp`` in place and refresh its CRC.

    As in Kafka, only the attributes and maxTimestamp change; readers give every
    record of a LogAppendTime batch the batch's maxTimestamp.
    """
    (attributes,) = _STRUCT_I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _STRUCT_I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _STRUCT_I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    (length,) = _STRUCT_I32.unpack_from(buf, pos + LENGTH_OFFSET)
    view = memoryview(buf)
    _STRUCT_U32.pack_into(buf, pos + CRC_OFFSET,
                          crc32c(view[pos + ATTRIBUTES_OFFSET:pos + LOG_OVERHEAD + length]))
