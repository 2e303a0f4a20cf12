"""Leader epochs over the Kafka protocol: OffsetForLeaderEpoch (API 23) answered from the epoch cache, the
partition's epoch in Metadata, Fetch and ListOffsets with Kafka's fencing errors, and a real consumer
that validates its position (KIP-320) after the partition moved to a new leader epoch."""

from __future__ import annotations

import threading
import time

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.log.log import Log
from broker_core.protocol import ApiKey
from format.layout import TopicPartition

from server_kit import create_topic, produce
from test_server_kafka_apis import batch, fetch, list_offset

FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 76
UNKNOWN_TOPIC_OR_PARTITION = 3


def lead_in_epoch(broker_server, topic: str, epoch: int, truncate_to: int | None = None) -> Log:
    """What a failover leaves on the partition's leader: its log cut back to what the new leader had
    (``truncate_to``) and a new leader epoch beginning at its end."""
    lg = broker_server.broker.log_manager.get_log(TopicPartition(topic, 0))
    if truncate_to is not None:
        lg.truncate_to(truncate_to)
    lg.maybe_assign_epoch_start_offset(epoch, lg.log_end_offset)
    return lg


def offsets_for_leader_epoch(client, partitions: list[tuple[str, int, int, int]], version: int | None = None
                             ) -> dict:
    """``partitions``: (topic, partition, current leader epoch, epoch asked); {(topic, p): answer}."""
    topics: dict[str, list] = {}
    for topic, p, current, epoch in partitions:
        topics.setdefault(topic, []).append({"partition": p, "current_leader_epoch": current, "leader_epoch": epoch})
    response = client.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, {
        "replica_id": -1, "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()]}, version=version)
    return {(t["topic"], p["partition"]): p for t in response["topics"] for p in t["partitions"]}


def answer(found: dict) -> tuple[int, int, int]:
    return found["error_code"], found["leader_epoch"], found["end_offset"]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_answers_where_each_epoch_ended(client, broker_server, version):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a", b"b", b"c"))              # epoch 0: offsets 0..2
    lead_in_epoch(broker_server, "t", 2)
    produce(client, "t", 0, batch(b"d", b"e"))                    # epoch 2: offsets 3..4
    for epoch, expected in ((0, (0, 0, 3)), (1, (0, 0, 3)), (2, (0, 2, 5)), (3, (0, -1, -1))):
        assert answer(offsets_for_leader_epoch(client, [("t", 0, 2, epoch)], version)[("t", 0)]) == expected


def test_offset_for_leader_epoch_fences_an_older_or_newer_current_leader_epoch(client, broker_server):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a"))
    lead_in_epoch(broker_server, "t", 2)
    assert answer(offsets_for_leader_epoch(client, [("t", 0, 1, 0)])[("t", 0)]) == (FENCED_LEADER_EPOCH, -1, -1)
    assert answer(offsets_for_leader_epoch(client, [("t", 0, 3, 0)])[("t", 0)]) == (UNKNOWN_LEADER_EPOCH, -1, -1)
    assert answer(offsets_for_leader_epoch(client, [("t", 5, -1, 0)])[("t", 5)])[0] == UNKNOWN_TOPIC_OR_PARTITION
    assert answer(offsets_for_leader_epoch(client, [("gone", 0, -1, 0)])[("gone", 0)])[0] == UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_names_the_partitions_leader_epoch(client, broker_server):
    create_topic(client, "t", 2)
    assert [p["leader_epoch"] for p in client.send(ApiKey.METADATA, {"topics": [{"name": "t"}]})["topics"][0][
        "partitions"]] == [0, 0]
    lead_in_epoch(broker_server, "t", 5)
    partitions = client.send(ApiKey.METADATA, {"topics": [{"name": "t"}]})["topics"][0]["partitions"]
    assert sorted((p["partition_index"], p["leader_epoch"]) for p in partitions) == [(0, 5), (1, 0)]


def test_a_fetch_with_an_older_leader_epoch_is_fenced_and_told_the_current_leader(client, broker_server):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a"))
    lead_in_epoch(broker_server, "t", 3)
    response = client.send(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": 1, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []}, version=12)
    fenced = response["responses"][0]["partitions"][0]
    assert (fenced["error_code"], fenced["records"]) == (FENCED_LEADER_EPOCH, b"")
    assert (fenced["current_leader"]["leader_id"], fenced["current_leader"]["leader_epoch"]) == (
        broker_server.config.node_id, 3)
    assert fetch(client, [("t", 0, 0, 1 << 20)])[("t", 0)]["error_code"] == 0  # naming no epoch reads


def test_list_offsets_answers_the_epoch_of_the_offset_it_found(client, broker_server):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a", b"b", timestamp=1000))
    lead_in_epoch(broker_server, "t", 4)
    produce(client, "t", 0, batch(b"c", timestamp=2000))
    assert list_offset(client, "t", 0, -2)["leader_epoch"] == 0
    assert list_offset(client, "t", 0, 1001)["leader_epoch"] == 0
    assert list_offset(client, "t", 0, 2000)["leader_epoch"] == 4
    assert (list_offset(client, "t", 0, -1)["offset"], list_offset(client, "t", 0, -1)["leader_epoch"]) == (3, 4)


def test_a_consumer_validates_its_position_after_a_leader_epoch_change_and_resumes_where_its_epoch_ended(
        bootstrap, broker_server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    with ProtocolClient(bootstrap) as admin:
        create_topic(admin, "t")
        for n in range(6):
            produce(admin, "t", 0, batch(b"old-%d" % n))
    tp = KafkaTopicPartition("t", 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             metadata_max_age_ms=500, fetch_max_wait_ms=100, request_timeout_ms=10_000)
    try:
        consumer.assign([tp])
        seen: list[tuple[int, bytes, int]] = []
        deadline = time.monotonic() + 30
        while len(seen) < 6 and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=200).get(tp, []):
                seen.append((record.offset, record.value, record.leader_epoch))
        assert seen == [(n, b"old-%d" % n, 0) for n in range(6)]
        # A new leader that had only the first four records takes over in epoch 1 and writes its own (paused
        # meanwhile: on one broker the cut and the new epoch are two steps a fetch could fall between).
        consumer.pause(tp)
        lead_in_epoch(broker_server, "t", 1, truncate_to=4)
        with ProtocolClient(bootstrap) as admin:
            for value in (b"new-4", b"new-5", b"new-6"):
                produce(admin, "t", 0, batch(value))
        consumer.resume(tp)
        after: list[tuple[int, bytes, int]] = []
        deadline = time.monotonic() + 30
        while len(after) < 3 and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=200).get(tp, []):
                after.append((record.offset, record.value, record.leader_epoch))
        # OffsetForLeaderEpoch told it epoch 0 ended at 4: it goes back there, not to the beginning,
        # and not past the new leader's records at 4 and 5.
        assert after == [(4, b"new-4", 1), (5, b"new-5", 1), (6, b"new-6", 1)]
    finally:
        consumer.close()


def test_a_librdkafka_consumer_validates_its_position_after_a_leader_epoch_change(bootstrap, broker_server):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    with ProtocolClient(bootstrap) as admin:
        create_topic(admin, "t")
        for n in range(6):
            produce(admin, "t", 0, batch(b"old-%d" % n))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "validating", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([KafkaTopicPartition("t", 0, 0)])

        def consume(count: int) -> list[tuple[int, bytes, int | None]]:
            got = []
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    got.append((message.offset(), message.value(), message.leader_epoch()))
            return got

        assert consume(6) == [(n, b"old-%d" % n, 0) for n in range(6)]
        consumer.pause([KafkaTopicPartition("t", 0)])
        lead_in_epoch(broker_server, "t", 1, truncate_to=4)
        with ProtocolClient(bootstrap) as admin:
            for value in (b"new-4", b"new-5", b"new-6"):
                produce(admin, "t", 0, batch(value))
        consumer.resume([KafkaTopicPartition("t", 0)])
        assert consume(3) == [(4, b"new-4", 1), (5, b"new-5", 1), (6, b"new-6", 1)]
    finally:
        consumer.close()


def test_a_fetch_waiting_in_the_purgatory_is_fenced_when_the_leader_epoch_changes(client, bootstrap, broker_server):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a"))
    answers = []

    def long_poll():
        with ProtocolClient(bootstrap) as other:
            answers.append(other.send(ApiKey.FETCH, {
                "replica_id": -1, "max_wait_ms": 10_000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 0,
                                                          "fetch_offset": 1, "partition_max_bytes": 1 << 20}]}],
                "forgotten_topics_data": []}, version=12))

    waiter = threading.Thread(target=long_poll)
    started = time.monotonic()
    waiter.start()
    time.sleep(0.5)  # parked: nothing past offset 1 yet
    lead_in_epoch(broker_server, "t", 1, truncate_to=0)
    produce(client, "t", 0, batch(b"b"))  # wakes the parked fetch
    waiter.join(15)
    fenced = answers[0]["responses"][0]["partitions"][0]
    assert (fenced["error_code"], fenced["current_leader"]["leader_epoch"]) == (FENCED_LEADER_EPOCH, 1)
    assert time.monotonic() - started < 5


def fetch_v12(client, offset: int, last_fetched_epoch: int, current_leader_epoch: int = -1) -> dict:
    response = client.send(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
             "last_fetched_epoch": last_fetched_epoch, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []}, version=12)
    return response["responses"][0]["partitions"][0]


def test_a_fetch_whose_last_fetched_epoch_ended_before_its_offset_gets_the_diverging_epoch_at_once(
        client, broker_server):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a", b"b", b"c"))              # epoch 0: offsets 0..2
    lead_in_epoch(broker_server, "t", 2)
    produce(client, "t", 0, batch(b"d", b"e"))                    # epoch 2: offsets 3..4
    started = time.monotonic()
    diverged = fetch_v12(client, 4, last_fetched_epoch=0)         # its epoch 0 went on past offset 3
    assert time.monotonic() - started < 2  # answered at once, not after max_wait_ms
    assert (diverged["error_code"], diverged["records"]) == (0, b"")
    assert (diverged["diverging_epoch"]["epoch"], diverged["diverging_epoch"]["end_offset"]) == (0, 3)
    skipped = fetch_v12(client, 5, last_fetched_epoch=1)          # an epoch this log never had
    assert (skipped["diverging_epoch"]["epoch"], skipped["diverging_epoch"]["end_offset"]) == (0, 3)
    in_step = fetch_v12(client, 3, last_fetched_epoch=0)
    assert in_step["diverging_epoch"]["epoch"] == -1 and in_step["records"]
