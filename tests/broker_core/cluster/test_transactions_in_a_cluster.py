"""Transactions across a three-broker cluster: the coordinator of a transactional id is the leader of its
``__transaction_state`` partition, and it sends the COMMIT or ABORT markers to the leaders of the
transaction's partitions on the other brokers (WriteTxnMarkers). When its broker is SIGKILLed the next
leader of that partition takes over: no committed transaction is lost, none is seen twice, and an aborted
one is never seen."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaException

from broker_core.client.remote_broker import RemoteBroker
from tests.broker_core.cluster.cluster_kit import ClusterKit
from tests.broker_core.cluster.test_coordinator_failover import INTERNAL_TOPICS, wait_for_coordinator
from tests.broker_core.server.transaction_clients_kit import read_all, transactional_producer

pytestmark = pytest.mark.slow

TOPIC = "payments"
PARTITIONS = 3
TRANSACTION_KEY_TYPE = 1


@pytest.fixture()
def cluster(tmp_path, etcd_server):
    kit = ClusterKit(tmp_path, etcd_server.connect("/seglog"), **INTERNAL_TOPICS)
    kit.start_all()
    try:
        assert kit.create_topic(TOPIC, partitions=PARTITIONS)["error_code"] == 0
        for p in range(PARTITIONS):
            kit.wait_for_isr(TOPIC, (1, 2, 3), p)
        yield kit
    finally:
        kit.close()


def _leaders(kit: ClusterKit) -> set[int]:
    return {kit.partition(TOPIC, p).leader for p in range(PARTITIONS)}


def _transaction(producer, n: int) -> list[bytes]:
    """Transaction ``n``: one record into each partition."""
    producer.begin_transaction()
    values = [b"txn-%03d-p%d" % (n, p) for p in range(PARTITIONS)]
    for p, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=p)
    return values


def test_a_transaction_over_partitions_led_by_every_broker_commits_or_aborts_on_each_of_them(cluster):
    coordinator = wait_for_coordinator(cluster, "spread", TRANSACTION_KEY_TYPE)
    assert len(_leaders(cluster) - {coordinator}) >= 1  # some markers must travel to another broker
    producer = transactional_producer(cluster.bootstrap, "spread")
    committed = _transaction(producer, 1)
    producer.commit_transaction(30)
    _transaction(producer, 2)
    assert producer.flush(30) == 0  # written, then aborted (unsent records would be dropped instead)
    producer.abort_transaction(30)
    committed += _transaction(producer, 3)
    producer.commit_transaction(30)
    assert read_all(cluster.bootstrap, TOPIC, "read_committed", PARTITIONS) == sorted(committed)
    with RemoteBroker(cluster.bootstrap) as remote:
        described = remote.describe_transaction("spread")
        assert (described.state, described.partitions) == ("CompleteCommit", ())
        # Every partition's last stable offset reached its end: each leader holds its markers.
        for p in range(PARTITIONS):
            ends = [remote.list_offsets(TOPIC, p, "latest", isolation_level=level).offset
                    for level in ("read_uncommitted", "read_committed")]
            assert ends == [6, 6], (p, ends)


def test_the_transaction_coordinators_broker_sigkilled_the_next_leader_completes_its_transactions(cluster):
    producer = transactional_producer(cluster.bootstrap, "survivor", **{"transaction.timeout.ms": 60_000})
    committed: list[bytes] = []
    for n in range(3):
        committed += _transaction(producer, n)
        producer.commit_transaction(30)
    coordinator = wait_for_coordinator(cluster, "survivor", TRANSACTION_KEY_TYPE)
    # A transaction open when its coordinator dies: its commit goes to the next coordinator.
    pending = _transaction(producer, 3)
    producer.flush(30)
    cluster.kill(coordinator)
    deadline = time.monotonic() + 90
    while True:
        try:
            producer.commit_transaction(30)
            committed += pending
            break
        except KafkaException as exc:
            error = exc.args[0]
            assert time.monotonic() < deadline, f"the commit never went through: {error}"
            assert not error.txn_requires_abort(), f"the next coordinator did not take the commit: {error}"
            assert error.retriable(), error
    for n in range(4, 7):
        committed += _transaction(producer, n)
        producer.commit_transaction(60)
    successor = wait_for_coordinator(cluster, "survivor", TRANSACTION_KEY_TYPE, avoid=coordinator)
    assert successor != coordinator
    assert read_all(cluster.bootstrap, TOPIC, "read_committed", PARTITIONS, timeout_s=60) == sorted(committed)
    cluster.start(coordinator)
    cluster.wait_until(lambda: len(cluster.live_brokers()) == 3, "the killed broker back")
