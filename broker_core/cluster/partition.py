"""One partition as a replica of it sees it (Kafka's ``kafka.cluster.Partition``).

As leader it keeps, per follower (``Replica``), the log end offset its fetches
show and when it was last caught up; it advances the high watermark to the
smallest log end offset over the in-sync replicas (only forwards); it finds
the followers out of sync for ``replica.lag.time.max.ms`` (the ISR shrinks)
and those caught up to the high watermark and into the current leader epoch
(the ISR expands); it refuses an ``acks=all`` write with ``NOT_ENOUGH_REPLICAS``
while the ISR is smaller than ``min.insync.replicas`` and tells when such a
write is complete (``check_enough_replicas_reach_offset``).

ISR changes are not made here: ``maybe_shrink_isr`` and ``maybe_expand_isr``
return the proposed ``LeaderAndIsr`` (Kafka's AlterPartition), which whoever
owns the cluster metadata writes by compare-and-set on ``partition_epoch``
and reports back (``on_isr_update_committed`` / ``on_isr_update_failed``).
While a proposal is in flight no other is made, and the high watermark
follows the "maximal" ISR: the current one plus a follower being added (a
stricter rule, harmless if the change fails), the current one while
followers are being removed (the HW must not run ahead of a change that may
fail).

Time comes from the injected clock; the log is the partition's real ``Log``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable

from format.layout import TopicPartition

from ..clock import Clock
from ..controller.partition_state import PartitionState
from ..errors import (FencedLeaderEpochError, KafkaError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                      NotLeaderOrFollowerError, UnknownLeaderEpochError)
from ..log.leader_epoch_file_cache import EpochEndOffset
from ..log.log import Log, LogAppendInfo
from .replica import Replica

log = logging.getLogger(__name__)

#: Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH: a request that names no leader epoch.
NO_PARTITION_LEADER_EPOCH = -1
#: Kafka's default ``replica.lag.time.max.ms``.
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leadership as the controller records it (Kafka's LeaderAndIsr): the leader, its
    epoch, the in-sync replicas, and the partition epoch every change of the record bumps."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int

    def with_isr(self, isr: set[int] | frozenset[int]) -> "LeaderAndIsr":
        return LeaderAndIsr(self.leader, self.leader_epoch, tuple(sorted(isr)), self.partition_epoch)

    @classmethod
    def from_partition_state(cls, state: PartitionState, partition_epoch: int) -> "LeaderAndIsr":
        """The controller's record of the partition (``/brokers/topics/T/partitions/P/state``) with the
        key's ``mod_revision`` as partition epoch."""
        return cls(state.leader, state.leader_epoch, state.isr, partition_epoch)

    def to_partition_state(self, controller_epoch: int) -> PartitionState:
        """The record a leader writes back for an ISR change, under the controller epoch it last read."""
        return PartitionState(self.leader, self.leader_epoch, self.isr, controller_epoch)


@dataclass(frozen=True)
class PendingIsrChange:
    """An ISR change proposed and not yet answered: the ISR before it and the one proposed."""

    proposed: LeaderAndIsr
    last_committed_isr: frozenset[int]

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Before the answer, the high watermark waits for every replica in either ISR."""
        return self.last_committed_isr | frozenset(self.proposed.isr)


def check_leader_epoch(owner: object, current_leader_epoch: int, leader_epoch: int) -> None:
    """Fence a request naming another leader epoch than the partition's (Kafka's getLocalLog):
    an older one is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; -1 names none."""
    if current_leader_epoch == NO_PARTITION_LEADER_EPOCH:
        return
    if current_leader_epoch < leader_epoch:
        raise FencedLeaderEpochError(f"{owner}: the request's leader epoch {current_leader_epoch} is older than "
                                     f"the current leader epoch {leader_epoch}")
    if current_leader_epoch > leader_epoch:
        raise UnknownLeaderEpochError(f"{owner}: the request's leader epoch {current_leader_epoch} is newer than "
                                      f"the current leader epoch {leader_epoch}")


class Partition:
    """A partition this broker holds a replica of, leader or follower."""

    def __init__(self, topic_partition: TopicPartition, local_broker_id: int, log: Log, clock: Clock, *,
                 replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS):
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.log = log
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._lock = threading.RLock()
        self.leader_id: int | None = None
        self.leader_epoch = NO_PARTITION_LEADER_EPOCH
        self.partition_epoch = -1
        # Where this broker's current leader epoch began in its log (only while it leads).
        self.leader_epoch_start_offset: int | None = None
        self.assignment: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        self.pending_isr_change: PendingIsrChange | None = None
        self._remote_replicas: dict[int, Replica] = {}

    def __repr__(self) -> str:
        return f"Partition({self.topic_partition})"

    # --- state ---------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def maximal_isr(self) -> frozenset[int]:
        pending = self.pending_isr_change
        return self.isr if pending is None else pending.maximal_isr

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas``, but never more than the replicas there are (Kafka's effectiveMinIsr)."""
        return min(self.log.config.min_insync_replicas, len(self._remote_replicas) + 1)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.isr) < self.effective_min_isr

    def remote_replica(self, broker_id: int) -> Replica:
        found = self._remote_replicas.get(broker_id)
        if found is None:
            raise NotLeaderOrFollowerError(f"{self}: broker {broker_id} holds no replica of it "
                                           f"(replicas {list(self.assignment)})")
        return found

    # --- leadership ----------------------------------------------------------------

    def make_leader(self, state: LeaderAndIsr, replicas: list[int]) -> bool:
        """Become (or stay) leader as ``state`` says, with ``replicas`` assigned (Kafka's makeLeader). A new
        leader epoch begins at the log end: it goes into the epoch cache and every follower starts over.
        Returns whether the high watermark moved."""
        with self._lock:
            if state.leader != self.local_broker_id:
                raise ValueError(f"{self}: broker {self.local_broker_id} told to lead for broker {state.leader}")
            is_new_leader = not self.is_leader
            self._update_assignment(replicas, frozenset(state.isr))
            self.log.sole_replica = False  # the high watermark follows the ISR from here on
            if state.leader_epoch > self.leader_epoch:
                start = self.log.log_end_offset
                self.log.maybe_assign_epoch_start_offset(state.leader_epoch, start)
                now = self.clock.milliseconds()
                for replica in self._remote_replicas.values():
                    replica.reset_replica_state(now, start, is_new_leader, replica.broker_id in state.isr)
                self.leader_epoch = state.leader_epoch
                self.leader_epoch_start_offset = start
                log.info("%s: leader in epoch %d from offset %d with ISR %s", self, state.leader_epoch, start,
                         sorted(state.isr))
            self.partition_epoch = state.partition_epoch
            self.leader_id = self.local_broker_id
            return self.maybe_increment_high_watermark()

    def make_follower(self, state: LeaderAndIsr, replicas: list[int]) -> bool:
        """Follow ``state.leader`` (Kafka's makeFollower); the log is truncated by the fetcher, by leader
        epoch, before it fetches. Returns whether the leader or its epoch changed."""
        with self._lock:
            changed = state.leader != self.leader_id or state.leader_epoch > self.leader_epoch
            self._update_assignment(replicas, frozenset(state.isr))
            self._remote_replicas.clear()
            self.log.sole_replica = False
            self.leader_id = state.leader
            self.leader_epoch = max(self.leader_epoch, state.leader_epoch)
            self.leader_epoch_start_offset = None
            self.partition_epoch = state.partition_epoch
            return changed

    def _update_assignment(self, replicas: list[int], isr: frozenset[int]) -> None:
        self.assignment = tuple(replicas)
        for broker_id in list(self._remote_replicas):
            if broker_id not in replicas:
                del self._remote_replicas[broker_id]
        for broker_id in replicas:
            if broker_id != self.local_broker_id and broker_id not in self._remote_replicas:
                self._remote_replicas[broker_id] = Replica(broker_id, str(self.topic_partition))
        self.isr = isr
        self.pending_isr_change = None

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        check_leader_epoch(self, current_leader_epoch, self.leader_epoch)

    # --- the high watermark ----------------------------------------------------------

    def maybe_increment_high_watermark(self) -> bool:
        """Advance the leader's high watermark to the smallest log end offset of the (maximal) ISR, and of
        any follower caught up enough to join it (Kafka's maybeIncrementLeaderHW); only forwards.
        Returns whether it moved."""
        with self._lock:
            if not self.is_leader:
                return False
            leader_end = self.log.log_end_offset
            now = self.clock.milliseconds()
            high_watermark = leader_end
            maximal = self.maximal_isr
            for replica in self._remote_replicas.values():
                state = replica.state
                if state.log_end_offset < high_watermark and (
                        replica.broker_id in maximal
                        or state.is_caught_up(leader_end, now, self.replica_lag_time_max_ms)):
                    high_watermark = max(state.log_end_offset, 0)
            old = self.log.maybe_increment_high_watermark(high_watermark)
            if old is not None:
                log.debug("%s: high watermark %d -> %d", self, old, high_watermark)
            return old is not None

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int = -1
                                    ) -> "FollowerFetchResult":
        """Take in a follower's fetch from ``fetch_offset`` (its log end offset, Kafka's
        updateFollowerFetchState): its state, the ISR expansion it may earn, the high watermark."""
        with self._lock:
            replica = self.remote_replica(replica_id)
            leader_end = self.log.log_end_offset
            replica.update_fetch_state(fetch_offset, log_start_offset, self.clock.milliseconds(), leader_end)
            expansion = self.maybe_expand_isr(replica_id)
            moved = self.maybe_increment_high_watermark()
            return FollowerFetchResult(moved, expansion)

    # --- the ISR ------------------------------------------------------------------------

    def out_of_sync_replicas(self, max_lag_ms: int | None = None) -> set[int]:
        """The followers in the ISR that have not been caught up for ``max_lag_ms`` (default
        ``replica.lag.time.max.ms``) while the leader's log had more (Kafka's getOutOfSyncReplicas)."""
        lag = self.replica_lag_time_max_ms if max_lag_ms is None else max_lag_ms
        with self._lock:
            if self.pending_isr_change is not None:
                return set()
            leader_end = self.log.log_end_offset
            now = self.clock.milliseconds()
            out = set()
            for broker_id in self.isr - {self.local_broker_id}:
                replica = self._remote_replicas.get(broker_id)
                if replica is None or not replica.state.is_caught_up(leader_end, now, lag):
                    out.add(broker_id)
            return out

    def maybe_shrink_isr(self) -> LeaderAndIsr | None:
        """The ISR without its out-of-sync followers, proposed (Kafka's maybeShrinkIsr); None when every
        member is in sync or a change is already in flight."""
        with self._lock:
            if not self.is_leader:
                return None
            out = self.out_of_sync_replicas()
            if not out:
                return None
            leader_end = self.log.log_end_offset
            lagging = {b: self._remote_replicas[b].state.log_end_offset if b in self._remote_replicas else -1
                       for b in sorted(out)}
            log.info("%s: shrinking ISR from %s to %s: out of sync for %d ms (log end offsets %s, leader's %d)",
                     self, sorted(self.isr), sorted(self.isr - out), self.replica_lag_time_max_ms, lagging,
                     leader_end)
            return self._propose(self.isr - out)

    def is_follower_in_sync(self, replica_id: int) -> bool:
        """A follower caught up to the high watermark and into this leader's epoch (Kafka's isFollowerInSync)."""
        with self._lock:
            replica = self._remote_replicas.get(replica_id)
            if replica is None or self.leader_epoch_start_offset is None:
                return False
            end = replica.state.log_end_offset
            return end >= self.log.high_watermark and end >= self.leader_epoch_start_offset

    def maybe_expand_isr(self, replica_id: int) -> LeaderAndIsr | None:
        """The ISR with ``replica_id`` added, proposed when that follower is in sync and not yet a member
        (Kafka's maybeExpandIsr); None otherwise or while a change is in flight."""
        with self._lock:
            if (not self.is_leader or self.pending_isr_change is not None or replica_id in self.isr
                    or not self.is_follower_in_sync(replica_id)):
                return None
            log.info("%s: expanding ISR from %s to %s", self, sorted(self.isr), sorted(self.isr | {replica_id}))
            return self._propose(self.isr | {replica_id})

    def _propose(self, isr: frozenset[int]) -> LeaderAndIsr:
        proposed = LeaderAndIsr(self.local_broker_id, self.leader_epoch, tuple(sorted(isr)), self.partition_epoch)
        self.pending_isr_change = PendingIsrChange(proposed, self.isr)
        return proposed

    def on_isr_update_committed(self, committed: LeaderAndIsr) -> bool:
        """The controller wrote ``committed`` (the proposal, with its new partition epoch); a stale answer —
        another leader epoch or an older partition epoch — is ignored. Returns whether the high watermark
        moved."""
        with self._lock:
            if committed.leader_epoch != self.leader_epoch or committed.partition_epoch < self.partition_epoch:
                log.info("%s: ignoring the ISR update %s: leader epoch %d, partition epoch %d now", self, committed,
                         self.leader_epoch, self.partition_epoch)
                return False
            self.isr = frozenset(committed.isr)
            self.partition_epoch = committed.partition_epoch
            self.pending_isr_change = None
            return self.maybe_increment_high_watermark()

    def on_isr_update_failed(self, reason: str) -> None:
        """The compare-and-set lost (another change came first) or failed: the ISR stays as committed."""
        with self._lock:
            pending = self.pending_isr_change
            if pending is not None:
                log.info("%s: the ISR change to %s failed: %s", self, list(pending.proposed.isr), reason)
            self.pending_isr_change = None

    # --- produce ------------------------------------------------------------------------

    def append_records_to_leader(self, records: bytes, required_acks: int) -> LogAppendInfo:
        """Append a producer's batches under this leader's epoch (Kafka's appendRecordsToLeader); with
        ``acks=all`` (-1) the ISR must have ``min.insync.replicas`` members first."""
        return self.append_to_leader(lambda lg, epoch: lg.append(records, leader_epoch=epoch), required_acks)

    def append_to_leader(self, append: Callable[[Log, int], LogAppendInfo], required_acks: int) -> LogAppendInfo:
        """``append(log, leader_epoch)`` run as this leader's append (a coordinator's records, a transaction
        marker), under the checks of ``append_records_to_leader``."""
        with self._lock:
            if not self.is_leader:
                raise NotLeaderOrFollowerError(f"{self}: broker {self.local_broker_id} is not the leader "
                                               f"(the leader is {self.leader_id})")
            min_isr = self.effective_min_isr
            if required_acks == -1 and len(self.isr) < min_isr:
                raise NotEnoughReplicasError(f"{self}: the ISR {sorted(self.isr)} is smaller than "
                                             f"min.insync.replicas {min_isr}")
            info = append(self.log, self.leader_epoch)
            self.maybe_increment_high_watermark()  # the ISR may be the leader alone
            return info

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, KafkaError | None]:
        """Whether an ``acks=all`` write ending before ``required_offset`` is done, and its error (Kafka's
        checkEnoughReplicasReachOffset): done once the high watermark — the ISR's smallest log end
        offset — reaches it, answered NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
        ``min.insync.replicas`` meanwhile."""
        with self._lock:
            if not self.is_leader:
                return False, NotLeaderOrFollowerError(f"{self}: broker {self.local_broker_id} is no longer "
                                                       f"the leader")
            if self.log.high_watermark < required_offset:
                return False, None
            min_isr = self.effective_min_isr
            if len(self.maximal_isr) < min_isr:
                return True, NotEnoughReplicasAfterAppendError(
                    f"{self}: the records up to offset {required_offset - 1} were written, but the ISR "
                    f"{sorted(self.maximal_isr)} is smaller than min.insync.replicas {min_isr}")
            return True, None

    # --- OffsetsForLeaderEpoch ----------------------------------------------------------------

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> EpochEndOffset | None:
        """The leader's answer to OffsetsForLeaderEpoch (Kafka's lastOffsetForLeaderEpoch): the end offset of
        the largest epoch at or below ``leader_epoch``; None when the log cannot tell. Only the leader
        answers, for the requester's ``current_leader_epoch``."""
        with self._lock:
            if not self.is_leader:
                raise NotLeaderOrFollowerError(f"{self}: broker {self.local_broker_id} is not the leader "
                                               f"(the leader is {self.leader_id})")
            self.check_leader_epoch(current_leader_epoch)
            return self.log.end_offset_for_epoch(leader_epoch)


@dataclass(frozen=True)
class FollowerFetchResult:
    """What a follower's fetch changed on the leader."""

    high_watermark_moved: bool
    isr_expansion: LeaderAndIsr | None
