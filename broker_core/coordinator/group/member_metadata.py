"""``MemberMetadata``: one member of a classic group, and the requests it has parked.

A member is what JoinGroup registered: its ids, its timeouts, its protocol
type and the protocols it supports in order of preference (name and opaque
metadata, e.g. a consumer's subscription), and the assignment the leader gave
it. While a JoinGroup or SyncGroup of the member waits for the rebalance, its
response callback is held here; ``GroupMetadata`` invokes and clears it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection

from .results import JoinCallback, MemberSummary, SyncCallback

__all__ = ["MemberMetadata"]


@dataclass(eq=False)
class MemberMetadata:
    """A member of a classic group (Kafka's MemberMetadata)."""

    member_id: str
    group_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (protocol name, metadata) in the member's order of preference.
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join_callback: JoinCallback | None = field(default=None, repr=False)
    awaiting_sync_callback: SyncCallback | None = field(default=None, repr=False)
    #: Joined in the current rebalance and has not received a generation yet.
    is_new: bool = False
    #: Set while a heartbeat is being recorded, so the waiting DelayedHeartbeat completes.
    heartbeat_satisfied: bool = False

    @property
    def is_static_member(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync_callback is not None

    @property
    def has_satisfied_heartbeat(self) -> bool:
        """Whether the member's current session deadline is met.

        A member parked in JoinGroup or SyncGroup cannot heartbeat (its client
        waits for the response), so waiting counts as alive; a new member
        cannot heartbeat at all until it knows its generation, so for it only
        the join timeout counts.
        """
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol``; the member must support it."""
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} of group {self.group_id!r} does not support protocol "
                         f"{protocol!r} (it supports {self.protocol_names()})")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.supported_protocols]

    def vote(self, candidates: Collection[str]) -> str:
        """The member's most preferred protocol among ``candidates`` (which it must share)."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} of group {self.group_id!r} supports none of the candidate "
                         f"protocols {sorted(candidates)}")

    def summary(self, protocol: str | None) -> MemberSummary:
        """The member for DescribeGroups; metadata and assignment only when the protocol is known."""
        if protocol is None:
            return MemberSummary(self.member_id, self.group_instance_id, self.client_id, self.client_host, b"", b"")
        return MemberSummary(self.member_id, self.group_instance_id, self.client_id, self.client_host,
                             self.metadata(protocol), self.assignment)
