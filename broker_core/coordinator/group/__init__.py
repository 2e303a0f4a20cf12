"""The group coordinator: Kafka's classic consumer group protocol and the offsets it stores.

``GroupCoordinator`` is a state machine fed with typed requests and a clock;
it keeps each ``GroupMetadata`` in one of the ``GroupState``s of Kafka's
transition table, parks JoinGroup and SyncGroup requests in the rebalance
purgatory and members' sessions in the heartbeat purgatory, and persists
generations and committed offsets as records of ``__consumer_offsets``
through a ``GroupStore`` (``BrokerGroupStore`` over a Broker,
``InMemoryGroupStore`` in tests).

Module map: ``group_state`` (states and transition table), ``member_metadata``
and ``group_metadata`` (the data), ``delayed_join`` / ``delayed_sync`` /
``delayed_heartbeat`` (the waits), ``group_coordinator`` (the protocol),
``requests`` and ``results`` (what it is asked and answers), ``wire`` (request
and response bodies per version ↔ those records), ``store`` and
``broker_store`` (persistence), ``config``.
"""

from .broker_store import BrokerGroupStore
from .config import GroupCoordinatorConfig
from .group_coordinator import GroupCoordinator
from .group_metadata import GroupMetadata
from .group_state import VALID_PREVIOUS_STATES, GroupState, IllegalGroupStateTransitionError
from .member_metadata import MemberMetadata
from .offset_and_metadata import OffsetAndMetadata
from .requests import (DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest,
                       JoinGroupRequest, LeaveGroupRequest, LeavingMember, ListGroupsRequest, OffsetCommitPartition,
                       OffsetCommitRequest, OffsetFetchGroup, OffsetFetchRequest, SyncGroupRequest)
from .results import (GroupOverview, GroupSummary, JoinGroupMember, JoinGroupResult, LeaveGroupResult,
                      LeaveMemberResult, MemberSummary, OffsetFetchResult, SyncGroupResult)
from .store import GroupStore, InMemoryGroupStore, LoadedGroups

__all__ = [
    "GroupCoordinator",
    "GroupCoordinatorConfig",
    "GroupMetadata",
    "MemberMetadata",
    "GroupState",
    "VALID_PREVIOUS_STATES",
    "IllegalGroupStateTransitionError",
    "OffsetAndMetadata",
    "GroupStore",
    "InMemoryGroupStore",
    "BrokerGroupStore",
    "LoadedGroups",
    "FindCoordinatorRequest",
    "JoinGroupRequest",
    "SyncGroupRequest",
    "HeartbeatRequest",
    "LeavingMember",
    "LeaveGroupRequest",
    "OffsetCommitPartition",
    "OffsetCommitRequest",
    "OffsetFetchGroup",
    "OffsetFetchRequest",
    "DescribeGroupsRequest",
    "ListGroupsRequest",
    "DeleteGroupsRequest",
    "JoinGroupMember",
    "JoinGroupResult",
    "SyncGroupResult",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "MemberSummary",
    "GroupSummary",
    "GroupOverview",
    "OffsetFetchResult",
]
