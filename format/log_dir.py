"""What a log directory holds, read from its files alone through fsspec: topics, partition
directories, their segments, each partition's log start and end offsets, its high watermark
and, for read_committed readers, its last stable offset and aborted transactions (``transactions``).

Readers stop at the high watermark. A single broker commits every record it appends, so there
it is the log end offset. A broker holding replicas of replicated partitions (cluster mode)
marks its log dir (``layout.REPLICATED_MARKER_FILE``); there the high watermark is the one the
broker checkpointed in ``replication-offset-checkpoint`` (bounded by the log start and end
offsets; a partition the checkpoint does not name yet has none committed). The checkpoint lags
the broker by up to ``replica.high.watermark.checkpoint.interval.ms``, which only holds a reader
back: everything below a checkpointed high watermark is committed.

Nothing is locked and nothing is written: a broker may be adding and removing
segments while this lists, so every listing is fresh (fsspec's cache is
dropped first), a directory that vanished lists as empty, and a segment that
vanishes while being looked at (retention, compaction) is simply not there.
The log end offset is that of the last complete batch: a torn tail is not
data yet. ``LogDirectory`` is the whole directory on any fsspec filesystem
(what Spark's planning and the SQL views read); the functions below it list
one level at a time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Mapping, Sequence

from fsspec.spec import AbstractFileSystem

from . import layout, transactions
from .checkpoint import parse_offset_checkpoint
from .errors import CheckpointError
from .fs import filesystem_for, join
from .layout import TopicPartition
from .remote_tier import RemoteLogSegmentMetadata
from .segment_reader import SegmentReader
from .txn_index import AbortedTxn

__all__ = ["SegmentInfo", "PartitionInfo", "LogDirectory", "entries", "partitions", "segments", "log_end_offset",
           "read_offset_checkpoint", "read_topic_id", "is_replicated"]

log = logging.getLogger(__name__)

_RETRIES = 3  # listings of a partition whose segments vanish while being read


@dataclass(frozen=True)
class SegmentInfo:
    """One segment's ``.log`` file: its base offset and size (``swapped``: a cleaned ``.log.swap`` standing in;
    ``remote``: the metadata of a segment in the remote tier, ``tiered_log``)."""

    base_offset: int
    size: int
    swapped: bool = False
    remote: RemoteLogSegmentMetadata | None = None

    @property
    def tier(self) -> str:
        return "local" if self.remote is None else "remote"

    @property
    def file_name(self) -> str:
        name = layout.log_file_name(self.base_offset)
        return name + layout.SWAP_FILE_SUFFIX if self.swapped else name


def entries(fs: AbstractFileSystem, path: str) -> list[tuple[str, dict]]:
    """(base name, fsspec entry) of everything in ``path`` now; empty when ``path`` does not exist."""
    fs.invalidate_cache(path)
    try:
        listed = fs.ls(path, detail=True)
    except FileNotFoundError:
        return []
    return [(e["name"].rstrip("/").rsplit("/", 1)[-1], e) for e in listed]


def partitions(fs: AbstractFileSystem, root: str) -> list[TopicPartition]:
    """The live partition directories of the log directory ``root``, in topic and partition order.

    Deleted, future and stray directories (and anything else) are left out.
    """
    out = []
    for name, entry in entries(fs, root):
        if entry.get("type") != "directory":
            continue
        try:
            out.append(layout.parse_partition_dir(name))
        except ValueError:
            continue
    return sorted(out, key=lambda tp: (tp.topic, tp.partition))


def segments(fs: AbstractFileSystem, directory: str, *, swapped: bool = False) -> list[SegmentInfo]:
    """The segments of a partition directory, in offset order.

    With ``swapped``, a cleaned ``.log.swap`` stands in for a ``.log`` that is
    missing: between the cleaner renaming the old segments away and the swap
    file into place, the cleaned data exists under that name only.
    """
    found: dict[int, SegmentInfo] = {}
    swap_suffix = layout.LOG_FILE_SUFFIX + layout.SWAP_FILE_SUFFIX
    for name, entry in entries(fs, directory):
        is_log = name.endswith(layout.LOG_FILE_SUFFIX)
        if not (is_log or (swapped and name.endswith(swap_suffix))):
            continue
        try:
            base_offset = layout.offset_from_file_name(name)
        except ValueError:
            continue
        if is_log or base_offset not in found:
            found[base_offset] = SegmentInfo(base_offset, int(entry.get("size") or 0), not is_log)
    return [found[b] for b in sorted(found)]


def log_end_offset(fs: AbstractFileSystem, directory: str, listed: Sequence[SegmentInfo]) -> int:
    """The offset after the last complete batch of the segments ``listed`` (in offset order, at least one).

    Only the last segment is read, from its last index entry on; while it holds
    no batch yet (just rolled) the end is its base offset.
    """
    last = listed[-1]
    with SegmentReader(fs, directory, last.base_offset, last.size) as reader:
        found = reader.next_offset()
    return last.base_offset if found is None else found


def read_offset_checkpoint(fs: AbstractFileSystem, path: str) -> dict[TopicPartition, int]:
    """An offset checkpoint file (``cleaner-offset-checkpoint``, ...) through fsspec; empty when it does not exist.

    A malformed file raises ``CheckpointError`` naming it and the line.
    """
    try:
        text = fs.cat_file(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    return parse_offset_checkpoint(text, path)


def read_topic_id(fs: AbstractFileSystem, partition_dir: str) -> str | None:
    """The topic id in Kafka's ``partition.metadata`` (``version: 0`` / ``topic_id: <id>``), as written there
    (Kafka's ``Uuid.toString``: URL-safe base64 without padding); None when there is none."""
    try:
        text = fs.cat_file(join(fs, partition_dir, layout.PARTITION_METADATA_FILE)).decode("utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "topic_id" and value.strip():
            return value.strip()
    return None


def is_replicated(fs: AbstractFileSystem, root: str) -> bool:
    """Whether the log dir ``root`` holds replicas of replicated partitions (its broker runs in cluster
    mode): then readers stop at the checkpointed high watermarks."""
    path = join(fs, root, layout.REPLICATED_MARKER_FILE)
    fs.invalidate_cache(root)
    return fs.exists(path)


@dataclass(frozen=True)
class PartitionInfo:
    """One partition as its files show it: its segments and its log start and end offsets."""

    topic: str
    partition: int
    directory: str
    segments: tuple[SegmentInfo, ...]
    log_start_offset: int
    log_end_offset: int
    # Computed only when asked for (read_committed readers): None otherwise.
    last_stable_offset: int | None = None
    # A replicated partition's high watermark, where the committed records end; None on a single broker,
    # whose every record is committed (the log end offset stands for it).
    high_watermark: int | None = None

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def committed_end_offset(self) -> int:
        """The high watermark: the log end offset unless the partition is replicated."""
        return self.log_end_offset if self.high_watermark is None else self.high_watermark

    @property
    def latest_offset(self) -> int:
        """Where a reader stops: the LSO when it was asked for (never above the high watermark), else
        the high watermark."""
        return self.committed_end_offset if self.last_stable_offset is None else self.last_stable_offset


class LogDirectory:
    """A log directory on any fsspec filesystem."""

    def __init__(self, url: str, storage_options: Mapping | None = None):
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.fs, self.root = filesystem_for(url, self.storage_options)

    def exists(self) -> bool:
        self.fs.invalidate_cache(self.root)
        return self.fs.isdir(self.root)

    def partitions(self, include_internal: bool = False) -> list[TopicPartition]:
        """Every partition directory, in topic and partition order; the KRaft metadata log of a
        dir Apache Kafka wrote is not a topic."""
        return [tp for tp in partitions(self.fs, self.root)
                if tp.topic != layout.CLUSTER_METADATA_TOPIC_NAME
                and (include_internal or tp.topic not in layout.INTERNAL_TOPICS)]

    def topics(self, include_internal: bool = False) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for tp in self.partitions(include_internal):
            out.setdefault(tp.topic, []).append(tp.partition)
        return out

    def partition_dir(self, tp: TopicPartition) -> str:
        return join(self.fs, self.root, layout.partition_dir_name(tp))

    def segments(self, tp: TopicPartition) -> list[SegmentInfo]:
        return segments(self.fs, self.partition_dir(tp))

    def log_start_offsets(self) -> dict[TopicPartition, int]:
        """``log-start-offset-checkpoint``; empty when it is missing or unreadable (a checkpoint
        half-written by its owner: the segments' base offsets stand in)."""
        path = join(self.fs, self.root, layout.LOG_START_OFFSET_CHECKPOINT_FILE)
        try:
            return read_offset_checkpoint(self.fs, path)
        except CheckpointError as exc:
            log.warning("ignoring %s: %s", path, exc)
            return {}

    def high_watermarks(self) -> dict[TopicPartition, int] | None:
        """The checkpointed high watermarks of a replicated log dir (``is_replicated``); None for a single
        broker's, where every record is committed. An unreadable checkpoint counts as naming none."""
        if not is_replicated(self.fs, self.root):
            return None
        path = join(self.fs, self.root, layout.REPLICATION_OFFSET_CHECKPOINT_FILE)
        try:
            return read_offset_checkpoint(self.fs, path)
        except CheckpointError as exc:
            log.warning("ignoring %s (nothing counts as committed): %s", path, exc)
            return {}

    def location(self, tp: TopicPartition, segment: SegmentInfo) -> str:
        """Where the segment's ``.log`` is, as a URL."""
        return self.fs.unstrip_protocol(join(self.fs, self.partition_dir(tp), segment.file_name))

    def reader(self, tp: TopicPartition, segment: SegmentInfo) -> SegmentReader:
        return SegmentReader(self.fs, self.partition_dir(tp), segment.base_offset, segment.size)

    def log_end_offset(self, tp: TopicPartition, listed: Sequence[SegmentInfo]) -> int:
        """The offset after the last complete batch of the segments ``listed`` (in offset order, at least one)."""
        last = listed[-1]
        with self.reader(tp, last) as reader:
            found = reader.next_offset()
        return last.base_offset if found is None else found

    def describe(self, tp: TopicPartition, start_offsets: Mapping[TopicPartition, int] | None = None, *,
                 last_stable: bool = False, high_watermarks: Mapping[TopicPartition, int] | None = None,
                 replicated: bool | None = None) -> PartitionInfo:
        """The partition's segments, its start and end offsets and its high watermark, from the files;
        with ``last_stable``, its last stable offset too (``transactions``), below the high watermark.
        ``start_offsets`` and ``high_watermarks`` (with ``replicated``) are the log dir's checkpoints when
        the caller read them already."""
        directory = self.partition_dir(tp)
        if replicated is None:
            checkpointed = self.high_watermarks()
            replicated, high_watermarks = checkpointed is not None, checkpointed or {}
        for attempt in range(_RETRIES):
            names = [name for name, _ in entries(self.fs, directory)] if last_stable else []
            listed = self.segments(tp)
            if not listed:
                return PartitionInfo(tp.topic, tp.partition, directory, (), 0, 0, 0 if last_stable else None,
                                     0 if replicated else None)
            starts = self.log_start_offsets() if start_offsets is None else start_offsets
            try:
                end = self.log_end_offset(tp, listed)
                start = max(listed[0].base_offset, min(starts.get(tp, 0), end))
                committed = min(max((high_watermarks or {}).get(tp, start), start), end) if replicated else end
                local = [s for s in listed if s.remote is None]
                stable = transactions.last_stable_offset(self.fs, directory, names, local, committed) \
                    if last_stable else None
            except FileNotFoundError:
                if attempt == _RETRIES - 1:
                    raise
                continue  # a segment deleted (retention, compaction) while being read: list again
            return PartitionInfo(tp.topic, tp.partition, directory, tuple(listed), start, end, stable,
                                 committed if replicated else None)
        raise AssertionError("unreachable")

    def describe_all(self, partitions: list[TopicPartition], *, last_stable: bool = False
                     ) -> dict[TopicPartition, PartitionInfo]:
        starts = self.log_start_offsets()
        checkpointed = self.high_watermarks()
        return {tp: self.describe(tp, starts, last_stable=last_stable, high_watermarks=checkpointed or {},
                                  replicated=checkpointed is not None) for tp in partitions}

    def aborted_transactions(self, tp: TopicPartition, from_offset: int, until_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [from_offset, until_offset), from the ``.txnindex`` files."""
        directory = self.partition_dir(tp)
        names = [name for name, _ in entries(self.fs, directory)]
        local = [s for s in self.segments(tp) if s.remote is None]
        return transactions.aborted_transactions(self.fs, directory, names, local, from_offset, until_offset)
