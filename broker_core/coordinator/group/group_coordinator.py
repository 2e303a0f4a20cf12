"""``GroupCoordinator``: Kafka's classic group protocol as a state machine fed with requests and a clock.

Requests come in whole as the typed records of ``requests`` (``wire`` builds
them from the body dicts of each API version, and shapes the typed results
back into response bodies), so nothing here knows a wire version: where
versions behave differently, the request says so in a field
(``require_known_member_id``, ``supports_skip_assignment``, ...).

Time comes in through the injected clock and the two purgatories: the
rebalance purgatory holds the DelayedJoin / DelayedSync of each group, the
heartbeat purgatory one DelayedHeartbeat per member. Nothing here opens a
socket or sleeps: a test builds the coordinator over a ``MockTime``, an
``InlineExecutor`` and an ``InMemoryGroupStore``, sends requests, moves the
clock and calls ``advance_clock``, and every delayed response has been
delivered when that returns.

JoinGroup and SyncGroup answer later (when the rebalance completes), so they
take a ``respond`` callback, called exactly once, maybe from the thread of
another request or of the timer. Every other API answers at once.

Locking follows Kafka: each group has a re-entrant lock, held while its
state changes and shared with its delayed operations; the coordinator's own
lock guards only the map of groups and the loading flag.

What follows Kafka 3.x (classic protocol) and where it differs:

* member ids are "<client.id>-<uuid>" ("<group.instance.id>-<uuid>" for
  static members); a JoinGroup without a member id that
  ``require_known_member_id`` (v4+) gets MEMBER_ID_REQUIRED and a pending
  member id to come back with;
* the first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``;
* members that do not SyncGroup within the rebalance timeout are removed (DelayedSync);
* a protocol tie goes to the one preferred by the member that joined first;
* a JoinGroup or SyncGroup replaced by a newer one from the same member is
  answered (REBALANCE_IN_PROGRESS) instead of being dropped, so no
  connection waits forever for it.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from format.layout import TopicPartition

from ...clock import SYSTEM_CLOCK, Clock
from ...consumer_protocol import CONSUMER_PROTOCOL_TYPE
from ...errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, FencedInstanceIdError,
                       GroupIdNotFoundError, GroupMaxSizeReachedError, GroupSubscribedToTopicError,
                       IllegalGenerationError, InconsistentGroupProtocolError, InvalidCommitOffsetSizeError,
                       InvalidGroupIdError, InvalidRequestError, InvalidSessionTimeoutError, MemberIdRequiredError,
                       NonEmptyGroupError, NotCoordinatorError, OffsetMetadataTooLargeError, RebalanceInProgressError,
                       UnknownMemberIdError, UnknownServerError)
from ...offsets_topic import OFFSETS_TOPIC, partition_for_group
from ...purgatory import DelayedOperationPurgatory
from ...timer import SystemTimer
from ...timer.timer_task import TimerTask
from ..append_errors import append_error_type
from .broker_store import BrokerGroupStore
from .config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupCoordinatorConfig
from .delayed_heartbeat import DelayedHeartbeat
from .delayed_join import DelayedJoin, InitialDelayedJoin
from .delayed_sync import DelayedSync
from .group_metadata import GroupMetadata
from .group_state import GroupState
from .keys import GroupJoinKey, GroupSyncKey, MemberKey
from .member_metadata import MemberMetadata
from .offset_and_metadata import OffsetAndMetadata
from .requests import (COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION, DeleteGroupsRequest,
                       DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest,
                       LeaveGroupRequest, LeavingMember, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
                       OffsetFetchRequest, SyncGroupRequest, TxnOffsetCommitRequest)
from .results import (CLASSIC_GROUP_TYPE, NONE, UNKNOWN_MEMBER_ID, GroupOverview, GroupSummary, JoinCallback,
                      JoinGroupResult, LeaveGroupResult, LeaveMemberResult, OffsetFetchResult, SyncCallback,
                      SyncGroupResult)
from .store import GroupStore, LoadedGroups

if TYPE_CHECKING:
    from ...broker import Broker

__all__ = ["GroupCoordinator", "COORDINATOR_TYPE_GROUP", "COORDINATOR_TYPE_TRANSACTION"]

log = logging.getLogger(__name__)

_S = GroupState

def _store_error_code(exc: BaseException, *, offsets: bool) -> int:
    """The store's failures as Kafka answers them (GroupMetadataManager's mapping)."""
    return append_error_type(exc, InvalidCommitOffsetSizeError if offsets else UnknownServerError).code


class _OffsetsExpirationTask(TimerTask):
    """Runs ``cleanup_expired_offsets`` every ``offsets.retention.check.interval.ms`` on the coordinator's timer."""

    def __init__(self, coordinator: GroupCoordinator, interval_ms: int) -> None:
        super().__init__(interval_ms)
        self.coordinator = coordinator

    def run(self) -> None:
        try:
            self.coordinator.cleanup_expired_offsets()
        finally:
            self.coordinator._schedule_offsets_expiration()


class GroupCoordinator:
    """The group coordinator of one broker (which, with one broker, coordinates every group)."""

    def __init__(
        self,
        broker_id: int,
        config: GroupCoordinatorConfig,
        store: GroupStore,
        *,
        clock: Clock = SYSTEM_CLOCK,
        heartbeat_purgatory: DelayedOperationPurgatory | None = None,
        rebalance_purgatory: DelayedOperationPurgatory | None = None,
        executor: Executor | None = None,
        reaper_enabled: bool = True,
    ) -> None:
        """``executor`` runs expired delayed operations (an ``InlineExecutor`` makes tests deterministic);
        ``reaper_enabled=False`` leaves advancing the timers to ``advance_clock``."""
        self.broker_id = broker_id
        self.config = config
        self.store = store
        self.clock = clock
        self._owned_purgatories: list[DelayedOperationPurgatory] = []
        self.heartbeat_purgatory = heartbeat_purgatory or self._purgatory("Heartbeat", executor, reaper_enabled)
        self.rebalance_purgatory = rebalance_purgatory or self._purgatory("Rebalance", executor, reaper_enabled)
        self._lock = threading.Lock()
        self._groups: dict[str, GroupMetadata] = {}
        self._active = False
        self._loading = False
        #: The ``__consumer_offsets`` partitions coordinated here: None for every one (one broker holds them
        #: all); in a cluster, those this broker was elected leader of, with the leader epoch of the election.
        self._owned_partitions: dict[int, int] | None = None
        self._loading_partitions: set[int] = set()
        #: The newest leader epoch an election named, by partition (an older election is stale).
        self._latest_epochs: dict[int, int] = {}
        self._expiration_task: _OffsetsExpirationTask | None = None

    @classmethod
    def for_broker(cls, broker: Broker, *, executor: Executor | None = None,
                   reaper_enabled: bool = True) -> GroupCoordinator:
        """The coordinator of an embedded or served ``Broker``: its settings, its clock, its offsets topic."""
        return cls(broker.node_id, GroupCoordinatorConfig.from_broker_config(broker.config), BrokerGroupStore(broker),
                   clock=broker.clock, executor=executor, reaper_enabled=reaper_enabled)

    def _purgatory(self, name: str, executor: Executor | None, reaper_enabled: bool) -> DelayedOperationPurgatory:
        timer = SystemTimer(name, clock=self.clock, executor=executor)
        purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory(
            name, timer, self.clock, reaper_enabled=reaper_enabled, broker_id=self.broker_id, shards=16)
        self._owned_purgatories.append(purgatory)
        return purgatory

    # ==================================================================================
    # lifecycle
    # ==================================================================================

    def startup(self, *, load: bool = True, elected_partitions_only: bool = False) -> None:
        """Start answering. Until ``load`` has run, group requests get COORDINATOR_LOAD_IN_PROGRESS.

        With ``load`` (the default) the offsets topic is replayed now; a server
        that wants to accept connections meanwhile passes ``load=False`` and
        calls ``load()`` from a background thread. A broker of a cluster passes
        ``elected_partitions_only``: it coordinates no group until it is elected
        leader of the group's partition (``on_election``); the others answer
        NOT_COORDINATOR.
        """
        assert not (load and elected_partitions_only), "a cluster's coordinator loads the partitions it is elected for"
        with self._lock:
            self._active = True
            self._loading = not elected_partitions_only
            self._owned_partitions = {} if elected_partitions_only else None
        if self._expiration_task is None:
            self._schedule_offsets_expiration()
        if load:
            self.load()

    def load(self) -> None:
        """Replay the store: every group and offset becomes live; loading ends.

        If the store cannot be read this raises, and the coordinator keeps
        answering COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
        """
        groups = self._live_groups(self.store.load())
        with self._lock:
            self._groups.update(groups)
        for group in groups.values():
            self._on_group_loaded(group)
        with self._lock:
            self._loading = False
        log.info("group coordinator %d: loaded %d groups and %d offsets", self.broker_id, len(groups),
                 sum(len(g.offsets) for g in groups.values()))

    def on_election(self, partition: int, leader_epoch: int) -> None:
        """This broker became leader of ``partition`` of ``__consumer_offsets`` at ``leader_epoch`` (Kafka's
        onElection): its groups are loaded from the local replica — the partition's requests answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile — and coordinated here from then on. An election older than
        one already seen is ignored. If the replica cannot be read this raises, and the partition keeps
        answering COORDINATOR_LOAD_IN_PROGRESS until the next election."""
        with self._lock:
            owned = self._owned_partitions
            if not self._active or owned is None or leader_epoch < self._latest_epochs.get(partition, -1):
                return
            self._latest_epochs[partition] = owned[partition] = leader_epoch
            self._loading_partitions.add(partition)
        loaded = self._live_groups(self.store.load([partition]))
        with self._lock:
            if self._owned_partitions is None or self._owned_partitions.get(partition) != leader_epoch:
                return  # resigned, or elected again, while loading
            # A new leader epoch of a partition coordinated here already keeps its live groups.
            groups = {gid: g for gid, g in loaded.items() if gid not in self._groups}
            self._groups.update(groups)
        for group in groups.values():
            self._on_group_loaded(group)
        with self._lock:
            self._loading_partitions.discard(partition)
        log.info("group coordinator %d: elected for %s-%d at leader epoch %d; loaded %d groups", self.broker_id,
                 OFFSETS_TOPIC, partition, leader_epoch, len(groups))

    def on_resignation(self, partition: int) -> None:
        """This broker no longer leads ``partition`` of ``__consumer_offsets`` (Kafka's onResignation): its
        groups are unloaded — parked JoinGroup and SyncGroup requests answer NOT_COORDINATOR, and the
        clients find the partition's new leader."""
        with self._lock:
            owned = self._owned_partitions
            if owned is None or owned.pop(partition, None) is None:
                return
            self._loading_partitions.discard(partition)
            gone = [g for g in self._groups.values() if self.partition_for(g.group_id) == partition]
            for group in gone:
                del self._groups[group.group_id]
        for group in gone:
            self._on_group_unloaded(group)
        log.info("group coordinator %d: resigned from %s-%d; unloaded %d groups", self.broker_id, OFFSETS_TOPIC,
                 partition, len(gone))

    def _live_groups(self, loaded: LoadedGroups) -> dict[str, GroupMetadata]:
        """The groups of what the store replayed, with their offsets and pending transactional offsets."""
        groups: dict[str, GroupMetadata] = {}
        for group_id, value in loaded.groups.items():
            groups[group_id] = GroupMetadata.loaded(group_id, value, clock=self.clock)
        for group_id, offsets in loaded.offsets.items():
            group = groups.get(group_id)
            if group is None:
                # Offsets without metadata: a group that only stores offsets.
                group = groups[group_id] = GroupMetadata(group_id, clock=self.clock)
            group.offsets.update(offsets)
            group.offset_positions.update(loaded.offset_positions.get(group_id, {}))
        for producer_id, by_group in loaded.pending_transactional_offsets.items():
            for group_id, pending in by_group.items():
                group = groups.get(group_id)
                if group is None:
                    group = groups[group_id] = GroupMetadata(group_id, clock=self.clock)
                group.pending_transactional_offsets.setdefault(producer_id, {}).update(pending)
        return groups

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        with group.lock:
            assert group.is_(_S.STABLE) or group.is_(_S.EMPTY), group
            if group.size > self.config.group_max_size:
                self._prepare_rebalance(group, f"loaded group is over capacity "
                                               f"(group.max.size={self.config.group_max_size})")
            # Loaded members must heartbeat within their session like any other.
            for member in group.members:
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def shutdown(self) -> None:
        """Stop answering (COORDINATOR_NOT_AVAILABLE), unload every group, stop the purgatories it created.

        Parked JoinGroup and SyncGroup requests are answered NOT_COORDINATOR,
        which sends their clients looking for the coordinator again.
        """
        with self._lock:
            self._active = False
            groups, self._groups = list(self._groups.values()), {}
        task, self._expiration_task = self._expiration_task, None
        if task is not None:
            task.cancel()
        for group in groups:
            self._on_group_unloaded(group)
        for purgatory in self._owned_purgatories:
            purgatory.shutdown()

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        with group.lock:
            for member in group.members:
                group.maybe_invoke_join_callback(member, JoinGroupResult.failed(member.member_id,
                                                                                NotCoordinatorError.code))
                group.maybe_invoke_sync_callback(member, SyncGroupResult(NotCoordinatorError.code))
            group.transition_to(_S.DEAD)
            # Dead completes whatever still waits on the group or its members.
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
            self.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))
            for member_id in group.member_ids:
                self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))

    close = shutdown

    def advance_clock(self, timeout_ms: int = 0) -> None:
        """Expire what is due on both purgatories (what their reaper threads do when enabled)."""
        self.rebalance_purgatory.advance_clock(timeout_ms)
        self.heartbeat_purgatory.advance_clock(timeout_ms)

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def is_loading(self) -> bool:
        return self._loading

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding the group."""
        return partition_for_group(group_id, self.store.num_partitions)

    def group(self, group_id: str) -> GroupMetadata | None:
        """The live group, for inspection (hold ``group.lock`` to read it consistently)."""
        with self._lock:
            return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._groups)

    # ==================================================================================
    # FindCoordinator
    # ==================================================================================

    def find_coordinator(self, request: FindCoordinatorRequest) -> list[tuple[str, int]]:
        """Each key with the error code answering it: none when this broker coordinates it."""
        return [(key, self._find_coordinator_error(request.key_type)) for key in request.keys]

    def _find_coordinator_error(self, key_type: int) -> int:
        if key_type == COORDINATOR_TYPE_TRANSACTION:
            return CoordinatorNotAvailableError.code  # no transaction coordinator runs here yet
        if key_type != COORDINATOR_TYPE_GROUP:
            return InvalidRequestError.code
        if not self._active:
            return CoordinatorNotAvailableError.code
        return NONE

    # ==================================================================================
    # JoinGroup
    # ==================================================================================

    def join_group(self, request: JoinGroupRequest, respond: JoinCallback) -> None:
        """A member (re)joins; ``respond`` receives the generation it ends up in, or an error.

        Called exactly once: now on an error, else when the rebalance completes
        (maybe from the thread of another request or of the timer).
        """
        member_id = request.member_id
        error = self._validate_group_status(request.group_id, allow_empty_id=False)
        if error:
            respond(JoinGroupResult.failed(member_id, error))
            return
        if not (self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            respond(JoinGroupResult.failed(member_id, InvalidSessionTimeoutError.code))
            return
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        # A group is created by its first member only; a member id for a group
        # that does not exist is one this coordinator never handed out.
        group = self._get_or_create_group(request.group_id) if is_unknown_member else self.group(request.group_id)
        if group is None:
            respond(JoinGroupResult.failed(member_id, UnknownMemberIdError.code))
            return
        with group.lock:
            if not self._accept_joining_member(group, member_id):
                removed = group.remove(member_id)
                if removed is not None:
                    self._remove_heartbeat_for_leaving_member(group, member_id)
                respond(JoinGroupResult.failed(UNKNOWN_MEMBER_ID, GroupMaxSizeReachedError.code))
            elif is_unknown_member:
                self._join_new_member(group, request, respond)
            else:
                self._join_current_member(group, request, respond)
            # The join may have been the last one the rebalance waited for.
            if group.is_(_S.PREPARING_REBALANCE):
                self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
            group.check_invariants()

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Whether ``group.max.size`` leaves room for this member."""
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        if group.is_(_S.PREPARING_REBALANCE):
            # Counting the members that rejoined (not all members) lets a
            # lowered group.max.size shed the last members to rejoin.
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_awaiting_join < self.config.group_max_size)
        return group.has(member_id) or group.size < self.config.group_max_size

    @staticmethod
    def _join_error(group: GroupMetadata, request: JoinGroupRequest) -> int:
        """What every JoinGroup is refused for before its member is looked at (0: nothing)."""
        if group.is_(_S.DEAD):
            # Deleted or unloaded meanwhile: the client finds the coordinator again and retries.
            return CoordinatorNotAvailableError.code
        if not group.supports_protocols(request.protocol_type, [name for name, _ in request.protocols]):
            return InconsistentGroupProtocolError.code
        return 0

    def _join_new_member(self, group: GroupMetadata, request: JoinGroupRequest, respond: JoinCallback) -> None:
        error = self._join_error(group, request)
        if error:
            respond(JoinGroupResult.failed(UNKNOWN_MEMBER_ID, error))
            return
        instance_id = request.group_instance_id
        new_member_id = group.generate_member_id(request.client_id, instance_id)
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, request, respond)
            else:
                self._add_member_and_rebalance(group, new_member_id, request, respond)
        elif request.require_known_member_id:
            # Hand out the id first, so a client whose first JoinGroup times
            # out retries as the same member, not a new one.
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, request.session_timeout_ms)
            respond(JoinGroupResult.failed(new_member_id, MemberIdRequiredError.code))
        else:
            self._add_member_and_rebalance(group, new_member_id, request, respond)

    def _join_current_member(self, group: GroupMetadata, request: JoinGroupRequest, respond: JoinCallback) -> None:
        member_id = request.member_id
        error = self._join_error(group, request)
        if error:
            respond(JoinGroupResult.failed(member_id, error))
            return
        if group.is_pending_member(member_id):
            # The second half of the MEMBER_ID_REQUIRED round trip.
            if request.group_instance_id is not None:
                raise AssertionError(f"group {group.group_id!r}: static member {request.group_instance_id} "
                                     f"has a pending member id {member_id}")
            self._add_member_and_rebalance(group, member_id, request, respond)
            return
        error = self._validate_current_member(group, member_id, request.group_instance_id)
        if error:
            respond(JoinGroupResult.failed(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is _S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, request, respond,
                                              f"member {member_id} joined during {state}")
        elif state is _S.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                # The member lost its JoinGroup response: send the same generation again.
                respond(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, request, respond,
                                                  f"member {member_id} changed its metadata during {state}")
        elif state is _S.STABLE:
            if group.is_leader(member_id):
                # The leader rejoins to have the group reassigned for changes its
                # metadata does not show (a consumer's topics gaining partitions).
                self._update_member_and_rebalance(group, member, request, respond, f"leader {member_id} rejoined")
            elif not member.matches(request.protocols):
                self._update_member_and_rebalance(group, member, request, respond,
                                                  f"member {member_id} changed its metadata")
            else:
                # A follower with nothing new: the current generation lets it SyncGroup.
                respond(self._join_result(group, member, with_members=False))
        else:
            # Empty (or Dead): the member's generation is gone; it must join anew.
            respond(JoinGroupResult.failed(member_id, UnknownMemberIdError.code))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata, *, with_members: bool = True
                     ) -> JoinGroupResult:
        """The current generation as ``member`` sees it; only the leader gets the member list."""
        is_leader = group.is_leader(member.member_id)
        return JoinGroupResult(
            member_id=member.member_id, error_code=NONE, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name, leader_id=group.leader_id,
            members=group.current_member_metadata() if is_leader and with_members else ())

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, request: JoinGroupRequest,
                                  respond: JoinCallback) -> None:
        member = MemberMetadata(
            member_id=member_id, group_id=group.group_id, group_instance_id=request.group_instance_id,
            client_id=request.client_id, client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms, session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type, supported_protocols=list(request.protocols), is_new=True)
        # During the first rebalance a new arrival extends the initial delay once more.
        if group.is_(_S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, respond)
        # A new member cannot heartbeat until it has a generation, so its
        # parked JoinGroup is bounded by the new-member timeout instead.
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined"
                                             + (f" ({request.reason})" if request.reason else ""))

    @staticmethod
    def _update_member(group: GroupMetadata, member: MemberMetadata, request: JoinGroupRequest,
                       respond: JoinCallback) -> None:
        group.update_member(member, list(request.protocols), request.rebalance_timeout_ms,
                            request.session_timeout_ms, respond)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata, request: JoinGroupRequest,
                                     respond: JoinCallback, reason: str) -> None:
        self._update_member(group, member, request, respond)
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            request: JoinGroupRequest, respond: JoinCallback) -> None:
        """A known static member restarted (unknown member id, known group.instance.id)."""
        group_instance_id = request.group_instance_id
        assert group_instance_id is not None, request
        current_leader = group.leader_id
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        # The old id's DelayedHeartbeat will find no such member and complete harmlessly.
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._update_member(group, member, request, respond)
        state = group.state
        if state is _S.STABLE:
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group, f"static member {group_instance_id} rejoined with "
                                                     f"protocols that change the group's choice")
                return
            # Same protocol: the restart needs no rebalance, only the new member id stored.
            error = self._store_group(group, {m.member_id: m.assignment for m in group.members})
            if error:
                member.awaiting_join_callback = None
                member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                self._complete_and_schedule_next_heartbeat_expiration(group, member)
                respond(JoinGroupResult(member_id=UNKNOWN_MEMBER_ID, error_code=error,
                                        generation_id=group.generation_id, protocol_type=group.protocol_type,
                                        protocol_name=group.protocol_name, leader_id=current_leader))
            elif request.supports_skip_assignment:
                # The leader learns it leads but must not reassign a Stable group.
                is_leader = group.is_leader(new_member_id)
                group.maybe_invoke_join_callback(member, JoinGroupResult(
                    member_id=new_member_id, generation_id=group.generation_id, protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name, leader_id=group.leader_id,
                    members=group.current_member_metadata() if is_leader else (), skip_assignment=is_leader))
            else:
                # Older clients: the old leader id keeps a restarted leader from
                # computing an assignment that a Stable group would not hand out.
                group.maybe_invoke_join_callback(member, JoinGroupResult(
                    member_id=new_member_id, generation_id=group.generation_id, protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name, leader_id=current_leader))
        elif state is _S.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {group_instance_id} rejoined during {state}")
        elif state is not _S.PREPARING_REBALANCE:
            raise AssertionError(f"group {group.group_id!r}: static member {group_instance_id} "
                                 f"rejoined in state {state}")

    # ==================================================================================
    # rebalancing
    # ==================================================================================

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Start a rebalance: park joins until the members are back (DelayedJoin)."""
        if group.is_(_S.COMPLETING_REBALANCE):
            # Members waiting for an assignment of a generation that will not be: rejoin.
            self._reset_and_propagate_assignment_error(group, RebalanceInProgressError.code)
        # No SyncGroup is owed to a generation that is over.
        group.clear_pending_sync_members()
        self.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))
        if group.is_(_S.EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            delayed: DelayedJoin = InitialDelayedJoin(self, self.rebalance_purgatory, group, delay, delay,
                                                      max(group.rebalance_timeout_ms - delay, 0))
        else:
            delayed = DelayedJoin(self, group, group.rebalance_timeout_ms)
        group.transition_to(_S.PREPARING_REBALANCE)
        log.info("group %r: preparing to rebalance from generation %d (%s-%d): %s", group.group_id,
                 group.generation_id, OFFSETS_TOPIC, self.partition_for(group.group_id), reason)
        self.rebalance_purgatory.try_complete_else_watch(delayed, [GroupJoinKey(group.group_id)])

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        """DelayedJoin's condition: every member has rejoined."""
        with group.lock:
            return force_complete() if group.has_all_members_joined() else False

    def on_complete_join(self, group: GroupMetadata) -> None:
        """End the rebalance: drop who did not rejoin, start the next generation, answer every JoinGroup."""
        with group.lock:
            for member in group.not_yet_rejoined_members:
                # A static member keeps its place until its session runs out:
                # it may be restarting, and coming back needs no rebalance.
                if not member.is_static_member:
                    group.remove(member.member_id)
                    self._remove_heartbeat_for_leaving_member(group, member.member_id)
            if group.is_(_S.DEAD):
                return
            if not group.maybe_elect_new_joined_leader() and group.size:
                # Only static members that have not rejoined are left: wait
                # again until they rejoin or their sessions expire.
                log.warning("group %r: no member rejoined; the rebalance waits longer", group.group_id)
                self.rebalance_purgatory.try_complete_else_watch(
                    DelayedJoin(self, group, group.rebalance_timeout_ms), [GroupJoinKey(group.group_id)])
                return
            group.init_next_generation()
            if group.is_(_S.EMPTY):
                log.info("group %r: generation %d is empty", group.group_id, group.generation_id)
                error = self._store_group(group, {})
                if error:
                    # No member depends on it: after a restart the previous
                    # generation comes back and its members time out.
                    log.warning("group %r: cannot store empty generation %d: error %d", group.group_id,
                                group.generation_id, error)
                return
            log.info("group %r: generation %d with %d members, leader %s, protocol %s", group.group_id,
                     group.generation_id, group.size, group.leader_id, group.protocol_name)
            for member in group.members:
                group.maybe_invoke_join_callback(member, self._join_result(group, member))
                self._complete_and_schedule_next_heartbeat_expiration(group, member)
                member.is_new = False
                group.add_pending_sync_member(member.member_id)
            self._schedule_pending_sync(group)
            group.check_invariants()

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms), [GroupSyncKey(group.group_id)])

    def try_complete_pending_sync(self, group: GroupMetadata, generation_id: int,
                                  force_complete: Callable[[], bool]) -> bool:
        """DelayedSync's condition: every member of the generation synced, or the generation is over."""
        with group.lock:
            if (generation_id != group.generation_id
                    or group.state in (_S.DEAD, _S.EMPTY, _S.PREPARING_REBALANCE)
                    or group.has_received_sync_from_all_members()):
                return force_complete()
            return False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        """The rebalance timeout passed after a generation started: drop who never synced, rebalance."""
        with group.lock:
            if generation_id != group.generation_id:
                return
            if group.state in (_S.COMPLETING_REBALANCE, _S.STABLE) and not group.has_received_sync_from_all_members():
                missing = sorted(group.pending_sync_members)
                for member_id in missing:
                    group.remove(member_id)
                    self._remove_heartbeat_for_leaving_member(group, member_id)
                self._prepare_rebalance(group, f"members {missing} did not sync generation {generation_id}")

    # ==================================================================================
    # SyncGroup
    # ==================================================================================

    def sync_group(self, request: SyncGroupRequest, respond: SyncCallback) -> None:
        """A member asks for its assignment; the leader's request carries everyone's.

        ``respond`` is called exactly once: at once, or when the leader's assignment has been stored.
        """
        if request.protocol_type_and_name_required and (request.protocol_type is None
                                                        or request.protocol_name is None):
            # Required so that a coordinator can check them (KIP-559).
            respond(SyncGroupResult(InconsistentGroupProtocolError.code))
            return
        group_id, generation_id, member_id = request.group_id, request.generation_id, request.member_id
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error == CoordinatorLoadInProgressError.code:
            # The rebalance in progress was lost with the old coordinator; older
            # clients know REBALANCE_IN_PROGRESS (rejoin), not this error.
            respond(SyncGroupResult(RebalanceInProgressError.code))
            return
        if error:
            respond(SyncGroupResult(error))
            return
        group = self.group(group_id)
        if group is None:
            respond(SyncGroupResult(UnknownMemberIdError.code))
            return
        with group.lock:
            error = self._validate_sync_group(group, request)
            if error:
                respond(SyncGroupResult(error))
                return
            state = group.state
            if state is _S.EMPTY:
                respond(SyncGroupResult(UnknownMemberIdError.code))
            elif state is _S.PREPARING_REBALANCE:
                respond(SyncGroupResult(RebalanceInProgressError.code))
            elif state is _S.COMPLETING_REBALANCE:
                member = group.get(member_id)
                previous = member.awaiting_sync_callback
                member.awaiting_sync_callback = respond
                if previous is not None:
                    previous(SyncGroupResult(RebalanceInProgressError.code))  # superseded by this request
                self._remove_pending_sync_member(group, member_id)
                if group.is_leader(member_id):
                    self._complete_sync_from_leader(group, generation_id, member_id, request.assignments)
            elif state is _S.STABLE:
                self._remove_pending_sync_member(group, member_id)
                member = group.get(member_id)
                respond(SyncGroupResult(NONE, member.assignment, group.protocol_type, group.protocol_name))
                self._complete_and_schedule_next_heartbeat_expiration(group, member)
            else:
                raise AssertionError(f"group {group_id!r}: SyncGroup reached state {state}")
            group.check_invariants()

    def _validate_sync_group(self, group: GroupMetadata, request: SyncGroupRequest) -> int:
        if group.is_(_S.DEAD):
            return CoordinatorNotAvailableError.code
        error = self._validate_current_member(group, request.member_id, request.group_instance_id)
        if error:
            return error
        if request.generation_id != group.generation_id:
            return IllegalGenerationError.code
        if request.protocol_type is not None and request.protocol_type != group.protocol_type:
            return InconsistentGroupProtocolError.code
        if request.protocol_name is not None and request.protocol_name != group.protocol_name:
            return InconsistentGroupProtocolError.code
        return NONE

    def _complete_sync_from_leader(self, group: GroupMetadata, generation_id: int, member_id: str,
                                   assignments: Mapping[str, bytes]) -> None:
        """Store the leader's assignment, then hand every member its part: the group is Stable."""
        # A member the leader left out gets an empty assignment; ids that are not members are ignored.
        assignment = {m: bytes(assignments.get(m, b"")) for m in group.member_ids}
        missing = sorted(set(group.member_ids) - set(assignments))
        if missing:
            log.warning("group %r: leader %s assigned nothing to %s in generation %d", group.group_id, member_id,
                        missing, generation_id)
        error = self._store_group(group, assignment)
        if not (group.is_(_S.COMPLETING_REBALANCE) and generation_id == group.generation_id):
            return  # the group moved on while storing
        if error:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"storing the assignment of generation {generation_id} failed")
            return
        for member in group.members:
            member.assignment = assignment[member.member_id]
        # Stable before the answers go out, so a member acting on its answer
        # (a heartbeat, a commit) finds the group Stable.
        group.transition_to(_S.STABLE)
        self._propagate_assignment(group, NONE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        assert group.is_(_S.COMPLETING_REBALANCE), group
        for member in group.members:
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        for member in group.members:
            result = (SyncGroupResult(NONE, member.assignment, group.protocol_type, group.protocol_name)
                      if error == NONE else SyncGroupResult(error))
            if group.maybe_invoke_sync_callback(member, result):
                # The session restarts with the answer: a member whose deadline
                # passed while it waited here must not be expired for it.
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))

    # ==================================================================================
    # Heartbeat and sessions
    # ==================================================================================

    def heartbeat(self, request: HeartbeatRequest) -> int:
        """A member's sign of life; the error code tells it to rejoin (REBALANCE_IN_PROGRESS) or start over."""
        group_id, member_id = request.group_id, request.member_id
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error == CoordinatorLoadInProgressError.code:
            return NONE  # the group is not known yet: nothing to tell the member
        if error:
            return error
        group = self.group(group_id)
        if group is None:
            return UnknownMemberIdError.code
        with group.lock:
            if group.is_(_S.DEAD):
                return CoordinatorNotAvailableError.code
            error = self._validate_current_member(group, member_id, request.group_instance_id)
            if error:
                return error
            if request.generation_id != group.generation_id:
                return IllegalGenerationError.code
            state = group.state
            if state is _S.EMPTY:
                return UnknownMemberIdError.code
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
            # In PreparingRebalance the answer is how members learn to rejoin.
            return RebalanceInProgressError.code if state is _S.PREPARING_REBALANCE else NONE

    def _complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                               timeout_ms: int) -> None:
        """Meet the member's current deadline and set the next one ``timeout_ms`` from now."""
        key = MemberKey(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key])

    def _add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms), [MemberKey(group.group_id, member_id)])

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        # The member is gone, so its DelayedHeartbeat completes instead of expiring.
        self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))

    def try_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool,
                               force_complete: Callable[[], bool]) -> bool:
        """DelayedHeartbeat's condition: the deadline is met, or there is nothing left to expire."""
        with group.lock:
            if group.is_(_S.DEAD):
                return force_complete()
            if is_pending:
                # Done once the pending id joined (or was withdrawn by a LeaveGroup).
                done = group.has(member_id) or not group.is_pending_member(member_id)
            else:
                done = not group.has(member_id) or group.get(member_id).has_satisfied_heartbeat
            return force_complete() if done else False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        """A session deadline passed: the member (or pending member id) leaves the group."""
        with group.lock:
            if group.is_(_S.DEAD):
                return
            if is_pending:
                if group.is_pending_member(member_id):
                    log.info("group %r: pending member %s never joined; forgetting it", group.group_id, member_id)
                    self._remove_pending_member_and_update_group(group, member_id)
            elif group.has(member_id):
                member = group.get(member_id)
                if not member.has_satisfied_heartbeat:
                    log.info("group %r: member %s failed (session timeout); removing it", group.group_id, member_id)
                    self._remove_member_and_update_group(group, member, f"member {member_id}'s session expired")
            group.check_invariants()

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member can time out while parked in JoinGroup; it learns it is
        # out and, if still alive, joins again.
        group.maybe_invoke_join_callback(member, JoinGroupResult.failed(UNKNOWN_MEMBER_ID,
                                                                        UnknownMemberIdError.code))
        group.maybe_invoke_sync_callback(member, SyncGroupResult(UnknownMemberIdError.code))
        group.remove(member.member_id)
        state = group.state
        if state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif state is _S.PREPARING_REBALANCE:
            # The rebalance may have been waiting only for this member.
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_member(member_id)
        if group.is_(_S.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))

    # ==================================================================================
    # LeaveGroup
    # ==================================================================================

    def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResult:
        """Members leave; a static one may be named by its group.instance.id alone."""
        error = self._validate_group_status(request.group_id, allow_empty_id=False)
        if error:
            return LeaveGroupResult(error)
        group = self.group(request.group_id)
        if group is None:
            return LeaveGroupResult(NONE, tuple(LeaveMemberResult(m.member_id, m.group_instance_id,
                                                                  UnknownMemberIdError.code)
                                                for m in request.members))
        with group.lock:
            if group.is_(_S.DEAD):
                return LeaveGroupResult(CoordinatorNotAvailableError.code)
            results = tuple(LeaveMemberResult(m.member_id, m.group_instance_id, self._leave_one(group, m))
                            for m in request.members)
            group.check_invariants()
            return LeaveGroupResult(NONE, results)

    def _leave_one(self, group: GroupMetadata, leaving: LeavingMember) -> int:
        member_id, group_instance_id = leaving.member_id, leaving.group_instance_id
        why = f"member {member_id or group_instance_id} left" + (f" ({leaving.reason})" if leaving.reason else "")
        if member_id == UNKNOWN_MEMBER_ID:
            # An administrator removing a static member by its group.instance.id.
            current = group.current_static_member_id(group_instance_id) if group_instance_id is not None else None
            if current is None:
                return UnknownMemberIdError.code
            self._remove_current_member(group, current, why)
            return NONE
        if group.is_pending_member(member_id):
            self._remove_pending_member_and_update_group(group, member_id)
            self.heartbeat_purgatory.check_and_complete(MemberKey(group.group_id, member_id))
            return NONE
        error = self._validate_current_member(group, member_id, group_instance_id)
        if error:
            return error
        self._remove_current_member(group, member_id, why)
        return NONE

    def _remove_current_member(self, group: GroupMetadata, member_id: str, reason: str) -> None:
        log.info("group %r: %s", group.group_id, reason)
        self._remove_member_and_update_group(group, group.get(member_id), reason)
        self._remove_heartbeat_for_leaving_member(group, member_id)

    # ==================================================================================
    # OffsetCommit and OffsetFetch
    # ==================================================================================

    def commit_offsets(self, request: OffsetCommitRequest) -> dict[TopicPartition, int]:
        """Store offsets, stamped with the coordinator's clock; the error code of each partition.

        A group with members takes commits only from a member of the current
        generation; a group without members (or none at all) takes plain
        commits (generation -1, no member id) from anyone, as Kafka does for
        consumers that assign partitions themselves.
        """
        group_id, offsets = request.group_id, request.offsets
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error:
            return {tp: error for tp in offsets}
        group = self.group(group_id)
        if group is None:
            if request.generation_id >= 0:
                # A generation of a group this coordinator does not know: stale.
                return {tp: IllegalGenerationError.code for tp in offsets}
            group = self._get_or_create_group(group_id)
        with group.lock:
            error = self._validate_offset_commit(group, request.generation_id, request.member_id,
                                                 request.group_instance_id)
            if error:
                return {tp: error for tp in offsets}
            state = group.state
            if state is _S.EMPTY:
                return self._store_offsets(group, request)
            if state in (_S.STABLE, _S.PREPARING_REBALANCE):
                # A commit during PreparingRebalance is still taken: the member
                # learns of the rebalance from its next heartbeat.
                self._complete_and_schedule_next_heartbeat_expiration(group, group.get(request.member_id))
                return self._store_offsets(group, request)
            if state is _S.COMPLETING_REBALANCE:
                # The member knows the new generation but has no assignment yet.
                return {tp: RebalanceInProgressError.code for tp in offsets}
            raise AssertionError(f"group {group_id!r}: OffsetCommit reached state {state}")

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> int:
        if group.is_(_S.DEAD):
            return CoordinatorNotAvailableError.code
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id)
            if error:
                return error
            return IllegalGenerationError.code if generation_id != group.generation_id else NONE
        if not group.is_(_S.EMPTY):
            # A plain commit into a group that has members would go behind their back.
            return UnknownMemberIdError.code
        return NONE

    def _store_offsets(self, group: GroupMetadata, request: OffsetCommitRequest) -> dict[TopicPartition, int]:
        limit = self.config.offset_metadata_max_bytes
        errors = {tp: OffsetMetadataTooLargeError.code for tp, o in request.offsets.items()
                  if len(o.metadata.encode("utf-8")) > limit}
        now = self.clock.milliseconds()
        # A retention time of the request's own: the offset expires then, whatever the group does.
        expire = None if request.retention_ms is None else now + request.retention_ms
        valid = {tp: OffsetAndMetadata(offset=o.offset, metadata=o.metadata, commit_timestamp=now,
                                       leader_epoch=o.leader_epoch, expire_timestamp=expire)
                 for tp, o in request.offsets.items() if tp not in errors}
        if valid:
            try:
                position = self.store.append_offsets(group.group_id, valid)
            except Exception as exc:
                code = _store_error_code(exc, offsets=True)
                log.warning("group %r: storing %d offsets failed (error %d): %s", group.group_id, len(valid), code,
                            exc)
                errors.update({tp: code for tp in valid})
            else:
                group.offsets.update(valid)
                if position is not None:
                    group.offset_positions.update({tp: position for tp in valid})
                errors.update({tp: NONE for tp in valid})
        return errors

    # ==================================================================================
    # TxnOffsetCommit and the end of transactions
    # ==================================================================================

    def commit_transactional_offsets(self, request: TxnOffsetCommitRequest) -> dict[TopicPartition, int]:
        """Store offsets in the producer's open transaction; they count once its COMMIT marker lands in
        the group's ``__consumer_offsets`` partition (``on_transaction_completed``) and vanish on ABORT.
        The error code of each partition.

        A group the coordinator does not know is created (a transactional producer may commit for a
        group that has no members); a request naming a member (v3+) must name one of the current
        generation.
        """
        group_id, offsets = request.group_id, request.offsets
        error = self._validate_group_status(group_id, allow_empty_id=False)
        if error:
            return {tp: error for tp in offsets}
        group = self._get_or_create_group(group_id)
        with group.lock:
            if group.is_(_S.DEAD):
                return {tp: CoordinatorNotAvailableError.code for tp in offsets}
            if request.generation_id >= 0 or request.member_id or request.group_instance_id is not None:
                error = self._validate_current_member(group, request.member_id, request.group_instance_id)
                if not error and request.generation_id != group.generation_id:
                    error = IllegalGenerationError.code
                if error:
                    return {tp: error for tp in offsets}
            limit = self.config.offset_metadata_max_bytes
            errors = {tp: OffsetMetadataTooLargeError.code for tp, o in offsets.items()
                      if len(o.metadata.encode("utf-8")) > limit}
            now = self.clock.milliseconds()
            valid = {tp: OffsetAndMetadata(offset=o.offset, metadata=o.metadata, commit_timestamp=now,
                                           leader_epoch=o.leader_epoch)
                     for tp, o in offsets.items() if tp not in errors}
            if not valid:
                return errors
            try:
                position = self.store.append_transactional_offsets(group_id, request.producer_id,
                                                                   request.producer_epoch, valid)
            except Exception as exc:
                code = _store_error_code(exc, offsets=True)
                log.warning("group %r: storing %d offsets of transactional id %r failed (error %d): %s", group_id,
                            len(valid), request.transactional_id, code, exc)
                errors.update({tp: code for tp in valid})
                return errors
            pending = group.pending_transactional_offsets.setdefault(request.producer_id, {})
            pending.update({tp: (-1 if position is None else position, o) for tp, o in valid.items()})
            errors.update({tp: NONE for tp in valid})
            return errors

    def on_transaction_completed(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` landed in ``__consumer_offsets-<offsets_partition>``:
        the offsets its transaction committed for the groups of that partition count, or vanish."""
        with self._lock:
            groups = [g for g in self._groups.values() if self.partition_for(g.group_id) == offsets_partition]
        for group in groups:
            with group.lock:
                if producer_id in group.pending_transactional_offsets:
                    applied = group.complete_pending_transactional_offsets(producer_id, commit)
                    log.debug("group %r: transaction of producer %d %s, %d offsets applied", group.group_id,
                              producer_id, "committed" if commit else "aborted", applied)

    def fetch_offsets(self, request: OffsetFetchRequest) -> list[OffsetFetchResult]:
        """Each group's committed offsets, in the request's order.

        Whatever the group's state: a group may use the coordinator only to
        store offsets. Offsets committed in a transaction that has not ended
        are not shown (the committed offset before them is). With
        ``require_stable`` (KIP-447) a partition such an open transaction has
        committed an offset of is ``unstable`` instead, answered
        UNSTABLE_OFFSET_COMMIT, which consumers retry until the transaction
        ends (Kafka's OffsetMetadataManager): asked for all partitions, only
        those with a committed offset are listed, as in Kafka.
        """
        return [self._fetch_group_offsets(group.group_id, group.partitions, request.require_stable)
                for group in request.groups]

    def _fetch_group_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                             require_stable: bool) -> OffsetFetchResult:
        """Of ``partitions``, or all of the group's when None."""
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error:
            return OffsetFetchResult(error, {})
        group = self.group(group_id)
        if group is None:
            return OffsetFetchResult(NONE, {tp: None for tp in partitions or ()})
        with group.lock:
            wanted = sorted(group.offsets) if partitions is None else partitions
            unstable = frozenset(tp for tp in wanted if group.has_pending_offset(tp)) if require_stable else frozenset()
            return OffsetFetchResult(NONE, {tp: None if tp in unstable else group.offsets.get(tp) for tp in wanted},
                                     unstable)

    # ==================================================================================
    # OffsetDelete
    # ==================================================================================

    def delete_offsets(self, request: OffsetDeleteRequest) -> tuple[int, dict[TopicPartition, int]]:
        """Delete a group's committed offsets of some partitions: the group's error and each partition's.

        As Kafka's OffsetDelete: a group that does not exist answers GROUP_ID_NOT_FOUND, a
        group with members of another protocol than the consumer's NON_EMPTY_GROUP, and the
        partitions of a topic the current generation subscribes to GROUP_SUBSCRIBED_TO_TOPIC;
        the others are deleted (a tombstone each where an offset was committed) and answer
        NONE, whether an offset was there or not.
        """
        error = self._validate_group_status(request.group_id, allow_empty_id=False)
        if error:
            return error, {}
        group = self.group(request.group_id)
        if group is None:
            return GroupIdNotFoundError.code, {}
        with group.lock:
            if group.is_(_S.DEAD):
                return GroupIdNotFoundError.code, {}
            if not group.is_(_S.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
                return NonEmptyGroupError.code, {}
            errors = {tp: GroupSubscribedToTopicError.code if group.is_subscribed_to_topic(tp.topic) else NONE
                      for tp in request.partitions}
            deleted = [tp for tp, code in errors.items() if code == NONE and tp in group.offsets]
            if deleted:
                try:
                    self.store.append_tombstones(group.group_id, deleted, group=False)
                except Exception as exc:
                    code = _store_error_code(exc, offsets=True)
                    log.warning("group %r: deleting %d offsets failed (error %d): %s", group.group_id,
                                len(deleted), code, exc)
                    return code, {}
                for tp in deleted:
                    del group.offsets[tp]
            return NONE, errors

    # ==================================================================================
    # DescribeGroups, ListGroups, DeleteGroups
    # ==================================================================================

    def describe_groups(self, request: DescribeGroupsRequest) -> list[tuple[int, GroupSummary]]:
        """The error and summary of each group, in the request's order."""
        return [self.describe_group(group_id) for group_id in request.group_ids]

    def describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        error = self._validate_group_status(group_id, allow_empty_id=True)
        if error:
            return error, GroupSummary("", "", "")
        group = self.group(group_id)
        if group is None:
            return NONE, GroupSummary(_S.DEAD.value, "", "")
        with group.lock:
            return NONE, group.summary()

    def list_groups(self, request: ListGroupsRequest) -> tuple[int, list[GroupOverview]]:
        """The groups, only those in the request's states and of its types when it names any."""
        if not self._active:
            return CoordinatorNotAvailableError.code, []
        states = {s.lower() for s in request.states_filter}
        types = {t.lower() for t in request.types_filter}
        if types and CLASSIC_GROUP_TYPE not in types:
            return self._loading_error(), []
        with self._lock:
            groups = list(self._groups.values())
        overviews = []
        for group in groups:
            with group.lock:
                if not states or group.state.value.lower() in states:
                    overviews.append(group.overview())
        return self._loading_error(), sorted(overviews, key=lambda o: o.group_id)

    def _loading_error(self) -> int:
        return CoordinatorLoadInProgressError.code if self._loading or self._loading_partitions else NONE

    def delete_groups(self, request: DeleteGroupsRequest) -> dict[str, int]:
        """Delete Empty groups with their offsets; the error code of each group."""
        results: dict[str, int] = {}
        for group_id in request.group_ids:
            error = self._validate_group_status(group_id, allow_empty_id=True)
            if error:
                results[group_id] = error
                continue
            group = self.group(group_id)
            if group is None:
                results[group_id] = GroupIdNotFoundError.code
                continue
            with group.lock:
                if group.is_(_S.DEAD):
                    results[group_id] = GroupIdNotFoundError.code
                elif not group.is_(_S.EMPTY):
                    results[group_id] = NonEmptyGroupError.code
                else:
                    results[group_id] = self._delete_group(group)
        return results

    def _delete_group(self, group: GroupMetadata) -> int:
        """Tombstones for the group's offsets and metadata, then the group is Dead and gone."""
        try:
            self.store.append_tombstones(group.group_id, list(group.offsets), group=True)
        except Exception as exc:
            code = _store_error_code(exc, offsets=False)
            log.warning("group %r: deleting failed (error %d): %s", group.group_id, code, exc)
            return code
        group.offsets.clear()
        self._remove_group(group)
        return NONE

    def _remove_group(self, group: GroupMetadata) -> None:
        group.transition_to(_S.DEAD)
        with self._lock:
            if self._groups.get(group.group_id) is group:
                del self._groups[group.group_id]
        # Wake whatever still waits on the group: Dead completes it.
        self.rebalance_purgatory.check_and_complete(GroupJoinKey(group.group_id))
        self.rebalance_purgatory.check_and_complete(GroupSyncKey(group.group_id))

    # ==================================================================================
    # offsets.retention.minutes
    # ==================================================================================

    def cleanup_expired_offsets(self, now_ms: int | None = None) -> int:
        """Expire offsets per ``offsets.retention.minutes``; a group left Empty without offsets is removed.

        Returns how many offsets expired. Runs every
        ``offsets.retention.check.interval.ms`` on the coordinator's timer once started.
        """
        if not self._active or self._loading:
            return 0
        now = self.clock.milliseconds() if now_ms is None else now_ms
        with self._lock:
            groups = list(self._groups.values())
        removed = 0
        for group in groups:
            with group.lock:
                expired = group.remove_expired_offsets(now, self.config.offsets_retention_ms)
                dead = group.is_(_S.EMPTY) and not group.has_offsets() and not group.pending_members
                if not expired and not dead:
                    continue
                try:
                    self.store.append_tombstones(group.group_id, list(expired), group=dead)
                except Exception as exc:
                    # Expired in memory all the same, as in Kafka: the records
                    # come back only if the broker restarts before compaction.
                    log.warning("group %r: writing tombstones for %d expired offsets failed: %s", group.group_id,
                                len(expired), exc)
                if dead:
                    self._remove_group(group)
                removed += len(expired)
        if removed:
            log.info("group coordinator %d: removed %d expired offsets", self.broker_id, removed)
        return removed

    def _schedule_offsets_expiration(self) -> None:
        if not self._active:
            return  # shut down: the chain of expiration tasks ends here
        task = _OffsetsExpirationTask(self, self.config.offsets_retention_check_interval_ms)
        self._expiration_task = task
        try:
            self.heartbeat_purgatory.timer.add(task)
        except RuntimeError:
            pass  # the timer shut down with the coordinator

    # ==================================================================================
    # shared checks and the store
    # ==================================================================================

    def _validate_group_status(self, group_id: str | None, *, allow_empty_id: bool) -> int:
        """Kafka's validateGroupStatus: a usable id, an active coordinator, a loaded group."""
        # OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups accept the
        # empty group id, for groups that old clients created with it.
        if group_id is None or (group_id == "" and not allow_empty_id):
            return InvalidGroupIdError.code
        if not self._active:
            return CoordinatorNotAvailableError.code
        if self._loading:
            return CoordinatorLoadInProgressError.code
        return self._partition_status(self.partition_for(group_id))

    def _partition_status(self, partition: int) -> int:
        """Whether this broker coordinates the groups of ``partition`` now: loading, or not its own."""
        with self._lock:
            if partition in self._loading_partitions:
                return CoordinatorLoadInProgressError.code
            if self._owned_partitions is not None and partition not in self._owned_partitions:
                return NotCoordinatorError.code
        return NONE

    def _validate_current_member(self, group: GroupMetadata, member_id: str, group_instance_id: str | None) -> int:
        """The member is in the group, and a static member's instance id maps to this member id."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return UnknownMemberIdError.code
            if current != member_id:
                # Another process uses this group.instance.id now: this one must stop.
                return FencedInstanceIdError.code
        return NONE if group.has(member_id) else UnknownMemberIdError.code

    def _get_or_create_group(self, group_id: str) -> GroupMetadata:
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                group = self._groups[group_id] = GroupMetadata(group_id, clock=self.clock)
            return group

    def _store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        """Append the group's generation (with ``assignment``) to the offsets topic; the error code."""
        try:
            self.store.append_group_metadata(group.group_id, group.stored_value(assignment))
        except Exception as exc:
            code = _store_error_code(exc, offsets=False)
            log.warning("group %r: storing generation %d failed (error %d): %s", group.group_id,
                        group.generation_id, code, exc)
            return code
        return NONE

    def __repr__(self) -> str:
        return (f"GroupCoordinator(broker_id={self.broker_id}, active={self._active}, loading={self._loading}, "
                f"groups={len(self._groups)})")
