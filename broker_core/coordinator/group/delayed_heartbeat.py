"""``DelayedHeartbeat``: a member's session deadline.

Each member has one waiting DelayedHeartbeat, due ``session.timeout.ms`` after
its last sign of life (a heartbeat, a join, a sync, an offset commit). A sign
of life completes it early and schedules the next one; if it expires first,
the member has failed and leaves the group, which rebalances. A member id
handed out with MEMBER_ID_REQUIRED gets one too (``is_pending``): unused within
the session timeout, the id is forgotten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...purgatory import DelayedOperation
from .group_metadata import GroupMetadata

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

__all__ = ["DelayedHeartbeat"]


class DelayedHeartbeat(DelayedOperation):
    """Expires a member (or a pending member id) that gave no sign of life within ``timeout_ms``."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, member_id: str, is_pending: bool,
                 timeout_ms: int) -> None:
        super().__init__(timeout_ms, lock=group.lock)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(self.group, self.member_id, self.is_pending,
                                                       self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)

    def __repr__(self) -> str:
        return (f"DelayedHeartbeat(group={self.group.group_id!r}, member={self.member_id!r}, "
                f"pending={self.is_pending}, delay_ms={self.delay_ms})")
