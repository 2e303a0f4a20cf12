"""Creating and deleting topics and adding partitions across the cluster: Kafka's ``AdminZkClient``.

Any broker that receives a CreateTopics or CreatePartitions request writes the
new replica assignment to ``/brokers/topics/T`` here; the controller, watching
that path, gives the new partitions their first leader and ISR. The number of
partitions and the replication factor default to ``num.partitions`` and
``default.replication.factor``; an explicit assignment (``replica.assignment``)
replaces both and is checked against the registered brokers.
"""

from __future__ import annotations

import random
from typing import Mapping, Sequence

from ..errors import (InvalidPartitionsError, InvalidReplicaAssignmentError, TopicAlreadyExistsError,
                      UnknownTopicOrPartitionError)
from ..log.topic_store import new_topic_id
from .kafka_zk_client import KafkaZkClient
from .replica_assignment import (BrokerMetadata, assign_new_partitions, assign_replicas_to_brokers,
                                 validate_replica_assignment)

__all__ = ["AdminZkClient"]


class AdminZkClient:
    """Topic creation and partition increases, written through ``zk_client``."""

    def __init__(self, zk_client: KafkaZkClient, num_partitions: int = 1, default_replication_factor: int = 1,
                 rng: random.Random | None = None) -> None:
        self.zk_client = zk_client
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor
        self._rng = rng or random.Random()

    def broker_metadatas(self) -> list[BrokerMetadata]:
        return [BrokerMetadata(broker_id, registration.value.rack)
                for broker_id, registration in self.zk_client.get_all_brokers().items()]

    def create_topic(self, topic: str, num_partitions: int = -1, replication_factor: int = -1,
                     replica_assignment: Mapping[int, Sequence[int]] | None = None,
                     config: Mapping[str, str] | None = None) -> dict[int, tuple[int, ...]]:
        """Place and write a new topic's replicas; the assignment written. ``-1`` means the broker default.
        ``config`` (the topic's overrides, already validated) goes to ``/config/topics/T`` first, as Kafka
        writes it, so every broker creating its replicas finds it.

        Raises TopicAlreadyExistsError, InvalidPartitionsError, InvalidReplicationFactorError or
        InvalidReplicaAssignmentError as Kafka answers CreateTopics.
        """
        brokers = self.broker_metadatas()
        if replica_assignment is not None:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidReplicaAssignmentError(
                    f"Topic {topic}: both a replica assignment and numPartitions or replicationFactor were given; "
                    f"only one can be used")
            assignment = {p: tuple(r) for p, r in replica_assignment.items()}
            validate_replica_assignment(topic, assignment, (b.id for b in brokers))
        else:
            partitions = self.num_partitions if num_partitions == -1 else num_partitions
            factor = self.default_replication_factor if replication_factor == -1 else replication_factor
            assignment = assign_replicas_to_brokers(brokers, partitions, factor, rng=self._rng)
        if self.zk_client.get_topic_assignment(topic) is not None:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        self.zk_client.set_topic_config(topic, dict(config or {}))
        self.zk_client.create_topic_assignment(topic, assignment, new_topic_id())
        return assignment

    def add_partitions(self, topic: str, total_partitions: int,
                       replica_assignment: Mapping[int, Sequence[int]] | None = None) -> dict[int, tuple[int, ...]]:
        """Grow ``topic`` to ``total_partitions``; the assignment of the partitions added.

        ``replica_assignment`` places the new partitions explicitly (numbered
        from the current count). A concurrent change of the topic is retried.
        """
        while True:
            current = self.zk_client.get_topic_assignment(topic)
            if current is None:
                raise UnknownTopicOrPartitionError(f"Topic {topic} does not exist.")
            existing = current.value
            if total_partitions <= len(existing):
                raise InvalidPartitionsError(
                    f"Topic {topic} currently has {len(existing)} partitions, {total_partitions} would not be an "
                    f"increase.")
            brokers = self.broker_metadatas()
            if replica_assignment is not None:
                added = {p: tuple(r) for p, r in replica_assignment.items()}
                validate_replica_assignment(topic, added, (b.id for b in brokers), first_partition=len(existing))
                if len(added) != total_partitions - len(existing):
                    raise InvalidReplicaAssignmentError(
                        f"Topic {topic}: the replica assignment places {len(added)} partitions, but "
                        f"{total_partitions - len(existing)} are being added")
            else:
                added = assign_new_partitions(existing, total_partitions, brokers, self._rng)
            if self.zk_client.set_topic_assignment(topic, {**existing, **added}, current.mod_revision,
                                                   self.zk_client.get_topic_id(topic)) is not None:
                return added

    def delete_topic(self, topic: str) -> None:
        """Ask the controller to delete ``topic``; UnknownTopicOrPartitionError if there is no such topic."""
        if self.zk_client.get_topic_assignment(topic) is None:
            raise UnknownTopicOrPartitionError(f"Topic {topic} does not exist.")
        self.zk_client.request_topic_deletion(topic)
