"""What the coordinator is asked, whatever API version the question came in.

The state machine takes these small frozen records whole; ``wire`` fills them
from the request bodies of each version. Where versions behave differently
the difference is a field here, set by ``wire`` (``require_known_member_id``
for JoinGroup v4+, ``supports_skip_assignment`` for v9+, ...), so the
coordinator never sees a version number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from format.layout import TopicPartition

__all__ = [
    "COORDINATOR_TYPE_GROUP",
    "COORDINATOR_TYPE_TRANSACTION",
    "FindCoordinatorRequest",
    "JoinGroupRequest",
    "SyncGroupRequest",
    "HeartbeatRequest",
    "LeavingMember",
    "LeaveGroupRequest",
    "OffsetCommitPartition",
    "OffsetCommitRequest",
    "TxnOffsetCommitRequest",
    "OffsetFetchGroup",
    "OffsetFetchRequest",
    "DescribeGroupsRequest",
    "ListGroupsRequest",
    "DeleteGroupsRequest",
    "OffsetDeleteRequest",
]


# FindCoordinator's key types: a group id, or a transactional id.
COORDINATOR_TYPE_GROUP = 0
COORDINATOR_TYPE_TRANSACTION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinatorRequest:
    key_type: int
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    reason: str | None = None
    #: The request header's client.id and the peer's address, as DescribeGroups shows them.
    client_id: str = ""
    client_host: str = ""
    #: A member without an id is handed one first (MEMBER_ID_REQUIRED), so that
    #: a retried first join comes back as the same member (v4+, dynamic members).
    require_known_member_id: bool
    #: A static member's restart may be told it leads without reassigning (v9+).
    supports_skip_assignment: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    #: The leader's assignment of each member (empty from followers).
    assignments: Mapping[str, bytes]
    #: Protocol type and name must be present and match the group's (v5+, KIP-559).
    protocol_type_and_name_required: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    """A member that leaves; a static one may be named by its group.instance.id alone (empty member id)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    """One partition's offset as a client commits it; the coordinator stamps the commit time."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    group_id: str
    #: -1 (with no member id) for a commit from outside the group's generations.
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    #: The partitions in request order, as the response lists them.
    offsets: Mapping[TopicPartition, OffsetCommitPartition]
    #: How long these offsets live whatever the group does (v2-v4 only); None: the broker's retention.
    retention_ms: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequest:
    """Offsets committed in the open transaction of ``producer_id``: they count from its COMMIT marker on."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    #: v3+: the consumer's generation and member id, checked against the group's (-1 and "": not checked).
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    #: The partitions in request order, as the response lists them.
    offsets: Mapping[TopicPartition, OffsetCommitPartition]


@dataclass(frozen=True, slots=True)
class OffsetFetchGroup:
    group_id: str
    #: None asks for every committed offset of the group.
    partitions: tuple[TopicPartition, ...] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    groups: tuple[OffsetFetchGroup, ...]
    require_stable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupsRequest:
    group_ids: tuple[str, ...]
    include_authorized_operations: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ListGroupsRequest:
    #: Only groups in these states / of these types (case-insensitive); empty: all.
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequest:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetDeleteRequest:
    group_id: str
    #: In the request's order.
    partitions: tuple[TopicPartition, ...]
