"""``seglog broker`` killed with SIGKILL in the middle of a transaction and started again on the same log
dir and port: the transaction completes when its producer commits after the restart, or is aborted when
its ``transaction.timeout.ms`` runs out if the producer is gone; read_committed consumers never see part
of it, and are held back no longer than the timeout."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from broker_core.client.remote_broker import RemoteBroker
from format.layout import TopicPartition as LogPartition
from format.record import SimpleRecord
from testbed.processes import free_port
from server_kit import BrokerProcess, committed_offsets
from transaction_clients_kit import TIMEOUT_S, read_all, transactional_producer

pytestmark = pytest.mark.slow

HERE = os.path.dirname(__file__)
CLEANUP_INTERVAL_MS = 500  # transaction.abort.timed.out.transaction.cleanup.interval.ms
PARTITIONS = 3


class RestartableBroker:
    """A ``seglog broker`` process on one log dir and one fixed port, to kill and start again."""

    def __init__(self, log_dir) -> None:
        self.log_dir = log_dir
        self.port = free_port()
        self.process: BrokerProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = BrokerProcess(
            [self.log_dir], "--config", "transaction.state.log.num.partitions=3",
            "--config", "offsets.topic.num.partitions=3",
            "--config", f"transaction.abort.timed.out.transaction.cleanup.interval.ms={CLEANUP_INTERVAL_MS}",
            port=self.port)
        assert self.process.port == self.port, self.process.stderr_text

    def kill(self) -> None:
        assert self.process.kill() == -9, self.process.stderr_text

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


@pytest.fixture()
def restartable_broker(tmp_path):
    broker = RestartableBroker(tmp_path / "logs")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


WRITTEN = sorted(b"out-%d" % i for i in range(3 * PARTITIONS))


def create_etl_topics(bootstrap: str) -> None:
    """``in``, with three records a transaction consumes, and ``out`` with ``PARTITIONS`` partitions."""
    with RemoteBroker(bootstrap) as admin:
        admin.create_topic("in", 1)
        admin.create_topic("out", PARTITIONS)
        admin.produce("in", [SimpleRecord(b"in-%d" % i) for i in range(3)], partition=0)


def check_open_after_restart(bootstrap: str, transactional_id: str) -> None:
    """The transaction is open as before the kill: read back from __transaction_state by the coordinator,
    every record on disk, none of it visible to read_committed, no group offset yet."""
    with RemoteBroker(bootstrap) as admin:
        described = admin.describe_transaction(transactional_id)
    assert described.state == "Ongoing"
    assert {tp for tp in described.partitions if tp.topic == "out"} == {
        LogPartition("out", p) for p in range(PARTITIONS)}
    assert len(described.partitions) == PARTITIONS + 1  # and the group's __consumer_offsets partition
    assert read_all(bootstrap, "out", "read_committed", PARTITIONS) == []
    assert read_all(bootstrap, "out", "read_uncommitted", PARTITIONS) == WRITTEN
    assert committed_offsets(bootstrap, "etl", "in") == {}


def check_committed(bootstrap: str, transactional_id: str) -> None:
    """All of the transaction: its records for read_committed, its group offset, a marker ending each partition."""
    assert read_all(bootstrap, "out", "read_committed", PARTITIONS) == WRITTEN
    assert committed_offsets(bootstrap, "etl", "in") == {0: 3}
    with RemoteBroker(bootstrap) as admin:
        described = admin.describe_transaction(transactional_id)
        assert (described.state, described.producer_epoch, described.partitions) == ("CompleteCommit", 0, ())
        for p in range(PARTITIONS):
            assert (admin.list_offsets("out", p, "latest", "read_committed").offset
                    == admin.list_offsets("out", p, "latest").offset == 4)  # three records and the marker


def test_a_transaction_cut_by_a_broker_sigkill_commits_whole_after_the_restart(restartable_broker):
    broker = restartable_broker
    bootstrap = broker.bootstrap
    create_etl_topics(bootstrap)
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "etl", "enable.auto.commit": False})
    producer = transactional_producer(bootstrap, "etl-0")
    try:
        producer.begin_transaction()
        for i in range(3 * PARTITIONS):
            producer.produce("out", value=b"out-%d" % i, partition=i % PARTITIONS)
        assert producer.flush(TIMEOUT_S) == 0
        producer.send_offsets_to_transaction([TopicPartition("in", 0, 3)], group.consumer_group_metadata(),
                                             TIMEOUT_S)
        broker.kill()
        broker.start()
        check_open_after_restart(bootstrap, "etl-0")
        producer.commit_transaction(TIMEOUT_S)
    finally:
        group.close()
    check_committed(bootstrap, "etl-0")


def test_an_aiokafka_transaction_cut_by_a_broker_sigkill_commits_whole_after_the_restart(restartable_broker):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import TopicPartition as AioPartition

    broker = restartable_broker
    bootstrap = broker.bootstrap
    create_etl_topics(bootstrap)

    async def scenario() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-etl-0",
                                             request_timeout_ms=TIMEOUT_S * 1000)
        await producer.start()
        try:
            await producer.begin_transaction()
            sent = [await producer.send("out", b"out-%d" % i, partition=i % PARTITIONS)
                    for i in range(3 * PARTITIONS)]
            await asyncio.wait_for(asyncio.gather(*sent), TIMEOUT_S)
            await producer.send_offsets_to_transaction({AioPartition("in", 0): 3}, "etl")
            broker.kill()
            broker.start()
            check_open_after_restart(bootstrap, "aio-etl-0")
            await asyncio.wait_for(producer.commit_transaction(), TIMEOUT_S)
        finally:
            await producer.stop()

    asyncio.run(scenario())
    check_committed(bootstrap, "aio-etl-0")


def test_a_broker_killed_while_it_commits_completes_the_commit_after_the_restart(restartable_broker):
    """SIGKILL a few milliseconds after EndTxn is sent: before the decision, between the decision and the
    markers, or after; whichever, the producer's commit completes after the restart, all at once."""
    broker = restartable_broker
    bootstrap = broker.bootstrap
    with RemoteBroker(bootstrap) as admin:
        admin.create_topic("out", PARTITIONS)
    rng = random.Random(15)
    expected = []
    for trial in range(3):
        producer = transactional_producer(bootstrap, f"commit-{trial}")
        producer.begin_transaction()
        values = [b"trial-%d-%d" % (trial, p) for p in range(PARTITIONS)]
        for p, value in enumerate(values):
            producer.produce("out", value=value, partition=p)
        assert producer.flush(TIMEOUT_S) == 0
        failures = []

        def commit() -> None:
            try:
                producer.commit_transaction(TIMEOUT_S * 2)
            except Exception as exc:  # the committing thread's failure is the test's
                failures.append(exc)

        committing = threading.Thread(target=commit)
        committing.start()
        time.sleep(rng.uniform(0, 0.01))  # a commit takes a few milliseconds here
        broker.kill()
        broker.start()
        committing.join(TIMEOUT_S * 3)
        assert not committing.is_alive() and failures == [], failures
        expected += values
        assert read_all(bootstrap, "out", "read_committed", PARTITIONS) == sorted(expected)
        with RemoteBroker(bootstrap) as admin:
            assert admin.describe_transaction(f"commit-{trial}").state == "CompleteCommit"


def consume_to(bootstrap: str, topic: str, isolation_level: str, end_offset: int,
               timeout_s: float) -> tuple[list[bytes], float]:
    """A consumer polling every partition of ``topic`` until it reaches ``end_offset`` in each (an end of
    partition at that offset); the values it read and the moment (``time.monotonic``) it got there."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation_level}",
                  "isolation.level": isolation_level, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values, ends = [], {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = c.poll(0.1)
            if msg is None:
                continue
            if not msg.error():
                values.append(msg.value())
                continue
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            ends[msg.partition()] = msg.offset()
            if all(ends.get(p) == end_offset for p in range(PARTITIONS)):
                return sorted(values), time.monotonic()
        raise AssertionError(f"{isolation_level}: read {values}, ends {ends} short of {end_offset} after "
                             f"{timeout_s} s")
    finally:
        c.close()


@pytest.mark.parametrize("downtime_s", [0, 6], ids=["restarted-at-once", "down-past-the-timeout"])
def test_a_transaction_whose_producer_is_gone_is_aborted_after_its_timeout_across_a_broker_sigkill(
        restartable_broker, downtime_s):
    broker = restartable_broker
    bootstrap = broker.bootstrap
    timeout_ms = 5_000
    margin_s = CLEANUP_INTERVAL_MS / 1000 + 5  # a reaper round, and room for a busy machine
    with RemoteBroker(bootstrap) as admin:
        admin.create_topic("out", PARTITIONS)
    began = time.monotonic()
    producer = subprocess.Popen([sys.executable, os.path.join(HERE, "abandoned_transaction.py"), bootstrap, "out",
                                 str(PARTITIONS), "abandoned", str(timeout_ms)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert producer.stdout.readline().strip() == "written", producer.stderr.read()
        written_at = time.monotonic()
    finally:
        producer.kill()  # gone for good
        producer.wait(30)
        producer.stdout.close()
        producer.stderr.close()
    with RemoteBroker(bootstrap) as admin:
        # Each partition: the abandoned record at offset 0; its ABORT marker is to come at 1.
        assert [admin.list_offsets("out", p, "latest").offset for p in range(PARTITIONS)] == [1] * PARTITIONS

    broker.kill()
    time.sleep(downtime_s)
    broker.start()
    restarted_at = time.monotonic()
    committed, reached = consume_to(bootstrap, "out", "read_committed", 2, timeout_ms / 1000 + margin_s + 30)
    assert committed == []
    assert reached - began >= timeout_ms / 1000, "aborted before its transaction.timeout.ms"
    held = reached - max(written_at + timeout_ms / 1000, restarted_at)
    assert held <= margin_s, f"read_committed held {held:.1f} s past the {timeout_ms} ms timeout or the restart"
    assert read_all(bootstrap, "out", "read_uncommitted", PARTITIONS) == sorted(
        b"abandoned-%d" % p for p in range(PARTITIONS))
    assert read_all(bootstrap, "out", "read_committed", PARTITIONS) == []
    with RemoteBroker(bootstrap) as admin:
        described = admin.describe_transaction("abandoned")
        # The abort bumped the epoch: the producer, should it come back, is fenced.
        assert (described.state, described.producer_epoch, described.partitions) == ("CompleteAbort", 1, ())
        for p in range(PARTITIONS):
            assert admin.list_offsets("out", p, "latest", "read_committed").offset == 2
