"""A simulated cluster for controller tests: brokers registered in an in-memory store, sessions kept
alive by hand, time moved by a ``MockTime``.

A "dead" broker is one whose session is no longer renewed: after
``broker.session.timeout.ms`` of simulated time its registration (and the
``/controller`` key, if it held it) vanish, exactly as a SIGKILLed broker's
would in etcd.
"""

from __future__ import annotations

import random

from broker_core.clock import MockTime
from broker_core.config import BrokerConfig
from broker_core.controller.admin_zk_client import AdminZkClient
from broker_core.controller.in_memory_metadata_store import InMemoryMetadataStore
from broker_core.controller.kafka_controller import KafkaController
from broker_core.controller.kafka_zk_client import KafkaZkClient
from broker_core.controller.partition_state import PartitionState, PartitionStateChange
from broker_core.controller.zk_data import BrokerInfo
from broker_core.network.endpoint import EndPoint
from format.layout import TopicPartition
from tests.broker_core.controller.store_kit import START_MS

SESSION_TIMEOUT_MS = 9000
HEARTBEAT_MS = 2000


class InterleavingStore(InMemoryMetadataStore):
    """The in-memory store, where a test can slip another writer's write in just before the next commit (the
    race a compare-and-set exists for)."""

    def __init__(self, clock) -> None:
        super().__init__(clock)
        self._interleaved = None

    def before_next_commit(self, write) -> None:
        self._interleaved = write

    def commit(self, compares, operations):
        write, self._interleaved = self._interleaved, None
        if write is not None:
            write()
        return super().commit(compares, operations)


class FakeCluster:
    """Brokers ``broker_ids`` (with ``racks`` where given) registered under their own leases."""

    def __init__(self, broker_ids, racks: dict[int, str] | None = None, **config) -> None:
        self.clock = MockTime(current_time_ms=START_MS)
        self.store = InterleavingStore(self.clock)
        self.zk = KafkaZkClient(self.store, self.clock)
        self.admin = AdminZkClient(self.zk, rng=random.Random(0))
        self.overrides = config
        self.racks = racks or {}
        self.leases: dict[int, int] = {}
        self.controllers: dict[int, KafkaController] = {}
        for broker_id in broker_ids:
            self.start_broker(broker_id)

    def config(self, broker_id: int) -> BrokerConfig:
        return BrokerConfig(node_id=broker_id, broker_session_timeout_ms=SESSION_TIMEOUT_MS,
                            broker_heartbeat_interval_ms=HEARTBEAT_MS, **self.overrides)

    def start_broker(self, broker_id: int) -> None:
        lease = self.store.grant_lease(SESSION_TIMEOUT_MS)
        endpoint = EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092 + broker_id)
        self.zk.register_broker(BrokerInfo(broker_id, (endpoint,), self.racks.get(broker_id)), lease)
        self.leases[broker_id] = lease

    def start_controller(self, broker_id: int) -> tuple[KafkaController, list[PartitionStateChange]]:
        controller = KafkaController(self.config(broker_id), self.zk, self.leases[broker_id], self.clock)
        self.controllers[broker_id] = controller
        return controller, controller.startup()

    def write_state(self, tp: TopicPartition, state: PartitionState) -> None:
        """Replace ``tp``'s state as its leader does when it changes the ISR (compare-and-set, no controller)."""
        held = self.zk.get_partition_state(tp)
        self.zk.update_partition_state(tp, state, held.mod_revision)

    def kill(self, broker_id: int) -> None:
        """The broker's process is gone: its session is not renewed from now on."""
        self.leases.pop(broker_id)
        self.controllers.pop(broker_id, None)

    def advance(self, ms: int) -> None:
        """Let ``ms`` of simulated time pass, the live brokers renewing their sessions on every beat."""
        while ms > 0:
            step = min(ms, HEARTBEAT_MS)
            self.clock.sleep(step)
            ms -= step
            for lease in self.leases.values():
                assert self.store.keep_alive(lease), f"the session lease {lease:x} of a live broker expired"

    def expire_dead_sessions(self) -> None:
        self.advance(SESSION_TIMEOUT_MS + HEARTBEAT_MS)

    def poll(self) -> list[PartitionStateChange]:
        changes = []
        for controller in self.controllers.values():
            changes += controller.poll()
        return changes

    def active_controller(self) -> KafkaController:
        active = [c for c in self.controllers.values() if c.is_active]
        assert len(active) == 1, f"expected one active controller, got brokers {[c.broker_id for c in active]}"
        return active[0]

    def state(self, topic: str, partition: int) -> PartitionState:
        held = self.zk.get_partition_state(TopicPartition(topic, partition))
        assert held is not None, f"{topic}-{partition} has no state"
        return held.value


class EtcdNode:
    """One broker of a cluster on a real etcd: its own connection, session lease, registration and controller —
    what a ``seglog broker`` process holds."""

    def __init__(self, connect: str, broker_id: int, session_timeout_ms: int = 1000, heartbeat_ms: int = 200,
                 **config) -> None:
        from broker_core.controller.etcd_connect import parse_etcd_connect
        from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
        from broker_core.controller.session_lease import SessionLease

        self.broker_id = broker_id
        self.store = EtcdMetadataStore(parse_etcd_connect(connect), request_timeout_ms=10_000)
        self.zk = KafkaZkClient(self.store)
        self.session = SessionLease(self.store, session_timeout_ms, heartbeat_ms, name=f"broker-{broker_id}")
        endpoint = EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092 + broker_id)
        self.zk.register_broker(BrokerInfo(broker_id, (endpoint,)), self.session.lease)
        self.controller = KafkaController(
            BrokerConfig(node_id=broker_id, broker_session_timeout_ms=session_timeout_ms,
                         broker_heartbeat_interval_ms=heartbeat_ms, **config), self.zk, self.session.lease)

    def gone(self, revoke: bool) -> None:
        """The process is gone: no more renewals (``revoke``: a clean exit ended the lease too)."""
        self.session.close(revoke=revoke)
        self.controller = None
        self.store.close()

    def close(self) -> None:
        if self.controller is not None:
            self.controller.shutdown()
            self.session.close()
            self.store.close()


def poll_until(nodes, probe, timeout_s: float = 15.0) -> list[PartitionStateChange]:
    """Poll the controllers of ``nodes`` that are up until ``probe()`` holds; the changes they made."""
    import time

    changes: list[PartitionStateChange] = []
    deadline = time.monotonic() + timeout_s
    while not probe():
        assert time.monotonic() < deadline, f"not reached within {timeout_s} s"
        for node in nodes:
            if node.controller is not None:
                changes += node.controller.poll(timeout_s=0.05)
    return changes
