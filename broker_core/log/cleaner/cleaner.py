"""Cleaning one log (Kafka's Cleaner): map the dirty section's keys to their latest
offsets, then rewrite the log from its start up to where the map reaches, group of
segments by group, keeping only the survivors.

1. ``build_offset_map`` reads the dirty segments from the first dirty offset and
   puts every key of a committed record into the bounded offset map; when the
   map fills it stops there, and the round ends at the last batch it mapped
   whole (the rest is cleaned next round).
2. The segments below that end are grouped (``group_segments_by_size``: at
   most ``segment.bytes`` of log and ``segment.index.bytes`` of each index per
   group, offsets within int32 of the group's base) and each group is cleaned
   into one ``.cleaned`` segment named after the group's first segment.
3. The log swaps the cleaned segment in (``Log.replace_segments``): ``.cleaned``
   becomes ``.swap``, the old segments ``.deleted``, the swap the live
   segment. A crash at any step is undone or completed by log loading.

The active segment is never read for cleaning. ``map_batches``,
``clean_segment_into`` and ``group_segments_by_size`` are plain functions so the
Spark compaction job runs the very same steps on its executors.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence

import numpy as np

from format import layout
from format.errors import CorruptRecordError
from format.file_records import FileRecords
from format.record_batch import LENGTH_OFFSET, LOG_OVERHEAD, MIN_BATCH_LENGTH, iter_batches
from format.segment import LogSegment
from format.txn_index import AbortedTxn

from ..log_loader import open_segment

from .filter import FilterContext, FilterStats, MapLatest, filter_chunk
from .offset_map import OffsetMap
from .records import decode_columns
from .transactions import CleanedTransactionMetadata, ProducerEvent, ProducerStateBuilder, collect_aborted_transactions

log = logging.getLogger(__name__)

# The cleaner decodes whole chunks of batches with numpy; Kafka's 512 KiB I/O
# buffers would make every step a short vector, so chunks are larger.
DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 60 * 60 * 1000  # Kafka's producer.id.expiration.ms
_INT32_MAX = (1 << 31) - 1
_I32 = struct.Struct(">i")


class LogCleaningAbortedError(Exception):
    """Cleaning of a partition was aborted (shutdown, deletion, pause); nothing was swapped in."""


# --- reading ------------------------------------------------------------------


def read_chunks(records: FileRecords, start: int = 0, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(file position, bytes) of whole batches from ``start``, about ``chunk_bytes`` at a time.

    A cleaned segment is inactive, so its file ends on a batch boundary: a
    batch cut short is corruption and raises.
    """
    size = records.size_in_bytes if end is None else min(end, records.size_in_bytes)
    pos = start
    while pos < size:
        data = records.read(pos, min(chunk_bytes, size - pos))
        cut = 0
        n = len(data)
        while cut + LOG_OVERHEAD <= n:
            (length,) = _I32.unpack_from(data, cut + LENGTH_OFFSET)
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(f"batch length {length} is below the minimum {MIN_BATCH_LENGTH}",
                                         path=records.path, position=pos + cut)
            if cut + LOG_OVERHEAD + length > n:
                break
            cut += LOG_OVERHEAD + length
        if cut == 0:
            if n < LOG_OVERHEAD:
                raise CorruptRecordError(f"truncated batch: {n} bytes left", path=records.path, position=pos)
            (length,) = _I32.unpack_from(data, LENGTH_OFFSET)
            needed = length + LOG_OVERHEAD
            if pos + needed > size:
                raise CorruptRecordError(f"truncated batch: length {length} needs {needed} bytes, "
                                         f"{size - pos} left", path=records.path, position=pos)
            data = records.read(pos, needed)
            cut = needed
        yield pos, data if cut == n else data[:cut]
        pos += cut


def header_events(records: FileRecords, start: int = 0, end: int | None = None) -> list[ProducerEvent]:
    """The producer events of the batches in [start, end) of a file, from their headers alone."""
    return [ProducerEvent.of(h) for _, h in records.batch_headers(start, end) if h.has_producer_id]


# --- grouping -----------------------------------------------------------------


@dataclass(frozen=True)
class SegmentSizes:
    """What grouping looks at: a segment's base offset and the bytes of its log and indexes."""

    base_offset: int
    size: int
    offset_index_size: int
    time_index_size: int

    @classmethod
    def of(cls, segment: LogSegment) -> "SegmentSizes":
        return cls(segment.base_offset, segment.size, segment.offset_index.size_in_bytes,
                   segment.time_index.size_in_bytes)


def group_segments_by_size(segments: Sequence[SegmentSizes], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[SegmentSizes]]:
    """Consecutive segments grouped so that each group's log, offset index and time index stay
    within ``max_size`` / ``max_index_size`` and its offsets within int32 of its first base offset
    (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentSizes]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size = group[0].offset_index_size
        time_index_size = group[0].time_index_size
        while rest:
            nxt = rest[0]
            last_offset = (rest[1].base_offset - 1) if len(rest) > 1 else first_uncleanable_offset - 1
            if not (log_size + nxt.size <= max_size
                    and index_size + nxt.offset_index_size <= max_index_size
                    and time_index_size + nxt.time_index_size <= max_index_size
                    and (nxt.size == 0 or last_offset - group[0].base_offset <= _INT32_MAX)):
                break
            group.append(rest.pop(0))
            log_size += nxt.size
            index_size += nxt.offset_index_size
            time_index_size += nxt.time_index_size
        groups.append(group)
    return groups


def segments_overlapping(segments: Sequence, start: int, end: int) -> list:
    """The segments holding offsets in [start, end) (Kafka's logSegments(from, to))."""
    out = []
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset < end and (next_base is None or next_base > start):
            out.append(segment)
    return out


# --- statistics and throttling -------------------------------------------------


@dataclass
class CleanerStats:
    """What one clean did (Kafka's CleanerStats)."""

    start_ns: int = field(default_factory=time.monotonic_ns)
    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    batches_rewritten: int = 0
    map_done_ns: int | None = None
    end_ns: int | None = None
    buffer_utilization: float = 0.0

    def add_filter(self, stats: FilterStats) -> None:
        self.bytes_read += stats.bytes_read
        self.messages_read += stats.messages_read
        self.bytes_written += stats.bytes_retained
        self.messages_written += stats.messages_retained
        self.batches_rewritten += stats.batches_rewritten

    @property
    def elapsed_s(self) -> float:
        end = self.end_ns if self.end_ns is not None else time.monotonic_ns()
        return (end - self.start_ns) / 1e9


class Throttler:
    """Holds I/O to ``rate`` bytes per second across every caller (Kafka's Throttler):
    every ``check_interval_ms`` the rate observed since the last check is compared with the
    desired one and the caller sleeps off any excess."""

    def __init__(self, rate: float, clock, check_interval_ms: int = 300,
                 sleep: Callable[[float], None] | None = None):
        self.rate = rate
        self.clock = clock
        self.check_interval_ns = check_interval_ms * 1_000_000
        self._sleep_ms = sleep or getattr(clock, "sleep", None) or (lambda ms: time.sleep(ms / 1000))
        self._period_start_ns = clock.nanoseconds()
        self._observed = 0
        self._lock = threading.Lock()

    def maybe_throttle(self, observed: int) -> None:
        if self.rate == float("inf") or self.rate >= 1.7e308:
            return
        with self._lock:
            self._observed += observed
            elapsed_ns = self.clock.nanoseconds() - self._period_start_ns
            if elapsed_ns > self.check_interval_ns and self._observed > 0:
                rate = self._observed * 1e9 / elapsed_ns
                if rate > self.rate:
                    sleep_ms = round(self._observed / (self.rate / 1000) - elapsed_ns / 1e6)
                    if sleep_ms > 0:
                        self._sleep_ms(sleep_ms)
                self._period_start_ns = self.clock.nanoseconds()
                self._observed = 0


# --- the two passes, as plain functions -----------------------------------------


class MapSink(Protocol):
    def put_many(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray) -> int: ...

    def update_latest_offset(self, offset: int) -> None: ...


def aborted_intervals(txns: Sequence[AbortedTxn]) -> dict[int, list[tuple[int, int]]]:
    """Per producer, the [first offset, marker offset) ranges of its aborted transactions."""
    out: dict[int, list[tuple[int, int]]] = {}
    for txn in txns:
        out.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return out


def is_aborted(h, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """Whether a data batch belongs to an aborted transaction. Kafka finds this by walking its
    transaction state from the dirty offset on; since a producer has one transaction open at a
    time, that walk flags exactly the producer's transactional batches between an aborted
    transaction's first offset and its marker, which this tests without state, so that each
    segment can be mapped on its own (the Spark job's stage 1)."""
    if not h.is_transactional:
        return False
    for first, marker in aborted.get(h.producer_id, ()):
        if first <= h.last_offset < marker:
            return True
    return False


def map_batches(data: bytes, position: int, start_offset: int, sink: MapSink,
                aborted: dict[int, list[tuple[int, int]]], events: list[ProducerEvent] | None = None,
                path: str | None = None) -> tuple[bool, int]:
    """Put the keys of one chunk's committed records at or past ``start_offset`` into ``sink``
    (Kafka's buildOffsetMapForSegment for one read buffer).

    Returns (full, bytes mapped): when the sink fills, the batches after the one that filled it
    are left unmapped, and the batch that filled it does not move the latest offset.
    """
    batches = list(iter_batches(data, path=path, base_position=position, stop_at_partial=False))
    data_batches = []
    for batch in batches:
        h = batch.header
        if not h.is_control and h.records_count and h.last_offset >= start_offset and not is_aborted(h, aborted):
            data_batches.append(batch)
    columns = decode_columns(data, data_batches, position, path)
    wanted = np.flatnonzero(columns.has_key & (columns.offset >= start_offset))
    consumed = len(wanted)
    if wanted.size:
        h1, h2 = columns.hashes(wanted)
        consumed = sink.put_many(h1, h2, columns.offset[wanted])
    full = consumed < len(wanted)
    stop_offset = int(columns.offset[wanted[consumed]]) if full else None
    mapped_bytes = 0
    for batch in batches:
        h = batch.header
        if full and h.base_offset <= stop_offset <= h.last_offset:
            break
        if events is not None and h.has_producer_id:
            events.append(ProducerEvent.of(h))
        if h.last_offset >= start_offset:
            sink.update_latest_offset(h.last_offset)
        mapped_bytes += h.size_in_bytes
    return full, mapped_bytes


@dataclass
class SourceSegment:
    """A segment being cleaned: its records and the offset the next segment starts at."""

    base_offset: int
    records: FileRecords
    upper_bound_offset: int


def clean_segment_into(source: SourceSegment, dest: LogSegment, ctx: FilterContext, *,
                       chunk_bytes: int = DEFAULT_CHUNK_BYTES, check_done: Callable[[], None] = lambda: None,
                       throttle: Callable[[int], None] = lambda n: None, stats: CleanerStats | None = None,
                       progress: Callable[[int], None] | None = None,
                       reads: Sequence[tuple[int, int]] | None = None) -> None:
    """Append the survivors of ``source`` to ``dest`` (Kafka's cleanInto). ``reads``, when given,
    are the (position, length) runs of whole batches to look at; every other batch is known to
    keep nothing (the Spark job knows which from its first stage)."""
    chunks = read_chunks(source.records, 0, chunk_bytes) if reads is None else (
        (position, source.records.read(position, length)) for position, length in reads)
    for position, data in chunks:
        check_done()
        throttle(len(data))
        result = filter_chunk(data, position, ctx, path=source.records.path)
        if stats is not None:
            stats.add_filter(result.stats)
        if result.output:
            dest.append(result.output)
            throttle(len(result.output))
        if progress is not None:
            progress(len(data))


def new_cleaned_segment(directory: str, base_offset: int, config) -> LogSegment:
    """A fresh ``.cleaned`` segment; leftovers of an interrupted clean are removed first."""
    for name in (layout.log_file_name(base_offset), layout.offset_index_file_name(base_offset),
                 layout.time_index_file_name(base_offset), layout.txn_index_file_name(base_offset)):
        try:
            os.remove(os.path.join(directory, name + layout.CLEANED_FILE_SUFFIX))
        except FileNotFoundError:
            pass
    return open_segment(directory, base_offset, config, layout.CLEANED_FILE_SUFFIX)


def clean_group(sources: Sequence[SourceSegment], dest: LogSegment, ctx: FilterContext,
                txn_indexes: list[tuple[int, list[AbortedTxn]]], *, last_modified_ms: int | None = None,
                reads: dict[int, list[tuple[int, int]]] | None = None, **kwargs) -> None:
    """Clean a group of segments into ``dest`` and make it ready to swap: indexes sealed,
    flushed, its modification time that of the group's last segment (Kafka's cleanSegments).
    ``reads``: per segment base offset, the only runs of batches worth reading."""
    ctx.transactions.cleaned_index = dest.txn_index
    for source in sources:
        # The whole index of the new segment is rebuilt, so collect over each segment's full range.
        ctx.transactions.add_aborted_transactions(
            collect_aborted_transactions(txn_indexes, source.base_offset, source.upper_bound_offset))
        clean_segment_into(source, dest, ctx, reads=None if reads is None else reads.get(source.base_offset, ()),
                           **kwargs)
    dest.on_becoming_inactive_segment()
    dest.flush()
    if last_modified_ms is not None:
        os.utime(dest.log.path, (last_modified_ms / 1000, last_modified_ms / 1000))


# --- the broker's cleaner ---------------------------------------------------------


@dataclass(frozen=True)
class LogToClean:
    """A log chosen for cleaning and its cleanable range (Kafka's LogToClean)."""

    topic_partition: layout.TopicPartition
    log: object  # broker_core.log.log.Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


class Cleaner:
    """Cleans one log at a time with its own offset map (one per cleaner thread)."""

    def __init__(self, cleaner_id: int, offset_map: OffsetMap, clock, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 throttler: Throttler | None = None,
                 check_done: Callable[[layout.TopicPartition], None] = lambda tp: None,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS):
        self.id = cleaner_id
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.offset_map = offset_map
        self.clock = clock
        self.chunk_bytes = chunk_bytes
        self.throttler = throttler
        self.check_done = check_done
        self.progress: Callable[[str, int], None] | None = None  # (phase, bytes) after each chunk
        # Producer batches of segments read last round, by (file, size, mtime): a segment that has
        # not changed since is not read again for its headers.
        self._events_cache: dict[tuple[str, int, int], list[ProducerEvent]] = {}
        # One clean at a time: the offset map is this cleaner's (a thread's, or an operator's run).
        self._lock = threading.Lock()

    def _throttle(self, n: int) -> None:
        if self.throttler is not None:
            self.throttler.maybe_throttle(n)

    def clean(self, to_clean: LogToClean) -> tuple[int, CleanerStats]:
        """Clean the log; returns the first offset not cleaned (the next first dirty offset)."""
        with self._lock:
            return self.do_clean(to_clean, self.clock.milliseconds())

    def do_clean(self, to_clean: LogToClean, now_ms: int) -> tuple[int, CleanerStats]:
        lg = to_clean.log
        tp = to_clean.topic_partition
        stats = CleanerStats()
        log.info("Cleaner %d: cleaning %s from offset %d to %d", self.id, lg, to_clean.first_dirty_offset,
                 to_clean.first_uncleanable_offset)
        segments = lg.segments
        events: list[ProducerEvent] = []
        self.build_offset_map(lg, segments, to_clean.first_dirty_offset, to_clean.first_uncleanable_offset,
                              self.offset_map, stats, events)
        end_offset = self.offset_map.latest_offset + 1
        stats.map_done_ns = time.monotonic_ns()
        producers = ProducerStateBuilder().add_all(events).last_records(now_ms, self.producer_id_expiration_ms)
        cleanable = [s for s in segments if s.base_offset < end_offset]
        if segments and cleanable and cleanable[-1] is segments[-1]:
            cleanable = cleanable[:-1]  # never the active segment
        by_base = {s.base_offset: s for s in cleanable}
        groups = group_segments_by_size([SegmentSizes.of(s) for s in cleanable], lg.config.segment_bytes,
                                        lg.config.segment_index_bytes, to_clean.first_uncleanable_offset)
        txn_indexes = [(s.base_offset, s.txn_index.all_aborted_txns()) for s in segments]
        transactions = CleanedTransactionMetadata()
        ctx = FilterContext(MapLatest(self.offset_map, to_clean.first_dirty_offset), now_ms,
                            lg.config.delete_retention_ms, to_clean.first_uncleanable_offset, producers, transactions)
        for group in groups:
            self.clean_segments(lg, [by_base[g.base_offset] for g in group], segments, ctx, txn_indexes, stats)
        stats.buffer_utilization = self.offset_map.utilization
        stats.end_ns = time.monotonic_ns()
        log.info("Cleaner %d: cleaned %s up to offset %d: %d bytes read, %d written in %.1f s", self.id, tp,
                 end_offset, stats.bytes_read, stats.bytes_written, stats.elapsed_s)
        return end_offset, stats

    def build_offset_map(self, lg, segments: list[LogSegment], start: int, end: int, offset_map: OffsetMap,
                         stats: CleanerStats, events: list[ProducerEvent]) -> None:
        """Map the keys of [start, end); collect every producer batch's header along the way."""
        offset_map.clear()
        tp = lg.topic_partition
        dirty = segments_overlapping(segments, start, end)
        cache, self._events_cache = self._events_cache, {}

        def headers_of(segment: LogSegment) -> list[ProducerEvent]:
            try:
                stat = os.stat(segment.log.path)
            except FileNotFoundError:
                return header_events(segment.log)
            key = (segment.log.path, stat.st_size, stat.st_mtime_ns)
            found = cache.get(key)
            if found is None:
                found = header_events(segment.log)
            self._events_cache[key] = found
            return found

        dirty_bases = {s.base_offset for s in dirty}
        txn_indexes = [(s.base_offset, s.txn_index.all_aborted_txns()) for s in segments]
        aborted = aborted_intervals(collect_aborted_transactions(txn_indexes, start, end))
        full = False
        for i, segment in enumerate(segments):
            if segment.base_offset not in dirty_bases or full:
                events.extend(headers_of(segment))  # clean, uncleanable or unmapped: headers only
                continue
            self.check_done(tp)
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else end
            position = segment.offset_index.lookup(start).position if segment.base_offset < start else 0
            events.extend(header_events(segment.log, 0, position))
            for chunk_position, data in read_chunks(segment.log, position, self.chunk_bytes):
                self.check_done(tp)
                self._throttle(len(data))
                full, mapped = map_batches(data, chunk_position, start, offset_map, aborted, events,
                                           segment.log.path)
                stats.map_bytes_read += mapped
                if self.progress is not None:
                    self.progress("map", len(data))
                if full:
                    events.extend(header_events(segment.log, chunk_position + mapped))
                    break
            if not full:
                # Gaps at the segment's end: the map covers everything below the next segment.
                offset_map.update_latest_offset(next_base - 1)

    def clean_segments(self, lg, group: list[LogSegment], segments: list[LogSegment], ctx: FilterContext,
                       txn_indexes, stats: CleanerStats) -> None:
        tp = lg.topic_partition
        cleaned = new_cleaned_segment(lg.dir, group[0].base_offset, lg.config)
        sources = []
        for segment in group:
            i = segments.index(segment)
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else segment.read_next_offset()
            sources.append(SourceSegment(segment.base_offset, segment.log, upper))
        progress = (lambda n: self.progress("clean", n)) if self.progress is not None else None
        try:
            clean_group(sources, cleaned, ctx, txn_indexes, last_modified_ms=group[-1].last_modified_ms,
                        chunk_bytes=self.chunk_bytes, check_done=lambda: self.check_done(tp),
                        throttle=self._throttle, stats=stats, progress=progress)
            log.info("Cleaner %d: swapping in cleaned segment %d for segments %s of %s", self.id,
                     cleaned.base_offset, [s.base_offset for s in group], lg)
            lg.replace_segments([cleaned], group)
        except Exception:
            # Nothing was swapped in (a failure inside the swap is left to log loading, which undoes
            # or completes it): the cleaned files are only garbage.
            if cleaned.has_suffix(layout.CLEANED_FILE_SUFFIX):
                cleaned.delete()
            raise
