"""The transaction coordinator in a cluster: it owns the ``__transaction_state`` partitions it is
elected for (loading them, and COORDINATOR_LOAD_IN_PROGRESS meanwhile), answers NOT_COORDINATOR for
the others, unloads a partition on resignation, and sends the markers of partitions led by other
brokers to their leaders with the partition's coordinator epoch, retrying after a growing backoff
until they are written — over a real embedded Broker on a ``MockTime``, with the leaders and the
other brokers' answers as a ``ClusterDestinations`` says."""

from __future__ import annotations

import threading
import time

import pytest

from broker_core.coordinator.transaction import ListTransactionsRequest, TxnMarker
from broker_core.errors import (InvalidProducerEpochError, NetworkExceptionError, NotLeaderOrFollowerError,
                                TransactionCoordinatorFencedError)
from broker_core.log.log import Log
from format.layout import TopicPartition

from transaction_kit import (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NODE_ID, NONE, NOT_COORDINATOR,
                             TP0, TP1, ClusterDestinations, Harness, S)

FAR0, FAR1 = TopicPartition("far", 0), TopicPartition("far", 1)
TXN_STATE_TOPIC = "__transaction_state"
OTHER = "a"  # a transactional id of the other partition of __transaction_state than "tx"


def cluster_harness(path, destinations: ClusterDestinations | None = None) -> Harness:
    return Harness(path, elected_partitions_only=True, destinations=destinations or ClusterDestinations())


@pytest.fixture()
def destinations():
    return ClusterDestinations()


@pytest.fixture()
def elected(tmp_path, destinations):
    """A cluster's coordinator elected for the partition of "tx" at coordinator epoch 7."""
    h = cluster_harness(tmp_path / "logs", destinations)
    h.coordinator.on_election(h.coordinator.partition_for("tx"), 7)
    yield h
    h.close()


def open_transaction(h: Harness, *partitions: TopicPartition, value: bytes = b"v") -> int:
    """An Ongoing transaction of "tx" over ``partitions``, a record written to those this broker leads."""
    pid = h.init().producer_id
    assert h.add(pid, 0, *partitions) == {tp: NONE for tp in partitions}
    for tp in partitions:
        h.write(pid, 0, tp, value)
    return pid


def sent(destinations: ClusterDestinations) -> list[tuple[int, list[TopicPartition]]]:
    return [(node, [m.topic_partition for m in markers]) for node, markers in destinations.requests]


@pytest.fixture()
def restarted(tmp_path):
    """A cluster's coordinator, elected for nothing yet, over the log dir of a single broker that wrote
    "tx" (Ongoing over out-0) and OTHER (Empty) in the two partitions of ``__transaction_state``."""
    single = Harness(tmp_path / "logs")
    try:
        assert single.coordinator.partition_for("tx") != single.coordinator.partition_for(OTHER)
        open_transaction(single, TP0)
        assert single.init(OTHER).error_code == NONE
    finally:
        single.close()
    h = cluster_harness(tmp_path / "logs")
    yield h
    h.close()


# --- ownership --------------------------------------------------------------------------------


def test_a_cluster_coordinator_owns_nothing_until_elected(restarted):
    restarted.coordinator.load()  # what a single broker replays at start-up: nothing here
    assert restarted.init().error_code == NOT_COORDINATOR
    assert restarted.described_error() == NOT_COORDINATOR
    assert restarted.coordinator.list_transactions(ListTransactionsRequest()) == (NONE, [])


def test_an_election_loads_only_its_partition_and_ids_of_the_others_get_not_coordinator(restarted):
    coordinator = restarted.coordinator
    coordinator.on_election(coordinator.partition_for("tx"), 3)
    assert (restarted.state().state, restarted.state().topic_partitions) == (S.ONGOING, {TP0})
    assert restarted.described_error(OTHER) == NOT_COORDINATOR
    assert restarted.init(OTHER).error_code == NOT_COORDINATOR
    _, listed = coordinator.list_transactions(ListTransactionsRequest())
    assert [t.transactional_id for t in listed] == ["tx"]
    coordinator.on_election(coordinator.partition_for(OTHER), 1)
    assert restarted.state(OTHER).state is S.EMPTY


def test_ids_of_a_partition_being_loaded_get_coordinator_load_in_progress(restarted):
    coordinator = restarted.coordinator
    coordinator.on_election(coordinator.partition_for(OTHER), 1)
    partition = coordinator.partition_for("tx")
    txn_log: Log = restarted.broker.log_manager.log_or_raise(TopicPartition(TXN_STATE_TOPIC, partition))
    # The load reads the partition's log, held here until the answers during the load are checked.
    with txn_log._lock:
        loader = threading.Thread(target=coordinator.on_election, args=(partition, 2))
        loader.start()
        deadline = time.monotonic() + 10
        while restarted.described_error() != COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
            time.sleep(0.01)
        assert restarted.described_error() == COORDINATOR_LOAD_IN_PROGRESS
        assert restarted.init().error_code == COORDINATOR_LOAD_IN_PROGRESS
        assert restarted.init(OTHER).error_code == NONE  # the partition already loaded answers meanwhile
    loader.join(timeout=10)
    assert not loader.is_alive()
    assert restarted.state().state is S.ONGOING


def test_an_election_waits_for_a_write_under_way_to_its_partition_and_replays_it(elected):
    coordinator = elected.coordinator
    partition = coordinator.partition_for("tx")
    assert elected.init().producer_epoch == 0
    txn_log: Log = elected.broker.log_manager.log_or_raise(TopicPartition(TXN_STATE_TOPIC, partition))
    answers: list = []
    # The next InitProducerId's record waits for the log, held here, while the partition is elected again.
    with txn_log._lock:
        writer = threading.Thread(target=lambda: answers.append(elected.init()))
        writer.start()
        time.sleep(0.2)
        elector = threading.Thread(target=coordinator.on_election, args=(partition, 9))
        elector.start()
        time.sleep(0.2)
    writer.join(timeout=10)
    elector.join(timeout=10)
    assert not writer.is_alive() and not elector.is_alive()
    assert answers[0].error_code == NOT_COORDINATOR  # written, but under the ownership that ended
    assert elected.state().producer_epoch == 1  # the new ownership replayed it


def test_a_resignation_unloads_its_partition_and_an_older_election_after_it_is_ignored(elected):
    coordinator = elected.coordinator
    partition = coordinator.partition_for("tx")
    open_transaction(elected, TP0)
    coordinator.on_resignation(partition, 8)
    assert elected.described_error() == NOT_COORDINATOR
    assert elected.init().error_code == NOT_COORDINATOR
    # The transaction is not aborted by a broker that no longer coordinates it.
    elected.advance(60_000)
    coordinator.on_election(partition, 7)  # older than the resignation: stale
    assert elected.described_error() == NOT_COORDINATOR
    coordinator.on_election(partition, 9)
    assert elected.state().state is S.ONGOING


def test_a_transaction_found_preparing_at_election_gets_its_markers_with_the_new_epoch_and_completes(tmp_path):
    destinations = ClusterDestinations(leaders={TP0: None})  # out-0 has no leader: the commit stays pending
    first = cluster_harness(tmp_path / "logs", destinations)
    partition = first.coordinator.partition_for("tx")
    try:
        first.coordinator.on_election(partition, 1)
        pid = open_transaction(first, TP0, value=b"kept")
        assert first.end(pid, 0, commit=True) == NONE
        assert first.state().state is S.PREPARE_COMMIT
    finally:
        first.close()
    again = cluster_harness(tmp_path / "logs")
    try:
        again.coordinator.on_election(partition, 2)
        assert again.state().state is S.COMPLETE_COMMIT
        assert again.committed_values(TP0) == [b"kept"]
        (producer,) = again.broker.describe_producers("out", 0)
        assert (producer.producer_id, producer.coordinator_epoch) == (pid, 2)
    finally:
        again.close()


def test_a_transaction_whose_partition_moves_away_while_its_markers_are_sent_is_completed_by_the_next_election(
        elected, destinations):
    coordinator = elected.coordinator
    partition = coordinator.partition_for("tx")
    destinations.leaders[TP1] = 2
    pid = open_transaction(elected, TP0)

    def resign_while_sending(node_id: int, markers: list[TxnMarker]):
        coordinator.on_resignation(partition, 8)
        return {}

    destinations.write_remote = resign_while_sending
    assert elected.add(pid, 0, TP1) == {TP1: NONE}
    assert elected.end(pid, 0, commit=True) == NONE  # PrepareCommit written: the commit is decided
    assert elected.described_error() == NOT_COORDINATOR
    del destinations.write_remote
    coordinator.on_election(partition, 9)
    assert elected.state().state is S.COMPLETE_COMMIT
    assert [(node, [(m.topic_partition, m.coordinator_epoch) for m in markers])
            for node, markers in destinations.requests] == [(2, [(TP1, 9)])]


# --- markers to other brokers -------------------------------------------------------------------


def test_markers_of_partitions_led_elsewhere_go_to_their_leaders_grouped_per_broker_with_the_coordinator_epoch(
        elected, destinations):
    destinations.leaders.update({TP1: 2, FAR0: 2, FAR1: 3})
    pid = open_transaction(elected, TP0, value=b"local")
    assert elected.add(pid, 0, TP1, FAR0, FAR1) == {TP1: NONE, FAR0: NONE, FAR1: NONE}
    assert elected.end(pid, 0, commit=True) == NONE
    assert destinations.requests == [
        (2, [TxnMarker(FAR0, pid, 0, 7, True), TxnMarker(TP1, pid, 0, 7, True)]),
        (3, [TxnMarker(FAR1, pid, 0, 7, True)])]
    assert elected.committed_values(TP0) == [b"local"]  # this broker leads out-0: appended here
    assert elected.state().state is S.COMPLETE_COMMIT


def test_a_failing_leader_keeps_the_transaction_preparing_until_a_retry_after_backoff_reaches_the_new_leader(
        elected, destinations):
    destinations.leaders.update({TP1: 2, FAR0: None})
    destinations.down[2] = NetworkExceptionError("broker 2 is down")
    pid = open_transaction(elected, TP0)
    assert elected.add(pid, 0, TP1, FAR0) == {TP1: NONE, FAR0: NONE}
    assert elected.end(pid, 0, commit=False) == NONE
    assert elected.state().state is S.PREPARE_ABORT and elected.state().topic_partitions == {TP1, FAR0}
    assert elected.end(pid, 0, commit=False) == CONCURRENT_TRANSACTIONS
    assert elected.init(producer_id=pid, producer_epoch=0).error_code == CONCURRENT_TRANSACTIONS
    # Retries after 100 ms, then 200 ms (doubling): not before.
    elected.advance(99)
    assert len(destinations.requests) == 1
    elected.advance(1)
    assert len(destinations.requests) == 2
    elected.advance(199)
    assert len(destinations.requests) == 2
    # The failover: broker 3 leads both partitions now.
    destinations.leaders.update({TP1: 3, FAR0: 3})
    elected.advance(1)
    assert sent(destinations)[-1] == (3, [FAR0, TP1])
    assert elected.state().state is S.COMPLETE_ABORT
    assert all(m.coordinator_epoch == 7 and not m.commit for _, markers in destinations.requests for m in markers)
    elected.advance(10_000)  # nothing is left to send
    assert len(destinations.requests) == 3


def test_a_not_leader_answer_is_retried_and_the_backoff_stops_growing_at_one_second(elected, destinations):
    destinations.leaders[TP1] = 2
    destinations.errors[TP1] = NotLeaderOrFollowerError("broker 2 does not lead out-1")
    pid = open_transaction(elected, TP0)
    elected.add(pid, 0, TP1)
    elected.end(pid, 0, commit=True)
    for wait_ms in (100, 200, 400, 800, 1_000, 1_000):
        before = len(destinations.requests)
        elected.advance(wait_ms - 1)
        assert len(destinations.requests) == before
        elected.advance(1)
        assert len(destinations.requests) == before + 1
    del destinations.errors[TP1]
    elected.advance(1_000)
    assert elected.state().state is S.COMPLETE_COMMIT


def test_obsolete_markers_and_deleted_partitions_count_as_written(elected, destinations):
    destinations.leaders.update({TP1: 2, FAR0: 3})
    destinations.errors.update({TP1: InvalidProducerEpochError("a newer epoch wrote out-1"),
                                FAR0: TransactionCoordinatorFencedError("a newer coordinator wrote far-0")})
    pid = open_transaction(elected, TP0)
    elected.add(pid, 0, TP1, FAR0, FAR1)
    destinations.deleted.add(FAR1)
    assert elected.end(pid, 0, commit=True) == NONE
    assert elected.state().state is S.COMPLETE_COMMIT
    assert sent(destinations) == [(2, [TP1]), (3, [FAR0])]
    elected.advance(10_000)
    assert len(destinations.requests) == 2


def test_a_single_broker_writes_every_marker_itself_at_coordinator_epoch_0(tmp_path):
    h = Harness(tmp_path / "logs")
    try:
        pid = open_transaction(h, TP0, TP1)
        assert h.end(pid, 0, commit=True) == NONE
        assert [p.coordinator_epoch for tp in (TP0, TP1) for p in h.broker.describe_producers(tp.topic, tp.partition)
                ] == [0, 0]
        assert h.broker.node_id == NODE_ID
    finally:
        h.close()


def test_elections_and_resignations_from_another_thread_leave_memory_as_the_log_says(tmp_path):
    h = cluster_harness(tmp_path / "logs")
    partition = h.coordinator.partition_for("tx")
    answers: set[int] = set()
    stop = threading.Event()

    def move_the_partition() -> None:
        """Away and back, again and again; it ends elected."""
        epoch = 1
        while True:
            h.coordinator.on_election(partition, epoch)
            time.sleep(0.002)
            if stop.is_set():
                return
            h.coordinator.on_resignation(partition, epoch + 1)
            epoch += 2

    mover = threading.Thread(target=move_the_partition)
    mover.start()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            init = h.init()
            answers.add(init.error_code)
            if init.error_code == NONE:
                added = set(h.add(init.producer_id, init.producer_epoch, TP0).values())
                answers.update(added)
                # A transaction whose partitions were not added (its Ongoing write lost to a resignation) is
                # Empty once the partition is loaded again: ending it is INVALID_TXN_STATE, as in Kafka.
                if added == {NONE}:
                    answers.add(h.end(init.producer_id, init.producer_epoch, commit=True))
    finally:
        stop.set()
        mover.join(timeout=10)
    assert not mover.is_alive()
    assert NONE in answers and NOT_COORDINATOR in answers
    assert answers <= {NONE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS}
    # What requests changed since the last election is in memory; the log must say the same.
    init = h.init()
    for _ in range(3):  # as a client retries, while the abort of a transaction left open completes
        if init.error_code != CONCURRENT_TRANSACTIONS:
            break
        init = h.init()
    assert init.error_code == NONE and h.add(init.producer_id, init.producer_epoch, TP0) == {TP0: NONE}
    live = h.state()
    memory = (live.state, live.producer_id, live.producer_epoch, live.topic_partitions)
    h.close()
    replayed = cluster_harness(tmp_path / "logs")
    try:
        replayed.coordinator.on_election(partition, 1_000_001)
        again = replayed.state()
        assert (again.state, again.producer_id, again.producer_epoch, again.topic_partitions) == memory
    finally:
        replayed.close()
