"""Fetch sessions (KIP-227) through the socket server with real clients.

kafka-python and the Java consumer open a session with a full fetch and go on with incremental ones;
librdkafka (confluent-kafka 2.16) does not implement KIP-227: every fetch it sends is sessionless
(session id 0, epoch -1), and it is served beside the sessions of other clients. What each client did is
read on the broker's side, from the session cache's counters (``FetchSessionCache.stats``).
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey
from broker_core.server.fetch_session import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
from jvm.apache_kafka import run_tool

from tests.broker_core.server.server_kit import create_topic, start_broker

pytestmark = pytest.mark.slow

TIMEOUT_S = 30
PARTITIONS = 6


@pytest.fixture()
def server_with(tmp_path):
    """``server_with(**settings)``: a started broker with those settings, shut down after the test."""
    started = []

    def start(**props):
        server = start_broker(tmp_path / f"logs-{len(started)}", **props)
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown(timeout_ms=10_000)


def produce_values(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Each value to partition ``i % PARTITIONS``, one batch per send (linger 0), so reads take many fetches."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, request_timeout_ms=10_000)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % PARTITIONS)
            producer.flush()
    finally:
        producer.close()


def values(prefix: str, n: int) -> list[bytes]:
    return [b"%s-%04d" % (prefix.encode(), i) for i in range(n)]


def kafka_python_consumer(bootstrap: str, topic: str) -> KafkaConsumer:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=10_000, fetch_max_wait_ms=50, max_partition_fetch_bytes=200)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    return consumer


def poll_until(consumer: KafkaConsumer, got: list[bytes], count: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=100).values():
            got.extend(r.value for r in records)


def new_topic(bootstrap: str, name: str) -> None:
    with ProtocolClient(bootstrap) as client:
        create_topic(client, name, PARTITIONS)


def test_kafka_python_consumes_every_record_through_incremental_fetches(server_with):
    server = server_with()
    bootstrap = server.bootstrap_servers
    new_topic(bootstrap, "events")
    first, then = values("first", 60), values("then", 30)
    produce_values(bootstrap, "events", first)
    consumer = kafka_python_consumer(bootstrap, "events")
    try:
        got: list[bytes] = []
        poll_until(consumer, got, len(first))
        produce_values(bootstrap, "events", then)       # tail reads, in the same session
        poll_until(consumer, got, len(first) + len(then))
    finally:
        consumer.close()
    assert sorted(got) == sorted(first + then)
    stats = server.apis.fetch_manager.cache.stats()
    # One session for the whole read, tail included: every fetch after the first was incremental.
    assert stats.sessions_created == 1
    assert stats.incremental_fetches > 1


def test_librdkafka_fetches_without_a_session_beside_a_kafka_python_session(server_with):
    server = server_with()
    bootstrap = server.bootstrap_servers
    new_topic(bootstrap, "events")
    sent = values("v", 60)
    produce_values(bootstrap, "events", sent)
    confluent = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": "sessionless",
                                   "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                   "fetch.wait.max.ms": 50, "max.partition.fetch.bytes": 200})
    confluent.assign([ConfluentTopicPartition("events", p, 0) for p in range(PARTITIONS)])
    try:
        from_librdkafka: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(from_librdkafka) < len(sent) and time.monotonic() < deadline:
            message = confluent.poll(0.1)
            if message is not None and message.error() is None:
                from_librdkafka.append(message.value())
        alone = server.apis.fetch_manager.cache.stats()
        # Now the same with a kafka-python session open on the same broker.
        python = kafka_python_consumer(bootstrap, "events")
        try:
            from_python: list[bytes] = []
            poll_until(python, from_python, len(sent))
            more = values("more", 12)
            produce_values(bootstrap, "events", more)
            deadline = time.monotonic() + TIMEOUT_S
            while len(from_librdkafka) < len(sent) + len(more) and time.monotonic() < deadline:
                message = confluent.poll(0.1)
                if message is not None and message.error() is None:
                    from_librdkafka.append(message.value())
            poll_until(python, from_python, len(sent) + len(more))
        finally:
            python.close()
    finally:
        confluent.close()
    assert (alone.sessions_created, alone.incremental_fetches) == (0, 0)
    assert sorted(from_librdkafka) == sorted(sent + more)
    assert sorted(from_python) == sorted(sent + more)
    stats = server.apis.fetch_manager.cache.stats()
    assert stats.sessions_created >= 1 and stats.incremental_fetches > 0


def test_two_consumers_evicting_each_other_from_one_slot_both_read_every_record(server_with):
    server = server_with(**{"max.incremental.fetch.session.cache.slots": 1,
                            "min.incremental.fetch.session.eviction.ms": 0})
    bootstrap = server.bootstrap_servers
    new_topic(bootstrap, "events")
    sent = values("v", 60)
    produce_values(bootstrap, "events", sent)
    results: dict[str, list[bytes]] = {"one": [], "two": []}

    def consume(name: str) -> None:
        consumer = kafka_python_consumer(bootstrap, "events")
        try:
            poll_until(consumer, results[name], len(sent))
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(name,)) for name in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_S + 10)
    assert sorted(results["one"]) == sorted(sent)
    assert sorted(results["two"]) == sorted(sent)
    stats = server.apis.fetch_manager.cache.stats()
    assert stats.incremental_fetch_session_evictions > 0
    assert stats.num_incremental_fetch_sessions <= 1


def test_the_java_console_consumer_reads_every_record_through_incremental_fetches(server_with):
    server = server_with()
    bootstrap = server.bootstrap_servers
    new_topic(bootstrap, "events")
    sent = values("v", 60)
    produce_values(bootstrap, "events", sent)
    done = run_tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--topic", "events",
                    "--from-beginning", "--max-messages", str(len(sent)), "--timeout-ms", "20000",
                    "--consumer-property", "max.partition.fetch.bytes=200",
                    "--consumer-property", "fetch.max.wait.ms=50")
    assert done.returncode == 0, done.stderr
    assert sorted(line.encode() for line in done.stdout.splitlines() if line.startswith("v-")) == sorted(sent)
    stats = server.apis.fetch_manager.cache.stats()
    assert stats.sessions_created == 1
    assert stats.incremental_fetches > 1
    # Closing the consumer closed its session (a fetch with epoch -1).
    assert stats.num_incremental_fetch_sessions == 0


def _fetch(client: ProtocolClient, session_id: int, epoch: int, partitions: list[tuple[int, int]], *,
           max_wait_ms: int = 0, min_bytes: int = 0) -> dict:
    return client.send(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": "events", "partitions": [{"partition": p, "fetch_offset": offset,
                                                       "partition_max_bytes": 1 << 20} for p, offset in partitions]}]
        if partitions else [],
        "forgotten_topics_data": [], "rack_id": ""})


def test_an_incremental_fetch_with_a_repeated_or_stale_epoch_is_invalid_fetch_session_epoch(server_with):
    server = server_with()
    bootstrap = server.bootstrap_servers
    new_topic(bootstrap, "events")
    produce_values(bootstrap, "events", values("v", 12))
    with ProtocolClient(bootstrap) as client:
        full = _fetch(client, 0, 0, [(p, 0) for p in range(PARTITIONS)])
        session_id = full["session_id"]
        assert session_id != 0 and full["error_code"] == 0
        assert sum(len(t["partitions"]) for t in full["responses"]) == PARTITIONS
        # Every partition was read to its end: the next fetch moves the offsets, and nothing changed since.
        moved = [(p["partition_index"], p["high_watermark"]) for t in full["responses"] for p in t["partitions"]]
        first = _fetch(client, session_id, 1, moved)
        assert (first["error_code"], first["session_id"], first["responses"]) == (0, session_id, [])
        repeated = _fetch(client, session_id, 1, [])
        assert (repeated["error_code"], repeated["responses"]) == (INVALID_FETCH_SESSION_EPOCH, [])
        second = _fetch(client, session_id, 2, [])
        assert (second["error_code"], second["responses"]) == (0, [])
        stale = _fetch(client, session_id, 1, [])
        assert stale["error_code"] == INVALID_FETCH_SESSION_EPOCH
        unknown = _fetch(client, session_id + 1, 1, [])
        assert unknown["error_code"] == FETCH_SESSION_ID_NOT_FOUND
        # The session survived the errors: new records on one partition come back, alone.
        produce_values(bootstrap, "events", [b"late"])
        third = _fetch(client, session_id, 3, [])
        assert [(t["topic"], [p["partition_index"] for p in t["partitions"]]) for t in third["responses"]] == [
            ("events", [0])]


def test_an_incremental_fetch_parked_in_the_purgatory_answers_in_its_session_when_records_arrive(server_with):
    server = server_with()
    bootstrap = server.bootstrap_servers
    new_topic(bootstrap, "events")
    with ProtocolClient(bootstrap) as client:
        session_id = _fetch(client, 0, 0, [(p, 0) for p in range(PARTITIONS)])["session_id"]
        late = threading.Timer(0.3, produce_values, (bootstrap, "events", [b"late"]))
        late.start()
        started = time.monotonic()
        parked = _fetch(client, session_id, 1, [], max_wait_ms=10_000, min_bytes=1)
        late.join()
        assert time.monotonic() - started < 8
        assert (parked["error_code"], parked["session_id"]) == (0, session_id)
        assert [(t["topic"], [p["partition_index"] for p in t["partitions"]]) for t in parked["responses"]] == [
            ("events", [0])]
        assert parked["responses"][0]["partitions"][0]["high_watermark"] == 1
        # The next epoch follows the parked one.
        assert _fetch(client, session_id, 2, [(0, 1)])["error_code"] == 0
