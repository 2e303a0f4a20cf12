"""Three (or more) ``seglog broker`` processes on loopback joined through a real etcd: start, stop, SIGKILL
and restart each by node id, and ask any live one for the cluster's metadata.

Each broker keeps its port across restarts (clients keep their bootstrap list) and its log dir under
``root/broker-N``.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass

from broker_core.client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey

from .broker_process import BrokerProcess
from .processes import free_port, pinned_to


@dataclass(frozen=True)
class PartitionView:
    """A partition as Metadata answers it."""

    error_code: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


class SeglogCluster:
    """Brokers ``1..size`` over ``etcd_connect`` with the broker configs ``props``, each pinned to ``cpu`` if
    given; ``close`` stops the live ones. Each listens on one listener named ``listener``, which its own
    client reaches with ``security``."""

    def __init__(self, root, etcd_connect: str, size: int = 3, cpu: int | None = None, *,
                 listener: str = "PLAINTEXT", security: ClientSecurity = PLAINTEXT_CLIENT, **props: str) -> None:
        self.root = str(root)
        self.listener = listener
        self.security = security
        self.etcd_connect = etcd_connect
        self.cpu = cpu
        self.props = {"etcd.connect": etcd_connect, **props}
        rng = random.Random()
        self.ports: dict[int, int] = {}
        for node_id in range(1, size + 1):
            self.ports[node_id] = free_port(rng, tuple(self.ports.values()))
        self.brokers: dict[int, BrokerProcess] = {}

    def log_dir(self, node_id: int) -> str:
        return os.path.join(self.root, f"broker-{node_id}")

    def start(self, node_id: int) -> BrokerProcess:
        extra = ["--node-id", str(node_id), "--log-level", os.environ.get("SEGLOG_CLUSTER_LOG_LEVEL", "WARNING")]
        for key, value in self.props.items():
            extra += ["--config", f"{key}={value}"]
        broker = BrokerProcess([self.log_dir(node_id)], *extra, port=self.ports[node_id],
                               preexec_fn=pinned_to(self.cpu), listener=self.listener)
        self.brokers[node_id] = broker
        return broker

    def start_all(self) -> None:
        for node_id in self.ports:
            self.start(node_id)
        self.wait_until(lambda: len(self.live_brokers()) == len(self.ports), "every broker registered")

    def kill(self, node_id: int) -> None:
        self.brokers.pop(node_id).kill()

    def stop(self, node_id: int) -> None:
        self.brokers.pop(node_id).stop()

    def close(self) -> None:
        for node_id in list(self.brokers):
            self.stop(node_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.ports[n]}" for n in sorted(self.ports))

    def client(self, node_id: int | None = None) -> ProtocolClient:
        """A protocol client to ``node_id``, or to the first live broker."""
        node_id = node_id if node_id is not None else min(self.brokers)
        return ProtocolClient(f"127.0.0.1:{self.ports[node_id]}", timeout_s=30, security=self.security)

    def metadata(self, topics: list[str] | None = None, node_id: int | None = None) -> dict:
        with self.client(node_id) as client:
            body = {"topics": None if topics is None else [{"name": t} for t in topics],
                    "allow_auto_topic_creation": False}
            return client.send(ApiKey.METADATA, body)

    def live_brokers(self) -> list[int]:
        try:
            return sorted(b["node_id"] for b in self.metadata([])["brokers"])
        except OSError:
            return []

    def controller_id(self) -> int:
        return self.metadata([])["controller_id"]

    def partition(self, topic: str, partition: int = 0, node_id: int | None = None) -> PartitionView | None:
        for entry in self.metadata([topic], node_id)["topics"]:
            for p in entry["partitions"]:
                if p["partition_index"] == partition:
                    return PartitionView(p["error_code"], p["leader_id"], p["leader_epoch"],
                                         tuple(p["replica_nodes"]), tuple(sorted(p["isr_nodes"])),
                                         tuple(p["offline_replicas"]))
        return None

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     configs: dict[str, str] | None = None) -> dict:
        """CreateTopics; the topic has ``min.insync.replicas=2`` unless ``configs`` says otherwise."""
        configs = {"min.insync.replicas": "2", **(configs or {})}
        with self.client() as client:
            response = client.send(ApiKey.CREATE_TOPICS, {
                "topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication_factor,
                            "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 30_000, "validate_only": False})
        return response["topics"][0]

    def wait_until(self, condition, what: str, timeout_s: float = 60):
        deadline = time.monotonic() + timeout_s
        last_error = None
        while time.monotonic() < deadline:
            try:
                value = condition()
                if value:
                    return value
            except (OSError, ConnectionError) as exc:
                last_error = exc
            time.sleep(0.1)
        raise AssertionError(f"not within {timeout_s} s: {what} (last error: {last_error})")

    def wait_for_isr(self, topic: str, isr: tuple[int, ...], partition: int = 0, timeout_s: float = 60
                     ) -> PartitionView:
        """Wait until ``isr`` is the partition's ISR as its leader itself answers (so the leader has taken in
        its leadership)."""
        def settled() -> PartitionView | None:
            view = self.partition(topic, partition)
            if view is None or view.isr != tuple(sorted(isr)) or view.leader not in isr \
                    or view.leader not in self.brokers:
                return None
            at_leader = self.partition(topic, partition, node_id=view.leader)
            return at_leader if at_leader == view else None

        try:
            return self.wait_until(settled, f"{topic}-{partition} has ISR {sorted(isr)}", timeout_s)
        except AssertionError as exc:
            seen = {n: self.partition(topic, partition, node_id=n) for n in sorted(self.brokers)}
            logs = "\n".join(f"--- broker {n}:\n" + "".join(b.lines[-15:]) for n, b in sorted(self.brokers.items()))
            raise AssertionError(f"{exc}; as each broker sees it: {seen}\n{logs}") from None
