"""Transactional producers of confluent-kafka (librdkafka) and kafka-python against a ``seglog broker``:
commits and aborts seen by read_committed and read_uncommitted consumers, offsets committed in a
transaction (consume-transform-produce), and a zombie producer fenced by a newer one."""

from __future__ import annotations

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
