"""The embedded Broker's producers: idempotent by default, transactional over several partitions and
group offsets through the broker's own transaction coordinator, without a server."""

from __future__ import annotations

import pytest

from broker_core import Broker
from broker_core.errors import InvalidProducerEpochError, ProducerFencedError
from format.layout import TopicPartition
from format.record_batch import iter_batches

SMALL = {"transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 2}
IN0 = TopicPartition("in", 0)


def values(broker: Broker, topic: str, partition: int, isolation_level: str = "read_committed") -> list[bytes]:
    return [r.value for r in broker.fetch(topic, partition, 0, isolation_level=isolation_level).decoded()]


@pytest.fixture()
def broker(tmp_path):
    with Broker(str(tmp_path / "logs"), SMALL) as b:
        b.create_topic("out", 2)
        yield b


def test_a_producer_is_idempotent_and_numbers_its_batches_per_partition(broker):
    producer = broker.producer()
    assert producer.producer_id >= 0 and producer.producer_epoch == 0
    first = producer.produce("out", [b"a", b"b"], partition=0)
    second = producer.produce("out", [b"c"], partition=0)
    assert [m.offset for m in first + second] == [0, 1, 2]
    headers = [b.header for b in iter_batches(broker.fetch("out", 0, 0).records)]
    assert [(h.producer_id, h.base_sequence) for h in headers] == [(producer.producer_id, 0),
                                                                   (producer.producer_id, 2)]
    # A retried batch (same sequence) is answered with its first offsets and not written again.
    from format.record import SimpleRecord
    retried = broker.produce("out", [SimpleRecord(b"c")], 0, producer_id=producer.producer_id, producer_epoch=0,
                             base_sequence=2)
    assert retried[0].offset == 2 and broker.list_offsets("out", 0, "latest").offset == 3


def test_a_transaction_over_two_partitions_and_group_offsets_commits_all_at_once(broker):
    with broker.transaction("etl") as txn:
        txn.produce("out", [b"x"], partition=0)
        txn.produce("out", [b"y"], partition=1)
        txn.send_offsets("etl-group", {IN0: 7})
        assert values(broker, "out", 0) == [] and broker.committed_offsets("etl-group") == {}
    assert values(broker, "out", 0) == [b"x"] and values(broker, "out", 1) == [b"y"]
    assert broker.committed_offsets("etl-group")[IN0].offset == 7


def test_a_transaction_whose_block_raises_is_aborted_with_its_offsets(broker):
    with broker.transaction("etl") as txn:
        txn.send_offsets("etl-group", {IN0: 1})
    with pytest.raises(RuntimeError):
        with broker.transaction("etl") as txn:
            txn.produce("out", [b"lost"], partition=0)
            txn.send_offsets("etl-group", {IN0: 99})
            raise RuntimeError("the job failed")
    assert values(broker, "out", 0) == [] and values(broker, "out", 0, "read_uncommitted") == [b"lost"]
    assert broker.committed_offsets("etl-group")[IN0].offset == 1


def test_a_second_producer_of_a_transactional_id_fences_the_first_and_aborts_its_transaction(broker):
    zombie = broker.producer("writer")
    zombie.begin_transaction()
    zombie.produce("out", [b"zombie"], partition=0)
    successor = broker.producer("writer")
    assert successor.producer_epoch == zombie.producer_epoch + 2
    with pytest.raises((InvalidProducerEpochError, ProducerFencedError)):
        zombie.produce("out", [b"more"], partition=0)
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    assert values(broker, "out", 0) == []


def test_transactions_survive_a_restart_of_the_embedded_broker(tmp_path):
    path = str(tmp_path / "logs")
    with Broker(path, SMALL) as b:
        b.create_topic("out", 1)
        with b.transaction("etl") as txn:
            txn.produce("out", [b"kept"], partition=0)
        epoch = b.transaction_coordinator.transaction("etl").producer_epoch
    with Broker(path) as b:
        assert b.producer("etl").producer_epoch == epoch + 1
        assert values(b, "out", 0) == [b"kept"]
