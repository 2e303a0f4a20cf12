"""The SQL inspection views of a log directory: ``offsets``, ``groups`` and ``segments``.

    CREATE TEMPORARY VIEW offsets USING seglog OPTIONS (path '/data/logs', view 'offsets');
    SELECT * FROM offsets ORDER BY topic, partition;

What ``kafka-log-dirs``, ``kafka-get-offsets`` and ``kafka-consumer-groups
--describe`` show, as tables, computed from the files alone: nothing is locked,
so a running broker may keep writing. The rows are built by plain functions
(``offsets_rows``, ``groups_rows``, ``segments_rows``) that need no Spark;
``ViewReader`` only turns them into one Arrow batch in one Spark task.

Internal topics (``__consumer_offsets``, ``__transaction_state``) are left out
unless a topic option (``subscribe``, ``subscribePattern``, ``assign``) names
them: they are the broker's bookkeeping, and ``groups`` already shows what
``__consumer_offsets`` means. Those options narrow every view to the partitions
they select, and ``groupId`` narrows ``groups`` to one group and fills the lag
columns of ``offsets`` with that group's.

A group's lag is shown three ways: in offsets (``lag``, as
``kafka-consumer-groups``), in bytes (``lag_bytes``: the log's bytes from the
batch holding the committed offset to the end, what the group has yet to
fetch, found through the offset index without reading the batches between)
and in time (``lag_ms``: the age of the oldest unconsumed record, now minus
the timestamp of the record at the committed offset; null when caught up).
"""

from __future__ import annotations

import bisect
from dataclasses import astuple, dataclass, replace
from typing import Callable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from broker_core.clock import SYSTEM_CLOCK, Clock
from format.layout import INTERNAL_TOPICS, TopicPartition
from format.log_dir import LogDirectory, PartitionInfo, SegmentInfo
from format.record_batch import TimestampType
from format.segment_reader import SegmentReader

from .options import SeglogOptionError, SourceOptions, open_log_directory

# Spark's TimestampType crosses the Python/JVM border as Arrow microseconds in UTC.
_TIMESTAMP = pa.timestamp("us", tz="UTC")

# Each view's columns, declared once: the Spark DDL and the Arrow schema both come from here.
_COLUMNS: dict[str, tuple[tuple[str, str, pa.DataType], ...]] = {
    "offsets": (
        ("topic", "string", pa.string()),
        ("partition", "int", pa.int32()),
        ("log_start_offset", "long", pa.int64()),
        ("log_end_offset", "long", pa.int64()),
        ("high_watermark", "long", pa.int64()),
        ("last_stable_offset", "long", pa.int64()),
        ("size_bytes", "long", pa.int64()),
        ("segments", "int", pa.int32()),
        ("first_timestamp", "timestamp", _TIMESTAMP),
        ("last_timestamp", "timestamp", _TIMESTAMP),
        # The group named by the option groupId; null without it.
        ("committed_offset", "long", pa.int64()),
        ("lag", "long", pa.int64()),
        ("lag_bytes", "long", pa.int64()),
        ("lag_ms", "long", pa.int64()),
    ),
    "groups": (
        ("group", "string", pa.string()),
        ("topic", "string", pa.string()),
        ("partition", "int", pa.int32()),
        ("committed_offset", "long", pa.int64()),
        ("log_end_offset", "long", pa.int64()),
        ("lag", "long", pa.int64()),
        ("lag_bytes", "long", pa.int64()),
        ("lag_ms", "long", pa.int64()),
        ("commit_time", "timestamp", _TIMESTAMP),
    ),
    "segments": (
        ("topic", "string", pa.string()),
        ("partition", "int", pa.int32()),
        ("base_offset", "long", pa.int64()),
        ("next_offset", "long", pa.int64()),
        ("size_bytes", "long", pa.int64()),
        ("first_timestamp", "timestamp", _TIMESTAMP),
        ("last_timestamp", "timestamp", _TIMESTAMP),
        ("active", "boolean", pa.bool_()),
        ("tier", "string", pa.string()),
        ("location", "string", pa.string()),
    ),
}


def _columns(name: str) -> tuple[tuple[str, str, pa.DataType], ...]:
    try:
        return _COLUMNS[name.lower()]
    except KeyError:
        raise SeglogOptionError(f"option view must be one of {', '.join(_COLUMNS)}, not {name!r}") from None


def view_schema(name: str) -> str:
    """The Spark DDL schema of view ``name``."""
    # Backquoted: ``partition`` and ``group`` are SQL keywords.
    return ", ".join(f"`{column}` {ddl}" for column, ddl, _ in _columns(name))


def arrow_schema(name: str) -> pa.Schema:
    """The Arrow schema Spark expects back from a task reading view ``name``."""
    return pa.schema([(column, arrow_type) for column, _, arrow_type in _columns(name)])


# --- rows -------------------------------------------------------------------------------------------
# Timestamps are Kafka's: milliseconds since the epoch, None where the log has none.


@dataclass(frozen=True)
class OffsetsRow:
    topic: str
    partition: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int  # where readers stop: the log end on a single broker, the checkpointed one if replicated
    last_stable_offset: int  # where read_committed readers stop: below the earliest open transaction
    size_bytes: int
    segments: int
    first_timestamp: int | None
    last_timestamp: int | None
    # The lag of the group named by the option groupId (GroupLag); None without it, or where it committed nothing.
    committed_offset: int | None = None
    lag: int | None = None
    lag_bytes: int | None = None
    lag_ms: int | None = None


@dataclass(frozen=True)
class GroupRow:
    group: str
    topic: str
    partition: int
    committed_offset: int
    log_end_offset: int | None  # None: the partition is not in the log directory (deleted topic)
    lag: int | None
    lag_bytes: int | None
    lag_ms: int | None
    commit_time: int | None


@dataclass(frozen=True)
class SegmentRow:
    topic: str
    partition: int
    base_offset: int
    next_offset: int
    size_bytes: int
    first_timestamp: int | None
    last_timestamp: int | None
    active: bool
    tier: str  # local or remote (the segment is read from the remote tier)
    location: str  # the URL of its .log file or object


PartitionFilter = Callable[[TopicPartition], bool]


def _not_internal(tp: TopicPartition) -> bool:
    return tp.topic not in INTERNAL_TOPICS


def partition_filter(options: SourceOptions) -> PartitionFilter:
    """The partitions a view shows: those the topic options select, else every non-internal one."""
    if options.assign:
        return lambda tp: tp.partition in options.assign.get(tp.topic, ())
    if options.subscribe or options.subscribe_pattern is not None:
        return lambda tp: options.selects(tp.topic)
    return _not_internal


def _partitions(directory: LogDirectory, keep: PartitionFilter) -> list[TopicPartition]:
    return [tp for tp in directory.partitions(include_internal=True) if keep(tp)]


def _timestamp(ms: int) -> int | None:
    return ms if ms >= 0 else None  # RecordBatch.NO_TIMESTAMP is -1


def _first_timestamp(reader: SegmentReader, from_offset: int) -> int | None:
    """The timestamp of the first record at or after ``from_offset`` in the segment."""
    found = reader.translate_offset(from_offset)
    if found is None:
        return None
    position = found.position
    header = next((h for _, h in reader.records.batch_headers(position, position + found.size)), None)
    if header is None:
        return None
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return _timestamp(header.max_timestamp)  # every record of the batch carries it
    if header.base_offset >= from_offset and not header.has_delete_horizon_ms:
        return _timestamp(header.first_timestamp)
    # The start is inside the batch, or a delete horizon took the place of the base timestamp:
    # only the records know.
    batch = next(reader.records.batches(position, position + header.size_in_bytes))
    for record in batch.records():
        if record.offset >= from_offset:
            return _timestamp(record.timestamp)
    return None


def _last_timestamp(reader: SegmentReader) -> int | None:
    """The largest timestamp in the segment.

    The time index's last entry holds the largest timestamp up to the offset it names
    (on a rolled segment, of the whole segment); batches appended since are found by
    reading headers from the index position of that offset, so the active segment
    costs a short scan rather than a full one.
    """
    last = reader.time_index.last_entry
    position = reader.offset_index.lookup(last.offset).position
    if position > reader.size:
        position = 0  # an index ahead of a truncated log
    largest = last.timestamp
    for _, header in reader.records.batch_headers(position):
        largest = max(largest, header.max_timestamp)
    return _timestamp(largest)


@dataclass(frozen=True)
class _SegmentStats:
    next_offset: int
    first_timestamp: int | None
    last_timestamp: int | None


def _segment_stats(directory: LogDirectory, tp: TopicPartition, segment: SegmentInfo) -> _SegmentStats | None:
    """What the segment's files say about it; None when it vanished (retention, compaction)."""
    try:
        with directory.reader(tp, segment) as reader:
            next_offset = reader.next_offset()
            if next_offset is None:  # no complete batch yet
                return _SegmentStats(segment.base_offset, None, None)
            return _SegmentStats(next_offset, _first_timestamp(reader, segment.base_offset), _last_timestamp(reader))
    except FileNotFoundError:
        return None


def _max(values: Iterator[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def segments_rows(directory: LogDirectory, keep: PartitionFilter = _not_internal) -> list[SegmentRow]:
    """One row per segment, in topic, partition and offset order; the last segment is the active one."""
    rows = []
    for tp in _partitions(directory, keep):
        segments = directory.segments(tp)
        for i, segment in enumerate(segments):
            stats = _segment_stats(directory, tp, segment)
            if stats is None:
                continue
            rows.append(SegmentRow(tp.topic, tp.partition, segment.base_offset, stats.next_offset, segment.size,
                                   stats.first_timestamp, stats.last_timestamp, i == len(segments) - 1,
                                   segment.tier, directory.location(tp, segment)))
    return rows


def _timestamp_from(directory: LogDirectory, tp: TopicPartition, segments: Sequence[SegmentInfo],
                    offset: int) -> int | None:
    """The timestamp of the first record at or after ``offset``."""
    bases = [s.base_offset for s in segments]
    for segment in segments[max(0, bisect.bisect_right(bases, offset) - 1):]:
        try:
            with directory.reader(tp, segment) as reader:
                found = _first_timestamp(reader, max(offset, segment.base_offset))
        except FileNotFoundError:
            continue
        if found is not None:
            return found
    return None


def _batch_position(directory: LogDirectory, tp: TopicPartition, segments: Sequence[SegmentInfo],
                    offset: int) -> tuple[int, int] | None:
    """Where the batch holding ``offset`` (or the first after it) starts: the index of its segment in
    ``segments`` and its byte position there, through the offset index and a short scan; None past the
    last batch."""
    bases = [s.base_offset for s in segments]
    for i in range(max(0, bisect.bisect_right(bases, offset) - 1), len(segments)):
        try:
            with directory.reader(tp, segments[i]) as reader:
                found = reader.translate_offset(offset)
        except FileNotFoundError:
            continue
        if found is not None:
            return i, found.position
    return None


def _bytes_between(directory: LogDirectory, tp: TopicPartition, segments: Sequence[SegmentInfo],
                   from_offset: int, until_offset: int) -> int:
    """The bytes of the log from the batch holding ``from_offset`` to the one holding ``until_offset``
    (the end of the log when none does): what a consumer at ``from_offset`` fetches to reach it.

    Only the two ends are looked up; the segments between count by their listed sizes."""
    if from_offset >= until_offset or not segments:
        return 0
    start = _batch_position(directory, tp, segments, from_offset)
    if start is None:
        return 0
    end = _batch_position(directory, tp, segments, until_offset) or (len(segments) - 1, segments[-1].size)
    (first, position), (last, until_position) = start, end
    return sum(s.size for s in segments[first:last]) - position + until_position


@dataclass(frozen=True)
class GroupLag:
    """How far a committed offset is behind a partition's end (its high watermark)."""

    lag: int  # offsets, unclamped as kafka-consumer-groups shows it (negative for a truncated log)
    lag_bytes: int  # bytes from the batch holding the committed offset (or the log start) to the end
    lag_ms: int | None  # age of the record at the committed offset (or the log start); None when caught up


def group_lag(directory: LogDirectory, tp: TopicPartition, info: PartitionInfo, committed_offset: int,
              now_ms: int) -> GroupLag:
    """The lag of ``committed_offset`` in partition ``tp`` (described by ``info``) at ``now_ms``.

    A committed offset below the log start (retention deleted what the group had not read) lags by the
    bytes and age of what the log still holds."""
    end = info.committed_end_offset
    lag = end - committed_offset
    start = min(max(committed_offset, info.log_start_offset), end)
    if start >= end:
        return GroupLag(lag, 0, None)
    oldest = _timestamp_from(directory, tp, info.segments, start)
    # A record stamped ahead of this clock (a producer's clock ahead, CreateTime) is no older than now.
    age = None if oldest is None else max(0, now_ms - oldest)
    return GroupLag(lag, _bytes_between(directory, tp, info.segments, start, end), age)


def _log_last_timestamp(directory: LogDirectory, tp: TopicPartition,
                        segments: Sequence[SegmentInfo]) -> int | None:
    """The largest timestamp of the partition: timestamps need not grow with offsets."""
    def each() -> Iterator[int | None]:
        for segment in segments:
            try:
                with directory.reader(tp, segment) as reader:
                    yield _last_timestamp(reader)
            except FileNotFoundError:
                continue
    return _max(each())


def offsets_rows(directory: LogDirectory, keep: PartitionFilter = _not_internal, group_id: str | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> list[OffsetsRow]:
    """One row per partition, in topic and partition order; with ``group_id``, with that group's lag."""
    from broker_core.group_offsets import read_committed_offsets

    committed = {}
    if group_id is not None:
        committed = read_committed_offsets(directory.fs, directory.root, group_id,
                                           directory.storage_options).get(group_id, {})
    now_ms = clock.milliseconds()
    rows = []
    for tp, info in directory.describe_all(_partitions(directory, keep), last_stable=True).items():
        first = _timestamp_from(directory, tp, info.segments, info.log_start_offset)
        last = _log_last_timestamp(directory, tp, info.segments)
        row = OffsetsRow(tp.topic, tp.partition, info.log_start_offset, info.log_end_offset,
                         info.committed_end_offset, info.latest_offset, info.size, len(info.segments), first, last)
        if tp in committed:
            c = committed[tp].offset
            behind = group_lag(directory, tp, info, c, now_ms)
            row = replace(row, committed_offset=c, lag=behind.lag, lag_bytes=behind.lag_bytes, lag_ms=behind.lag_ms)
        rows.append(row)
    return rows


def groups_rows(directory: LogDirectory, group_id: str | None = None,
                keep: PartitionFilter = _not_internal, clock: Clock = SYSTEM_CLOCK) -> list[GroupRow]:
    """One row per committed offset, in group, topic and partition order; ``group_id`` narrows to one group."""
    from broker_core.group_offsets import read_committed_offsets

    committed = read_committed_offsets(directory.fs, directory.root, group_id, directory.storage_options)
    wanted = {tp for offsets in committed.values() for tp in offsets if keep(tp)}
    present = set(directory.partitions(include_internal=True))
    infos = directory.describe_all(sorted(wanted & present, key=lambda tp: (tp.topic, tp.partition)))
    now_ms = clock.milliseconds()
    rows = []
    for group in sorted(committed):
        for tp in sorted(committed[group], key=lambda tp: (tp.topic, tp.partition)):
            if tp not in wanted:
                continue
            c = committed[group][tp]
            commit_time = _timestamp(c.commit_timestamp)
            if tp not in infos:
                rows.append(GroupRow(group, tp.topic, tp.partition, c.offset, None, None, None, None, commit_time))
                continue
            # As kafka-consumer-groups.sh: the end is what a consumer can read (the high watermark, the log end
            # on a single broker), and the lag is that end minus committed, unclamped (a negative lag shows a
            # truncated log).
            behind = group_lag(directory, tp, infos[tp], c.offset, now_ms)
            rows.append(GroupRow(group, tp.topic, tp.partition, c.offset, infos[tp].committed_end_offset,
                                 behind.lag, behind.lag_bytes, behind.lag_ms, commit_time))
    return rows


def view_rows(name: str, directory: LogDirectory, options: SourceOptions, clock: Clock = SYSTEM_CLOCK) -> list:
    """The rows of view ``name`` for the source ``options``, lags as of ``clock``."""
    keep = partition_filter(options)
    if name == "offsets":
        return offsets_rows(directory, keep, options.group_id, clock)
    if name == "groups":
        return groups_rows(directory, options.group_id, keep, clock)
    if name == "segments":
        return segments_rows(directory, keep)
    raise SeglogOptionError(f"option view must be one of {', '.join(_COLUMNS)}, not {name!r}")


def to_arrow(name: str, rows: Sequence) -> pa.RecordBatch:
    """``rows`` of view ``name`` as one Arrow batch in Spark's types (timestamps in microseconds)."""
    schema = arrow_schema(name)
    columns = list(zip(*(astuple(row) for row in rows))) or [() for _ in schema]
    arrays = []
    for field, values in zip(schema, columns):
        if pa.types.is_timestamp(field.type):
            values = [None if v is None else v * 1000 for v in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class ViewReader(DataSourceReader):
    """A view in one task: the rows are few, and reading them at execution time keeps them current."""

    def __init__(self, options: SourceOptions):
        if options.view is None:
            raise SeglogOptionError("option view is not set")
        _columns(options.view)
        self.options = options

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        directory = open_log_directory(self.options)
        rows = view_rows(self.options.view, directory, self.options)
        if rows:
            yield to_arrow(self.options.view, rows)
