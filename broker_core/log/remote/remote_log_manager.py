"""Kafka's ``RemoteLogManager``: for every partition of a topic with ``remote.storage.enable``, a task run
every ``remote.log.manager.task.interval.ms``. On the partition's leader it

1. on its first run (and on each new leadership) recovers the partition's remote tier: a copy left at
   COPY_SEGMENT_STARTED is removed (objects, then metadata), a delete left at DELETE_SEGMENT_STARTED is
   finished, objects no metadata names are removed;
2. copies each rolled segment lying wholly below the high watermark and the last stable offset, oldest first:
   metadata COPY_SEGMENT_STARTED, the data and index objects, metadata COPY_SEGMENT_FINISHED — then tells the
   log (``highest_offset_in_remote_storage``), whose retention may from then on delete the local copy once it
   is past ``local.retention.ms`` / ``.bytes``;
3. deletes remote segments past the total retention (``retention.ms``, ``retention.bytes`` over both tiers)
   or wholly below the log start offset: the log start offset moves first, then metadata
   DELETE_SEGMENT_STARTED, the objects, the metadata object.

On a follower it copies and deletes nothing: it lists the partition's remote metadata and sets the log's
``highest_offset_in_remote_storage`` to the last offset of its own log that a ``COPY_SEGMENT_FINISHED``
segment holds (Kafka's follower task, ``findHighestRemoteOffset``), so that its local retention, too, deletes
only what the remote tier holds whole; a log start offset the leader's remote retention moved is followed.
Leading again, the task starts over from the listed metadata (step 1).

A failing remote tier (unreachable, refusing) stops the partition's round; the task retries after
``remote.log.manager.task.retry.backoff.ms``, doubling up to ``...backoff.max.ms``, and warns naming the URL
and the error. Nothing local goes meanwhile: local retention waits for a finished copy.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from typing import Callable

from format.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from format.fs import filesystem_for
from format.layout import TopicPartition, producer_snapshot_file_name
from format.log_dir import read_topic_id
from format.remote_tier import RemoteLogSegmentMetadata, RemoteLogSegmentState, new_segment_id
from format.segment import LogSegment

from ...clock import SYSTEM_CLOCK, Clock
from ...config import BrokerConfig
from ..leader_epoch_file_cache import LeaderEpochFileCache
from ..log import Log
from ..scheduler import Scheduler
from .remote_storage_manager import LogSegmentData, RemoteStorageManager
from .retry_backoff import retry_backoff_ms

log = logging.getLogger(__name__)

__all__ = ["RemoteLogManager"]

_STARTED = (RemoteLogSegmentState.COPY_SEGMENT_STARTED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)


@dataclass
class _PartitionTask:
    """One partition's RLMTask state: whether it leads, the finished remote segments it knows, and its retry
    back-off."""

    leader: bool
    topic_id: str = ""
    segments: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    recovered: bool = False
    failures: int = 0
    retry_at_ms: int = 0


class RemoteLogManager:
    """The remote log manager of one broker. ``logs`` lists the broker's logs; ``is_leader`` says whether this
    broker leads a partition (always, on a single broker); ``rsm`` is the remote tier."""

    def __init__(self, config: BrokerConfig, logs: Callable[[], dict[TopicPartition, Log]],
                 rsm: RemoteStorageManager, *, clock: Clock = SYSTEM_CLOCK,
                 is_leader: Callable[[TopicPartition], bool] = lambda tp: True):
        self.config = config
        self.rsm = rsm
        self.clock = clock
        self._logs = logs
        #: Whether this broker leads a partition (cluster mode sets the replica manager's answer).
        self.is_leader = is_leader
        self._tasks: dict[TopicPartition, _PartitionTask] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"RemoteLogManager({self.rsm.url})"

    # --- scheduling ----------------------------------------------------------------

    def start_up(self, scheduler: Scheduler) -> None:
        """Run every ``remote.log.manager.task.interval.ms`` on ``scheduler`` (the log manager's)."""
        interval = self.config.remote_log_manager_task_interval_ms

        def run() -> None:
            if self._closed:
                return
            try:
                self.run_once()
            finally:
                scheduler.schedule("remote-log-manager", run, interval)

        scheduler.schedule("remote-log-manager", run, interval)

    def close(self) -> None:
        self._closed = True

    def run_once(self) -> None:
        """One round over every partition with remote storage."""
        for tp, lg in sorted(self._logs().items()):
            if not lg.config.remote_storage_enable or lg.read_only:
                continue
            leader = self.is_leader(tp)
            task = self._tasks.get(tp)
            if task is None or task.leader != leader:
                # A new leader starts from the listed metadata (recovery first); a follower only reads it.
                task = self._tasks[tp] = _PartitionTask(leader)
            self._run_partition(tp, lg, task)

    # --- one partition ---------------------------------------------------------------

    def _run_partition(self, tp: TopicPartition, lg: Log, task: _PartitionTask) -> None:
        now = self.clock.milliseconds()
        if now < task.retry_at_ms:
            return
        try:
            if not task.leader:
                self._follow(tp, lg, task)
                return
            if not task.recovered and not self._recover(tp, lg, task):
                return
            self._copy_segments(tp, lg, task)
            self._delete_expired(tp, lg, task)
        except Exception as exc:  # noqa: BLE001 — a store's failures come as OSError, botocore's, aiohttp's...
            task.failures += 1
            backoff = retry_backoff_ms(task.failures, self.config.remote_log_manager_task_retry_backoff_ms,
                                       self.config.remote_log_manager_task_retry_backoff_max_ms)
            task.retry_at_ms = self.clock.milliseconds() + backoff  # from when the attempt gave up
            log.warning("%s: the remote tier %s failed (%s: %s); retrying in %d ms, local segments kept",
                        lg, self.rsm.url, type(exc).__name__, exc, backoff)
        else:
            task.failures = 0

    def _recover(self, tp: TopicPartition, lg: Log, task: _PartitionTask) -> bool:
        """Make the partition's remote tier whole again (see the module docstring) and learn its finished
        segments; False when the partition cannot be tiered (no topic id)."""
        topic_id = read_topic_id(*filesystem_for(lg.dir))
        if topic_id is None:
            log.warning("%s: no topic id in its partition.metadata; not tiering it", lg)
            return False
        finished = []
        for metadata in self.rsm.list_segments(tp.topic, topic_id, tp.partition):
            if metadata.state in _STARTED:
                log.info("%s: removing remote segment %s left at %s", lg, metadata.name, metadata.state.name)
                self._delete_remote_segment(metadata, started=True)
            else:
                finished.append(metadata)
        for orphan in self.rsm.remove_orphans(tp.topic, topic_id, tp.partition):
            log.info("%s: removed orphan remote object %s", lg, orphan)
        task.topic_id, task.segments, task.recovered = topic_id, finished, True
        self._publish(lg, task)
        # A restart after remote retention whose log start offset had not been checkpointed yet.
        self._follow_log_start_offset(lg, finished)
        return True

    @staticmethod
    def _publish(lg: Log, task: _PartitionTask) -> None:
        lg.highest_offset_in_remote_storage = max((m.end_offset for m in task.segments), default=-1)

    @staticmethod
    def _follow_log_start_offset(lg: Log, finished: list[RemoteLogSegmentMetadata]) -> None:
        """Offsets below the remote tier's first segment and below local disk are in neither tier any more."""
        if finished and lg.log_start_offset < finished[0].base_offset <= lg.local_log_start_offset:
            lg.maybe_increment_log_start_offset(finished[0].base_offset, "the remote tier's first segment")

    # --- following -------------------------------------------------------------------------

    def _follow(self, tp: TopicPartition, lg: Log, task: _PartitionTask) -> None:
        """A follower's round: what the leader has finished copying, as far as this log shares it, is what
        local retention may delete (never less than before: the remote tier's last offset only grows)."""
        if not task.topic_id:
            topic_id = read_topic_id(*filesystem_for(lg.dir))
            if topic_id is None:
                return  # nothing of it can be in the remote tier, whose paths name the topic id
            task.topic_id = topic_id
        finished = [m for m in self.rsm.list_segments(tp.topic, task.topic_id, tp.partition)
                    if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
        highest = highest_remote_offset(finished, lg.leader_epoch_cache, lg.log_end_offset)
        if highest > lg.highest_offset_in_remote_storage:
            log.debug("%s: the remote tier holds offsets up to %d", lg, highest)
            lg.highest_offset_in_remote_storage = highest
        self._follow_log_start_offset(lg, finished)

    # --- copying -------------------------------------------------------------------------

    def _copy_segments(self, tp: TopicPartition, lg: Log, task: _PartitionTask) -> None:
        bound = min(lg.high_watermark, lg.last_stable_offset)
        segments = lg.segments
        for i, segment in enumerate(segments[:-1]):  # never the active segment
            next_base = segments[i + 1].base_offset
            if next_base - 1 <= lg.highest_offset_in_remote_storage:
                continue  # in the remote tier already
            if next_base > bound:
                return  # not committed (or not stable) to its end yet
            if segment.size == 0:
                continue
            self._copy_segment(tp, lg, task, segment, next_base)

    def _copy_segment(self, tp: TopicPartition, lg: Log, task: _PartitionTask, segment: LogSegment,
                      next_base: int) -> None:
        with tempfile.TemporaryDirectory() as scratch:
            data = self._segment_data(lg, segment, next_base, scratch)
            now = self.clock.milliseconds()
            metadata = RemoteLogSegmentMetadata(
                tp.topic, task.topic_id, tp.partition, new_segment_id(), segment.base_offset, next_base - 1,
                segment.largest_timestamp, segment.size, RemoteLogSegmentState.COPY_SEGMENT_STARTED,
                self.config.node_id, now, self._segment_leader_epochs(lg, segment.base_offset, next_base),
                data.objects())
            self.rsm.put_metadata(metadata)
            self.rsm.copy_log_segment_data(metadata, data)
            finished = metadata.with_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED, self.config.node_id,
                                           self.clock.milliseconds())
            self.rsm.put_metadata(finished)
        task.segments.append(finished)
        self._publish(lg, task)
        log.info("%s: copied segment %d..%d to the remote tier as %s", lg, finished.base_offset,
                 finished.end_offset, finished.name)

    @staticmethod
    def _segment_data(lg: Log, segment: LogSegment, next_base: int, scratch: str) -> LogSegmentData:
        txn = segment.txn_index.path
        snapshot = os.path.join(lg.dir, producer_snapshot_file_name(next_base))
        epochs = LeaderEpochCheckpointFile(os.path.join(scratch, "leader-epoch-checkpoint"))
        epochs.write([e for e in lg.leader_epoch_cache.epoch_entries() if e.start_offset < next_base], sync=False)
        with open(epochs.path, "rb") as f:
            epoch_text = f.read()
        return LogSegmentData(
            segment.log.path, segment.offset_index.path, segment.time_index.path,
            txn if os.path.exists(txn) and os.path.getsize(txn) > 0 else None,
            snapshot if os.path.exists(snapshot) else None, epoch_text)

    @staticmethod
    def _segment_leader_epochs(lg: Log, base: int, next_base: int) -> dict[int, int]:
        """Kafka's segmentLeaderEpochs: the epoch in force at ``base`` and each one starting in the segment."""
        found: dict[int, int] = {}
        entries: list[EpochEntry] = lg.leader_epoch_cache.epoch_entries()
        for entry in entries:
            if entry.start_offset <= base:
                found = {entry.epoch: base}
            elif entry.start_offset < next_base:
                found[entry.epoch] = entry.start_offset
        return found

    # --- deleting --------------------------------------------------------------------------

    def _delete_expired(self, tp: TopicPartition, lg: Log, task: _PartitionTask) -> None:
        """Remote segments past total retention or below the log start offset go, oldest first."""
        if not task.segments:
            return
        cfg = lg.config
        now = self.clock.milliseconds()
        local_only = sum(s.size for s in lg.segments if s.base_offset > lg.highest_offset_in_remote_storage)
        excess = (sum(m.size_in_bytes for m in task.segments) + local_only - cfg.retention_bytes
                  if cfg.retention_bytes >= 0 else -1)
        doomed: list[tuple[RemoteLogSegmentMetadata, str]] = []
        for metadata in task.segments:
            if metadata.end_offset < lg.log_start_offset:
                reason = "below the log start offset"
            elif cfg.retention_ms >= 0 and now - metadata.max_timestamp_ms > cfg.retention_ms:
                reason = f"retention.ms {cfg.retention_ms} breached"
            elif excess >= metadata.size_in_bytes:
                reason = f"retention.bytes {cfg.retention_bytes} breached"
            else:
                break
            excess -= metadata.size_in_bytes
            doomed.append((metadata, reason))
        if not doomed:
            return
        # Readers stop using the segments before they go: the log start offset moves first.
        lg.maybe_increment_log_start_offset(doomed[-1][0].end_offset + 1, doomed[-1][1])
        for metadata, reason in doomed:
            self._delete_remote_segment(metadata, started=False)
            task.segments.remove(metadata)
            log.info("%s: deleted remote segment %s (%s)", lg, metadata.name, reason)

    def _delete_remote_segment(self, metadata: RemoteLogSegmentMetadata, started: bool) -> None:
        if not started:
            self.rsm.put_metadata(metadata.with_state(RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                                                      self.config.node_id, self.clock.milliseconds()))
        self.rsm.delete_log_segment_data(metadata)
        self.rsm.delete_metadata(metadata)


def highest_remote_offset(segments: list[RemoteLogSegmentMetadata], epochs: LeaderEpochFileCache,
                          log_end_offset: int) -> int:
    """The last offset of a log (its leader ``epochs``, its ``log_end_offset``) that the finished remote
    ``segments`` hold, as Kafka's findHighestRemoteOffset finds it: from the log's latest epoch down, the first
    epoch the segments hold gives the highest remote offset in that epoch, bounded by where the epoch ends in
    this log — a log that diverged from the remote tier counts only the offsets it shares. -1 when none."""
    for entry in reversed(epochs.epoch_entries()):
        ends = [_epoch_end_offset(m, entry.epoch) for m in segments if entry.epoch in m.segment_leader_epochs]
        if ends:
            return min(max(ends), epochs.end_offset_for(entry.epoch, log_end_offset).end_offset - 1)
    return -1


def _epoch_end_offset(metadata: RemoteLogSegmentMetadata, epoch: int) -> int:
    """The last offset of ``epoch`` in a remote segment: before the next epoch's start in it, else its end."""
    later = [start for e, start in metadata.segment_leader_epochs.items() if e > epoch]
    return min(later) - 1 if later else metadata.end_offset
