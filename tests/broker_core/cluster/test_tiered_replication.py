"""Tiered storage in a cluster of two ``seglog broker`` processes over etcd, the remote tier a shared local
directory: a follower whose log ends below its leader's local log start offset is answered
OFFSET_MOVED_TO_TIERED_STORAGE and starts at the leader's local log start from the remote tier's state,
as Kafka's followers do (KIP-405); a follower applies local retention to what the leader has copied, and only
to that."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

import fsspec
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from broker_core.broker import Broker
from broker_core.protocol import ApiKey
from format.fs import filesystem_for
from format.layout import TopicPartition
from format.log_dir import read_topic_id
from format.remote_tier import RemoteLogSegmentMetadata, RemoteLogSegmentState, list_segments
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches
from tests.broker_core.cluster.cluster_kit import ClusterKit

pytestmark = pytest.mark.slow

TOPIC = "events"
TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
                "retention.ms": "-1", "min.insync.replicas": "1"}
OFFSET_MOVED_TO_TIERED_STORAGE = 109


@contextmanager
def _cluster(tmp_path, etcd_server, url: str, **props: str):
    kit = ClusterKit(tmp_path / "brokers", etcd_server.connect("/tiered"), size=2, **{
        "default.replication.factor": "2", "remote.log.storage.system.enable": "true",
        "remote.storage.url": url, "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0", **props})
    kit.start_all()
    try:
        yield kit
    finally:
        kit.close()


@pytest.fixture()
def tiered_cluster(tmp_path, etcd_server):
    remote = tmp_path / "remote"
    remote.mkdir()
    with _cluster(tmp_path, etcd_server, remote.as_uri()) as kit:
        yield kit


def _value(n: int) -> bytes:
    return f"event-{n:05d}".encode().ljust(100, b".")


def _produce(kit: ClusterKit, node_id: int, first: int, count: int, acks: int) -> None:
    with kit.client(node_id) as client:
        for n in range(first, first + count):
            response = client.send(ApiKey.PRODUCE, {
                "transactional_id": None, "acks": acks, "timeout_ms": 10_000, "topic_data": [{
                    "name": TOPIC, "partition_data": [{"index": 0, "records": build_batch(
                        [SimpleRecord(value=_value(n))], default_timestamp=int(time.time() * 1000))}]}]})
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0


def _offsets(kit: ClusterKit, node_id: int, timestamp: int, replica_id: int = -1) -> dict:
    with kit.client(node_id) as client:
        response = client.send(ApiKey.LIST_OFFSETS, {"replica_id": replica_id, "isolation_level": 0, "topics": [{
            "name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                           "timestamp": timestamp}]}]}, version=9)
    return response["topics"][0]["partitions"][0]


def _fetch_as_replica(kit: ClusterKit, leader: int, replica_id: int, offset: int) -> dict:
    with kit.client(leader) as client:
        response = client.send(ApiKey.FETCH, {
            "replica_id": replica_id, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}]}, version=12)
    return response["responses"][0]["partitions"][0]


def test_a_follower_behind_the_leaders_local_log_start_starts_there_with_the_remote_tiers_epochs_and_state(
        tiered_cluster):
    kit = tiered_cluster
    assert kit.create_topic(TOPIC, 1, 2, TOPIC_CONFIG)["error_code"] == 0
    leader = kit.wait_for_isr(TOPIC, (1, 2)).leader
    follower = 3 - leader
    # One topic id on both replicas (the cluster's, from etcd): the remote tier's directory is the same for all.
    ids = {read_topic_id(*filesystem_for(f"{kit.log_dir(n)}/{TOPIC}-0")) for n in (1, 2)}
    assert len(ids) == 1 and None not in ids
    _produce(kit, leader, 0, 10, acks=-1)
    kit.stop(follower)
    # An idempotent producer's batches, then plain ones: its state is in the remote tier's snapshots only.
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{kit.ports[leader]}", "enable.idempotence": True,
                         "linger.ms": 0, "batch.size": 1024})
    for n in range(10, 150):
        producer.produce(TOPIC, _value(n), partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0
    _produce(kit, leader, 150, 160, acks=1)
    local_start = kit.wait_until(lambda: (o := _offsets(kit, leader, -4)["offset"]) > 150 and o,
                                 "the leader's older segments tiered and deleted locally")
    # A consumer below the local log start reads the remote tier; a replica is sent to it.
    moved = _fetch_as_replica(kit, leader, follower, 10)
    assert moved["error_code"] == OFFSET_MOVED_TO_TIERED_STORAGE and not moved["records"]
    assert _fetch_as_replica(kit, leader, -1, 10)["error_code"] == 0

    kit.start(follower)
    kit.wait_for_isr(TOPIC, (1, 2), timeout_s=60)
    with Broker(kit.log_dir(leader), read_only=True) as reader:
        leader_producers = reader.describe_producers(TOPIC, 0)
        lg = reader.log_manager.log_or_raise(TopicPartition(TOPIC, 0))
        leader_epochs = lg.leader_epoch_cache.epoch_entries()
        end, leader_local_start = lg.log_end_offset, lg.local_log_start_offset
    with Broker(kit.log_dir(follower), read_only=True) as reader:
        assert [(p.producer_id, p.last_sequence) for p in reader.describe_producers(TOPIC, 0)] == \
            [(p.producer_id, p.last_sequence) for p in leader_producers] != []
        lg = reader.log_manager.log_or_raise(TopicPartition(TOPIC, 0))
        assert lg.log_start_offset == 0  # the offsets below its local log are in the remote tier
        # Started at the leader's local log start offset when it asked, not at 10 with the remote tier's data.
        assert local_start <= lg.local_log_start_offset <= leader_local_start
        assert lg.segments[0].base_offset == lg.local_log_start_offset
        assert lg.leader_epoch_cache.epoch_entries() == leader_epochs
        follower_start, values, offset = lg.local_log_start_offset, [], lg.local_log_start_offset
        while offset < end:
            batches = list(iter_batches(bytes(lg.read(offset, 1 << 20, max_offset=end).records)))
            values += [r.value for b in batches for r in b.records()]
            offset = batches[-1].header.next_offset
    assert values == [_value(n) for n in range(follower_start, end)]


def _local_segments(kit: ClusterKit, node_id: int) -> list[int]:
    """The base offsets of the broker's local segments of the partition, from its directory."""
    names = os.listdir(os.path.join(kit.log_dir(node_id), f"{TOPIC}-0"))
    return sorted(int(n[:-len(".log")]) for n in names if n.endswith(".log"))


def _remote_segments(kit: ClusterKit, url: str) -> list[RemoteLogSegmentMetadata]:
    """The partition's complete remote segments, as the remote log metadata lists them."""
    topic_id = read_topic_id(*filesystem_for(f"{kit.log_dir(1)}/{TOPIC}-0"))
    fs = fsspec.filesystem("file")
    fs.invalidate_cache()
    return [m for m in list_segments(fs, url, TOPIC, topic_id, 0)
            if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]


def _consume_from_zero(kit: ClusterKit, count: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": "from-zero", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([KafkaTopicPartition(TOPIC, 0, 0)])
        seen: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return seen


def test_a_follower_deletes_its_local_copies_of_segments_the_leader_copied_and_keeps_a_bounded_local_tail(
        tmp_path, etcd_server):
    url = (tmp_path / "remote").as_uri()
    (tmp_path / "remote").mkdir()
    with _cluster(tmp_path, etcd_server, url) as kit:
        assert kit.create_topic(TOPIC, 1, 2, TOPIC_CONFIG)["error_code"] == 0
        leader = kit.wait_for_isr(TOPIC, (1, 2)).leader
        follower = 3 - leader
        _produce(kit, leader, 0, 300, acks=-1)

        def trimmed() -> bool:
            local = _local_segments(kit, follower)  # before the remote listing: the remote tier only grows
            remote = _remote_segments(kit, url)
            # never a local segment deleted whose offsets the remote tier does not hold
            assert local[0] == 0 or (remote and remote[0].base_offset == 0 and local[0] <= remote[-1].end_offset + 1)
            return len(remote) >= 8 and len(local) <= 4 and local[0] > 0

        kit.wait_until(trimmed, "the follower's copied segments deleted locally")
        remote = _remote_segments(kit, url)
        assert [m.base_offset for m in remote[1:]] == [m.end_offset + 1 for m in remote[:-1]]
        assert _local_segments(kit, follower)[0] <= remote[-1].end_offset + 1
        assert _consume_from_zero(kit, 300) == [(n, _value(n)) for n in range(300)]

        # The follower leads: it goes on from the remote log metadata, and every record is still read from 0.
        kit.stop(leader)
        kit.wait_for_isr(TOPIC, (follower,))
        _produce(kit, follower, 300, 150, acks=1)
        kit.wait_until(lambda: _remote_segments(kit, url)[-1].end_offset >= 400, "the new leader's copies")
        assert _remote_segments(kit, url)[0].base_offset == 0
        assert _consume_from_zero(kit, 450) == [(n, _value(n)) for n in range(450)]


def test_a_follower_never_deletes_a_segment_the_remote_tier_does_not_hold(tmp_path, etcd_server):
    unreachable = {"remote.storage.options.endpoint_url": "http://127.0.0.1:9", "remote.storage.options.key": "k",
                   "remote.storage.options.secret": "s", "remote.log.manager.task.retry.backoff.max.ms": "500"}
    with _cluster(tmp_path, etcd_server, "s3://unreachable/tier", **unreachable) as kit:
        assert kit.create_topic(TOPIC, 1, 2, TOPIC_CONFIG)["error_code"] == 0
        leader = kit.wait_for_isr(TOPIC, (1, 2)).leader
        follower = 3 - leader
        _produce(kit, leader, 0, 200, acks=1)
        segments = len(_local_segments(kit, leader))
        assert segments >= 10
        # (not the ISR: the leader's fetch path waits on the unreachable tier too, and may drop the follower)
        kit.wait_until(lambda: len(_local_segments(kit, follower)) >= segments, "the follower has every segment",
                       timeout_s=120)
        # both have tried the remote tier and failed, the leader copying, the follower listing, and retention
        # has passed many times since
        for node_id in (leader, follower):
            kit.wait_until(lambda: "unreachable/tier failed" in kit.brokers[node_id].stderr_text,
                           f"broker {node_id} failing on the remote tier")
        time.sleep(2)
        for node_id in (leader, follower):
            local = _local_segments(kit, node_id)
            assert local[0] == 0 and len(local) >= segments, (node_id, local)
