"""Compaction leases: which partitions an outside compaction job holds, and until when.

An outside job (the Spark compaction job) reads a running broker's segment
files directly and writes ``.cleaned`` segments beside them. While it works,
the broker's own cleaner must leave those partitions alone, and only the
broker, which has the logs open, may swap the cleaned segments in. A lease
gives the job both: acquiring one pauses the broker's cleaner on its
partitions (``LogCleanerManager.abort_and_pause_cleaning``, the pause Kafka's
retention and topic deletion take, which retention in turn respects), and
``replace_segments`` swaps a job's segments in only for partitions its live
lease holds.

A lease lasts ``lease_ms`` after its last acquire or renew, by the broker's
clock. One that lapses (the job died) resumes cleaning and is forgotten, so a
crashed job never keeps a partition uncleaned for long; expiry is checked on
every lease call and by the log manager's scheduler. A lease remembers the
``Log`` it paused for each partition: once the partition is deleted (or
deleted and created again) the lease no longer holds it and drops it.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

from format import layout
from format.errors import FormatError
from format.layout import TopicPartition
from format.segment import LogSegment

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import (ConcurrentTransactionsError, InvalidRequestError, KafkaError, KafkaStorageError,
                      UnknownMemberIdError, UnknownTopicOrPartitionError)
from .cleaner.log_cleaner_manager import LogCleanerManager
from .log import Log
from .log_loader import open_segment
from .scheduler import Scheduler

if TYPE_CHECKING:
    from .log_manager import LogManager

log = logging.getLogger(__name__)

__all__ = ["CompactionLeases", "LeasedPartition", "CleanedSegment", "plan_replacement",
           "LEASE_EXPIRATION_CHECK_INTERVAL_MS"]

#: How often the scheduler looks for lapsed leases (lease calls look too).
LEASE_EXPIRATION_CHECK_INTERVAL_MS = 1000


@dataclass(frozen=True)
class LeasedPartition:
    """One partition of a lease: the log dir holding it, or why it could not be leased."""

    topic_partition: TopicPartition
    log_dir: str = ""
    error: KafkaError | None = None


@dataclass(frozen=True)
class CleanedSegment:
    """A segment an outside job cleaned (``<base>.log.cleaned`` and its indexes, in the
    partition directory) and the bases of the current segments it replaces, in order."""

    base_offset: int
    replaced_base_offsets: tuple[int, ...]


@dataclass(frozen=True)
class _Replacement:
    cleaned: CleanedSegment
    replaced: list[LogSegment]
    upper_bound_offset: int  # the base of the segment after the group: the cleaned one stays below it


@dataclass
class _Lease:
    lease_id: str
    expires_ms: int
    logs: dict[TopicPartition, Log]


class CompactionLeases:
    """The broker's table of compaction leases; every method is safe to call from any thread."""

    def __init__(self, log_manager: LogManager, clock: Clock = SYSTEM_CLOCK) -> None:
        self._log_manager = log_manager
        self._clock = clock
        self._leases: dict[str, _Lease] = {}
        self._holders: dict[TopicPartition, str] = {}
        # Held through a pause (which waits for a cleaner to stop) and through a swap, so a
        # lease cannot lapse, and the cleaner resume, halfway through either.
        self._lock = threading.RLock()
        cleaner = log_manager.cleaner
        self._cleaner_manager: LogCleanerManager | None = None if cleaner is None else cleaner.manager
        if self._cleaner_manager is not None:
            self._checkpoints = self._cleaner_manager
        else:
            # No cleaner runs (log.cleaner.enable=false), but the checkpoint a job moves still
            # tells a later cleaner where the dirty section starts.
            self._checkpoints = LogCleanerManager(log_manager.log_dirs, log_manager.all_logs)

    # --- the lease calls -----------------------------------------------------------

    def acquire(self, lease_id: str, partitions: Iterable[TopicPartition], lease_ms: int
                ) -> dict[TopicPartition, LeasedPartition]:
        """Lease ``partitions`` for ``lease_ms``, all or none; the outcome of each partition.

        When any partition cannot be leased nothing is, and the others carry no error. A
        partition ``lease_id`` already holds stays held (acquiring again renews); the
        partitions the lease holds and the call does not name stay held too.
        """
        _check_lease_args(lease_id, lease_ms)
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            raise InvalidRequestError(f"compaction lease {lease_id!r}: an acquire must name partitions")
        with self._lock:
            now = self._clock.milliseconds()
            self._expire(now)
            existing = self._leases.get(lease_id)
            held = existing.logs if existing is not None else {}
            errors: dict[TopicPartition, KafkaError] = {}
            logs: dict[TopicPartition, Log] = {}
            for tp in wanted:
                if tp in held:
                    logs[tp] = held[tp]
                    continue
                lg = self._log_manager.get_log(tp)
                holder = self._holders.get(tp)
                if lg is None:
                    errors[tp] = UnknownTopicOrPartitionError(f"this broker has no partition {tp}")
                elif holder is not None:
                    errors[tp] = ConcurrentTransactionsError(
                        f"partition {tp} is held by compaction lease {holder!r}")
                elif not lg.config.compact:
                    errors[tp] = InvalidRequestError(
                        f"partition {tp} is not compacted: cleanup.policy is "
                        f"{','.join(lg.config.cleanup_policy)}")
                else:
                    logs[tp] = lg
            if errors:
                return {tp: LeasedPartition(tp, error=errors.get(tp)) for tp in wanted}
            fresh = [tp for tp in wanted if tp not in held]
            self._pause(fresh)
            if existing is None:
                existing = self._leases[lease_id] = _Lease(lease_id, now + lease_ms, {})
            existing.expires_ms = now + lease_ms
            for tp in fresh:
                existing.logs[tp] = logs[tp]
                self._holders[tp] = lease_id
            log.info("compaction lease %s: acquired %s for %d ms", lease_id, [str(tp) for tp in fresh], lease_ms)
            return {tp: _leased(tp, logs[tp]) for tp in wanted}

    def renew(self, lease_id: str, lease_ms: int) -> list[LeasedPartition]:
        """Make ``lease_id`` last ``lease_ms`` from now; the partitions it holds."""
        _check_lease_args(lease_id, lease_ms)
        with self._lock:
            now = self._clock.milliseconds()
            self._expire(now)
            lease = self._live(lease_id)
            lease.expires_ms = now + lease_ms
            return [_leased(tp, lg) for tp, lg in lease.logs.items()]

    def release(self, lease_id: str) -> list[LeasedPartition]:
        """Resume cleaning of ``lease_id``'s partitions and forget it; the partitions it held."""
        with self._lock:
            self._expire(self._clock.milliseconds())
            lease = self._live(lease_id)
            self._forget(lease)
            log.info("compaction lease %s: released %s", lease_id, [str(tp) for tp in lease.logs])
            return [_leased(tp, lg) for tp, lg in lease.logs.items()]

    def replace_segments(self, lease_id: str, tp: TopicPartition, segments: Sequence[CleanedSegment],
                         cleaned_through_offset: int) -> None:
        """Swap a job's cleaned segments into ``tp``'s log and move its cleaner checkpoint.

        The lease must hold ``tp`` (``UnknownMemberIdError``). Everything is checked before
        anything is swapped (``InvalidRequestError``); a cleaned segment that cannot be opened
        or read whole raises ``KafkaStorageError``. Each group goes in through the log's own
        ``replace_segments``, the swap the broker's cleaner makes, so fetches racing it keep
        working. The lease stays held.
        """
        with self._lock:
            self._expire(self._clock.milliseconds())
            lease = self._live(lease_id)
            lg = lease.logs.get(tp)
            if lg is None:
                raise UnknownMemberIdError(f"compaction lease {lease_id!r} does not hold partition {tp}")
            plan = plan_replacement(lg, segments, cleaned_through_offset)
            opened = _open_cleaned(lg, plan)
            swapped = 0
            try:
                for replacement, segment in zip(plan, opened):
                    log.info("compaction lease %s: swapping in cleaned segment %d for segments %s of %s", lease_id,
                             replacement.cleaned.base_offset, [s.base_offset for s in replacement.replaced], lg)
                    lg.replace_segments([segment], replacement.replaced)
                    swapped += 1
            except (OSError, FormatError, KafkaStorageError) as exc:
                for segment in opened[swapped:]:
                    if segment.has_suffix(layout.CLEANED_FILE_SUFFIX):  # never reached the log
                        segment.close()
                # A swap cut short is finished or undone by log loading, as for the broker's cleaner.
                raise KafkaStorageError(f"{lg}: swapping in cleaned segment "
                                        f"{plan[swapped].cleaned.base_offset} failed after {swapped} of "
                                        f"{len(plan)}: {exc}") from exc
            self._checkpoints.update_checkpoints(os.path.dirname(lg.dir), (tp, cleaned_through_offset))

    # --- state -----------------------------------------------------------------

    def holder(self, tp: TopicPartition) -> str | None:
        """The id of the live lease holding ``tp``, if any."""
        with self._lock:
            self._expire(self._clock.milliseconds())
            return self._holders.get(tp)

    def leased_partitions(self, lease_id: str) -> list[TopicPartition]:
        """The partitions live lease ``lease_id`` holds (none when it is unknown or lapsed)."""
        with self._lock:
            self._expire(self._clock.milliseconds())
            lease = self._leases.get(lease_id)
            return [] if lease is None else list(lease.logs)

    def expire_leases(self) -> int:
        """Forget every lapsed lease, resuming cleaning of its partitions; how many lapsed."""
        with self._lock:
            return self._expire(self._clock.milliseconds())

    def schedule_expiration(self, scheduler: Scheduler,
                            interval_ms: int = LEASE_EXPIRATION_CHECK_INTERVAL_MS) -> None:
        """Check for lapsed leases every ``interval_ms`` on ``scheduler`` (the log manager's)."""
        if interval_ms <= 0:
            raise ValueError(f"the lease expiration check interval must be positive, not {interval_ms} ms")

        def check() -> None:
            try:
                self.expire_leases()
            finally:
                scheduler.schedule("compaction-lease-expiration", check, interval_ms)

        scheduler.schedule("compaction-lease-expiration", check, interval_ms)

    # --- helpers -----------------------------------------------------------------

    def _live(self, lease_id: str) -> _Lease:
        lease = self._leases.get(lease_id)
        if lease is None:
            raise UnknownMemberIdError(f"compaction lease {lease_id!r} is unknown or has expired")
        return lease

    def _expire(self, now: int) -> int:
        """Drop deleted partitions from every lease, then forget the leases that have lapsed."""
        for lease in self._leases.values():
            for tp, lg in list(lease.logs.items()):
                if self._log_manager.get_log(tp) is not lg:
                    log.info("compaction lease %s: partition %s was deleted; dropping it", lease.lease_id, tp)
                    del lease.logs[tp]
                    del self._holders[tp]
                    self._resume([tp])
        lapsed = [lease for lease in self._leases.values() if now >= lease.expires_ms]
        for lease in lapsed:
            log.info("compaction lease %s expired; resuming cleaning of %s", lease.lease_id,
                     [str(tp) for tp in lease.logs])
            self._forget(lease)
        return len(lapsed)

    def _forget(self, lease: _Lease) -> None:
        del self._leases[lease.lease_id]
        for tp in lease.logs:
            del self._holders[tp]
        self._resume(list(lease.logs))

    def _pause(self, tps: list[TopicPartition]) -> None:
        if self._cleaner_manager is None:
            return
        paused: list[TopicPartition] = []
        try:
            for tp in tps:
                self._cleaner_manager.abort_and_pause_cleaning(tp)
                paused.append(tp)
        except BaseException:
            self._cleaner_manager.resume_cleaning(paused)
            raise

    def _resume(self, tps: list[TopicPartition]) -> None:
        """Take back this lease's pause of each partition (each was paused once by it)."""
        if self._cleaner_manager is not None and tps:
            self._cleaner_manager.resume_cleaning(tps)


def _check_lease_args(lease_id: str, lease_ms: int) -> None:
    if not lease_id:
        raise InvalidRequestError("a compaction lease needs a non-empty lease id")
    if lease_ms <= 0:
        raise InvalidRequestError(f"compaction lease {lease_id!r}: lease ms must be positive, not {lease_ms}")


def _leased(tp: TopicPartition, lg: Log) -> LeasedPartition:
    return LeasedPartition(tp, os.path.dirname(os.path.abspath(lg.dir)))


def plan_replacement(lg: Log, segments: Sequence[CleanedSegment], cleaned_through_offset: int
                     ) -> list[_Replacement]:
    """Check a job's cleaned segments against ``lg``'s current segments; the groups to swap, in
    offset order. Raises ``InvalidRequestError`` naming the first thing wrong.

    Each group must replace consecutive current segments, none of them the active one,
    start at its cleaned segment's base, and share no segment with another group; the
    ``.log.cleaned`` file must exist; the new checkpoint must lie between the log start
    offset and the active segment's base, the range the cleaner's checkpoint lives in.
    """
    current = lg.segments
    position = {s.base_offset: i for i, s in enumerate(current)}
    active = current[-1]
    taken: set[int] = set()
    plan = []
    for cleaned in sorted(segments, key=lambda c: c.base_offset):
        bases = list(cleaned.replaced_base_offsets)
        where = f"{lg}: cleaned segment {cleaned.base_offset}"
        if not bases:
            raise InvalidRequestError(f"{where} replaces no segment")
        if bases[0] != cleaned.base_offset:
            raise InvalidRequestError(f"{where} must start the segments it replaces, which start at {bases[0]}")
        for base in bases:
            if base not in position:
                raise InvalidRequestError(f"{where}: {base} is not the base offset of a current segment")
            if base == active.base_offset:
                raise InvalidRequestError(f"{where}: segment {base} is the active segment")
            if base in taken:
                raise InvalidRequestError(f"{where}: segment {base} is replaced twice")
            taken.add(base)
        first = position[bases[0]]
        if [position[b] for b in bases] != list(range(first, first + len(bases))):
            raise InvalidRequestError(f"{where}: segments {bases} are not consecutive in the log")
        path = os.path.join(lg.dir, layout.log_file_name(cleaned.base_offset) + layout.CLEANED_FILE_SUFFIX)
        if not os.path.isfile(path):
            raise InvalidRequestError(f"{where}: {path} does not exist")
        last = first + len(bases) - 1
        plan.append(_Replacement(cleaned, current[first:last + 1], current[last + 1].base_offset))
    if not lg.log_start_offset <= cleaned_through_offset <= active.base_offset:
        raise InvalidRequestError(f"{lg}: cleaned-through offset {cleaned_through_offset} is outside "
                                  f"[{lg.log_start_offset}, {active.base_offset}] (log start offset, "
                                  f"active segment)")
    return plan


def _open_cleaned(lg: Log, plan: list[_Replacement]) -> list[LogSegment]:
    """Open each planned cleaned segment and check it whole: sound indexes, whole batches, offsets
    within the segments it replaces. Nothing is left open when one fails."""
    opened: list[LogSegment] = []
    try:
        for replacement in plan:
            base = replacement.cleaned.base_offset
            segment = open_segment(lg.dir, base, lg.config, layout.CLEANED_FILE_SUFFIX)
            opened.append(segment)
            segment.sanity_check()
            next_offset = base
            for _, header in segment.log.batch_headers(stop_at_partial=False):
                if header.base_offset < next_offset:
                    raise InvalidRequestError(f"{lg}: cleaned segment {base} has a batch at offset "
                                              f"{header.base_offset}, below {next_offset}")
                next_offset = header.next_offset
            if next_offset > replacement.upper_bound_offset:
                raise InvalidRequestError(f"{lg}: cleaned segment {base} ends at offset {next_offset}, past the "
                                          f"segments it replaces (next segment at {replacement.upper_bound_offset})")
    except BaseException as exc:
        for segment in opened:
            segment.close()
        if isinstance(exc, (OSError, FormatError)):
            raise KafkaStorageError(f"{lg}: cannot read cleaned segment {replacement.cleaned.base_offset}: "
                                    f"{exc}") from exc
        raise
    return opened
