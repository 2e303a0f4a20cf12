"""``DelayedSync``: the wait of a new generation for every member's SyncGroup.

After a rebalance each member must fetch its assignment with SyncGroup within
the rebalance timeout. A member that does not is taken out of the group and
the group rebalances without it (as Kafka does since 3.1): otherwise a member
that crashed between JoinGroup and SyncGroup would hold its partitions,
unassigned to anyone alive, until its session ran out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...purgatory import DelayedOperation
from .group_metadata import GroupMetadata

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

__all__ = ["DelayedSync"]


class DelayedSync(DelayedOperation):
    """Completes when every member of ``generation_id`` has synced; on timeout removes the rest."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, generation_id: int,
                 rebalance_timeout_ms: int) -> None:
        super().__init__(rebalance_timeout_ms, lock=group.lock)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)

    def __repr__(self) -> str:
        return (f"DelayedSync(group={self.group.group_id!r}, generation={self.generation_id}, "
                f"delay_ms={self.delay_ms})")
