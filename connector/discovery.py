"""What a log directory holds, read from its files alone: topics, partitions,
segments, and each partition's log start and end offsets.

Nothing is locked: a broker may be writing the directory. The end offset is
that of the last complete batch (a torn tail is not data yet); a segment that
vanishes while being looked at (retention, compaction) is simply not there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from broker_core.log.kafka_topics import CLUSTER_METADATA_TOPIC
from format import layout, log_dir
from format.checkpoint import parse_offset_checkpoint
from format.fs import filesystem_for, join
from format.log_dir import SegmentInfo
from format.segment_reader import SegmentReader

log = logging.getLogger(__name__)

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentInfo, ...]
    log_start_offset: int
    log_end_offset: int

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)


class LogDirectory:
    """A log directory on any fsspec filesystem."""

    def __init__(self, url: str, storage_options=None):
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.fs, self.root = filesystem_for(url, self.storage_options)

    def exists(self) -> bool:
        self.fs.invalidate_cache(self.root)
        return self.fs.isdir(self.root)

    def partitions(self, include_internal: bool = False) -> list[layout.TopicPartition]:
        """Every partition directory, in topic and partition order; the KRaft metadata log of a
        dir Apache Kafka wrote is not a topic."""
        return [tp for tp in log_dir.partitions(self.fs, self.root)
                if tp.topic != CLUSTER_METADATA_TOPIC and (include_internal or tp.topic not in INTERNAL_TOPICS)]

    def topics(self, include_internal: bool = False) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in self.partitions(include_internal):
            out.setdefault(tp.topic, []).append(tp.partition)
        return out

    def partition_dir(self, tp: layout.TopicPartition) -> str:
        return join(self.fs, self.root, layout.partition_dir_name(tp))

    def segments(self, tp: layout.TopicPartition) -> list[SegmentInfo]:
        return log_dir.segments(self.fs, self.partition_dir(tp))

    def _checkpointed_start_offsets(self) -> dict[layout.TopicPartition, int]:
        path = join(self.fs, self.root, layout.LOG_START_OFFSET_CHECKPOINT_FILE)
        try:
            text = self.fs.cat_file(path).decode("utf-8")
        except FileNotFoundError:
            return {}
        try:
            return parse_offset_checkpoint(text, path)
        except Exception as exc:  # a checkpoint half-written by its owner: fall back to the files
            log.warning("ignoring %s: %s", path, exc)
            return {}

    def reader(self, tp: layout.TopicPartition, segment: SegmentInfo) -> SegmentReader:
        return SegmentReader(self.fs, self.partition_dir(tp), segment.base_offset, segment.size)

    def describe(self, tp: layout.TopicPartition, start_offsets: dict | None = None) -> PartitionInfo:
        """The partition's segments and its start and end offsets, from the files."""
        segments = self.segments(tp)
        if not segments:
            return PartitionInfo(tp.topic, tp.partition, self.partition_dir(tp), (), 0, 0)
        starts = self._checkpointed_start_offsets() if start_offsets is None else start_offsets
        end = log_dir.log_end_offset(self.fs, self.partition_dir(tp), segments)
        start = max(segments[0].base_offset, min(starts.get(tp, 0), end))
        return PartitionInfo(tp.topic, tp.partition, self.partition_dir(tp), tuple(segments), start, end)

    def describe_all(self, partitions: list[layout.TopicPartition]) -> dict[layout.TopicPartition, PartitionInfo]:
        starts = self._checkpointed_start_offsets()
        return {tp: self.describe(tp, starts) for tp in partitions}
