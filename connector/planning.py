"""Offset-range planning on the driver: which partitions, from where to where, and
how the ranges become Spark tasks. Plain functions over the files' metadata,
tested without a SparkSession.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

from broker_core.clock import SYSTEM_CLOCK, Clock
from format.layout import TopicPartition
from format.log_dir import LogDirectory, PartitionInfo

from .options import EARLIEST, LATEST, OffsetSpec, SeglogOptionError, SourceOptions


class NoOffsetForPartitionError(SeglogOptionError):
    """startingOffsets=group with autoOffsetReset=none, and a partition without a committed offset
    (Kafka's NoOffsetForPartitionException)."""


@dataclass(frozen=True)
class OffsetRange:
    """Records ``from_offset <= offset < until_offset`` of one partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def select_partitions(directory: LogDirectory, options: SourceOptions) -> list[TopicPartition]:
    """The partitions the query reads, by subscribe, subscribePattern or assign."""
    if options.assign:
        present = directory.topics(include_internal=True)
        out = []
        for topic, partitions in options.assign.items():
            if topic not in present:
                raise SeglogOptionError(f"option assign names topic {topic!r}, which has no partition in "
                                        f"{directory.url}")
            for p in partitions:
                if p not in present[topic]:
                    raise SeglogOptionError(f"option assign names partition {topic}-{p}, which is not in "
                                            f"{directory.url} (the topic has {sorted(present[topic])})")
                out.append(TopicPartition(topic, p))
        return sorted(out, key=lambda tp: (tp.topic, tp.partition))
    include_internal = bool(options.subscribe)
    return [tp for tp in directory.partitions(include_internal) if options.selects(tp.topic)]


def to_offsets_json(offsets: Mapping[TopicPartition, int]) -> dict:
    """Spark's Kafka offset layout: {"topic": {"0": 23}}."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_offsets_json(doc: Mapping) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in doc.items() for p, o in parts.items()}


def check_named_partitions(spec: OffsetSpec, option: str, partitions: list[TopicPartition], *,
                           every: bool = True) -> None:
    """Per-partition offsets or timestamps name only partitions the query reads and, with ``every``,
    all of them (Kafka's rule for the offsets a query starts or ends at)."""
    if spec.kind not in ("offsets", "timestamps"):
        return
    def ordered(tps):
        return sorted(tps, key=lambda t: (t.topic, t.partition))

    reads = set(partitions)
    named = {TopicPartition(t, p) for t, parts in spec.offsets.items() for p in parts}
    for tp in ordered(named - reads):
        raise SeglogOptionError(f"option {option} names {tp}, which the query does not read (it reads "
                                f"{', '.join(map(str, ordered(reads))) or 'no partition'})")
    for tp in ordered(reads - named) if every else ():
        what = "offset" if spec.kind == "offsets" else "timestamp"
        raise SeglogOptionError(f"option {option} gives no {what} for {tp}: name every partition the query "
                                f"reads (-2 for earliest, -1 for latest)")


def resolve(spec: OffsetSpec, infos: Mapping[TopicPartition, PartitionInfo], *, option: str, is_start: bool,
            find_by_timestamp: Callable[[TopicPartition, int], int | None],
            group_offsets: Callable[[], Mapping[TopicPartition, int]] | None = None,
            auto_offset_reset: str = "latest", timestamp_strategy: str = "latest",
            group_id: str | None = None) -> dict[TopicPartition, int]:
    """Turn startingOffsets/endingOffsets (or their timestamp forms) into an offset per partition.

    ``auto_offset_reset`` (Kafka's earliest, latest or none) places a partition the group has
    no committed offset for; ``timestamp_strategy`` (error or latest) a partition with no
    record at or after a starting timestamp.
    """
    out = {}
    committed = group_offsets() if spec.kind == "group" and group_offsets else {}
    if spec.kind == "group" and auto_offset_reset == "none":
        missing = sorted((tp for tp in infos if tp not in committed), key=lambda t: (t.topic, t.partition))
        if missing:
            raise NoOffsetForPartitionError(
                f"group {group_id!r} has no committed offset for {', '.join(map(str, missing))} and option "
                f"autoOffsetReset is none: commit offsets for them, or set autoOffsetReset to earliest or latest")
    for tp, info in infos.items():
        if spec.kind == "earliest":
            out[tp] = info.log_start_offset
        elif spec.kind == "latest":
            out[tp] = info.latest_offset
        elif spec.kind == "group":
            fallback = info.log_start_offset if auto_offset_reset == "earliest" else info.latest_offset
            out[tp] = committed.get(tp, fallback)
        elif spec.kind == "offsets":
            offset = spec.for_partition(tp.topic, tp.partition)
            if offset is None:  # a partition created since the query was planned
                offset = EARLIEST if is_start else LATEST
            out[tp] = (info.log_start_offset if offset == EARLIEST
                       else info.latest_offset if offset == LATEST else offset)
        else:
            ts = spec.timestamp if spec.kind == "timestamp" else spec.for_partition(tp.topic, tp.partition)
            if ts is None:
                ts = EARLIEST if is_start else LATEST
            if ts in (EARLIEST, LATEST) and spec.kind == "timestamps":
                out[tp] = info.log_start_offset if ts == EARLIEST else info.latest_offset
                continue
            found = find_by_timestamp(tp, ts)
            if found is None and is_start and timestamp_strategy == "error":
                raise SeglogOptionError(f"option {option}: no record of {tp} has a timestamp at or after {ts} "
                                        f"(startingOffsetsByTimestampStrategy is error; latest starts such "
                                        f"partitions at their log end)")
            out[tp] = info.latest_offset if found is None else found
    return out


def bound_to_readable(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                      infos: Mapping[TopicPartition, PartitionInfo], *, read_committed: bool
                      ) -> dict[TopicPartition, int]:
    """Ending offsets past where a consumer may read end there (never before the start): the last stable
    offset read_committed, the high watermark of a replicated partition. A single broker's partition is
    left alone read_uncommitted: all it holds is committed, and a range may end past its end."""
    out = {}
    for tp, until in end.items():
        info = infos.get(tp)
        if info is not None and (read_committed or info.high_watermark is not None):
            until = max(min(until, info.latest_offset), start.get(tp, 0))
        out[tp] = until
    return out


def check_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> None:
    for tp, until in end.items():
        begin = start.get(tp)
        if begin is not None and until < begin:
            raise SeglogOptionError(f"the ending offset {until} of {tp} is before its starting offset {begin}")


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_offsets: int) -> dict[TopicPartition, int]:
    """Spread ``max_offsets`` over the partitions in proportion to their backlog, as Spark's
    Kafka source does (fractions below one round up so small partitions still move)."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    out = {}
    for tp, until in latest.items():
        begin = start.get(tp, until)
        share = max_offsets * backlog[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(until, begin + step)
    return out


class TriggerPacer:
    """Where a streaming micro-batch ends, under the trigger options of Spark's Kafka source.

    ``minOffsetsPerTrigger`` holds a trigger back (it ends where it begins) until that many
    offsets wait across the partitions, or until ``maxTriggerDelay`` has passed since the
    last micro-batch that read something; ``maxOffsetsPerTrigger`` caps what one reads
    (``rate_limit``). Time comes from ``clock``, so the delay is tested without waiting.
    """

    def __init__(self, max_trigger_delay_ms: int, clock: Clock = SYSTEM_CLOCK):
        self.max_trigger_delay_ms = max_trigger_delay_ms
        self.clock = clock
        self._last_trigger_ms = clock.hi_res_clock_ms()

    def end_offsets(self, begin: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], *,
                    min_offsets: int | None = None, max_offsets: int | None = None) -> dict[TopicPartition, int]:
        """The next micro-batch's end offsets from ``begin``, with ``latest`` available."""
        now_ms = self.clock.hi_res_clock_ms()
        backlog = sum(max(0, latest[tp] - begin.get(tp, latest[tp])) for tp in latest)
        waited_ms = now_ms - self._last_trigger_ms
        if min_offsets is not None and backlog < min_offsets and waited_ms < self.max_trigger_delay_ms:
            return dict(begin)
        end = rate_limit(begin, latest, max_offsets) if max_offsets is not None else dict(latest)
        if end != dict(begin):
            self._last_trigger_ms = now_ms
        return end


def split_ranges(ranges: list[OffsetRange], *, min_partitions: int | None,
                 max_records_per_partition: int | None,
                 boundaries: Callable[[OffsetRange], list[int]] | None = None) -> list[OffsetRange]:
    """Split ranges into more tasks: each at most ``max_records_per_partition`` records, and
    at least ``min_partitions`` tasks overall, large partitions split first (Spark's rule).

    ``boundaries(range)`` may offer batch-start offsets inside the range; split points
    snap to the nearest one, so no two tasks decode the same batch.
    """
    ranges = [r for r in ranges if r.size > 0]
    parts = {r: 1 for r in ranges}
    if max_records_per_partition:
        for r in ranges:
            parts[r] = max(parts[r], math.ceil(r.size / max_records_per_partition))
    total = sum(r.size for r in ranges)
    if min_partitions and sum(parts.values()) < min_partitions and total > 0:
        for r in ranges:
            parts[r] = max(parts[r], math.ceil(min_partitions * r.size / total))
    out = []
    for r in ranges:
        n = min(parts[r], r.size)
        if n <= 1:
            out.append(r)
            continue
        snaps = sorted(set(boundaries(r))) if boundaries else []
        cuts = []
        for i in range(1, n):
            ideal = r.from_offset + (r.size * i) // n
            if snaps:
                ideal = min(snaps, key=lambda b: (abs(b - ideal), b))
            if r.from_offset < ideal < r.until_offset and (not cuts or ideal > cuts[-1]):
                cuts.append(ideal)
        edges = [r.from_offset, *cuts, r.until_offset]
        out.extend(OffsetRange(r.topic, r.partition, a, b) for a, b in zip(edges, edges[1:]))
    return out
