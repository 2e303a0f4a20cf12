"""``seglog broker`` at the edge of its resources, with kafka-python as the client: thousands of
partitions within 256 descriptors, and a log dir whose disk fills up."""

from __future__ import annotations

import os
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaStorageError

from broker_core.client.protocol_client import ProtocolClient
from broker_core.errors import PolicyViolationError
from broker_core.protocol import ApiKey
from server_kit import BrokerProcess, start_broker

pytestmark = pytest.mark.slow

TIMEOUT_S = 60


def admin_client(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=120_000)


def producer(bootstrap: str) -> KafkaProducer:
    # No retries: each send shows the broker's own answer.
    return KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks=1, linger_ms=0,
                         max_in_flight_requests_per_connection=1, request_timeout_ms=30_000, max_block_ms=30_000)


def read_all(bootstrap: str, topic: str, partitions: list[int], count: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of ``count`` records from the beginning of ``partitions``."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=30_000, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        consumer.seek_to_beginning()
        out: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                out.extend((tp.partition, r.offset, r.value) for r in records)
        return sorted(out)
    finally:
        consumer.close()


def test_create_topics_and_create_partitions_over_max_partitions_answer_policy_violation(tmp_path):
    server = start_broker(tmp_path / "logs", **{"max.partitions": 10})
    try:
        with ProtocolClient(server.bootstrap_servers) as client:
            def create(name: str, partitions: int, validate_only: bool) -> dict:
                return client.send(ApiKey.CREATE_TOPICS, {"topics": [
                    {"name": name, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                     "configs": []}], "timeout_ms": 5000, "validate_only": validate_only})["topics"][0]

            def grow(name: str, count: int, validate_only: bool) -> dict:
                return client.send(ApiKey.CREATE_PARTITIONS, {"topics": [
                    {"name": name, "count": count, "assignments": None}], "timeout_ms": 5000,
                    "validate_only": validate_only})["results"][0]

            assert create("t", 8, False)["error_code"] == 0
            for validate_only in (True, False):
                refused = create("u", 3, validate_only)
                assert refused["error_code"] == PolicyViolationError.code
                assert "max.partitions=10" in refused["error_message"]
                assert grow("t", 11, validate_only)["error_code"] == PolicyViolationError.code
            assert create("u", 2, False)["error_code"] == 0
            listed = client.send(ApiKey.METADATA, {"topics": None})["topics"]
            assert sorted((t["name"], len(t["partitions"])) for t in listed) == [("t", 8), ("u", 2)]
    finally:
        server.shutdown(timeout_ms=10_000)


def test_a_broker_creates_produces_to_reads_and_deletes_thousands_of_partitions_within_256_descriptors(
        tmp_path, descriptor_limit):
    partitions = 2000
    broker = BrokerProcess([tmp_path / "logs"], preexec_fn=descriptor_limit(256))
    try:
        admin = admin_client(broker.bootstrap)
        admin.create_topics([NewTopic("wide", partitions, 1)], timeout_ms=120_000)
        sender = producer(broker.bootstrap)
        futures = [sender.send("wide", b"value-%d" % p, partition=p) for p in range(partitions)]
        sender.flush(TIMEOUT_S)
        assert sorted(f.get(TIMEOUT_S).partition for f in futures) == list(range(partitions))
        sender.close()
        some = list(range(0, partitions, 7))
        assert read_all(broker.bootstrap, "wide", some, len(some)) == [(p, 0, b"value-%d" % p) for p in some]
        assert broker.open_descriptors() < 256
        admin.delete_topics(["wide"], timeout_ms=60_000)
        assert "wide" not in admin.list_topics()
        admin.create_topics([NewTopic("after", 3, 1)])
        admin.close()
        assert broker.stop() == 0, broker.stderr_text
        broker = BrokerProcess([tmp_path / "logs"], preexec_fn=descriptor_limit(256))
        admin = admin_client(broker.bootstrap)
        assert admin.list_topics() == ["after"]
        admin.close()
    finally:
        assert broker.stop() == 0, broker.stderr_text
    assert "Too many open files" not in broker.stderr_text
    assert not [n for n in os.listdir(tmp_path / "logs") if n.startswith("wide-")]


def fill(bootstrap: str, topic: str, value_size: int) -> tuple[dict[int, bytes], KafkaStorageError]:
    """Produce numbered values until the broker refuses one; returns what was acknowledged, by
    offset, and the refusal."""
    sender = producer(bootstrap)
    acknowledged: dict[int, bytes] = {}
    try:
        for n in range(100_000):
            value = b"%08d" % n + bytes(value_size - 8)
            try:
                metadata = sender.send(topic, value, partition=0).get(TIMEOUT_S)
            except KafkaStorageError as exc:
                return acknowledged, exc
            acknowledged[metadata.offset] = value
        raise AssertionError(f"{len(acknowledged)} records fitted on a disk meant to fill up")
    finally:
        sender.close()


def test_a_full_disk_answers_kafka_storage_error_and_the_broker_keeps_serving_reads_and_other_log_dirs(
        tmp_path, small_filesystem):
    full_dir = os.path.join(small_filesystem.mount("3m"), "logs")
    other_dir = tmp_path / "other"
    segments = ("--config", "log.segment.bytes=524288")
    broker = BrokerProcess([full_dir, other_dir], *segments)
    try:
        admin = admin_client(broker.bootstrap)
        admin.create_topics([NewTopic("filling", 1, 1)])  # the dir with the fewest partitions: the small one
        admin.create_topics([NewTopic("elsewhere", 1, 1)])
        admin.close()
        assert os.path.isdir(os.path.join(full_dir, "filling-0")) and os.path.isdir(other_dir / "elsewhere-0")

        acknowledged, refusal = fill(broker.bootstrap, "filling", 10_000)
        assert refusal.errno == 56 and len(acknowledged) > 100
        sender = producer(broker.bootstrap)
        with pytest.raises(KafkaStorageError):  # the whole dir is offline, not this one request
            sender.send("filling", b"small", partition=0).get(TIMEOUT_S)
        elsewhere = sender.send("elsewhere", b"still accepted", partition=0).get(TIMEOUT_S)
        sender.close()
        assert elsewhere.offset == 0

        read = read_all(broker.bootstrap, "filling", [0], len(acknowledged))
        assert read == [(0, offset, value) for offset, value in sorted(acknowledged.items())]
        assert read_all(broker.bootstrap, "elsewhere", [0], 1) == [(0, 0, b"still accepted")]
        assert broker.proc.poll() is None
        assert broker.stderr_text.count(f"log dir {full_dir} is offline") == 1
        assert "No space left on device" in broker.stderr_text
        assert broker.stop() == 0, broker.stderr_text

        # Restarted while the disk is still full: it starts and serves what it holds.
        broker = BrokerProcess([full_dir, other_dir], *segments)
        assert read_all(broker.bootstrap, "filling", [0], len(acknowledged)) == read
        assert broker.stop() == 0, broker.stderr_text

        small_filesystem.resize(os.path.dirname(full_dir), "64m")
        broker = BrokerProcess([full_dir, other_dir], *segments)
        sender = producer(broker.bootstrap)
        after = sender.send("filling", b"after the disk has room", partition=0).get(TIMEOUT_S)
        sender.close()
        assert after.offset == max(acknowledged) + 1
        assert read_all(broker.bootstrap, "filling", [0], len(acknowledged) + 1) == read + [
            (0, after.offset, b"after the disk has room")]
    finally:
        assert broker.stop() == 0, broker.stderr_text
    assert "Bus error" not in broker.stderr_text
