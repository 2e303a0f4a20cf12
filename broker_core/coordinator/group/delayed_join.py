"""``DelayedJoin`` and ``InitialDelayedJoin``: the wait of a rebalance for its members.

A rebalance (PreparingRebalance) parks every JoinGroup until all known members
have joined again, or until the group's rebalance timeout (the longest
``rebalance.timeout.ms`` of its members) passes; then the coordinator ends it
(``on_complete_join``), dropping the members that did not come back.

The first rebalance of an empty group waits instead for
``group.initial.rebalance.delay.ms``, and once more each time a new member
arrived meanwhile, up to the rebalance timeout: consumers of a starting
application join one by one, and waiting a little saves a rebalance per member.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...purgatory import DelayedOperation, DelayedOperationPurgatory
from .group_metadata import GroupMetadata
from .keys import GroupJoinKey

if TYPE_CHECKING:
    from .group_coordinator import GroupCoordinator

__all__ = ["DelayedJoin", "InitialDelayedJoin"]


class DelayedJoin(DelayedOperation):
    """Completes when every member has joined, or when ``rebalance_timeout_ms`` passes."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, rebalance_timeout_ms: int) -> None:
        # The group's lock: completing the join changes the group.
        super().__init__(rebalance_timeout_ms, lock=group.lock)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)

    def on_expiration(self) -> None:
        # Completing already did the work; members that never joined were dropped there.
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(group={self.group.group_id!r}, delay_ms={self.delay_ms})"


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group: wait ``delay_ms``, again while new members keep arriving."""

    def __init__(self, coordinator: GroupCoordinator, purgatory: DelayedOperationPurgatory, group: GroupMetadata,
                 configured_rebalance_delay_ms: int, delay_ms: int, remaining_ms: int) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_rebalance_delay_ms = configured_rebalance_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        # Only time ends the initial delay, not the members having joined.
        return False

    def on_complete(self) -> None:
        with self.group.lock:
            if self.group.new_member_added and self.remaining_ms != 0:
                self.group.new_member_added = False
                delay = min(self.configured_rebalance_delay_ms, self.remaining_ms)
                remaining = max(self.remaining_ms - self.delay_ms, 0)
                self.purgatory.try_complete_else_watch(
                    InitialDelayedJoin(self.coordinator, self.purgatory, self.group,
                                       self.configured_rebalance_delay_ms, delay, remaining),
                    [GroupJoinKey(self.group.group_id)])
            else:
                super().on_complete()
