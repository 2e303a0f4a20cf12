"""What the coordinator answers, before it is shaped into a response body for one API version.

The state machine speaks in these small frozen records; ``wire`` turns them
into Kafka's response dicts. Error codes are Kafka's numeric codes (the
``code`` of the classes in ``broker_core.errors``), 0 meaning none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from format.layout import TopicPartition

from ...errors import NONE  # noqa: F401  (re-exported: the coordinator's results speak of it)
from .offset_and_metadata import OffsetAndMetadata

__all__ = [
    "NONE",
    "UNKNOWN_MEMBER_ID",
    "NO_GENERATION",
    "CLASSIC_GROUP_TYPE",
    "JoinGroupMember",
    "JoinGroupResult",
    "SyncGroupResult",
    "LeaveMemberResult",
    "LeaveGroupResult",
    "MemberSummary",
    "GroupSummary",
    "GroupOverview",
    "OffsetFetchResult",
    "JoinCallback",
    "SyncCallback",
]

#: The member id of a member that has none yet (JoinGroupRequest.UNKNOWN_MEMBER_ID).
UNKNOWN_MEMBER_ID = ""
#: The generation of a response that carries none.
NO_GENERATION = -1
#: The group type ListGroups v5 reports for groups of the classic protocol.
CLASSIC_GROUP_TYPE = "classic"


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """One member as the leader sees it in its JoinGroup response: the metadata for the chosen protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """The answer to one JoinGroup request; only the leader's carries ``members``."""

    member_id: str
    error_code: int = NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False

    @classmethod
    def failed(cls, member_id: str, error_code: int) -> JoinGroupResult:
        return cls(member_id=member_id, error_code=error_code)


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """The answer to one SyncGroup request: the member's assignment (opaque bytes) or an error."""

    error_code: int = NONE
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error_code: int
    members: tuple[LeaveMemberResult, ...] = ()


@dataclass(frozen=True, slots=True)
class MemberSummary:
    """A member in DescribeGroups; metadata and assignment are empty unless the group is Stable."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group in DescribeGroups. ``state`` is "" when the group could not be looked at."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupOverview:
    """A group in ListGroups."""

    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    """A group's committed offsets; None for a requested partition that has none, or whose offset is
    ``unstable``: asked with ``require_stable``, a partition an open transaction has committed an
    offset of is answered UNSTABLE_OFFSET_COMMIT until that transaction ends (KIP-447)."""

    error_code: int
    offsets: dict[TopicPartition, OffsetAndMetadata | None]
    unstable: frozenset[TopicPartition] = frozenset()


JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]
