"""The ``seglog`` Spark data source: thin adapters from Spark's calls to the
connector's planning and reading functions.

    spark.read.format("seglog").option("path", "/data/logs").option("subscribe", "orders").load()
    spark.readStream.format("seglog").option("path", "s3://bucket/logs").option("subscribe", "orders") \
        .option("groupId", "orders-etl").load()
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from broker_core.clock import SYSTEM_CLOCK, Clock
from format.layout import TopicPartition
from format.log_dir import PartitionInfo, SegmentInfo
from format.record_batch import TimestampType
from format.remote_tier import REMOTE_TIER_FILE
from format.tiered_log import TieredLogDirectory

from .client_options import open_broker
from .data_loss import data_loss
from .options import SeglogOptionError, SourceOptions, open_log_directory, parse_options
from .planning import (OffsetRange, TriggerPacer, bound_to_readable, check_named_partitions, check_ranges,
                       from_offsets_json, resolve, select_partitions, split_ranges, to_offsets_json)
from .pushdown import ReadBounds, narrow_ranges, push_filters
from .read_counter import ReadCounter
from .remote import RemoteLog

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int")
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"


class RangePartition(InputPartition):
    """One Spark task: an offset range of one partition."""

    def __init__(self, offset_range: OffsetRange):
        super().__init__(offset_range)
        self.offset_range = offset_range


class _Planner:
    """Driver-side state shared by the batch and streaming readers."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.directory = _log_directory(options) if options.path else None
        # With bootstrap, the running broker is the authority on partitions and offsets.
        self.metadata = RemoteLog(options.bootstrap, options.client_props) if options.bootstrap else self.directory

    def check_path(self) -> None:
        if self.directory is None:
            return
        if not self.directory.exists():
            raise SeglogOptionError(f"option path: {self.options.path} is not a log directory (nothing is "
                                    f"there)")
        url = self.directory.remote_storage_url
        if url is not None:
            try:
                self.directory.remote_fs
            except (ValueError, TypeError, ImportError) as exc:
                named = "remote.storage.url" if self.options.remote_storage_url else f"path (its {REMOTE_TIER_FILE})"
                raise SeglogOptionError(f"option {named}: the remote tier {url!r} cannot be opened with the "
                                        f"storage.* options: {exc}") from None

    def check(self) -> None:
        """What ``load()`` can check against the log dir: it exists, assign names partitions it
        has, and per-partition offsets or timestamps name only partitions read. That they name
        all of them is checked where the starting offsets are used: a stream restarted from its
        checkpoint after partitions were added must still load, as with Spark's Kafka source."""
        self.check_path()
        partitions = self.partitions()
        check_named_partitions(self.options.starting, _spec_option(self.options.raw, "starting"), partitions,
                               every=False)
        check_named_partitions(self.options.ending, _spec_option(self.options.raw, "ending"), partitions)

    def starting_offsets(self, infos: dict[TopicPartition, PartitionInfo]) -> dict[TopicPartition, int]:
        check_named_partitions(self.options.starting, _spec_option(self.options.raw, "starting"), list(infos))
        return self.resolve(self.options.starting, infos, is_start=True)

    def partitions(self) -> list[TopicPartition]:
        return select_partitions(self.metadata, self.options)

    def infos(self) -> dict[TopicPartition, PartitionInfo]:
        """The partitions read; for read_committed with their last stable offset, where reads stop."""
        return self.metadata.describe_all(self.partitions(), last_stable=self.options.read_committed)

    def find_by_timestamp(self, tp: TopicPartition, timestamp: int) -> int | None:
        if self.directory is None or self.options.bootstrap:
            return self.metadata.find_by_timestamp(tp, timestamp)
        for segment in self.directory.segments(tp):
            with self.directory.reader(tp, segment) as reader:
                found = reader.find_offset_by_timestamp(timestamp)
            if found is not None:
                return found.offset
        return None

    def stamped_at_append(self, tp: TopicPartition, offset: int) -> bool:
        """Whether the batch holding ``offset`` and the partition's last batch are stamped at append
        (``LogAppendTime``): the topic was so set when ``offset`` was written and still is, and the broker
        stamps with its clock as it appends, so no record after ``offset`` is stamped before it (what
        Kafka's time index rests on). Unknown (False) without the files."""
        if self.directory is None or self.options.bootstrap:
            return False
        segments = self.directory.segments(tp)
        holding = [s for s in segments if s.base_offset <= offset]
        return (bool(holding) and self._batch_stamped_at_append(tp, holding[-1], offset)
                and self._batch_stamped_at_append(tp, segments[-1], None))

    def _batch_stamped_at_append(self, tp: TopicPartition, segment: SegmentInfo, offset: int | None) -> bool:
        """Whether the batch of ``segment`` holding ``offset`` (its last batch for None) is LogAppendTime."""
        with self.directory.reader(tp, segment) as reader:
            if offset is None:
                end = reader.next_offset()
                if end is None:
                    return False  # a segment just rolled: its batches are yet to come
                offset = end - 1
            found = reader.translate_offset(offset)
            walk = reader.records.batch_headers(found.position) if found is not None else iter(())
            _, header = next(walk, (None, None))
            return header is not None and header.timestamp_type == TimestampType.LOG_APPEND_TIME

    def group_offsets(self) -> dict[TopicPartition, int]:
        from broker_core.group_offsets import read_committed_offsets

        if self.options.bootstrap:
            # The running broker's coordinator knows the group's offsets (OffsetFetch).
            with open_broker(self.options.bootstrap, self.options.client_props) as broker:
                return {tp: c.offset for tp, c in broker.committed_offsets(self.options.group_id).items()}
        if self.directory is None:
            raise SeglogOptionError("option startingOffsets=group needs the option path (the log dir holding "
                                    "the group's committed offsets) or bootstrap")

        groups = read_committed_offsets(self.directory.fs, self.directory.root, self.options.group_id)
        return {tp: c.offset for tp, c in groups.get(self.options.group_id, {}).items()}

    def resolve(self, spec, infos, *, is_start: bool) -> dict[TopicPartition, int]:
        prefix = "starting" if is_start else "ending"
        return resolve(spec, infos, option=_spec_option(self.options.raw, prefix), is_start=is_start,
                       find_by_timestamp=self.find_by_timestamp, group_offsets=self.group_offsets,
                       auto_offset_reset=self.options.auto_offset_reset,
                       timestamp_strategy=self.options.starting_timestamp_strategy, group_id=self.options.group_id)

    def tasks(self, start: dict[TopicPartition, int], end: dict[TopicPartition, int],
              infos: dict[TopicPartition, PartitionInfo]) -> list[RangePartition]:
        ranges = []
        for tp, until in sorted(end.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            begin = start.get(tp, infos[tp].log_start_offset if tp in infos else until)
            info = infos.get(tp)
            if info is not None and begin < info.log_start_offset:
                data_loss(f"offsets {begin} to {min(until, info.log_start_offset)} of {tp} are gone: the log now "
                          f"starts at {info.log_start_offset}", self.options.fail_on_data_loss)
                begin = min(info.log_start_offset, until)
            if until > begin:
                ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
        ranges = split_ranges(ranges, min_partitions=self.options.min_partitions,
                              max_records_per_partition=self.options.max_records_per_partition,
                              boundaries=self.batch_boundaries)
        return [RangePartition(r) for r in ranges]

    def batch_boundaries(self, r: OffsetRange) -> list[int]:
        """Offsets where a batch starts inside ``r``, from the sparse offset indexes."""
        if self.directory is None:
            return []
        tp = r.topic_partition
        out = []
        for segment in self.directory.segments(tp):
            if segment.base_offset >= r.until_offset:
                break
            out.append(segment.base_offset)
            with self.directory.reader(tp, segment) as reader:
                index = reader.offset_index
                out.extend(index.entry(n).offset + 1 for n in range(index.entries))
        return [b for b in out if r.from_offset < b < r.until_offset]


PUSHDOWN_WORKER = "pyspark.sql.worker.data_source_pushdown_filters"


def _planned_with_pushdown() -> bool:
    """Whether the reader is being made by Spark's planning worker that pushes filters: a frame of that module
    (by its spec's name, which holds when it runs as ``__main__`` too) among the callers of
    ``DataSource.reader``."""
    frame = sys._getframe(2)
    while frame is not None:
        spec = frame.f_globals.get("__spec__")
        if spec is not None and spec.name == PUSHDOWN_WORKER:
            return True
        frame = frame.f_back
    return False


def _log_directory(options: SourceOptions) -> TieredLogDirectory:
    try:
        return open_log_directory(options)
    except (ValueError, TypeError, ImportError) as exc:  # an unknown scheme, a bad storage.* option
        raise SeglogOptionError(f"option path={options.path!r} cannot be opened: {exc}") from None


def _spec_option(raw: dict, prefix: str) -> str:
    """The name of the option the user gave for where to start or end (for messages)."""
    given = {k.lower() for k in raw}
    for name in (f"{prefix}Offsets", f"{prefix}OffsetsByTimestamp", f"{prefix}Timestamp"):
        if name.lower() in given:
            return name
    return f"{prefix}Offsets"


def _read(options: SourceOptions, partition: InputPartition, bounds: ReadBounds = ReadBounds(),
          counter: ReadCounter | None = None) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        # Spark plans one InputPartition(None) for a batch reader that has no ranges to read.
        return iter(())
    # Imported by the task that reads, not where the query is planned (see ``partition_read``).
    from .partition_read import read_partition

    return read_partition(options, partition.offset_range, bounds, counter)


class SeglogBatchReader(DataSourceReader):
    """A batch query: the offset ranges from the starting and ending options, narrowed by ``bounds``, the
    filters Spark pushes (``PushdownBatchReader``, ``connector.pushdown``).

    ``counter`` counts the bytes of segment files that ``read`` read through this object. Spark 4.2 gives
    a Python data source no task metric of its own (a Python scan reports only Spark's Python runner
    metrics) and a reader cannot make an accumulator (it is made in a planning worker, not in the
    driver), so the count is read where the reader reads: in the process that calls ``read``."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.bounds = ReadBounds()
        self.counter = ReadCounter()
        self._planner = planner = _Planner(options)
        self._infos = planner.infos()
        self._start = planner.starting_offsets(self._infos)
        end = planner.resolve(options.ending, self._infos, is_start=False)
        check_ranges(self._start, end)
        self._end = bound_to_readable(self._start, end, self._infos, read_committed=options.read_committed)

    def __getstate__(self) -> dict:
        # Spark pickles the reader into every task's read function: the tasks read by their partition, the
        # planning state (every partition's segments, the log directory's handles) stays behind.
        return {k: v for k, v in vars(self).items() if k not in ("_planner", "_infos", "_start", "_end")}

    def partitions(self):
        planner = self._planner
        start, end = self._start, self._end
        if not self.bounds.is_unbounded:
            start, end = narrow_ranges(self.bounds, start, end, first_reaching=planner.find_by_timestamp,
                                       stamped_at_append=planner.stamped_at_append)
        return planner.tasks(start, end, self._infos)

    def read(self, partition):
        return _read(self.options, partition, self.bounds, self.counter)


class PushdownBatchReader(SeglogBatchReader):
    """The batch reader Spark pushes filters to.

    Spark refuses to plan a reader that takes filters when ``spark.sql.python.filterPushdown.enabled``
    is false (``DATA_SOURCE_PUSHDOWN_DISABLED``) and says so to no data source: the reader is made by one
    of two planning workers, one for each setting. Taking filters only when made by the pushdown one keeps
    ``format("seglog")`` working in every session, pushing filters down where the setting allows it."""

    def pushFilters(self, filters):
        self.bounds, remaining = push_filters(filters)
        return remaining


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, clock: Clock = SYSTEM_CLOCK):
        self.options = options
        self._planner = _Planner(options)
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._pacer = TriggerPacer(options.max_trigger_delay_ms, clock)
        self._committed: dict | None = None

    def initialOffset(self) -> dict:
        infos = self._planner.infos()
        return to_offsets_json(self._planner.starting_offsets(infos))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: info.latest_offset for tp, info in self._planner.infos().items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # Everything below ``start`` is done: Spark plans the next batch only after the
        # previous one committed. Committing here keeps the group at most one trigger behind.
        self._commit_group(start)
        begin = from_offsets_json(start)
        infos = self._planner.infos()
        latest = {tp: info.latest_offset for tp, info in infos.items()}
        for tp, info in infos.items():
            begin.setdefault(tp, info.log_start_offset)  # a partition created mid-query starts at earliest
        for tp, offset in begin.items():
            latest.setdefault(tp, offset)  # a partition that vanished makes no progress
        if self._target is not None:
            latest = {tp: min(offset, self._target.get(tp, begin[tp])) if tp in self._target else begin[tp]
                      for tp, offset in latest.items()}
        for tp in sorted(latest, key=lambda t: (t.topic, t.partition)):
            if latest[tp] < begin[tp] and tp in infos and begin[tp] > infos[tp].log_end_offset:
                # As Spark's Kafka source: offsets past the log end (a start beyond it, a truncated
                # log) are data loss; without failOnDataLoss the query goes on from the log end.
                # (A start between the last stable offset and the log end waits, read_committed.)
                data_loss(f"partition {tp}'s offset was changed from {begin[tp]} to {latest[tp]}: offsets "
                          f"{latest[tp]} to {begin[tp]} are past the log end offset {infos[tp].log_end_offset}",
                          self.options.fail_on_data_loss)
            elif latest[tp] < begin[tp]:
                latest[tp] = begin[tp]  # a partition that vanished makes no progress
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return to_offsets_json(self._pacer.end_offsets(begin, latest))
        min_offsets = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        max_offsets = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return to_offsets_json(self._pacer.end_offsets(begin, latest, min_offsets=min_offsets,
                                                       max_offsets=max_offsets))

    def reportLatestOffset(self):
        return None if self._latest is None else to_offsets_json(self._latest)

    def partitions(self, start: dict, end: dict):
        infos = self._planner.infos()
        return self._planner.tasks(from_offsets_json(start), from_offsets_json(end), infos)

    def read(self, partition):
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        self._commit_group(end)

    def _commit_group(self, offsets: dict) -> None:
        if not self.options.group_id or not offsets or offsets == self._committed:
            return
        from .group_commit import commit_group_offsets

        commit_group_offsets(self.options, from_offsets_json(offsets))
        self._committed = offsets


class _RefusedStreamReader(DataSourceStreamReader):
    """A stream whose options are wrong: every call raises the option error."""

    def __init__(self, error: SeglogOptionError):
        self.error = error

    def initialOffset(self) -> dict:
        raise self.error

    def latestOffset(self, start: dict = None, limit: ReadLimit = None) -> dict:
        raise self.error

    def partitions(self, start: dict, end: dict):
        raise self.error

    def read(self, partition):
        raise self.error


class SeglogDataSource(DataSource):
    """``format("seglog")``: Spark's Kafka source columns, read from segment files."""

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def _options(self, streaming: bool) -> SourceOptions:
        return parse_options(self.options, streaming=streaming)

    def schema(self):
        # Spark calls this at load(): every option error that does not depend on the query
        # being a batch or a stream is raised here.
        options = parse_options(self.options, streaming=None)
        if options.view is not None:
            from .views import view_schema

            _Planner(options).check_path()
            return view_schema(options.view)
        _Planner(options).check()
        return KAFKA_SCHEMA + (", " + HEADERS_COLUMN if options.include_headers else "")

    def reader(self, schema):
        options = self._options(streaming=False)
        if options.view is not None:
            from .views import ViewReader

            return ViewReader(options)
        return PushdownBatchReader(options) if _planned_with_pushdown() else SeglogBatchReader(options)

    def streamReader(self, schema):
        try:
            return SeglogStreamReader(self._options(streaming=True))
        except SeglogOptionError as exc:
            # Spark's stream runner hides an error raised here behind its own UnboundLocalError;
            # raised from the reader's first call, the message reaches the user.
            return _RefusedStreamReader(exc)

    def writer(self, schema, overwrite: bool):
        from .sink import SeglogWriter

        return SeglogWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from .sink import SeglogStreamWriter

        return SeglogStreamWriter(dict(self.options), schema, overwrite)
