"""Which log to clean next and where its cleaning stands (Kafka's LogCleanerManager).

For each compacted log the first dirty offset comes from the log dir's
``cleaner-offset-checkpoint`` (the log start offset when there is none, or
when the checkpoint lies outside the log). Cleaning may go up to the first
uncleanable offset: never into the active segment, and never into a segment
holding a record younger than ``min.compaction.lag.ms``. The dirtiest log —
the highest cleanable ratio (dirty bytes / total bytes) at or above its
``min.cleanable.dirty.ratio``, or any log with a record older than
``max.compaction.lag.ms`` still dirty — is cleaned next.

Each partition has a cleaning state: in progress, aborted (a cleaner will
stop at its next check), or paused (n times). Retention takes the same states,
so retention and cleaning never work on one log at once.

The range rules are plain functions over segments (``cleanable_offsets``,
``calculate_cleanable_bytes``, ``max_compaction_delay``) so that the Spark
compaction job plans with the broker's rules.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from format import layout
from format.checkpoint import OffsetCheckpointFile
from format.layout import TopicPartition

from .cleaner import LogToClean, segments_overlapping

log = logging.getLogger(__name__)

IN_PROGRESS = "in-progress"
ABORTED = "aborted"


@dataclass(frozen=True)
class Paused:
    count: int


@dataclass(frozen=True)
class OffsetsToClean:
    first_dirty_offset: int
    first_uncleanable_dirty_offset: int
    force_update_checkpoint: bool = False


def first_batch_timestamp(segment) -> int:
    """The max timestamp of a segment's first batch (what Kafka's roll and compaction lag look at)."""
    first = next(segment.log.batch_headers(), None)
    return -1 if first is None else first[1].max_timestamp


def _non_active_from(segments: Sequence, offset: int) -> list:
    """The segments from the one holding ``offset`` on, the active (last) one excluded."""
    floor = 0
    for i, s in enumerate(segments):
        if s.base_offset <= offset:
            floor = i
    return list(segments[floor:-1])


def cleanable_offsets(segments: Sequence, *, log_start_offset: int, log_end_offset: int,
                      last_stable_offset: int, min_compaction_lag_ms: int, last_clean_offset: int | None,
                      now_ms: int, largest_timestamp: Callable[[object], int] = lambda s: s.largest_timestamp
                      ) -> OffsetsToClean:
    """The range of dirty offsets that may be cleaned (Kafka's cleanableOffsets).

    ``segments`` in offset order, the last one active; each has ``base_offset``.
    """
    checkpoint = log_start_offset if last_clean_offset is None else last_clean_offset
    if checkpoint < log_start_offset or checkpoint > log_end_offset:
        first_dirty, force = log_start_offset, True
    else:
        first_dirty, force = checkpoint, False
    candidates = [last_stable_offset, segments[-1].base_offset]
    if min_compaction_lag_ms > 0:
        for segment in _non_active_from(segments, first_dirty):
            if largest_timestamp(segment) > now_ms - min_compaction_lag_ms:
                candidates.append(segment.base_offset)
                break
    return OffsetsToClean(first_dirty, max(first_dirty, min(candidates)), force)


def calculate_cleanable_bytes(segments: Sequence, first_dirty_offset: int, uncleanable_offset: int,
                              size: Callable[[object], int] = lambda s: s.size) -> tuple[int, int]:
    """(first uncleanable segment's base offset, bytes from the first dirty segment up to it)."""
    non_active = _non_active_from(segments, uncleanable_offset)
    first_uncleanable = (non_active[0] if non_active else segments[-1]).base_offset
    cleanable = sum(size(s) for s in segments_overlapping(segments, min(first_dirty_offset, first_uncleanable),
                                                          first_uncleanable))
    return first_uncleanable, cleanable


def clean_bytes(segments: Sequence, first_dirty_offset: int, size: Callable[[object], int] = lambda s: s.size
                ) -> int:
    return sum(size(s) for s in segments if s.base_offset < first_dirty_offset)


def max_compaction_delay(segments: Sequence, first_dirty_offset: int, max_compaction_lag_ms: int, now_ms: int,
                         first_timestamp: Callable[[object], int] = first_batch_timestamp) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty record is (0: not overdue)."""
    clean_until = now_ms - max(max_compaction_lag_ms, 0)
    if clean_until <= 0:
        return 0  # no timestamp can be that old (the default lag is Long.MAX_VALUE)
    timestamps = [t for t in (first_timestamp(s) for s in _non_active_from(segments, first_dirty_offset)) if t > 0]
    if not timestamps:
        return 0
    earliest = min(timestamps)
    return clean_until - earliest if earliest < clean_until else 0


def log_to_clean(tp: TopicPartition, lg, offsets: OffsetsToClean, need_compaction_now: bool = False) -> LogToClean:
    segments = lg.segments
    first_uncleanable, cleanable = calculate_cleanable_bytes(segments, offsets.first_dirty_offset,
                                                             offsets.first_uncleanable_dirty_offset)
    return LogToClean(tp, lg, offsets.first_dirty_offset, first_uncleanable,
                      clean_bytes(segments, offsets.first_dirty_offset), cleanable, need_compaction_now)


class LogCleanerManager:
    """Cleaning states and checkpoints of the logs of a broker's log dirs."""

    def __init__(self, log_dirs: Iterable[str], logs: Callable[[], dict[TopicPartition, object]]):
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self._logs = logs
        self._checkpoints = {d: OffsetCheckpointFile(os.path.join(d, layout.CLEANER_OFFSET_CHECKPOINT_FILE))
                             for d in self.log_dirs}
        self._lock = threading.RLock()
        self._paused = threading.Condition(self._lock)
        self._in_progress: dict[TopicPartition, object] = {}
        self._uncleanable: dict[str, set[TopicPartition]] = {}
        self.dirtiest_log_cleanable_ratio = 0.0

    # --- checkpoints -----------------------------------------------------------

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            out: dict[TopicPartition, int] = {}
            for checkpoint in self._checkpoints.values():
                try:
                    out.update(checkpoint.read())
                except Exception as exc:  # a damaged checkpoint only costs a full re-clean
                    log.error("cannot read %s: %s", checkpoint.path, exc)
            return out

    def update_checkpoints(self, log_dir: str, update: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        """Rewrite ``log_dir``'s checkpoint, dropping partitions no longer hosted."""
        with self._lock:
            checkpoint = self._checkpoints.get(os.path.abspath(log_dir))
            if checkpoint is None:
                return
            logs = self._logs()
            current = {tp: o for tp, o in checkpoint.read().items() if tp in logs}
            if remove is not None:
                current.pop(remove, None)
            if update is not None:
                current[update[0]] = update[1]
            checkpoint.write(current)

    # --- choosing -----------------------------------------------------------

    def cleanable_offsets(self, lg, last_clean_offset: int | None, now_ms: int) -> OffsetsToClean:
        return cleanable_offsets(lg.segments, log_start_offset=lg.log_start_offset,
                                 log_end_offset=lg.log_end_offset, last_stable_offset=lg.high_watermark,
                                 min_compaction_lag_ms=lg.config.min_compaction_lag_ms,
                                 last_clean_offset=last_clean_offset, now_ms=now_ms)

    def _is_uncleanable(self, tp: TopicPartition, lg) -> bool:
        return tp in self._uncleanable.get(os.path.dirname(lg.dir), set())

    def _candidates(self, now_ms: int, topics: Iterable[str] | None):
        last_clean = self.all_cleaner_checkpoints()
        wanted = None if topics is None else set(topics)
        out = []
        for tp, lg in self._logs().items():
            if not lg.config.compact or tp in self._in_progress or self._is_uncleanable(tp, lg):
                continue
            if wanted is not None and tp.topic not in wanted:
                continue
            offsets = self.cleanable_offsets(lg, last_clean.get(tp), now_ms)
            if offsets.force_update_checkpoint:
                self.update_checkpoints(os.path.dirname(lg.dir), (tp, offsets.first_dirty_offset))
            delay = max_compaction_delay(lg.segments, offsets.first_dirty_offset, lg.config.max_compaction_lag_ms,
                                         now_ms)
            candidate = log_to_clean(tp, lg, offsets, delay > 0)
            if candidate.total_bytes > 0:
                out.append(candidate)
        return out

    def grab_filthiest_compacted_log(self, now_ms: int, *, force: bool = False,
                                     topics: Iterable[str] | None = None) -> LogToClean | None:
        """The dirtiest compacted log worth cleaning, marked in progress; None when none is.

        ``force`` ignores ``min.cleanable.dirty.ratio`` (any cleanable byte will do), for an
        operator's explicit request.
        """
        with self._lock:
            dirty = self._candidates(now_ms, topics)
            self.dirtiest_log_cleanable_ratio = max((c.cleanable_ratio for c in dirty), default=0.0)
            cleanable = [c for c in dirty
                         if (c.cleanable_bytes > 0 and (force or c.need_compaction_now))
                         or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._in_progress[filthiest.topic_partition] = IN_PROGRESS
            return filthiest

    # --- states -----------------------------------------------------------

    def state(self, tp: TopicPartition):
        with self._lock:
            return self._in_progress.get(tp)

    def pause_cleaning_for_retention(self) -> list[tuple[TopicPartition, object]]:
        """Every log not being cleaned, now paused so retention can delete its segments."""
        with self._lock:
            out = [(tp, lg) for tp, lg in self._logs().items() if tp not in self._in_progress]
            for tp, _ in out:
                self._in_progress[tp] = Paused(1)
            return out

    def abort_and_pause_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        """Stop any cleaning of ``tp`` and keep it from starting again until resumed; waits for a
        cleaner working on it to notice."""
        with self._lock:
            state = self._in_progress.get(tp)
            if state is None:
                self._in_progress[tp] = Paused(1)
            elif state == IN_PROGRESS:
                self._in_progress[tp] = ABORTED
            elif isinstance(state, Paused):
                self._in_progress[tp] = Paused(state.count + 1)
            else:
                raise RuntimeError(f"compaction of {tp} cannot be aborted and paused in state {state}")
            if not self._paused.wait_for(lambda: isinstance(self._in_progress.get(tp), Paused), timeout_s):
                raise TimeoutError(f"the cleaner did not stop working on {tp} within {timeout_s} s")

    def resume_cleaning(self, tps: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in tps:
                state = self._in_progress.get(tp)
                if not isinstance(state, Paused):
                    raise RuntimeError(f"compaction of {tp} cannot be resumed in state {state}")
                if state.count == 1:
                    del self._in_progress[tp]
                else:
                    self._in_progress[tp] = Paused(state.count - 1)

    def abort_cleaning(self, tp: TopicPartition, timeout_s: float | None = None) -> None:
        with self._lock:
            self.abort_and_pause_cleaning(tp, timeout_s)
            self.resume_cleaning([tp])

    def is_aborted(self, tp: TopicPartition) -> bool:
        with self._lock:
            return self._in_progress.get(tp) == ABORTED

    def done_cleaning(self, tp: TopicPartition, log_dir: str, end_offset: int) -> None:
        """Checkpoint ``end_offset`` and leave the in-progress state (or become paused if aborted)."""
        with self._lock:
            state = self._in_progress.get(tp)
            if state == IN_PROGRESS:
                self.update_checkpoints(log_dir, (tp, end_offset))
                del self._in_progress[tp]
            elif state == ABORTED:
                self._in_progress[tp] = Paused(1)
                self._paused.notify_all()
            else:
                raise RuntimeError(f"partition {tp} finished cleaning in state {state}")

    def mark_uncleanable(self, log_dir: str, tp: TopicPartition) -> None:
        with self._lock:
            self._uncleanable.setdefault(os.path.abspath(log_dir), set()).add(tp)

    def uncleanable_partitions(self, log_dir: str) -> set[TopicPartition]:
        with self._lock:
            return set(self._uncleanable.get(os.path.abspath(log_dir), set()))

    def maintain_uncleanable_partitions(self) -> None:
        with self._lock:
            logs = self._logs()
            for d in list(self._uncleanable):
                self._uncleanable[d] = {tp for tp in self._uncleanable[d] if tp in logs}
                if not self._uncleanable[d]:
                    del self._uncleanable[d]
