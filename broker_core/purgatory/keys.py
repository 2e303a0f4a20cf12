"""Watch keys: what a delayed operation waits on.

Any hashable value works as a key; these are Kafka's common ones, frozen so
that they hash by value.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TopicPartitionOperationKey"]


@dataclass(frozen=True, slots=True)
class TopicPartitionOperationKey:
    """Operations waiting on one partition (delayed fetch and produce)."""

    topic: str
    partition: int

    def key_label(self) -> str:
        return f"{self.topic}-{self.partition}"
