"""The coordinators following the leadership of their topics' partitions (Kafka's ``onLeadershipChange`` of
the replica manager, calling each coordinator's ``onElection`` and ``onResignation``).

A broker elected leader of a partition of ``__consumer_offsets`` loads that partition's groups into its
group coordinator; one elected for ``__transaction_state`` loads the partition's transactional ids (and
completes the transactions it finds preparing). Losing the leadership unloads them. Loading reads the
local replica and may take a while, so the changes run one at a time, in the order they happened, on one
thread of their own, never on the replica manager's.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from format.layout import TopicPartition

from ..coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from ..offsets_topic import OFFSETS_TOPIC

if TYPE_CHECKING:
    from ..coordinator.group import GroupCoordinator
    from ..coordinator.transaction import TransactionCoordinator

__all__ = ["CoordinatorElections"]

log = logging.getLogger(__name__)


class CoordinatorElections:
    def __init__(self, broker_id: int, group_coordinator: GroupCoordinator,
                 transaction_coordinator: TransactionCoordinator) -> None:
        self.broker_id = broker_id
        self._coordinators = {OFFSETS_TOPIC: group_coordinator, TRANSACTION_STATE_TOPIC: transaction_coordinator}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"coordinator-elections-{broker_id}")

    def on_leadership_change(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        """This broker became leader of ``tp`` at ``leader_epoch``, or (None) stopped leading it."""
        coordinator = self._coordinators.get(tp.topic)
        if coordinator is None:
            return
        try:
            self._executor.submit(self._apply, coordinator, tp, leader_epoch)
        except RuntimeError:
            pass  # shutting down: the coordinators stop with the broker

    def _apply(self, coordinator, tp: TopicPartition, leader_epoch: int | None) -> None:
        try:
            if leader_epoch is None:
                coordinator.on_resignation(tp.partition)
            else:
                coordinator.on_election(tp.partition, leader_epoch)
        except Exception:  # noqa: BLE001 - one partition's failure must not stop the others'
            log.exception("broker %d: %s the coordinator of %s failed", self.broker_id,
                          "unloading" if leader_epoch is None else "loading", tp)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
