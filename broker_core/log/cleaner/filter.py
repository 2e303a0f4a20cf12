"""Which records and batches survive a clean, and the bytes that replace a batch
(Kafka's LogCleaner record filter and ``MemoryRecords.filterTo``).

This is the one place the survivor rules live; the broker's cleaner and the
Spark compaction job both call ``filter_chunk`` on the same bytes with the
same map and so keep exactly the same records.

Per batch (``check_batch_retention``):

* the transaction state decides whether the whole batch may go (data of an
  aborted transaction; a marker whose transaction left no data, once its
  delete horizon has passed);
* the last batch of a producer, and the batch ending the cleaning round, are
  kept even when no record survives, as an empty batch with the original
  offsets and producer fields, so sequence numbers, epochs and the log end
  survive;
* otherwise a batch whose records all go is dropped.

Per record (``retained_records``): a record past the map's latest offset is
kept; a keyless record goes; a keyed record stays when its offset is at or
above the map's offset for its key, and, when its value is null (a
tombstone), while its batch's delete horizon has not passed.

A batch whose records all stay is copied unchanged unless it newly holds a
tombstone or a marker of an empty transaction: then it is rewritten with a
delete horizon of now + ``delete.retention.ms`` (KIP-534), after which
the next clean removes the tombstone. A partly kept batch is rewritten with
the same base offset, last offset delta and producer fields, its base
timestamp being the first survivor's timestamp (or the delete horizon).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from format.compression import CompressionType, compress
from format.errors import CorruptRecordError
from format.record_batch import (
    ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, CRC_OFFSET, CURRENT_MAGIC,
    DELETE_HORIZON_FLAG_MASK, HEADER, LOG_OVERHEAD, NO_TIMESTAMP, RECORDS_OFFSET, TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK, BatchHeader, RecordBatch, TimestampType, crc32c, iter_batches)
from format.varint import encode_varint, encode_varlong

from .offset_map import OffsetMap
from .records import RecordColumns, decode_columns
from .transactions import CleanedTransactionMetadata, LastRecord, is_last_batch_of_producer

_U32 = struct.Struct(">I")
_KEPT_ATTRIBUTES = COMPRESSION_CODEC_MASK | TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK


class BatchRetention(enum.Enum):
    DELETE = "delete"  # drop the batch without looking at its records
    RETAIN_EMPTY = "retain_empty"  # keep the batch, empty if no record survives
    DELETE_EMPTY = "delete_empty"  # drop the batch if no record survives


class LatestOffsets(Protocol):
    """Which keyed records are the latest of their key, as far as a clean round mapped them."""

    latest_offset: int  # the last offset mapped: records after it are kept as they are

    def is_latest(self, columns: RecordColumns, rows: np.ndarray) -> np.ndarray:
        """For keyed records at or below ``latest_offset``: whether each is its key's latest."""

    def hold_none(self, base_offsets: np.ndarray, last_offsets: np.ndarray) -> np.ndarray:
        """For data batches: True where the batch is known to hold no key's latest record (so its
        records need not be decoded), False where it may."""


class MapLatest:
    """The broker's answer: a record is its key's latest when its offset is at least the offset
    the map holds for its key hash (absent keys, from before the dirty section, stay).

    With ``first_dirty_offset``, the map's offsets sorted also say which batches hold none: every
    keyed record of a data batch between the first dirty offset and the map's latest offset was
    mapped, so such a batch without a mapped offset keeps no record."""

    def __init__(self, offset_map: OffsetMap, first_dirty_offset: int | None = None):
        self.offset_map = offset_map
        self.first_dirty_offset = first_dirty_offset
        self._mapped = offset_map.sorted_offsets() if first_dirty_offset is not None else None

    @property
    def latest_offset(self) -> int:
        return self.offset_map.latest_offset

    def is_latest(self, columns: RecordColumns, rows: np.ndarray) -> np.ndarray:
        h1, h2 = columns.hashes(rows)
        return columns.offset[rows] >= self.offset_map.get_many(h1, h2)

    def hold_none(self, base_offsets: np.ndarray, last_offsets: np.ndarray) -> np.ndarray:
        if self._mapped is None:
            return np.zeros(len(base_offsets), dtype=bool)
        inside = (base_offsets >= self.first_dirty_offset) & (last_offsets <= self.latest_offset)
        return inside & ~offsets_between(self._mapped, base_offsets, last_offsets)


def offsets_between(sorted_offsets: np.ndarray, firsts: np.ndarray, lasts: np.ndarray) -> np.ndarray:
    """Whether ``sorted_offsets`` holds an offset in [first, last], for each pair."""
    # How many offsets lie at or below ``last`` against how many lie below ``first``.
    return np.searchsorted(sorted_offsets, lasts, side="right") > np.searchsorted(sorted_offsets, firsts)


@dataclass
class FilterContext:
    """Everything a clean round decides survivors by."""

    latest: LatestOffsets
    now_ms: int
    delete_retention_ms: int
    upper_bound_offset: int  # the first uncleanable offset of the round: its last batch is kept
    producers: dict[int, LastRecord]
    transactions: CleanedTransactionMetadata


@dataclass
class FilterStats:
    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    batches_rewritten: int = 0


@dataclass(frozen=True)
class BatchDecision:
    retention: BatchRetention
    discard_records: bool
    contains_marker_for_empty_txn: bool


def check_batch_retention(batch: RecordBatch, ctx: FilterContext) -> BatchDecision:
    """Kafka's checkBatchRetention for the log cleaner; updates the transaction state."""
    h = batch.header
    if h.is_control:
        can_discard = ctx.transactions.on_control_batch_read(batch)
        horizon = h.delete_horizon_ms
        discard_records = can_discard and horizon is not None and horizon <= ctx.now_ms
    else:
        can_discard = ctx.transactions.on_batch_read(h)
        discard_records = can_discard
    if h.has_producer_id and is_last_batch_of_producer(h, ctx.producers):
        retention = BatchRetention.RETAIN_EMPTY
    elif h.next_offset == ctx.upper_bound_offset:
        # The round's last batch keeps the log's last offset even when it empties.
        retention = BatchRetention.RETAIN_EMPTY
    elif discard_records:
        retention = BatchRetention.DELETE
    else:
        retention = BatchRetention.DELETE_EMPTY
    return BatchDecision(retention, discard_records, can_discard and h.is_control)


def retained_records(columns: RecordColumns, batch_retain_deletes: np.ndarray, batch_is_control: np.ndarray,
                     latest: LatestOffsets) -> np.ndarray:
    """Kafka's shouldRetainRecord for every record of ``columns`` at once.

    ``batch_retain_deletes[b]``: tombstones of batch b are still within their delete horizon.
    """
    offsets = columns.offset
    keep = offsets > latest.latest_offset
    keyed = np.flatnonzero(columns.has_key & ~keep)
    if keyed.size:
        latest_for_key = latest.is_latest(columns, keyed)
        has_value = columns.value_length[keyed] >= 0
        keep[keyed] = latest_for_key & (has_value | batch_retain_deletes[columns.batch[keyed]])
    keep |= batch_is_control[columns.batch]
    return keep


def empty_batch(h: BatchHeader) -> bytes:
    """The header-only batch Kafka keeps for producer state (``writeEmptyHeader``)."""
    attributes = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    out = bytearray(HEADER.pack(h.base_offset, RECORDS_OFFSET - LOG_OVERHEAD, h.partition_leader_epoch,
                                CURRENT_MAGIC, 0, attributes, h.last_offset_delta, NO_TIMESTAMP, h.max_timestamp,
                                h.producer_id, h.producer_epoch, h.base_sequence, 0))
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def rebuild_batch(h: BatchHeader, columns: RecordColumns, rows: np.ndarray, delete_horizon_ms: int | None) -> bytes:
    """The batch ``h`` holding only the records ``rows`` of ``columns`` (what Kafka's MemoryRecordsBuilder
    writes for the survivors): same base offset, last offset delta, producer fields and codec; base
    timestamp the delete horizon or the first survivor's timestamp; records re-encoded only where their
    timestamp delta changes."""
    arena = columns.arena
    timestamps = columns.timestamp[rows]
    lat = h.timestamp_type == TimestampType.LOG_APPEND_TIME
    base_timestamp = delete_horizon_ms if delete_horizon_ms is not None else int(timestamps[0])
    max_timestamp = h.max_timestamp if lat else int(timestamps.max())
    old_base = h.base_timestamp
    starts = columns.start[rows].tolist()
    ends = columns.end[rows].tolist()
    if base_timestamp == old_base and not columns.attributes[rows].any() and not lat:
        body = b"".join([arena[s:e] for s, e in zip(starts, ends)])
    else:
        tails = columns.offset_delta_at[rows].tolist()
        parts = []
        for ts, t, e in zip(timestamps.tolist(), tails, ends):
            record = b"\x00" + encode_varlong(ts - base_timestamp) + arena[t:e]
            parts.append(encode_varint(len(record)))
            parts.append(record)
        body = b"".join(parts)
    codec = h.compression_type
    if codec != CompressionType.NONE:
        body = compress(codec, body)
    attributes = h.attributes & _KEPT_ATTRIBUTES
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_FLAG_MASK
    out = bytearray(HEADER.pack(h.base_offset, RECORDS_OFFSET - LOG_OVERHEAD + len(body), h.partition_leader_epoch,
                                CURRENT_MAGIC, 0, attributes, h.last_offset_delta, base_timestamp, max_timestamp,
                                h.producer_id, h.producer_epoch, h.base_sequence, len(starts)))
    out += body
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


@dataclass
class ChunkResult:
    output: bytes
    stats: FilterStats = field(default_factory=FilterStats)


def filter_chunk(data: bytes, position: int, ctx: FilterContext, *, path: str | None = None) -> ChunkResult:
    """Clean the whole batches of ``data`` (read from file position ``position``): the survivors'
    bytes, ready to append to the cleaned segment, in the same order."""
    stats = FilterStats()
    batches = list(iter_batches(data, path=path, base_position=position, stop_at_partial=False))
    decisions: list[BatchDecision | None] = []
    for batch in batches:
        h = batch.header
        if batch.compute_checksum() != h.crc:
            raise CorruptRecordError(f"CRC mismatch: stored 0x{h.crc:08x}, computed 0x{batch.compute_checksum():08x}",
                                     path=path, position=batch.position)
        stats.bytes_read += h.size_in_bytes
        stats.messages_read += h.records_count
        decision = check_batch_retention(batch, ctx)
        decisions.append(None if decision.retention == BatchRetention.DELETE else decision)
    # Records of the batches whose fate depends on them, decoded together.
    undecided = [i for i, (batch, decision) in enumerate(zip(batches, decisions))
                 if decision is not None and not decision.discard_records and not batch.header.is_control
                 and batch.header.records_count]
    if undecided:
        firsts = np.fromiter((batches[i].header.base_offset for i in undecided), np.int64, len(undecided))
        lasts = np.fromiter((batches[i].header.last_offset for i in undecided), np.int64, len(undecided))
        for j in np.flatnonzero(ctx.latest.hold_none(firsts, lasts)).tolist():
            i = undecided[j]
            decision = decisions[i]
            decisions[i] = BatchDecision(decision.retention, True, decision.contains_marker_for_empty_txn)
    wanted = [b for b, d in zip(batches, decisions) if d is not None and not d.discard_records]
    columns = decode_columns(data, wanted, position, path)
    retain_deletes = np.array([b.header.delete_horizon_ms is None or ctx.now_ms < b.header.delete_horizon_ms
                               for b in wanted], dtype=bool)
    is_control = np.array([b.header.is_control for b in wanted], dtype=bool)
    keep = retained_records(columns, retain_deletes, is_control, ctx.latest)
    running = np.zeros(len(keep) + 1, dtype=np.int64)
    np.cumsum(keep, out=running[1:])
    kept_per_batch = running[columns.batch_first[1:]] - running[columns.batch_first[:-1]]
    tombstones_kept = keep & columns.is_tombstone
    pieces = []
    view = memoryview(data)
    w = 0
    for batch, decision in zip(batches, decisions):
        if decision is None:
            continue
        h = batch.header
        if decision.discard_records:
            if decision.retention == BatchRetention.RETAIN_EMPTY:
                pieces.append(empty_batch(h))
            continue
        first, last = int(columns.batch_first[w]), int(columns.batch_first[w + 1])
        kept = int(kept_per_batch[w])
        w += 1
        if kept:
            contains_tombstones = bool(tombstones_kept[first:last].any())
            need_horizon = (contains_tombstones or decision.contains_marker_for_empty_txn) \
                and not h.has_delete_horizon_ms
            if kept == h.records_count and not need_horizon:
                start = batch.position - position
                pieces.append(view[start:start + h.size_in_bytes])
            else:
                horizon = ctx.now_ms + ctx.delete_retention_ms if need_horizon else h.delete_horizon_ms
                rows = first + np.flatnonzero(keep[first:last])
                pieces.append(rebuild_batch(h, columns, rows, horizon))
                stats.batches_rewritten += 1
            stats.messages_retained += kept
        elif decision.retention == BatchRetention.RETAIN_EMPTY:
            pieces.append(empty_batch(h))
    output = b"".join(pieces)
    stats.bytes_retained = len(output)
    return ChunkResult(output, stats)
