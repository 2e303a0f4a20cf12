"""A produce with ``acks=all`` waiting for the in-sync replicas (Kafka's ``DelayedProduce``).

The records are in the leader's log already; the answer waits in the produce
purgatory, watched under each partition, until for every partition the high
watermark — the smallest log end offset of the ISR — has passed the last
record written (``Partition.check_enough_replicas_reach_offset``), or the
request's ``timeout.ms`` ends it with REQUEST_TIMED_OUT. A partition whose ISR
shrank below ``min.insync.replicas`` meanwhile answers
NOT_ENOUGH_REPLICAS_AFTER_APPEND; one whose leadership moved,
NOT_LEADER_OR_FOLLOWER. The replica manager calls ``check_and_complete`` on a
partition's key whenever its high watermark moves or its leadership changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from format.layout import TopicPartition

from ..cluster.partition import Partition
from ..errors import KafkaError, NotLeaderOrFollowerError, RequestTimedOutError
from ..purgatory.delayed_operation import DelayedOperation

__all__ = ["ProducePartitionStatus", "DelayedProduce"]


@dataclass
class ProducePartitionStatus:
    """One partition of the produce: the offset the ISR must reach (the last offset written + 1), and the
    error once known."""

    topic_partition: TopicPartition
    required_offset: int
    acks_pending: bool = True
    error: KafkaError | None = None


class DelayedProduce(DelayedOperation):
    def __init__(self, timeout_ms: int, statuses: list[ProducePartitionStatus],
                 partition_of: Callable[[TopicPartition], Partition | None],
                 response_callback: Callable[[list[ProducePartitionStatus]], None]) -> None:
        super().__init__(max(0, timeout_ms))
        self.statuses = statuses
        self._partition_of = partition_of
        self._response_callback = response_callback

    def try_complete(self) -> bool:
        for status in self.statuses:
            if not status.acks_pending:
                continue
            partition = self._partition_of(status.topic_partition)
            if partition is None:
                status.acks_pending = False
                status.error = NotLeaderOrFollowerError(f"{status.topic_partition} is no longer held here")
                continue
            done, error = partition.check_enough_replicas_reach_offset(status.required_offset)
            if error is not None:
                status.acks_pending, status.error = False, error
            elif done:
                status.acks_pending = False
        if not any(status.acks_pending for status in self.statuses):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        # Forced by the timeout (or by shutdown) while some partitions still wait.
        for status in self.statuses:
            if status.acks_pending:
                status.acks_pending = False
                status.error = RequestTimedOutError(
                    f"{status.topic_partition}: the in-sync replicas did not reach offset "
                    f"{status.required_offset} within the request's timeout")
        self._response_callback(self.statuses)

    def on_expiration(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"DelayedProduce({[(str(s.topic_partition), s.required_offset) for s in self.statuses]})"
