"""Starting a real broker for tests on an ephemeral loopback port: a ``BrokerServer`` in this
process, or ``seglog broker`` in its own (``BrokerProcess``); talking to it with the protocol
package's client (``create_topic``, ``produce``, ``fetch``) or on a raw socket (``read_frame``)."""

from __future__ import annotations

import socket
import struct

from broker_core.client.protocol_client import ProtocolClient
from broker_core.errors import NONE
from broker_core.protocol import ApiKey
from broker_core.server.broker_server import BrokerServer
from testbed.broker_process import BrokerProcess  # noqa: F401 - the tests' broker in its own process

_SIZE = struct.Struct(">i")


def start_broker(log_dir, **props) -> BrokerServer:
    """A started broker on 127.0.0.1 (port chosen by the OS) with small thread pools."""
    settings = {"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                "num.io.threads": 4}
    settings.update(props)
    return BrokerServer(settings).startup()


def create_topic(client: ProtocolClient, name: str, partitions: int = 1, configs: dict | None = None, *,
                 expect_error: int = NONE) -> dict:
    """CreateTopics for one topic; checks its error code (``expect_error``) and returns its result."""
    response = client.send(ApiKey.CREATE_TOPICS, {"topics": [{
        "name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}], "timeout_ms": 5000})
    (result,) = response["topics"]
    assert result["error_code"] == expect_error, result
    return result


def produce(client: ProtocolClient, topic: str, partition: int, records: bytes, acks: int = -1) -> dict:
    """Produce ``records`` (a RecordBatch) to one partition; its partition response ({} with acks=0)."""
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}
    if acks == 0:
        client.send_no_response(ApiKey.PRODUCE, body)
        return {}
    return client.send(ApiKey.PRODUCE, body)["responses"][0]["partition_responses"][0]


def fetch(client: ProtocolClient, partitions: list[tuple[str, int, int, int]], *, max_wait_ms: int = 0,
          min_bytes: int = 0, max_bytes: int = 50 * 1024 * 1024, isolation_level: int = 0) -> dict:
    """``partitions``: (topic, partition, fetch offset, partition max bytes); returns {(topic, p): data}."""
    topics: list[dict] = []
    for topic, p, offset, limit in partitions:
        if not topics or topics[-1]["topic"] != topic:
            topics.append({"topic": topic, "partitions": []})
        topics[-1]["partitions"].append({"partition": p, "fetch_offset": offset, "partition_max_bytes": limit})
    response = client.send(ApiKey.FETCH, {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes,
                                          "max_bytes": max_bytes, "isolation_level": isolation_level,
                                          "topics": topics, "forgotten_topics_data": []})
    return {(t["topic"], p["partition_index"]): p for t in response["responses"] for p in t["partitions"]}


def read_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame off a raw socket (a response, or an echo of the socket server)."""
    return read_exactly(sock, _SIZE.unpack(read_exactly(sock, 4))[0])


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
