"""The coordinators of a three-broker cluster move with the leadership of their topics' partitions:
``__consumer_offsets`` is replicated, a group's coordinator is the leader of its partition, and when that
broker is SIGKILLed the next leader loads the group's commits — every acknowledged one."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition as KafkaTopicPartition

from broker_core.client.remote_broker import RemoteBroker
from broker_core.errors import CoordinatorNotAvailableError, NotCoordinatorError
from broker_core.offsets_topic import OFFSETS_TOPIC
from broker_core.protocol import ApiKey
from format.layout import TopicPartition
from tests.broker_core.cli_kit import run
from tests.broker_core.cluster.cluster_kit import ClusterKit

pytestmark = pytest.mark.slow

TOPIC = "events"
PARTITIONS = 3
RECORDS = 3000
#: Small internal topics: their partitions are elected and loaded in seconds.
INTERNAL_TOPICS = {"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}


@pytest.fixture()
def cluster(tmp_path, etcd_server):
    kit = ClusterKit(tmp_path, etcd_server.connect("/seglog"), **INTERNAL_TOPICS)
    kit.start_all()
    try:
        yield kit
    finally:
        kit.close()


def find_coordinator(kit: ClusterKit, key: str, key_type: int = 0) -> tuple[int, int]:
    """FindCoordinator v4 asked of any live broker: (error code, node id)."""
    with kit.client() as client:
        response = client.send(ApiKey.FIND_COORDINATOR, {"key_type": key_type, "coordinator_keys": [key]},
                               version=4)
    (answer,) = response["coordinators"]
    return answer["error_code"], answer["node_id"]


def wait_for_coordinator(kit: ClusterKit, key: str, key_type: int = 0, avoid: int | None = None) -> int:
    def found() -> int | None:
        error, node = find_coordinator(kit, key, key_type)
        return node if error == 0 and node != avoid and node in kit.brokers else None

    return kit.wait_until(found, f"a live coordinator of {key!r}")


def _produce_all(kit: ClusterKit) -> None:
    producer = Producer({"bootstrap.servers": kit.bootstrap, "acks": "all", "enable.idempotence": True})
    for n in range(RECORDS):
        producer.produce(TOPIC, value=b"%05d" % n, partition=n % PARTITIONS)
    assert producer.flush(60) == 0


class CommittingConsumer:
    """confluent-kafka's consumer of group ``group``, committing synchronously what it consumed; remembers
    every commit the coordinator acknowledged."""

    def __init__(self, kit: ClusterKit, group: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": group,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.consumer.subscribe([TOPIC])
        self.positions: dict[int, int] = {}
        self.acknowledged: dict[int, int] = {}
        self.seen: set[tuple[int, int]] = set()

    def consume(self, count: int, timeout_s: float = 120) -> None:
        """Consume ``count`` more records, committing after every 100."""
        deadline = time.monotonic() + timeout_s
        taken = 0
        while taken < count and time.monotonic() < deadline:
            message = self.consumer.poll(0.5)
            if message is None or message.error():
                continue
            self.seen.add((message.partition(), message.offset()))
            self.positions[message.partition()] = message.offset() + 1
            taken += 1
            if taken % 100 == 0:
                self.commit(deadline)
        assert taken == count, f"consumed {taken} of {count} records in {timeout_s} s"
        self.commit(deadline)

    def commit(self, deadline: float) -> None:
        """Commit the positions, again after each retriable failure (the coordinator moving)."""
        offsets = [KafkaTopicPartition(TOPIC, p, o) for p, o in sorted(self.positions.items())]
        while True:
            try:
                for tp in self.consumer.commit(offsets=offsets, asynchronous=False):
                    assert tp.error is None, tp.error
                self.acknowledged = dict(self.positions)
                return
            except KafkaException as exc:
                assert time.monotonic() < deadline, f"no commit acknowledged before the deadline: {exc}"
                time.sleep(0.2)

    def committed(self) -> dict[int, int]:
        """The group's offsets as its coordinator answers them now."""
        answered = self.consumer.committed([KafkaTopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in answered if tp.offset >= 0}

    def close(self) -> None:
        self.consumer.close()


def test_a_consumer_group_keeps_consuming_across_coordinator_failover_with_no_lost_commits(cluster):
    assert cluster.create_topic(TOPIC, partitions=PARTITIONS)["error_code"] == 0
    _produce_all(cluster)
    consumer = CommittingConsumer(cluster, "failover-group")
    try:
        consumer.consume(RECORDS // 3)
        offsets_partition = cluster.partition(OFFSETS_TOPIC, 0)
        assert offsets_partition is not None and len(offsets_partition.replicas) == 3
        for round_ in range(2):
            coordinator = wait_for_coordinator(cluster, "failover-group")
            acknowledged = dict(consumer.acknowledged)
            cluster.kill(coordinator)
            successor = wait_for_coordinator(cluster, "failover-group", avoid=coordinator)
            assert successor != coordinator
            # The new coordinator answers every commit acknowledged before the old one died.
            assert cluster.wait_until(lambda: consumer.committed() == acknowledged or None,
                                      f"the commits {acknowledged} at broker {successor}", 60)
            consumer.consume(RECORDS // 3 if round_ == 0 else RECORDS - len(consumer.seen))
            cluster.start(coordinator)
            cluster.wait_until(lambda: len(cluster.live_brokers()) == 3, "the killed broker back")
        assert consumer.seen == {(p, o) for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS)}
        assert consumer.committed() == consumer.acknowledged == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    finally:
        consumer.close()


def test_seglog_groups_asked_of_any_broker_find_the_groups_coordinator(cluster):
    assert cluster.create_topic(TOPIC, partitions=PARTITIONS)["error_code"] == 0
    _produce_all(cluster)
    coordinator = wait_for_coordinator(cluster, "tools")
    other = f"127.0.0.1:{cluster.ports[next(b for b in sorted(cluster.brokers) if b != coordinator)]}"
    with RemoteBroker(other) as remote:
        remote.commit_offsets("tools", {TopicPartition(TOPIC, p): 100 for p in range(PARTITIONS)})
        assert remote.list_groups() == ["tools"]
        assert {tp.partition: o.offset for tp, o in remote.committed_offsets("tools").items()} == {
            p: 100 for p in range(PARTITIONS)}
    code, out, err = run("groups", "describe", "--bootstrap", other, "--group", "tools")
    assert code == 0, err
    rows = {int(cells[2]): (int(cells[3]), int(cells[4]), int(cells[5]))
            for cells in (line.split() for line in out.splitlines()) if cells and cells[0] == "tools"}
    per_partition = RECORDS // PARTITIONS
    assert rows == {p: (100, per_partition, per_partition - 100) for p in range(PARTITIONS)}


def test_only_the_leader_of_a_groups_partition_coordinates_it_the_others_answer_not_coordinator(cluster):
    def offset_fetch_error(node: int) -> int:
        with cluster.client(node) as client:
            response = client.send(ApiKey.OFFSET_FETCH, {
                "group_id": "g", "topics": None, "groups": [{"group_id": "g", "topics": None}],
                "require_stable": False})
        return response["groups"][0]["error_code"] if response.get("groups") else response["error_code"]

    coordinator = wait_for_coordinator(cluster, "g")
    # The elected leader takes the partition's groups on once it has seen its election, which on a busy
    # machine can come a moment after FindCoordinator already names it.
    cluster.wait_until(lambda: offset_fetch_error(coordinator) == 0, f"broker {coordinator} coordinating 'g'")
    for node in sorted(cluster.brokers):
        assert offset_fetch_error(node) == (0 if node == coordinator else NotCoordinatorError.code), node


def test_find_coordinator_answers_coordinator_not_available_while_too_few_brokers_hold_the_offsets_topic(
        tmp_path, etcd_server):
    kit = ClusterKit(tmp_path, etcd_server.connect("/seglog-two"), size=2, **INTERNAL_TOPICS)
    kit.start_all()
    try:
        assert find_coordinator(kit, "g") == (CoordinatorNotAvailableError.code, -1)
        assert kit.metadata([OFFSETS_TOPIC])["topics"][0]["error_code"] != 0  # not created with 2 of 3 brokers
    finally:
        kit.close()
