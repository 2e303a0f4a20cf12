"""Consumer groups of kafka-python and confluent-kafka (librdkafka) consumers against a ``seglog broker``.

Both clients join the same groups unmodified (``subscribe`` with a group id,
the ``range`` assignor they share): each partition has exactly one owner, a
crashed member's partitions move to the others once its session times out, a
member that leaves hands them over at once, committed offsets (auto or
manual, from either client) survive a broker restart and consumption resumes
from them.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

from broker_core.consumer_protocol import decode_assignment
from group_kit import MemberProcess
from server_kit import committed_offsets, start_broker
from tests.broker_core.wait_kit import wait_until

pytestmark = pytest.mark.slow

TIMEOUT_S = 20
SESSION_TIMEOUT_MS = 3000
# group.min.session.timeout.ms is lowered so the clients may use a 3 s session. The initial
# rebalance delay stays short but not zero: kafka-python leads the first assignment with
# whatever metadata it has, and at zero it may not have the topic's partitions yet.
BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": 500, "group.min.session.timeout.ms": 1000}
PARTITIONS = 6


@pytest.fixture()
def server(tmp_path):
    served = start_broker(tmp_path / "logs", **BROKER_SETTINGS)
    yield served
    served.shutdown(timeout_ms=10_000)


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = PARTITIONS) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10_000)
    try:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(topic, b"%d-%d" % (p, i), partition=p)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close()


def kafka_python_consumer(bootstrap: str, topic: str, group: str, **config) -> KafkaConsumer:
    settings = {"group_id": group, "auto_offset_reset": "earliest", "enable_auto_commit": False,
                "session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": 500,
                "request_timeout_ms": 10_000, "fetch_max_wait_ms": 100}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **{**settings, **config})
    consumer.subscribe([topic])
    return consumer


def confluent_consumer(bootstrap: str, topic: str, group: str, **config) -> ConfluentConsumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 100}
    consumer = ConfluentConsumer({**settings, **config})
    consumer.subscribe([topic])
    return consumer


def poll_records(consumer, count: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of the next ``count`` records, from either client."""
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(out) < count and time.monotonic() < deadline:
        if isinstance(consumer, KafkaConsumer):
            for tp, records in consumer.poll(200).items():
                out.extend((tp.partition, r.offset, r.value) for r in records)
        else:
            out.extend((m.partition(), m.offset(), m.value()) for m in consumer.consume(100, 0.2)
                       if m.error() is None)
    assert len(out) >= count, f"read {len(out)} records of {count} within {TIMEOUT_S} s"
    return out


def owners(members: list[MemberProcess]) -> dict[int, list[int]]:
    """Partition -> indexes of the members whose current assignment holds it."""
    out: dict[int, list[int]] = {}
    for i, member in enumerate(members):
        for p in member.current or ():
            out.setdefault(p, []).append(i)
    return out


def owned_exactly_once(members: list[MemberProcess], live: list[int]) -> bool:
    """Every partition has one owner, every owner is live, and every live member owns some."""
    found = owners(members)
    return (sorted(found) == list(range(PARTITIONS)) and all(len(o) == 1 and o[0] in live for o in found.values())
            and all(members[i].current for i in live))


@pytest.mark.serial  # times the move against the session timeout
@pytest.mark.parametrize("victim", ["kafka-python", "confluent"])
def test_three_members_own_each_partition_once_and_a_crashed_ones_move_within_the_session_timeout(server, victim):
    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "orders")
    other = "confluent" if victim == "kafka-python" else "kafka-python"
    members = [MemberProcess(lib, bootstrap, "orders", "app", SESSION_TIMEOUT_MS)
               for lib in (victim, other, "kafka-python")]
    try:
        assert wait_until(lambda: owned_exactly_once(members, [0, 1, 2]), TIMEOUT_S), [m.current for m in members]
        # The coordinator hands out what the leader assigned: the same picture from DescribeGroups.
        group = server.group_coordinator.describe_group("app")[1]
        assert group.state == "Stable" and len(group.members) == 3
        described = sorted(tuple(tp.partition for tp in decode_assignment(m.assignment)) for m in group.members)
        assert described == sorted(m.current for m in members)

        members[0].kill()  # no LeaveGroup: only the session timeout tells the coordinator
        killed_at = time.monotonic()
        assert wait_until(lambda: owned_exactly_once(members[1:], [0, 1]), SESSION_TIMEOUT_MS / 1000 + TIMEOUT_S)
        moved_after = time.monotonic() - killed_at
        # The session timeout, then one rebalance round (members learn of it from a heartbeat).
        assert moved_after < SESSION_TIMEOUT_MS / 1000 + 2.5, f"partitions moved after {moved_after:.1f} s"

        members[1].stop()  # LeaveGroup: the partitions move without waiting for the session to expire
        left_at = time.monotonic()
        assert wait_until(lambda: members[2].current == tuple(range(PARTITIONS)), TIMEOUT_S)
        assert time.monotonic() - left_at < SESSION_TIMEOUT_MS / 1000
    finally:
        for member in members:
            member.stop()


def test_manual_commits_of_both_clients_survive_a_restart_and_consumption_resumes_from_them(tmp_path):
    server = start_broker(tmp_path / "logs", **BROKER_SETTINGS)
    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "orders")
    produce(bootstrap, "orders", 10)
    # kafka-python reads everything but commits only the first half of each partition.
    consumer = kafka_python_consumer(bootstrap, "orders", "resume")
    assert len(poll_records(consumer, 60)) == 60
    consumer.commit({TopicPartition("orders", p): OffsetAndMetadata(5, "half", -1) for p in range(PARTITIONS)})
    consumer.close(autocommit=False)
    server.shutdown(timeout_ms=10_000)

    server = start_broker(tmp_path / "logs", **BROKER_SETTINGS)
    bootstrap = server.bootstrap_servers
    try:
        assert committed_offsets(bootstrap, "resume") == {p: 5 for p in range(PARTITIONS)}
        # confluent-kafka in the same group resumes at the committed offsets, not at the start.
        consumer = confluent_consumer(bootstrap, "orders", "resume")
        records = poll_records(consumer, 30)
        assert sorted((p, o) for p, o, _ in records) == [(p, o) for p in range(PARTITIONS) for o in range(5, 10)]
        assert all(value == b"%d-%d" % (p, o) for p, o, value in records)
        consumer.commit(asynchronous=False)  # its positions: the end of every partition
        committed = consumer.committed([ConfluentTopicPartition("orders", p) for p in range(PARTITIONS)],
                                       timeout=TIMEOUT_S)
        assert {tp.partition: tp.offset for tp in committed} == {p: 10 for p in range(PARTITIONS)}
        consumer.close()
        # And kafka-python sees confluent-kafka's commit.
        produce(bootstrap, "orders", 1)
        consumer = kafka_python_consumer(bootstrap, "orders", "resume")
        assert sorted((p, o) for p, o, _ in poll_records(consumer, 6)) == [(p, 10) for p in range(PARTITIONS)]
        consumer.close(autocommit=False)
    finally:
        server.shutdown(timeout_ms=10_000)


@pytest.mark.parametrize("lib", ["kafka-python", "confluent"])
def test_auto_commit_commits_what_was_consumed(server, lib):
    bootstrap = server.bootstrap_servers
    create_topic(bootstrap, "orders")
    produce(bootstrap, "orders", 4)
    if lib == "kafka-python":
        consumer = kafka_python_consumer(bootstrap, "orders", "auto", enable_auto_commit=True,
                                         auto_commit_interval_ms=100)
    else:
        consumer = confluent_consumer(bootstrap, "orders", "auto", **{"enable.auto.commit": True,
                                                                      "auto.commit.interval.ms": 100})
    try:
        assert len(poll_records(consumer, 24)) == 24

        def committed_everything() -> bool:
            if lib == "kafka-python":
                consumer.poll(50)  # kafka-python commits from poll
            return committed_offsets(bootstrap, "auto") == {p: 4 for p in range(PARTITIONS)}

        assert wait_until(committed_everything, TIMEOUT_S, interval_s=0.2)
    finally:
        consumer.close()
