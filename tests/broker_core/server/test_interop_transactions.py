"""Transactional producers of confluent-kafka (librdkafka) and kafka-python against a ``seglog broker``:
commits and aborts seen by read_committed and read_uncommitted consumers, offsets committed in a
transaction (consume-transform-produce), a zombie producer fenced by a newer one, and read_committed
consumers waiting for the offsets an open transaction holds (OffsetFetch's require_stable)."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from server_kit import committed_offsets, start_broker

pytestmark = pytest.mark.slow

TIMEOUT_S = 20
PARTITIONS = 2
_PARTITION_EOF = KafkaError._PARTITION_EOF


@pytest.fixture()
def txn_server(tmp_path):
    """A broker with small internal topics (their partition counts are settings, not what is tested)."""
    server = start_broker(tmp_path / "logs", **{"transaction.state.log.num.partitions": 3,
                                                 "offsets.topic.num.partitions": 3})
    try:
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


def transactional_producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **config})
    p.init_transactions(TIMEOUT_S)
    return p


def read_all(bootstrap: str, topic: str, isolation_level: str, partitions: int = PARTITIONS) -> list[bytes]:
    """Every value a consumer with ``isolation_level`` reads from the start to the end of each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation_level}",
                  "isolation.level": isolation_level, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values, ended = [], set()
        deadline = time.monotonic() + TIMEOUT_S
        while len(ended) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == _PARTITION_EOF, msg.error()
                ended.add(msg.partition())
                continue
            values.append(msg.value())
        assert len(ended) == partitions, f"read {values} without reaching the end of every partition"
        return sorted(values)
    finally:
        c.close()


def test_committed_and_aborted_transactions_read_committed_sees_only_the_committed(txn_server):
    bootstrap = txn_server.bootstrap_servers
    txn_server.broker.create_topic("out", PARTITIONS)
    p = transactional_producer(bootstrap, "txn-commit-abort")
    p.begin_transaction()
    for i in range(6):
        p.produce("out", key=b"k%d" % i, value=b"committed-%d" % i, partition=i % PARTITIONS)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce("out", key=b"k%d" % i, value=b"aborted-%d" % i, partition=i % PARTITIONS)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce("out", value=b"committed-last", partition=0)
    p.commit_transaction(TIMEOUT_S)

    committed = sorted([b"committed-%d" % i for i in range(6)] + [b"committed-last"])
    assert read_all(bootstrap, "out", "read_committed") == committed
    assert read_all(bootstrap, "out", "read_uncommitted") == sorted(committed + [b"aborted-%d" % i
                                                                                 for i in range(4)])
    # Each partition ends with its last transaction's marker: the last stable offset is the log end.
    broker = txn_server.broker
    for partition in range(PARTITIONS):
        assert (broker.list_offsets("out", partition, "latest", "read_committed").offset
                == broker.list_offsets("out", partition, "latest").offset)
    described = txn_server.broker.transaction_coordinator.describe_transactions(["txn-commit-abort"])[0]
    assert (described.state, described.producer_epoch, described.partitions) == ("CompleteCommit", 0, ())


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(txn_server):
    bootstrap = txn_server.bootstrap_servers
    txn_server.broker.create_topic("out", 1)
    txn_server.broker.produce("out", [b"before"], partition=0)
    p = transactional_producer(bootstrap, "txn-open")
    p.begin_transaction()
    p.produce("out", value=b"pending", partition=0)
    p.flush(TIMEOUT_S)
    assert read_all(bootstrap, "out", "read_committed", 1) == [b"before"]
    assert read_all(bootstrap, "out", "read_uncommitted", 1) == [b"before", b"pending"]
    p.commit_transaction(TIMEOUT_S)
    assert read_all(bootstrap, "out", "read_committed", 1) == [b"before", b"pending"]


def test_consume_transform_produce_commits_output_and_group_offsets_together(txn_server):
    bootstrap = txn_server.bootstrap_servers
    broker = txn_server.broker
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    broker.produce("in", [b"a", b"b", b"c", b"d"], partition=0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "etl", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    p = transactional_producer(bootstrap, "etl-0")
    try:
        consumer.assign([TopicPartition("in", 0, 0)])

        def one_round(n: int, commit: bool) -> None:
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < n and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.append(msg)
            assert len(got) == n
            p.begin_transaction()
            for msg in got:
                p.produce("out", value=msg.value().upper(), partition=0)
            p.send_offsets_to_transaction([TopicPartition("in", 0, got[-1].offset() + 1)],
                                          consumer.consumer_group_metadata(), TIMEOUT_S)
            if commit:
                p.commit_transaction(TIMEOUT_S)
            else:
                p.abort_transaction(TIMEOUT_S)

        one_round(2, commit=True)
        assert committed_offsets(bootstrap, "etl", "in") == {0: 2}
        one_round(2, commit=False)
        # The aborted round's offsets vanish with its output.
        assert committed_offsets(bootstrap, "etl", "in") == {0: 2}
        assert read_all(bootstrap, "out", "read_committed", 1) == [b"A", b"B"]
    finally:
        consumer.close()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(txn_server):
    bootstrap = txn_server.bootstrap_servers
    txn_server.broker.create_topic("out", 1)
    zombie = transactional_producer(bootstrap, "txn-zombie")
    zombie.begin_transaction()
    zombie.produce("out", value=b"zombie", partition=0)
    zombie.flush(TIMEOUT_S)

    successor = transactional_producer(bootstrap, "txn-zombie")  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce("out", value=b"successor", partition=0)
    successor.commit_transaction(TIMEOUT_S)

    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH), error
    assert read_all(bootstrap, "out", "read_committed", 1) == [b"successor"]
    described = txn_server.broker.transaction_coordinator.describe_transactions(["txn-zombie"])[0]
    # The fence bumps the epoch twice: once to abort the zombie's transaction, once for the successor.
    assert (described.state, described.producer_epoch) == ("CompleteCommit", 2)


def test_kafka_python_transactional_producer_commits_and_aborts(txn_server):
    from kafka import KafkaProducer

    bootstrap = txn_server.bootstrap_servers
    txn_server.broker.create_topic("out", 1)
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("out", value=b"kept", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send("out", value=b"dropped", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=TIMEOUT_S)
    assert read_all(bootstrap, "out", "read_committed", 1) == [b"kept"]
    assert read_all(bootstrap, "out", "read_uncommitted", 1) == [b"dropped", b"kept"]


# --- OffsetFetch with require_stable (KIP-447): librdkafka asks for it with isolation.level=read_committed ---

STABLE_GROUP = "stable"


def offsets_pending_in_a_transaction(server) -> Producer:
    """Topic ``in`` with ten records; group ``stable`` committed offset 2, and an open transaction
    has sent offset 5 for it (the producer returned commits or aborts it)."""
    bootstrap = server.bootstrap_servers
    server.broker.create_topic("in", 1)
    server.broker.produce("in", [b"%d" % i for i in range(10)], partition=0)
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": STABLE_GROUP, "enable.auto.commit": False})
    try:
        plain.commit(offsets=[TopicPartition("in", 0, 2)], asynchronous=False)
        p = transactional_producer(bootstrap, "stable-0")
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition("in", 0, 5)], plain.consumer_group_metadata(), TIMEOUT_S)
    finally:
        plain.close()
    return p


def group_consumer(bootstrap: str, isolation_level: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": STABLE_GROUP, "isolation.level": isolation_level,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def test_a_read_committed_consumer_sees_offsets_sent_to_a_transaction_only_once_it_commits(txn_server):
    bootstrap = txn_server.bootstrap_servers
    p = offsets_pending_in_a_transaction(txn_server)
    uncommitted, committed = group_consumer(bootstrap, "read_uncommitted"), group_consumer(bootstrap, "read_committed")
    try:
        # Without require_stable the offset committed before the transaction is answered at once.
        (before,) = uncommitted.committed([TopicPartition("in", 0)], timeout=TIMEOUT_S)
        assert (before.offset, before.error) == (2, None)
        answered: list = []
        asking = threading.Thread(target=lambda: answered.append(
            committed.committed([TopicPartition("in", 0)], timeout=TIMEOUT_S)))
        asking.start()
        asking.join(2.0)
        # UNSTABLE_OFFSET_COMMIT: the client asks again until the transaction ends.
        assert asking.is_alive() and not answered
        p.commit_transaction(TIMEOUT_S)
        asking.join(TIMEOUT_S)
        (after,) = answered[0]
        assert (after.offset, after.error) == (5, None)
    finally:
        uncommitted.close()
        committed.close()


def test_a_read_committed_consumer_joining_while_offsets_are_pending_starts_where_the_transaction_committed(
        txn_server):
    p = offsets_pending_in_a_transaction(txn_server)
    consumer = group_consumer(txn_server.bootstrap_servers, "read_committed")
    assigned: list = []
    try:
        consumer.subscribe(["in"], on_assign=lambda c, partitions: assigned.extend(partitions))
        early = []
        deadline = time.monotonic() + TIMEOUT_S
        while not assigned and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                early.append(msg.offset())
        assert assigned, "the consumer never joined"
        quiet_until = time.monotonic() + 2.0
        while time.monotonic() < quiet_until:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                early.append(msg.offset())
        # Neither the offset before the transaction (2) nor auto.offset.reset (0): it waits.
        assert early == []
        p.commit_transaction(TIMEOUT_S)
        first = None
        deadline = time.monotonic() + TIMEOUT_S
        while first is None and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                first = msg
        assert first is not None and first.offset() == 5
    finally:
        consumer.close()
