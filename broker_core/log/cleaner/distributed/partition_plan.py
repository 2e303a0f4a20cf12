"""What the job will do to each partition, decided by the broker cleaner's rules, and how its work is cut into tasks.

``plan_partition`` takes the first dirty offset from
``cleaner-offset-checkpoint`` and the first uncleanable one from the active
segment and ``min.compaction.lag.ms`` (``cleanable_offsets``, the broker's
own), and groups the cleanable segments as the broker's cleaner would
(``group_segments_by_size``); the dirty ratio aside, the job cleans what it is
asked to. ``plan_compaction`` plans every partition of some topics, settling
an interrupted swap first where no broker owns the log dir.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from format import layout
from format.fs import join
from format.layout import TopicPartition
from format.log_dir import LogDirectory, read_offset_checkpoint
from format.txn_index import AbortedTxn, parse_aborted_txns

from ....config import BrokerConfig, LogConfig
from ...topic_store import read_topics
from ..cleaner import group_segments_by_size, segments_overlapping
from ..log_cleaner_manager import calculate_cleanable_bytes, cleanable_offsets
from . import CompactionError
from .remote_segments import RemoteSegment, largest_timestamp, list_files, remote_segments, segment_path
from .segment_swap import recover_partition

# What one task of either stage reads, at least (a segment or group larger than this is a task alone).
DEFAULT_TASK_BYTES = 256 * 1024 * 1024


def task_bundles(items: Sequence, size: Callable[[object], int], target: int) -> list[list]:
    """Consecutive items in bundles of about ``target`` bytes (an item larger than that is a bundle
    alone): a Spark task costs a fixed tenth of a second or so, so tasks much smaller than that
    waste the cores, and a small remainder joins the bundle before it."""
    out: list[list] = []
    current: list = []
    held = 0
    for item in items:
        current.append(item)
        held += size(item)
        if held >= target:
            out.append(current)
            current, held = [], 0
    if current:
        if out and held < target // 2:
            out[-1].extend(current)
        else:
            out.append(current)
    return out


def topic_overrides(fs, root: str) -> dict[str, dict[str, str]]:
    """Each topic's configuration overrides, from seglog's topic store in the log dir."""
    return {name: dict(topic.config) for name, topic in read_topics(fs, root).items()}


@dataclass(frozen=True)
class GroupSource:
    base_offset: int
    size: int
    upper_bound_offset: int
    last_modified_ms: int | None


@dataclass(frozen=True)
class PartitionPlan:
    """What the job will do to one partition."""

    topic_partition: TopicPartition
    directory: str
    config: LogConfig
    segments: tuple[RemoteSegment, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    groups: tuple[tuple[GroupSource, ...], ...]
    txn_indexes: tuple[tuple[int, tuple[AbortedTxn, ...]], ...]

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic_partition.topic, self.topic_partition.partition)

    @property
    def dirty_segments(self) -> list[RemoteSegment]:
        return segments_overlapping(self.segments, self.first_dirty_offset, self.first_uncleanable_offset)

    @property
    def bytes_before(self) -> int:
        return sum(s.size for s in self.segments)


def plan_partition(fs, directory: str, tp: TopicPartition, config: LogConfig, *, log_start_offset: int,
                   log_end_offset: int, last_clean_offset: int | None, now_ms: int) -> PartitionPlan | None:
    """The broker cleaner's decision for this partition (dirty ratio aside: the job cleans what it
    is asked to); None when nothing is cleanable."""
    segments = remote_segments(list_files(fs, directory))
    if not segments:
        return None
    offsets = cleanable_offsets(segments, log_start_offset=log_start_offset, log_end_offset=log_end_offset,
                                last_stable_offset=log_end_offset,
                                min_compaction_lag_ms=config.min_compaction_lag_ms,
                                last_clean_offset=last_clean_offset, now_ms=now_ms,
                                largest_timestamp=lambda s: largest_timestamp(fs, directory, s))
    first_uncleanable, cleanable = calculate_cleanable_bytes(segments, offsets.first_dirty_offset,
                                                             offsets.first_uncleanable_dirty_offset)
    if cleanable == 0:
        return None
    cleanable_segments = [s for s in segments[:-1] if s.base_offset < first_uncleanable]
    next_base = {s.base_offset: segments[i + 1].base_offset for i, s in enumerate(segments[:-1])}
    by_base = {s.base_offset: s for s in cleanable_segments}
    groups = group_segments_by_size([s.sizes() for s in cleanable_segments], config.segment_bytes,
                                    config.segment_index_bytes, first_uncleanable)
    txn_indexes = []
    for s in segments:
        entries: tuple[AbortedTxn, ...] = ()
        if s.txn_index_size:
            path = segment_path(directory, fs, s.base_offset, layout.TXN_INDEX_FILE_SUFFIX)
            entries = tuple(parse_aborted_txns(fs.cat_file(path), path))
        txn_indexes.append((s.base_offset, entries))
    sources = tuple(tuple(GroupSource(g.base_offset, g.size, next_base[g.base_offset],
                                      by_base[g.base_offset].last_modified_ms) for g in group) for group in groups)
    return PartitionPlan(tp, directory, config, tuple(segments), offsets.first_dirty_offset, first_uncleanable,
                         sources, tuple(txn_indexes))


def plan_compaction(url: str, topics: Sequence[str], *, storage_options: Mapping | None = None,
                    now_ms: int, broker_config: Mapping[str, object] | None = None,
                    settle_leftovers: bool = True) -> list[PartitionPlan]:
    """Plan every partition of ``topics`` in the log dir at ``url`` (partitions with nothing to
    clean are left out). Topics must exist and be compacted. With ``settle_leftovers`` an
    interrupted swap's files are settled first (not under a running broker, which owns them)."""
    directory = LogDirectory(url, storage_options)
    fs, root = directory.fs, directory.root
    defaults = BrokerConfig.from_props(dict(broker_config or {})).log_config_defaults()
    overrides = topic_overrides(fs, root)
    present = directory.topics(include_internal=True)
    checkpoint = read_offset_checkpoint(fs, join(fs, root, layout.CLEANER_OFFSET_CHECKPOINT_FILE))
    starts = directory.log_start_offsets()
    plans = []
    for topic in topics:
        if topic not in present:
            raise CompactionError(f"topic {topic!r} has no partition in {url}")
        config = defaults.with_overrides(overrides.get(topic, {}))
        if not config.compact:
            raise CompactionError(f"topic {topic!r} has cleanup.policy={','.join(config.cleanup_policy)}; only "
                                  f"topics whose cleanup.policy includes compact are compacted")
        for partition in present[topic]:
            tp = TopicPartition(topic, partition)
            if settle_leftovers:
                recover_partition(fs, directory.partition_dir(tp))
            info = directory.describe(tp, starts)
            plan = plan_partition(fs, directory.partition_dir(tp), tp, config,
                                  log_start_offset=info.log_start_offset, log_end_offset=info.log_end_offset,
                                  last_clean_offset=checkpoint.get(tp), now_ms=now_ms)
            if plan is not None:
                plans.append(plan)
    return plans
