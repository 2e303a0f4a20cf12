"""Typed reads and writes of the cluster metadata: Kafka's ``KafkaZkClient``, over a ``MetadataStore``.

Callers speak of brokers, controllers, topics and partition states; this module
turns that into keys (``zk_data``), compare-and-sets and leases. Every write a
controller makes carries its fence: the ``mod_revision`` of
``/controller_epoch`` as the controller itself wrote it. A controller that has
been replaced no longer matches it, so its writes are refused — Kafka's
``checkControllerAndUpdate`` (a ZooKeeper ``multi`` with a version check on
``/controller_epoch``), here one etcd transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Mapping, Sequence, TypeVar

from format.layout import TopicPartition

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import NotControllerError, TopicAlreadyExistsError
from . import zk_data
from .metadata_store import NO_LEASE, Compare, Delete, MetadataStore, Put
from .partition_state import PartitionState
from .zk_data import BrokerInfo

__all__ = ["Versioned", "ControllerRegistration", "BrokerRegistrationConflictError", "KafkaZkClient"]

T = TypeVar("T")


@dataclass(frozen=True)
class Versioned(Generic[T]):
    """A decoded node with the ``mod_revision`` a compare-and-set of it must name (ZooKeeper's version)."""

    value: T
    mod_revision: int


@dataclass(frozen=True)
class ControllerRegistration:
    """A won controller election: the new epoch and the fence its writes carry."""

    broker_id: int
    epoch: int
    epoch_mod_revision: int


class BrokerRegistrationConflictError(Exception):
    """Another live session holds ``/brokers/ids/N``: two brokers were started with one ``node.id``."""


class KafkaZkClient:
    """The cluster's metadata in Kafka's layout, read and written through ``store``."""

    def __init__(self, store: MetadataStore, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self._clock = clock

    # -- cluster id --

    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id: the one stored, else ``proposed`` (stored now; the first writer wins)."""
        self.store.create(zk_data.CLUSTER_ID_PATH, zk_data.encode_cluster_id(proposed))
        found = self.store.get(zk_data.CLUSTER_ID_PATH)
        assert found is not None, "the cluster id cannot vanish right after it was created"
        return zk_data.decode_cluster_id(found.value)

    # -- brokers --

    def register_broker(self, broker: BrokerInfo, lease: int) -> int:
        """Write ``/brokers/ids/N`` under the broker's session lease; the registration's ``mod_revision``.

        A registration left by this broker's previous session (another lease
        that has not expired yet) is refused, as Kafka refuses a second
        ephemeral node: wait for the old session to time out, or revoke it.
        """
        path = zk_data.broker_path(broker.id)
        data = zk_data.encode_broker_info(broker, self._clock.milliseconds())
        while True:
            existing = self.store.get(path)
            if existing is None:
                revision = self.store.create(path, data, lease)
            elif existing.lease == lease:
                revision = self.store.compare_and_set(path, data, existing.mod_revision, lease)
            else:
                raise BrokerRegistrationConflictError(
                    f"{path} is held by another session (lease {existing.lease:x}): a broker with node.id "
                    f"{broker.id} is already registered")
            if revision is not None:
                return revision

    def get_all_brokers(self) -> dict[int, Versioned[BrokerInfo]]:
        """Registered (live) brokers by id; the revision is the registration's creation, which changes when a
        broker bounces."""
        brokers = {}
        for kv in self.store.get_prefix(zk_data.BROKER_IDS_PATH):
            broker_id = zk_data.broker_id_from_path(kv.key)
            brokers[broker_id] = Versioned(zk_data.decode_broker_info(broker_id, kv.value), kv.create_revision)
        return dict(sorted(brokers.items()))

    # -- controller --

    def get_controller_id(self) -> int | None:
        found = self.store.get(zk_data.CONTROLLER_PATH)
        return zk_data.decode_controller(found.value) if found else None

    def get_controller_epoch(self) -> Versioned[int] | None:
        found = self.store.get(zk_data.CONTROLLER_EPOCH_PATH)
        return Versioned(zk_data.decode_controller_epoch(found.value), found.mod_revision) if found else None

    def register_controller_and_increment_controller_epoch(self, broker_id: int,
                                                           lease: int) -> ControllerRegistration | None:
        """Become the controller if there is none: ``/controller`` (under ``lease``) and ``/controller_epoch``
        (one higher) in one transaction. ``None`` when another broker is the controller."""
        while True:
            if self.store.get(zk_data.CONTROLLER_PATH) is not None:
                return None
            epoch = self.get_controller_epoch()
            next_epoch = epoch.value + 1 if epoch else 1
            revision = self.store.commit(
                [Compare(zk_data.CONTROLLER_PATH, 0), Compare(zk_data.CONTROLLER_EPOCH_PATH,
                                                               epoch.mod_revision if epoch else 0)],
                [Put(zk_data.CONTROLLER_PATH, zk_data.encode_controller(broker_id, self._clock.milliseconds()), lease),
                 Put(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(next_epoch))])
            if revision is not None:
                return ControllerRegistration(broker_id, next_epoch, revision)

    def is_controller_epoch_current(self, registration: ControllerRegistration) -> bool:
        epoch = self.get_controller_epoch()
        return epoch is not None and epoch.mod_revision == registration.epoch_mod_revision

    def delete_controller(self, registration: ControllerRegistration) -> bool:
        """Resign: delete ``/controller`` if it is still this registration's."""
        found = self.store.get(zk_data.CONTROLLER_PATH)
        if found is None or zk_data.decode_controller(found.value) != registration.broker_id \
                or not self.is_controller_epoch_current(registration):
            return False
        return self.store.delete(zk_data.CONTROLLER_PATH, found.mod_revision)

    # -- topics --

    def create_topic_assignment(self, topic: str, assignment: Mapping[int, Sequence[int]],
                                topic_id: str | None = None) -> int:
        revision = self.store.create(zk_data.topic_path(topic), zk_data.encode_topic_assignment(
            {p: tuple(r) for p, r in assignment.items()}, topic_id))
        if revision is None:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        return revision

    def set_topic_assignment(self, topic: str, assignment: Mapping[int, Sequence[int]], mod_revision: int,
                             topic_id: str | None = None) -> int | None:
        return self.store.compare_and_set(
            zk_data.topic_path(topic),
            zk_data.encode_topic_assignment({p: tuple(r) for p, r in assignment.items()}, topic_id), mod_revision)

    def get_topic_id(self, topic: str) -> str | None:
        """The topic's id as its assignment holds it; None for a topic unknown or written without one."""
        found = self.store.get(zk_data.topic_path(topic))
        return zk_data.decode_topic_id(topic, found.value) if found else None

    def get_topic_assignment(self, topic: str) -> Versioned[dict[int, tuple[int, ...]]] | None:
        found = self.store.get(zk_data.topic_path(topic))
        return Versioned(zk_data.decode_topic_assignment(topic, found.value), found.mod_revision) if found else None

    def get_all_topic_assignments(self) -> dict[str, Versioned[dict[int, tuple[int, ...]]]]:
        assignments = {}
        for kv in self.store.get_prefix(zk_data.TOPICS_PATH):
            topic = zk_data.topic_from_path(kv.key)
            if topic is not None:
                assignments[topic] = Versioned(zk_data.decode_topic_assignment(topic, kv.value), kv.mod_revision)
        return assignments

    # -- partition states --

    def get_partition_state(self, tp: TopicPartition) -> Versioned[PartitionState] | None:
        found = self.store.get(zk_data.partition_state_path(tp))
        return Versioned(zk_data.decode_partition_state(tp, found.value), found.mod_revision) if found else None

    def get_all_partition_states(self) -> dict[TopicPartition, Versioned[PartitionState]]:
        states = {}
        for kv in self.store.get_prefix(zk_data.TOPICS_PATH):
            tp = zk_data.partition_from_state_path(kv.key)
            if tp is not None:
                states[tp] = Versioned(zk_data.decode_partition_state(tp, kv.value), kv.mod_revision)
        return dict(sorted(states.items()))

    def update_partition_state(self, tp: TopicPartition, state: PartitionState, mod_revision: int,
                               controller: ControllerRegistration | None = None) -> int | None:
        """Compare-and-set a partition's state (``mod_revision`` 0: create it); fenced by the controller's epoch
        when written by a controller. The new ``mod_revision``, or ``None`` when refused.

        Raises ``NotControllerError`` when the refusal is the controller's fence: it has been replaced.
        """
        compares = [Compare(zk_data.partition_state_path(tp), mod_revision)]
        if controller is not None:
            compares.append(Compare(zk_data.CONTROLLER_EPOCH_PATH, controller.epoch_mod_revision))
        revision = self.store.commit(compares, [Put(zk_data.partition_state_path(tp),
                                                    zk_data.encode_partition_state(state), NO_LEASE)])
        if revision is None and controller is not None and not self.is_controller_epoch_current(controller):
            raise NotControllerError(
                f"broker {controller.broker_id}: controller epoch {controller.epoch} is no longer current; "
                f"the write of {tp}'s state was refused")
        return revision

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> int:
        """Write ``/config/topics/T``: the topic's overrides (Kafka writes them before the assignment)."""
        revision = self.store.commit([], [Put(zk_data.topic_config_path(topic), zk_data.encode_topic_config(config))])
        assert revision is not None, "an unconditional write cannot be refused"
        return revision

    def get_topic_config(self, topic: str) -> dict[str, str]:
        """The overrides of ``/config/topics/T`` (none when it was never written)."""
        found = self.store.get(zk_data.topic_config_path(topic))
        return {} if found is None else zk_data.decode_topic_config(topic, found.value)

    def get_all_topic_configs(self) -> dict[str, dict[str, str]]:
        return {kv.key[len(zk_data.TOPIC_CONFIGS_PATH):]: zk_data.decode_topic_config(
                    kv.key[len(zk_data.TOPIC_CONFIGS_PATH):], kv.value)
                for kv in self.store.get_prefix(zk_data.TOPIC_CONFIGS_PATH)}

    def allocate_producer_id_block(self, broker_id: int, block_size: int) -> tuple[int, int]:
        """Grant ``broker_id`` the next ``block_size`` producer ids, by compare-and-set of
        ``/latest_producer_id_block`` (Kafka's ZkProducerIdManager): (first id, last id)."""
        while True:
            found = self.store.get(zk_data.PRODUCER_ID_BLOCK_PATH)
            start = 0 if found is None else zk_data.decode_producer_id_block(found.value)[1] + 1
            end = start + block_size - 1
            data = zk_data.encode_producer_id_block(broker_id, start, end)
            if found is None:
                written = self.store.create(zk_data.PRODUCER_ID_BLOCK_PATH, data)
            else:
                written = self.store.compare_and_set(zk_data.PRODUCER_ID_BLOCK_PATH, data, found.mod_revision)
            if written is not None:
                return start, end

    def request_controlled_shutdown(self, broker_id: int, lease: int, attempt: int) -> int:
        """Ask the controller to move ``broker_id``'s leaderships away (``/admin/controlled_shutdown/N`` under the
        broker's lease, rewritten by each attempt so the controller sees each); the write's revision."""
        revision = self.store.commit([], [Put(zk_data.controlled_shutdown_path(broker_id), str(attempt).encode(),
                                              lease)])
        assert revision is not None, "an unconditional write cannot be refused"
        return revision

    def get_controlled_shutdown_requests(self) -> list[int]:
        """The brokers asking to shut down."""
        return sorted(int(kv.key[len(zk_data.CONTROLLED_SHUTDOWN_PATH):])
                      for kv in self.store.get_prefix(zk_data.CONTROLLED_SHUTDOWN_PATH)
                      if kv.key[len(zk_data.CONTROLLED_SHUTDOWN_PATH):].isdigit())

    def request_topic_deletion(self, topic: str) -> None:
        """Ask the controller to delete ``topic`` (``/admin/delete_topics/T``); asking twice is no error."""
        self.store.create(zk_data.delete_topic_path(topic), b"")

    def get_topic_deletions(self) -> list[str]:
        return [kv.key[len(zk_data.DELETE_TOPICS_PATH):] for kv in self.store.get_prefix(zk_data.DELETE_TOPICS_PATH)]

    def delete_topic(self, topic: str, partitions: Sequence[int], controller: ControllerRegistration) -> int:
        """Delete a topic's assignment, partition states and deletion request in one controller write; the
        revision of the deletion. Raises ``NotControllerError`` when the controller has been replaced."""
        operations = [Delete(zk_data.topic_path(topic)), Delete(zk_data.delete_topic_path(topic)),
                      Delete(zk_data.topic_config_path(topic))]
        operations += [Delete(zk_data.partition_state_path(TopicPartition(topic, p))) for p in partitions]
        revision = self.store.commit([Compare(zk_data.CONTROLLER_EPOCH_PATH, controller.epoch_mod_revision)],
                                     operations)
        if revision is None:
            raise NotControllerError(f"broker {controller.broker_id}: controller epoch {controller.epoch} is no "
                                     f"longer current; the deletion of topic {topic} was refused")
        return revision
