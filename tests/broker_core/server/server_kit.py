"""Starting a real ``BrokerServer`` for tests: an ephemeral loopback port over a given log dir."""

from __future__ import annotations

from broker_core.server.broker_server import BrokerServer


def start_broker(log_dir, **props) -> BrokerServer:
    """A started broker on 127.0.0.1 (port chosen by the OS) with small thread pools."""
    settings = {"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                "num.io.threads": 4}
    settings.update(props)
    return BrokerServer(settings).startup()


def committed_offsets(bootstrap: str, group: str, topic: str | None = None) -> dict[int, int]:
    """A group's committed offsets by partition (of ``topic``, or of every topic), as an admin
    client reads them (OffsetFetch)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        offsets = admin.list_group_offsets(group)
    finally:
        admin.close()
    offsets = offsets.get(group, offsets)  # newer kafka-python answers by group
    return {tp.partition: meta.offset for tp, meta in offsets.items() if topic is None or tp.topic == topic}
