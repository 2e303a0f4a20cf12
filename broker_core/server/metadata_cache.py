"""What a broker knows of the cluster: live brokers, the controller, every partition's replicas and state
(Kafka's ``MetadataCache``).

In cluster mode the ``ReplicaManager`` fills it from etcd each time the
cluster's metadata changes; Metadata, DescribeCluster and the fetchers (which
need the leaders' endpoints) read it. It is replaced whole under a lock, so a
reader sees one consistent snapshot.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from format.layout import TopicPartition

from ..controller.partition_state import NO_LEADER, PartitionState
from ..controller.zk_data import BrokerInfo
from ..network.endpoint import EndPoint

__all__ = ["PartitionMetadata", "ClusterSnapshot", "MetadataCache"]


@dataclass(frozen=True)
class PartitionMetadata:
    """One partition as Metadata answers it: assigned replicas and, once elected, its state."""

    topic_partition: TopicPartition
    replicas: tuple[int, ...]
    state: PartitionState | None
    # The state key's mod_revision: the partition epoch (``zkVersion``) an ISR change compares against.
    partition_epoch: int = -1

    @property
    def leader(self) -> int:
        return NO_LEADER if self.state is None else self.state.leader

    @property
    def leader_epoch(self) -> int:
        return -1 if self.state is None else self.state.leader_epoch

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.isr


@dataclass(frozen=True)
class ClusterSnapshot:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    controller_id: int | None = None
    # topic -> partition -> metadata, every topic of /brokers/topics.
    topics: dict[str, dict[int, PartitionMetadata]] = field(default_factory=dict)


class MetadataCache:
    """The latest ``ClusterSnapshot``; readers take it whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = ClusterSnapshot()

    def update(self, snapshot: ClusterSnapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    @property
    def snapshot(self) -> ClusterSnapshot:
        with self._lock:
            return self._snapshot

    def alive_brokers(self) -> dict[int, BrokerInfo]:
        return self.snapshot.brokers

    def controller_id(self) -> int | None:
        return self.snapshot.controller_id

    def topic_names(self) -> list[str]:
        return sorted(self.snapshot.topics)

    def topic(self, name: str) -> dict[int, PartitionMetadata] | None:
        return self.snapshot.topics.get(name)

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        partitions = self.snapshot.topics.get(tp.topic)
        return None if partitions is None else partitions.get(tp.partition)

    def endpoint(self, broker_id: int, listener_name: str) -> EndPoint | None:
        """``broker_id``'s endpoint on ``listener_name``, or its first one; None when it is not alive."""
        broker = self.snapshot.brokers.get(broker_id)
        if broker is None:
            return None
        return broker.endpoint(listener_name) or (broker.endpoints[0] if broker.endpoints else None)
