"""The transaction coordinator on simulated time: the state table, InitProducerId's epochs and fencing,
AddPartitionsToTxn and EndTxn with their markers, timeouts, expiry, DescribeTransactions and
ListTransactions, and loading ``__transaction_state`` again — over a real embedded Broker whose
clock is a ``MockTime``, with the timer advanced by hand."""

from __future__ import annotations

import pytest

from broker_core.clock import MockTime
from broker_core.coordinator.transaction import (VALID_PREVIOUS_STATES, IllegalTransactionStateTransitionError,
                                                 ListTransactionsRequest, TransactionMetadata)

from transaction_kit import (ABORT_INTERVAL_MS, CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
                             INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT, INVALID_TXN_STATE, NONE,
                             PRODUCER_FENCED, START_MS, TIMEOUT_MS, TP0, TP1, TRANSACTIONAL_ID_NOT_FOUND, Harness, S)


@pytest.fixture()
def harness(tmp_path):
    h = Harness(tmp_path / "logs")
    yield h
    h.close()


# --- the table ----------------------------------------------------------------------------------


def test_the_transition_table_is_kafkas():
    assert VALID_PREVIOUS_STATES == {
        S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_COMMIT: {S.ONGOING},
        S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
        S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
        S.COMPLETE_ABORT: {S.PREPARE_ABORT},
        S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
        S.PREPARE_EPOCH_FENCE: {S.ONGOING},
    }


def test_a_transition_outside_the_table_raises_naming_the_transactional_id_and_both_states():
    metadata = TransactionMetadata("tx-bad", 1, producer_epoch=0, txn_timeout_ms=TIMEOUT_MS,
                                   txn_last_update_timestamp=START_MS)
    with pytest.raises(IllegalTransactionStateTransitionError, match="'tx-bad' cannot move from Empty to "
                                                                     "PrepareCommit"):
        metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, START_MS)


# --- InitProducerId -------------------------------------------------------------------------------


def test_a_new_transactional_id_gets_a_producer_id_at_epoch_0_and_each_init_bumps_the_epoch(harness):
    first = harness.init()
    assert (first.error_code, first.producer_epoch) == (NONE, 0)
    second = harness.init()
    assert (second.error_code, second.producer_id, second.producer_epoch) == (NONE, first.producer_id, 1)
    assert harness.state().state is S.EMPTY


def test_a_timeout_above_transaction_max_timeout_ms_is_invalid(harness):
    assert harness.init(timeout_ms=15 * 60_000 + 1).error_code == INVALID_TRANSACTION_TIMEOUT
    assert harness.init(timeout_ms=0).error_code == INVALID_TRANSACTION_TIMEOUT


def test_init_during_an_open_transaction_aborts_it_with_a_bumped_epoch_then_answers_the_next(harness):
    pid = harness.init().producer_id
    assert harness.add(pid, 0, TP0) == {TP0: NONE}
    harness.write(pid, 0, TP0, b"zombie")
    assert harness.init().error_code == CONCURRENT_TRANSACTIONS  # the abort of epoch 0 is written
    assert harness.state().state is S.COMPLETE_ABORT and harness.state().producer_epoch == 1
    retried = harness.init()
    assert (retried.error_code, retried.producer_epoch) == (NONE, 2)
    assert harness.committed_values(TP0) == []
    # The zombie at epoch 0 is fenced everywhere.
    assert harness.add(pid, 0, TP1) == {TP1: PRODUCER_FENCED}
    assert harness.end(pid, 0, commit=True) == PRODUCER_FENCED


def test_a_producer_naming_an_epoch_that_is_neither_current_nor_last_is_fenced(harness):
    pid = harness.init().producer_id
    harness.init()  # epoch 1, last epoch -1: a new producer took over
    assert harness.init(producer_id=pid, producer_epoch=0).error_code == PRODUCER_FENCED
    assert harness.init(producer_id=pid + 100, producer_epoch=1).error_code == PRODUCER_FENCED
    bumped = harness.init(producer_id=pid, producer_epoch=1)  # KIP-360: the current epoch may bump itself
    assert (bumped.error_code, bumped.producer_epoch) == (NONE, 2)


# --- AddPartitionsToTxn and EndTxn -----------------------------------------------------------------


def test_commit_writes_a_marker_to_every_partition_and_completes(harness):
    pid = harness.init().producer_id
    assert harness.add(pid, 0, TP0, TP1) == {TP0: NONE, TP1: NONE}
    assert harness.state().state is S.ONGOING and harness.state().txn_start_timestamp == START_MS
    harness.write(pid, 0, TP0, b"a")
    harness.write(pid, 0, TP1, b"b")
    assert harness.committed_values(TP0) == []
    assert harness.end(pid, 0, commit=True) == NONE
    assert harness.committed_values(TP0) == [b"a"] and harness.committed_values(TP1) == [b"b"]
    assert harness.state().state is S.COMPLETE_COMMIT and harness.state().topic_partitions == set()
    assert harness.end(pid, 0, commit=True) == NONE  # a retried commit
    assert harness.end(pid, 0, commit=False) == INVALID_TXN_STATE


def test_abort_leaves_no_record_for_read_committed(harness):
    pid = harness.init().producer_id
    harness.add(pid, 0, TP0)
    harness.write(pid, 0, TP0, b"gone")
    assert harness.end(pid, 0, commit=False) == NONE
    assert harness.committed_values(TP0) == []
    assert harness.state().state is S.COMPLETE_ABORT


def test_ending_without_a_transaction_or_with_another_producer_id_is_refused(harness):
    pid = harness.init().producer_id
    assert harness.end(pid, 0, commit=True) == INVALID_TXN_STATE
    assert harness.add(pid + 1, 0, TP0) == {TP0: INVALID_PRODUCER_ID_MAPPING}
    assert harness.end(pid, 0, commit=True, transactional_id="unknown") == INVALID_PRODUCER_ID_MAPPING


# --- timeouts and expiry ----------------------------------------------------------------------------


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_timer_and_its_producer_fenced(harness):
    pid = harness.init().producer_id
    harness.add(pid, 0, TP0)
    harness.write(pid, 0, TP0, b"late")
    harness.advance(TIMEOUT_MS)
    assert harness.state().state is S.ONGOING  # not past it yet
    harness.advance(ABORT_INTERVAL_MS)
    assert harness.state().state is S.COMPLETE_ABORT and harness.state().producer_epoch == 1
    assert harness.committed_values(TP0) == []
    assert harness.end(pid, 0, commit=True) == PRODUCER_FENCED


def test_an_idle_transactional_id_expires_with_a_tombstone(harness):
    harness.init()
    harness.clock.sleep(3_600_000)
    assert harness.coordinator.remove_expired_transactional_ids() == 1
    assert harness.state() is None
    assert harness.coordinator.describe_transactions(["tx"])[0].error_code == TRANSACTIONAL_ID_NOT_FOUND


# --- DescribeTransactions and ListTransactions ---------------------------------------------------


def test_describe_and_list_show_state_producer_and_partitions(harness):
    pid = harness.init("tx").producer_id
    harness.add(pid, 0, TP1, TP0)
    other = harness.init("tx-idle").producer_id
    (described,) = harness.coordinator.describe_transactions(["tx"])
    assert (described.error_code, described.state, described.producer_id, described.producer_epoch,
            described.transaction_timeout_ms, described.transaction_start_time_ms, described.partitions) == (
        NONE, "Ongoing", pid, 0, TIMEOUT_MS, START_MS, (TP0, TP1))
    error, listed = harness.coordinator.list_transactions(ListTransactionsRequest())
    assert error == NONE and [(t.transactional_id, t.producer_id, t.state) for t in listed] == [
        ("tx", pid, "Ongoing"), ("tx-idle", other, "Empty")]
    _, ongoing = harness.coordinator.list_transactions(ListTransactionsRequest(state_filters=("ongoing",)))
    assert [t.transactional_id for t in ongoing] == ["tx"]
    _, by_id = harness.coordinator.list_transactions(ListTransactionsRequest(producer_id_filters=(other,)))
    assert [t.transactional_id for t in by_id] == ["tx-idle"]
    harness.clock.sleep(5_000)
    _, long_running = harness.coordinator.list_transactions(ListTransactionsRequest(duration_filter_ms=4_000))
    assert [t.transactional_id for t in long_running] == ["tx"]


# --- loading ----------------------------------------------------------------------------------------


def test_requests_before_loading_get_coordinator_load_in_progress_and_loading_restores_state(tmp_path):
    h = Harness(tmp_path / "logs")
    pid = h.init().producer_id
    h.add(pid, 0, TP0)
    h.write(pid, 0, TP0, b"open")
    h.close()
    clock = MockTime(current_time_ms=START_MS + 1)
    again = Harness(tmp_path / "logs", clock, load=False)
    try:
        assert again.init().error_code == COORDINATOR_LOAD_IN_PROGRESS
        assert again.coordinator.describe_transactions(["tx"])[0].error_code == COORDINATOR_LOAD_IN_PROGRESS
        again.coordinator.load()
        metadata = again.state()
        assert (metadata.state, metadata.producer_id, metadata.producer_epoch, metadata.topic_partitions) == (
            S.ONGOING, pid, 0, {TP0})
        # The open transaction still times out after the restart.
        again.advance(TIMEOUT_MS + ABORT_INTERVAL_MS)
        assert again.state().state is S.COMPLETE_ABORT
        assert again.committed_values(TP0) == []
    finally:
        again.close()
