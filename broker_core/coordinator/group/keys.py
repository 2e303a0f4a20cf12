"""The keys delayed group operations are watched under in the purgatories."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupJoinKey", "GroupSyncKey", "MemberKey"]


@dataclass(frozen=True, slots=True)
class GroupJoinKey:
    """The group's pending rebalance (DelayedJoin / InitialDelayedJoin)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class GroupSyncKey:
    """The group's wait for every member's SyncGroup (DelayedSync)."""

    group_id: str


@dataclass(frozen=True, slots=True)
class MemberKey:
    """One member's session (DelayedHeartbeat)."""

    group_id: str
    member_id: str
