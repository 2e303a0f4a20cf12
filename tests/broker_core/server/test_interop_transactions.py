"""Transactional producers of confluent-kafka (librdkafka), kafka-python and aiokafka: commits and aborts
seen by read_committed and read_uncommitted consumers, offsets committed in a transaction
(consume-transform-produce), a zombie producer fenced by a newer one, and a transaction aborted when
its timeout runs out; and read_committed consumers waiting for the offsets an open transaction holds
(OffsetFetch's require_stable).

Every scenario runs against a ``seglog broker`` and against Apache Kafka (``txn_broker``), and asserts
the same values for both: what Kafka answers is what seglog must answer. Apache Kafka is shared by the
whole run, so each scenario names its topics, transactional ids and groups with a suffix of its own;
and since Kafka writes a transaction's markers after it answers EndTxn, a scenario waits for the
transaction to complete (``TxnBroker.completed``) before it reads."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from broker_core.client.remote_broker import RemoteBroker
from broker_core.coordinator.transaction import TransactionDescription
from broker_core.errors import KafkaError as BrokerError
from format.record import SimpleRecord
from server_kit import committed_offsets, start_broker
from transaction_clients_kit import TIMEOUT_S, read_all, transactional_producer

pytestmark = pytest.mark.slow

PARTITIONS = 2


class TxnBroker:
    """The broker a scenario runs against (``kind``: ``seglog`` or ``apache-kafka``), with an admin
    client and names of the scenario's own."""

    def __init__(self, kind: str, bootstrap: str) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self.suffix = uuid.uuid4().hex[:8]
        self.admin = RemoteBroker(bootstrap)

    def name(self, base: str) -> str:
        """``base`` made unique to this scenario (a topic, a transactional id, a group)."""
        return f"{base}-{self.suffix}"

    def create_topic(self, base: str, partitions: int) -> str:
        """A new topic named after ``base``, once every partition has a leader; returns its name."""
        topic = self.name(base)
        deadline = time.monotonic() + TIMEOUT_S
        try:
            self.admin.create_topic(topic, partitions)
            return topic
        except BrokerError as exc:
            if not exc.retriable:
                raise
        while True:
            # Created, but Kafka's broker learns of a new topic from its controller a moment later.
            try:
                self.admin.describe_topic(topic)
                return topic
            except BrokerError as exc:
                if not exc.retriable:
                    raise
            assert time.monotonic() < deadline, f"{self.kind}: topic {topic} not ready after {TIMEOUT_S} s"
            time.sleep(0.1)

    def produce(self, topic: str, values: list[bytes], partition: int) -> None:
        """Plain (non-transactional) records."""
        self.admin.produce(topic, [SimpleRecord(v) for v in values], partition=partition)

    def completed(self, transactional_id: str) -> TransactionDescription:
        """The transaction's description once no marker is pending (Kafka answers EndTxn first)."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            described = self.admin.describe_transaction(transactional_id)
            if not described.state.startswith("Prepare"):
                return described
            assert time.monotonic() < deadline, f"{self.kind}: {transactional_id} still {described.state}"
            time.sleep(0.05)

    def close(self) -> None:
        self.admin.close()


@pytest.fixture(params=["seglog", "apache-kafka"])
def txn_broker(request, tmp_path):
    """Each scenario once against a ``seglog broker`` (small internal topics: their partition counts are
    settings, not what is tested) and once against Apache Kafka."""
    if request.param == "seglog":
        server = start_broker(tmp_path / "logs", **{"transaction.state.log.num.partitions": 3,
                                                     "offsets.topic.num.partitions": 3})
        broker = TxnBroker("seglog", server.bootstrap_servers)
        try:
            yield broker
        finally:
            broker.close()
            server.shutdown(timeout_ms=10_000)
    else:
        broker = TxnBroker("apache-kafka", request.getfixturevalue("apache_kafka").bootstrap)
        try:
            yield broker
        finally:
            broker.close()


def test_committed_and_aborted_transactions_read_committed_sees_only_the_committed(txn_broker):
    bootstrap = txn_broker.bootstrap
    out = txn_broker.create_topic("out", PARTITIONS)
    txn_id = txn_broker.name("txn-commit-abort")
    p = transactional_producer(bootstrap, txn_id)
    p.begin_transaction()
    for i in range(6):
        p.produce(out, key=b"k%d" % i, value=b"committed-%d" % i, partition=i % PARTITIONS)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce(out, key=b"k%d" % i, value=b"aborted-%d" % i, partition=i % PARTITIONS)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce(out, value=b"committed-last", partition=0)
    p.commit_transaction(TIMEOUT_S)
    described = txn_broker.completed(txn_id)

    committed = sorted([b"committed-%d" % i for i in range(6)] + [b"committed-last"])
    assert read_all(bootstrap, out, "read_committed", PARTITIONS) == committed
    assert read_all(bootstrap, out, "read_uncommitted", PARTITIONS) == sorted(committed + [b"aborted-%d" % i
                                                                               for i in range(4)])
    # Each partition ends with its last transaction's marker: the last stable offset is the log end.
    admin = txn_broker.admin
    for partition in range(PARTITIONS):
        assert (admin.list_offsets(out, partition, "latest", "read_committed").offset
                == admin.list_offsets(out, partition, "latest").offset)
    assert (described.state, described.producer_epoch, described.partitions) == ("CompleteCommit", 0, ())


def test_an_open_transaction_holds_read_committed_consumers_at_its_first_offset(txn_broker):
    bootstrap = txn_broker.bootstrap
    out = txn_broker.create_topic("out", 1)
    txn_broker.produce(out, [b"before"], partition=0)
    txn_id = txn_broker.name("txn-open")
    p = transactional_producer(bootstrap, txn_id)
    p.begin_transaction()
    p.produce(out, value=b"pending", partition=0)
    p.flush(TIMEOUT_S)
    assert read_all(bootstrap, out, "read_committed", 1) == [b"before"]
    assert read_all(bootstrap, out, "read_uncommitted", 1) == [b"before", b"pending"]
    assert txn_broker.admin.list_offsets(out, 0, "latest", "read_committed").offset == 1
    p.commit_transaction(TIMEOUT_S)
    txn_broker.completed(txn_id)
    assert read_all(bootstrap, out, "read_committed", 1) == [b"before", b"pending"]


def test_consume_transform_produce_commits_output_and_group_offsets_together(txn_broker):
    bootstrap = txn_broker.bootstrap
    source = txn_broker.create_topic("in", 1)
    out = txn_broker.create_topic("out", 1)
    txn_broker.produce(source, [b"a", b"b", b"c", b"d"], partition=0)
    group, txn_id = txn_broker.name("etl"), txn_broker.name("etl-0")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    p = transactional_producer(bootstrap, txn_id)
    try:
        consumer.assign([TopicPartition(source, 0, 0)])

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
                p.produce(out, value=msg.value().upper(), partition=0)
            assert p.flush(TIMEOUT_S) == 0  # an abort drops what is still unsent
            p.send_offsets_to_transaction([TopicPartition(source, 0, got[-1].offset() + 1)],
                                          consumer.consumer_group_metadata(), TIMEOUT_S)
            if commit:
                p.commit_transaction(TIMEOUT_S)
            else:
                p.abort_transaction(TIMEOUT_S)
            txn_broker.completed(txn_id)

        one_round(2, commit=True)
        assert committed_offsets(bootstrap, group, source) == {0: 2}
        one_round(2, commit=False)
        # The aborted round's offsets vanish with its output.
        assert committed_offsets(bootstrap, group, source) == {0: 2}
        assert read_all(bootstrap, out, "read_committed", 1) == [b"A", b"B"]
        assert read_all(bootstrap, out, "read_uncommitted", 1) == [b"A", b"B", b"C", b"D"]
    finally:
        consumer.close()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(txn_broker):
    bootstrap = txn_broker.bootstrap
    out = txn_broker.create_topic("out", 1)
    txn_id = txn_broker.name("txn-zombie")
    zombie = transactional_producer(bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(out, value=b"zombie", partition=0)
    zombie.flush(TIMEOUT_S)

    successor = transactional_producer(bootstrap, txn_id)  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(out, value=b"successor", partition=0)
    successor.commit_transaction(TIMEOUT_S)
    described = txn_broker.completed(txn_id)

    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH), error
    assert read_all(bootstrap, out, "read_committed", 1) == [b"successor"]
    assert read_all(bootstrap, out, "read_uncommitted", 1) == [b"successor", b"zombie"]
    # The fence bumps the epoch twice: once to abort the zombie's transaction, once for the successor.
    assert (described.state, described.producer_epoch) == ("CompleteCommit", 2)


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(txn_broker):
    bootstrap = txn_broker.bootstrap
    out = txn_broker.create_topic("out", 1)
    txn_id = txn_broker.name("txn-slow")
    p = transactional_producer(bootstrap, txn_id, **{"transaction.timeout.ms": 2_000})
    p.begin_transaction()
    p.produce(out, value=b"late", partition=0)
    assert p.flush(TIMEOUT_S) == 0
    # Both brokers look for timed-out transactions every 10 s (Kafka's
    # transaction.abort.timed.out.transaction.cleanup.interval.ms).
    deadline = time.monotonic() + 2 + 10 + TIMEOUT_S
    while (described := txn_broker.completed(txn_id)).state == "Ongoing":
        assert time.monotonic() < deadline, f"{txn_id} still open"
        time.sleep(0.2)
    assert (described.state, described.producer_epoch, described.partitions) == ("CompleteAbort", 1, ())
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert (error.code(), error.fatal()) == (KafkaError._FENCED, True), error
    assert read_all(bootstrap, out, "read_committed", 1) == []
    assert read_all(bootstrap, out, "read_uncommitted", 1) == [b"late"]


def test_kafka_python_transactional_producer_commits_and_aborts(txn_broker):
    from kafka import KafkaProducer

    bootstrap = txn_broker.bootstrap
    out = txn_broker.create_topic("out", 1)
    txn_id = txn_broker.name("kp-txn")
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(out, value=b"kept", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(out, value=b"dropped", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=TIMEOUT_S)
    assert txn_broker.completed(txn_id).state == "CompleteAbort"
    assert read_all(bootstrap, out, "read_committed", 1) == [b"kept"]
    assert read_all(bootstrap, out, "read_uncommitted", 1) == [b"dropped", b"kept"]


# --- aiokafka (asyncio; older API versions than librdkafka: InitProducerId, AddPartitionsToTxn,
# AddOffsetsToTxn, TxnOffsetCommit and EndTxn v0) ---------------------------------------------------


async def aiokafka_read_all(bootstrap: str, topic: str, isolation_level: str,
                            partitions: int = PARTITIONS) -> list[bytes]:
    """Every value an ``AIOKafkaConsumer`` with ``isolation_level`` reads up to the end offsets it is
    given (the last stable offset for read_committed)."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [AioPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        values = []
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            positions = {tp: await consumer.position(tp) for tp in tps}
            if all(positions[tp] >= ends[tp] for tp in tps):
                return sorted(values)
            assert time.monotonic() < deadline, f"read {values}; positions {positions} short of {ends}"
            batches = await consumer.getmany(timeout_ms=500)
            values.extend(record.value for records in batches.values() for record in records)
    finally:
        await consumer.stop()


def test_aiokafka_consume_transform_produce_commits_and_aborts_with_group_offsets(txn_broker):
    aiokafka = pytest.importorskip("aiokafka")

    bootstrap = txn_broker.bootstrap
    source = txn_broker.create_topic("in", 1)
    out = txn_broker.create_topic("out", PARTITIONS)
    txn_broker.produce(source, [b"a", b"b", b"c", b"d", b"e", b"f"], partition=0)
    group, txn_id = txn_broker.name("aio-etl"), txn_broker.name("aio-txn")

    def consumer():
        return aiokafka.AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group,
                                         isolation_level="read_committed", enable_auto_commit=False,
                                         auto_offset_reset="earliest")

    async def take(c, n: int) -> list:
        """The next ``n`` records of the subscribed consumer ``c``."""
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < n:
            assert time.monotonic() < deadline, f"took {got} of {n}"
            for records in (await c.getmany(timeout_ms=500, max_records=n - len(got))).values():
                got.extend(records)
        return got

    async def one_round(c, producer, n: int, commit: bool) -> None:
        """Transform ``n`` records into ``out``, with the group's offset after them, in one transaction."""
        from aiokafka.structs import TopicPartition as AioPartition

        got = await take(c, n)
        await producer.begin_transaction()
        sent = [await producer.send(out, r.value.upper(), partition=i % PARTITIONS) for i, r in enumerate(got)]
        await asyncio.wait_for(asyncio.gather(*sent), TIMEOUT_S)  # an abort drops what is still unsent
        await producer.send_offsets_to_transaction({AioPartition(source, 0): got[-1].offset + 1}, group)
        await (producer.commit_transaction() if commit else producer.abort_transaction())

    async def scenario() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                                             request_timeout_ms=TIMEOUT_S * 1000)
        await producer.start()
        first = consumer()
        await first.start()
        try:
            await one_round(first, producer, 2, commit=True)
            await one_round(first, producer, 2, commit=False)
        finally:
            await first.stop()
        # A consumer of the group starts after the committed offset: the aborted round is done again.
        again = consumer()
        await again.start()
        try:
            await one_round(again, producer, 4, commit=True)
        finally:
            await again.stop()
            await producer.stop()

    asyncio.run(scenario())
    described = txn_broker.completed(txn_id)
    committed = sorted([b"A", b"B", b"C", b"D", b"E", b"F"])
    assert asyncio.run(aiokafka_read_all(bootstrap, out, "read_committed", PARTITIONS)) == committed
    assert asyncio.run(aiokafka_read_all(bootstrap, out, "read_uncommitted", PARTITIONS)) == sorted(
        committed + [b"C", b"D"])
    assert read_all(bootstrap, out, "read_committed", PARTITIONS) == committed
    assert committed_offsets(bootstrap, group, source) == {0: 6}
    assert (described.state, described.producer_epoch, described.partitions) == ("CompleteCommit", 0, ())


def test_aiokafka_transactional_producer_is_fenced_by_a_second_one(txn_broker):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.errors import ProducerFenced

    bootstrap = txn_broker.bootstrap
    out = txn_broker.create_topic("out", 1)
    txn_id = txn_broker.name("aio-zombie")

    async def scenario() -> None:
        zombie = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        successor = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await zombie.send_and_wait(out, b"zombie", partition=0)
            await successor.start()  # InitProducerId: aborts the zombie's transaction
            async with successor.transaction():
                await successor.send(out, b"successor", partition=0)
            with pytest.raises(ProducerFenced):
                await zombie.commit_transaction()
        finally:
            await successor.stop()
            await zombie.stop()

    asyncio.run(scenario())
    described = txn_broker.completed(txn_id)
    assert asyncio.run(aiokafka_read_all(bootstrap, out, "read_committed", 1)) == [b"successor"]
    assert asyncio.run(aiokafka_read_all(bootstrap, out, "read_uncommitted", 1)) == [b"successor", b"zombie"]
    assert (described.state, described.producer_epoch) == ("CompleteCommit", 2)


# --- OffsetFetch with require_stable (KIP-447): librdkafka asks for it with isolation.level=read_committed ---

def offsets_pending_in_a_transaction(txn_broker: TxnBroker) -> tuple[Producer, str]:
    """A topic with ten records (its name returned); the scenario's group committed offset 2 on it, and an
    open transaction has sent offset 5 for it (the producer returned commits or aborts it)."""
    bootstrap = txn_broker.bootstrap
    topic = txn_broker.create_topic("in", 1)
    txn_broker.produce(topic, [b"%d" % i for i in range(10)], partition=0)
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": txn_broker.name("stable"),
                      "enable.auto.commit": False})
    try:
        plain.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        p = transactional_producer(bootstrap, txn_broker.name("stable-txn"))
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], plain.consumer_group_metadata(), TIMEOUT_S)
    finally:
        plain.close()
    return p, topic


def group_consumer(txn_broker: TxnBroker, isolation_level: str) -> Consumer:
    return Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": txn_broker.name("stable"),
                     "isolation.level": isolation_level, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})


def test_a_read_committed_consumer_sees_offsets_sent_to_a_transaction_only_once_it_commits(txn_broker):
    p, topic = offsets_pending_in_a_transaction(txn_broker)
    uncommitted = group_consumer(txn_broker, "read_uncommitted")
    committed = group_consumer(txn_broker, "read_committed")
    try:
        # Without require_stable the offset committed before the transaction is answered at once.
        (before,) = uncommitted.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert (before.offset, before.error) == (2, None)
        answered: list = []
        asking = threading.Thread(target=lambda: answered.append(
            committed.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)))
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
        txn_broker):
    p, topic = offsets_pending_in_a_transaction(txn_broker)
    consumer = group_consumer(txn_broker, "read_committed")
    assigned: list = []
    try:
        consumer.subscribe([topic], on_assign=lambda c, partitions: assigned.extend(partitions))
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
