import os

import pytest
from hypothesis import given, strategies as st

from broker_core.errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceNumberError,
                                TransactionCoordinatorFencedError)
from broker_core.log.producer_state_manager import (NUM_BATCHES_TO_RETAIN, AppendOrigin, ProducerStateManager,
                                                    decrement_sequence)
from format.control import ControlRecordType, EndTransactionMarker
from format.record import SimpleRecord
from format.record_batch import BatchHeader, build_batch

DAY = 86_400_000
T0 = 1_800_000_000_000


def header(count=1, pid=7, epoch=0, seq=0, txn=False, ts=T0):
    return BatchHeader.parse(build_batch([SimpleRecord(b"v", None, ts)] * count, producer_id=pid,
                                         producer_epoch=epoch, base_sequence=seq, is_transactional=txn))


def manager(tmp_path, expiration_ms=DAY):
    return ProducerStateManager(str(tmp_path), "topic-0", expiration_ms)


def append(state, h, offset, origin=AppendOrigin.CLIENT):
    info = state.prepare_update(h.producer_id, origin)
    info.append_data_batch(h, offset)
    state.update(info)
    state.update_map_end_offset(offset + h.last_offset_delta + 1)


def end_txn(state, pid, offset, commit, epoch=0, coordinator_epoch=0, origin=AppendOrigin.COORDINATOR):
    info = state.prepare_update(pid, origin)
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    done = info.append_end_txn_marker(EndTransactionMarker(kind, coordinator_epoch), epoch, offset, T0)
    state.update(info)
    if done is not None:
        state.complete_txn(done)
    state.update_map_end_offset(offset + 1)
    return done


def test_batches_in_sequence_are_taken_and_the_last_five_kept(tmp_path):
    state = manager(tmp_path)
    for n in range(7):
        append(state, header(count=2, seq=2 * n), offset=10 * n)
    entry = state.last_entry(7)
    assert len(entry.batches) == NUM_BATCHES_TO_RETAIN
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (4, 13, 61)


def test_a_gap_in_sequences_is_out_of_order_naming_producer_and_sequences(tmp_path):
    state = manager(tmp_path)
    append(state, header(count=3, seq=0), offset=0)
    info = state.prepare_update(7, AppendOrigin.CLIENT)
    with pytest.raises(OutOfOrderSequenceNumberError,
                       match=r"topic-0: out of order sequence number for producer 7 at offset 3: 5 \(incoming "
                             r"seq. number\), 2 \(current end sequence number\)"):
        info.append_data_batch(header(seq=5), 3)
    assert state.last_entry(7).last_seq == 2  # nothing changed


def test_a_retried_batch_is_found_among_the_last_five_with_its_offsets(tmp_path):
    state = manager(tmp_path)
    for n in range(5):
        append(state, header(count=2, seq=2 * n), offset=100 + 2 * n)
    found = state.last_entry(7).find_duplicate_batch(header(count=2, seq=2))
    assert (found.first_offset, found.last_offset) == (102, 103)
    assert state.last_entry(7).find_duplicate_batch(header(count=2, seq=2, epoch=1)) is None
    assert state.last_entry(7).find_duplicate_batch(header(count=1, seq=2)) is None


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_sequence_zero(tmp_path):
    state = manager(tmp_path)
    append(state, header(epoch=3, seq=0), offset=0)
    with pytest.raises(InvalidProducerEpochError, match="epoch of producer 7 at offset 1 is 2, which is smaller "
                                                        "than the last seen epoch 3"):
        state.prepare_update(7, AppendOrigin.CLIENT).append_data_batch(header(epoch=2, seq=1), 1)
    with pytest.raises(OutOfOrderSequenceNumberError, match="new epoch of producer 7"):
        state.prepare_update(7, AppendOrigin.CLIENT).append_data_batch(header(epoch=4, seq=1), 1)
    append(state, header(epoch=4, seq=0), offset=1)
    assert (state.last_entry(7).producer_epoch, len(state.last_entry(7).batches)) == (4, 1)


def test_an_unknown_producer_may_start_at_any_sequence_as_in_kafka_3(tmp_path):
    state = manager(tmp_path)
    append(state, header(seq=1234), offset=0)
    assert state.last_entry(7).last_seq == 1234


def test_replayed_batches_are_not_checked(tmp_path):
    state = manager(tmp_path)
    append(state, header(seq=0), offset=0)
    append(state, header(seq=9), offset=1, origin=AppendOrigin.REPLICATION)
    assert state.last_entry(7).last_seq == 9


@given(st.integers(0, (1 << 31) - 1), st.integers(0, 1000))
def test_sequences_wrap_at_int32_as_kafkas_decrement_sequence(sequence, decrement):
    first = decrement_sequence(sequence, decrement)
    assert 0 <= first <= (1 << 31) - 1
    assert (first + decrement) % (1 << 31) == sequence


def test_transactions_bound_the_last_stable_offset_until_their_marker_is_below_the_high_watermark(tmp_path):
    state = manager(tmp_path)
    append(state, header(pid=1, txn=True), offset=5)
    append(state, header(pid=2, txn=True), offset=6)
    append(state, header(pid=1, seq=1, txn=True), offset=7)
    assert state.first_unstable_offset == 5
    done = end_txn(state, 1, offset=8, commit=False)
    assert (done.first_offset, done.last_offset, done.is_aborted) == (5, 8, True)
    assert state.first_unstable_offset == 5  # the marker is not replicated yet
    state.on_high_watermark_updated(8)
    assert state.first_unstable_offset == 5
    state.on_high_watermark_updated(9)
    assert state.first_unstable_offset == 6
    assert end_txn(state, 2, offset=9, commit=True).is_aborted is False
    state.on_high_watermark_updated(10)
    assert state.first_unstable_offset is None
    assert end_txn(state, 2, offset=10, commit=True) is None  # nothing was open


def test_the_lso_an_abort_records_is_the_next_open_transaction_of_another_producer(tmp_path):
    state = manager(tmp_path)
    append(state, header(pid=1, txn=True), offset=5)
    append(state, header(pid=2, txn=True), offset=6)
    info = state.prepare_update(1, AppendOrigin.COORDINATOR)
    done = info.append_end_txn_marker(EndTransactionMarker(ControlRecordType.ABORT, 0), 0, 7, T0)
    assert state.last_stable_offset(done) == 6


def test_a_plain_batch_inside_an_open_transaction_is_an_invalid_txn_state(tmp_path):
    state = manager(tmp_path)
    append(state, header(txn=True), offset=0)
    with pytest.raises(InvalidTxnStateError, match="transaction open since offset 0"):
        state.prepare_update(7, AppendOrigin.CLIENT).append_data_batch(header(seq=1), 1)


def test_a_marker_of_an_older_coordinator_epoch_is_fenced(tmp_path):
    state = manager(tmp_path)
    append(state, header(txn=True), offset=0)
    end_txn(state, 7, offset=1, commit=True, coordinator_epoch=5)
    append(state, header(seq=1, txn=True), offset=2)
    info = state.prepare_update(7, AppendOrigin.COORDINATOR)
    with pytest.raises(TransactionCoordinatorFencedError, match=r"4 \(zombie\), 5 \(current\)"):
        info.append_end_txn_marker(EndTransactionMarker(ControlRecordType.COMMIT, 4), 0, 3, T0)


def test_producers_expire_after_producer_id_expiration_ms_unless_a_transaction_is_open(tmp_path):
    state = manager(tmp_path, expiration_ms=1000)
    append(state, header(pid=1, ts=T0), offset=0)
    append(state, header(pid=2, ts=T0, txn=True), offset=1)
    assert state.remove_expired_producers(T0 + 999) == []
    assert state.remove_expired_producers(T0 + 1000) == [1]
    assert sorted(state.producers) == [2]


def test_a_snapshot_restores_every_producer_and_open_transaction(tmp_path):
    state = manager(tmp_path)
    append(state, header(pid=1, count=3, seq=0, epoch=2), offset=0)
    append(state, header(pid=2, txn=True), offset=3)
    end_txn(state, 1, offset=4, commit=True, epoch=2, coordinator_epoch=6)
    path = state.take_snapshot()
    assert os.path.basename(path) == "00000000000000000005.snapshot"
    loaded = manager(tmp_path)
    loaded.truncate_and_reload(0, 5, T0)
    assert loaded.map_end_offset == 5
    assert loaded.first_unstable_offset == 3
    one = loaded.last_entry(1)
    assert (one.producer_epoch, one.coordinator_epoch, one.first_seq, one.last_seq, one.last_data_offset) == \
        (2, 6, 0, 2, 2)
    assert loaded.last_entry(1).find_duplicate_batch(header(pid=1, count=3, seq=0, epoch=2)).first_offset == 0


def test_reloading_skips_snapshots_past_the_log_end_and_a_corrupt_one(tmp_path):
    state = manager(tmp_path)
    for offset in (1, 2, 3):
        append(state, header(seq=offset - 1), offset=offset - 1)
        state.take_snapshot()
    with open(os.path.join(tmp_path, "00000000000000000002.snapshot"), "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    loaded = manager(tmp_path)
    loaded.truncate_and_reload(0, 2, T0)
    assert loaded.map_end_offset == 1 and loaded.last_entry(7).last_seq == 0
    assert loaded.snapshot_offsets == [1]
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000001.snapshot"]
