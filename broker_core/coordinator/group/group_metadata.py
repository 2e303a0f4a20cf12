"""``GroupMetadata``: one classic group's membership, generation and offsets.

The group knows its members (in join order), the pending members that were
handed a member id but have not joined with it yet (MEMBER_ID_REQUIRED), its
static members (``group.instance.id`` -> member id), the members whose
SyncGroup is still expected, its generation, protocol and leader, and its
committed offsets. It changes only through its methods, which keep these
invariants (``check_invariants``):

* a group has a leader iff it has members, and the leader is a member — one
  leader per generation;
* pending members are not members yet; static ids map to members that carry them;
* a group in CompletingRebalance or Stable has a protocol every member supports.

It does no I/O and knows no timers: the coordinator drives it. Like Kafka's
GroupMetadata it is not thread-safe by itself; callers hold ``lock``, which is
also the lock of every delayed operation of the group.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Iterable

from format.layout import TopicPartition

from ...clock import Clock
from ...consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from ...errors import FencedInstanceIdError, RebalanceInProgressError
from ...protocol.errors import ProtocolError
from ...offsets_topic import NO_TIMESTAMP, GroupMetadataValue
from ...offsets_topic import MemberMetadata as StoredMember
from .group_state import VALID_PREVIOUS_STATES, GroupState, IllegalGroupStateTransitionError, check_transition
from .member_metadata import MemberMetadata
from .offset_and_metadata import OffsetAndMetadata
from .results import (CLASSIC_GROUP_TYPE, GroupOverview, GroupSummary, JoinCallback, JoinGroupMember, JoinGroupResult,
                      SyncGroupResult)

__all__ = [
    "CLASSIC_GROUP_TYPE",
    "GroupMetadata",
    "GroupState",
    "MemberMetadata",
    "VALID_PREVIOUS_STATES",
    "IllegalGroupStateTransitionError",
]

_FENCED_INSTANCE_ID = FencedInstanceIdError.code
_REBALANCE_IN_PROGRESS = RebalanceInProgressError.code


class GroupMetadata:
    """A classic consumer group (Kafka's GroupMetadata)."""

    def __init__(self, group_id: str, initial_state: GroupState = GroupState.EMPTY, *, clock: Clock) -> None:
        self.group_id = group_id
        self.lock = threading.RLock()
        self._clock = clock
        self._state = initial_state
        self.current_state_timestamp: int | None = clock.milliseconds()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        # Join order matters: the next leader is the oldest remaining member.
        self._members: dict[str, MemberMetadata] = {}
        self._pending_members: set[str] = set()
        self._static_members: dict[str, str] = {}
        self._pending_sync_members: set[str] = set()
        #: A member joined during the first rebalance: group.initial.rebalance.delay.ms waits once more.
        self.new_member_added = False
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        #: The topics the members of the current generation subscribe to; None when unknown
        #: (not a consumer group, no protocol chosen yet, or metadata that does not parse).
        self.subscribed_topics: frozenset[str] | None = None
        #: The log offset of the record that set each committed offset (which of two commits is newer).
        self.offset_positions: dict[TopicPartition, int] = {}
        #: Offsets committed in open transactions, by producer id, with the log offset of their record.
        self.pending_transactional_offsets: dict[int, dict[TopicPartition, tuple[int, OffsetAndMetadata]]] = {}

    # -- state ---------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        return self._state

    def is_(self, state: GroupState) -> bool:
        return self._state is state

    def transition_to(self, target: GroupState) -> None:
        """Move to ``target``; raises IllegalGroupStateTransitionError for a move the table forbids."""
        check_transition(self.group_id, self._state, target)
        self._state = target
        self.current_state_timestamp = self._clock.milliseconds()

    @property
    def can_rebalance(self) -> bool:
        return self._state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    # -- members -------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self._members

    def get(self, member_id: str) -> MemberMetadata:
        try:
            return self._members[member_id]
        except KeyError:
            raise KeyError(f"group {self.group_id!r} has no member {member_id!r}") from None

    @property
    def members(self) -> list[MemberMetadata]:
        """The members in join order."""
        return list(self._members.values())

    @property
    def member_ids(self) -> list[str]:
        return list(self._members)

    @property
    def size(self) -> int:
        return len(self._members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Kafka's member ids: "<group.instance.id or client.id>-<uuid>"."""
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        """Add a member (parked in JoinGroup when ``callback`` is given); the first member leads."""
        if member.member_id in self._members:
            raise ValueError(f"group {self.group_id!r} already has member {member.member_id}")
        if member.group_instance_id is not None:
            if member.group_instance_id in self._static_members:
                raise ValueError(f"group {self.group_id!r} already has a member with group.instance.id "
                                 f"{member.group_instance_id!r}")
            self._static_members[member.group_instance_id] = member.member_id
        if not self._members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type, (self.group_id, self.protocol_type, member.protocol_type)
        assert self.supports_protocols(member.protocol_type, member.protocol_names()), (self.group_id, member)
        if self.leader_id is None:
            self.leader_id = member.member_id
        self._members[member.member_id] = member
        member.awaiting_join_callback = callback
        self._pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Drop a member (no-op for an unknown id); the oldest remaining member leads if it led."""
        member = self._members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self._static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self._members), None)
        self._pending_members.discard(member_id)
        self._pending_sync_members.discard(member_id)
        return member

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, callback: JoinCallback | None) -> None:
        """New protocols and timeouts for a rejoining member, parked in JoinGroup under ``callback``."""
        member.supported_protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join_callback
        member.awaiting_join_callback = callback
        if previous is not None and previous is not callback:
            # A member that joins again while parked has given up on its first
            # request; answering it keeps its connection from waiting forever.
            previous(JoinGroupResult.failed(member.member_id, _REBALANCE_IN_PROGRESS))

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> bool:
        """Answer the member's parked JoinGroup, if any."""
        callback = member.awaiting_join_callback
        if callback is None:
            return False
        member.awaiting_join_callback = None
        callback(result)
        return True

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        """Answer the member's parked SyncGroup, if any."""
        callback = member.awaiting_sync_callback
        if callback is None:
            return False
        member.awaiting_sync_callback = None
        callback(result)
        return True

    @property
    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self._members.values() if not m.is_awaiting_join]

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self._members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        """Every member is parked in JoinGroup and no handed-out member id is still unused."""
        return self.num_awaiting_join == len(self._members) and not self._pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members: how long a rebalance may wait for them."""
        return max((m.rebalance_timeout_ms for m in self._members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False when no member rejoined."""
        if self.leader_id is None:
            return False
        if self._members[self.leader_id].is_awaiting_join:
            return True
        for member in self._members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- pending members (MEMBER_ID_REQUIRED) -----------------------------------

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self._members:
            raise ValueError(f"group {self.group_id!r}: member {member_id} is already a member, not pending")
        self._pending_members.add(member_id)

    def remove_pending_member(self, member_id: str) -> None:
        self._pending_members.discard(member_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self._pending_members

    @property
    def pending_members(self) -> frozenset[str]:
        return frozenset(self._pending_members)

    # -- static members (group.instance.id) -----------------------------------------

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self._static_members

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self._static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """Give a static member a new member id; requests parked under the old id are fenced."""
        member = self._members.pop(old_member_id, None)
        if member is None:
            raise ValueError(f"group {self.group_id!r}: cannot replace static member {old_member_id}, "
                             f"it is not a member")
        # The old id belongs to a duplicate instance now: it must shut down.
        self.maybe_invoke_join_callback(member, JoinGroupResult.failed(old_member_id, _FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(member, SyncGroupResult(_FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self._members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self._pending_sync_members:
            self._pending_sync_members.discard(old_member_id)
            self._pending_sync_members.add(new_member_id)
        self._static_members[group_instance_id] = new_member_id
        return member

    # -- pending SyncGroups ------------------------------------------------------------

    def add_pending_sync_member(self, member_id: str) -> None:
        if member_id not in self._members:
            raise ValueError(f"group {self.group_id!r}: {member_id} is not a member, it cannot owe a SyncGroup")
        self._pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self._pending_sync_members.discard(member_id)

    def clear_pending_sync_members(self) -> None:
        self._pending_sync_members.clear()

    @property
    def pending_sync_members(self) -> frozenset[str]:
        return frozenset(self._pending_sync_members)

    def has_received_sync_from_all_members(self) -> bool:
        return not self._pending_sync_members

    # -- protocols ----------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = iter(self._members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = set(first.protocol_names())
        for member in members:
            common &= set(member.protocol_names())
        return common

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        """Whether a member of ``protocol_type`` supporting ``protocols`` can join.

        An empty group takes any non-empty type and protocol list (and adopts
        them); otherwise the type must match and one protocol must be supported
        by every member already in the group.
        """
        names = set(protocols)
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type or not names:
            return False
        if not self._members:
            return True
        return bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """The protocol of the next generation: among those all members support, the one most members prefer.

        Each member votes for its most preferred candidate. Kafka leaves a tie
        to hash-map order; here it goes to the candidate voted for by the
        member that joined first, so the choice is reproducible.
        """
        if not self._members:
            raise ValueError(f"group {self.group_id!r}: cannot select a protocol for a group without members")
        candidates = self.candidate_protocols()
        votes = [member.vote(candidates) for member in self._members.values()]
        counts = Counter(votes)
        most = max(counts.values())
        return next(vote for vote in votes if counts[vote] == most)

    # -- generations ----------------------------------------------------------------------

    def init_next_generation(self) -> None:
        """End a rebalance: bump the generation, choose the protocol, wait for the leader's SyncGroup."""
        self.generation_id += 1
        if self._members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)
        self.subscribed_topics = self.compute_subscribed_topics()
        self._pending_sync_members.clear()
        self.check_invariants()

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        """The members and their metadata for the chosen protocol, as the leader receives them."""
        if self.is_(GroupState.DEAD) or self.is_(GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise ValueError(f"group {self.group_id!r} has no member metadata to hand out in state {self._state}")
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                     for m in self._members.values())

    # -- subscriptions ---------------------------------------------------------------------------

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, from their ``ConsumerProtocolSubscription``s.

        None unless the group is a consumer group with a protocol chosen, or when a member's
        metadata does not parse; empty for a consumer group without members.
        """
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self._members:
            return frozenset()
        if self.protocol_name is None:
            return None
        try:
            return frozenset(topic for m in self._members.values()
                             for topic in decode_subscription(m.metadata(self.protocol_name)))
        except ProtocolError:
            return None

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether the current generation consumes ``topic``; when that is unknown, a consumer
        group counts as subscribed and any other group as not (Kafka's ClassicGroup)."""
        if self.subscribed_topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    # -- offsets -----------------------------------------------------------------------------

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_transactional_offsets)

    def has_pending_offset(self, tp: TopicPartition) -> bool:
        """An open transaction has committed an offset of ``tp`` (OffsetFetch's UNSTABLE_OFFSET_COMMIT)."""
        return any(tp in pending for pending in self.pending_transactional_offsets.values())

    def complete_pending_transactional_offsets(self, producer_id: int, commit: bool) -> int:
        """The transaction of ``producer_id`` ended: on commit its offsets count, each unless a plain
        commit of the partition was written after it (Kafka's rule); on abort they vanish. Returns how
        many offsets it applied."""
        applied = 0
        for tp, (position, offset) in self.pending_transactional_offsets.pop(producer_id, {}).items():
            if not commit:
                continue
            current = self.offset_positions.get(tp)
            if tp not in self.offsets or current is None or current < position:
                self.offsets[tp] = offset
                self.offset_positions[tp] = position
                applied += 1
        return applied

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Drop and return the offsets that ``offsets.retention.minutes`` has expired at ``now_ms``.

        A group of the classic protocol keeps its offsets while it has members;
        once Empty, they expire ``retention_ms`` after it became Empty (after
        the commit, for a group stored before state timestamps existed). A
        group that only stores offsets (no protocol type) expires each offset
        ``retention_ms`` after its commit. An offset committed with an explicit
        retention time (OffsetCommit v2-v4) expires at that time.
        """
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            state_ts = self.current_state_timestamp

            def base(o: OffsetAndMetadata) -> int:
                return state_ts if state_ts is not None else o.commit_timestamp
        elif self.protocol_type is None:
            def base(o: OffsetAndMetadata) -> int:
                return o.commit_timestamp
        else:
            return {}
        expired = {tp: o for tp, o in self.offsets.items()
                   if (now_ms >= o.expire_timestamp if o.expire_timestamp is not None
                       else now_ms - base(o) >= retention_ms)}
        for tp in expired:
            del self.offsets[tp]
        return expired

    # -- views -----------------------------------------------------------------------------------

    def summary(self) -> GroupSummary:
        """DescribeGroups: member metadata and assignments only once the group is Stable."""
        protocol = self.protocol_name if self.is_(GroupState.STABLE) else None
        return GroupSummary(self._state.value, self.protocol_type or "", protocol or "",
                            tuple(m.summary(protocol) for m in self._members.values()))

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", self._state.value)

    # -- the offsets topic --------------------------------------------------------------------------

    def stored_value(self, assignment: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The group as its ``__consumer_offsets`` record holds it (Kafka's GroupMetadataValue).

        ``assignment`` overrides the members' current assignments (the leader's
        new one, stored before it is handed out).
        """
        members = []
        for m in self._members.values():
            assert self.protocol_name is not None, self
            members.append(StoredMember(
                member_id=m.member_id, client_id=m.client_id, client_host=m.client_host,
                session_timeout=m.session_timeout_ms, rebalance_timeout=m.rebalance_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=assignment.get(m.member_id, b"") if assignment is not None else m.assignment,
                group_instance_id=m.group_instance_id))
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation_id, protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=NO_TIMESTAMP if self.current_state_timestamp is None
            else self.current_state_timestamp,
            members=tuple(members))

    @classmethod
    def loaded(cls, group_id: str, value: GroupMetadataValue, *, clock: Clock) -> GroupMetadata:
        """A group rebuilt from its ``__consumer_offsets`` record: Stable with its members, else Empty."""
        group = cls(group_id, GroupState.STABLE if value.members else GroupState.EMPTY, clock=clock)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.current_state_timestamp = (None if value.current_state_timestamp == NO_TIMESTAMP
                                         else value.current_state_timestamp)
        for stored in value.members:
            if value.protocol is None:
                raise ValueError(f"group {group_id!r}: stored generation {value.generation} has members "
                                 f"but no protocol")
            member = MemberMetadata(
                member_id=stored.member_id, group_id=group_id, group_instance_id=stored.group_instance_id,
                client_id=stored.client_id, client_host=stored.client_host,
                rebalance_timeout_ms=stored.rebalance_timeout, session_timeout_ms=stored.session_timeout,
                protocol_type=value.protocol_type,
                # Only the chosen protocol is stored; it is all a rejoin is compared with.
                supported_protocols=[(value.protocol, stored.subscription)], assignment=stored.assignment)
            group._members[member.member_id] = member
            if member.group_instance_id is not None:
                group._static_members[member.group_instance_id] = member.member_id
        group.leader_id = value.leader if value.leader in group._members else next(iter(group._members), None)
        group.subscribed_topics = group.compute_subscribed_topics()
        group.check_invariants()
        return group

    # -- invariants ----------------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Assert what must hold between two operations; a failure is a coordinator bug."""
        if self._members:
            assert self.leader_id in self._members, f"{self}: leader {self.leader_id} is not a member"
        else:
            assert self.leader_id is None, f"{self}: leader {self.leader_id} without members"
        assert not (self._pending_members & self._members.keys()), f"{self}: pending members are members"
        assert self._pending_sync_members <= self._members.keys(), f"{self}: pending syncs of non-members"
        for instance_id, member_id in self._static_members.items():
            member = self._members.get(member_id)
            assert member is not None and member.group_instance_id == instance_id, \
                f"{self}: static member {instance_id} -> {member_id} is not in the group"
        if self._state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            assert self._members, f"{self}: {self._state} without members"
            assert self.protocol_name is not None and all(
                self.protocol_name in m.protocol_names() for m in self._members.values()), \
                f"{self}: protocol {self.protocol_name} is not supported by every member"

    def __repr__(self) -> str:
        return (f"GroupMetadata({self.group_id!r}, state={self._state.value}, generation={self.generation_id}, "
                f"protocol_type={self.protocol_type!r}, protocol={self.protocol_name!r}, leader={self.leader_id!r}, "
                f"members={list(self._members)})")

