"""Idempotent and transactional appends, the last stable offset, producer snapshots and
their recovery, at the level of one partition's ``Log``."""

import os
import shutil

import pytest

from broker_core.clock import MockTime
from broker_core.config import LogConfig
from broker_core.errors import (InvalidProducerEpochError, InvalidRecordError, InvalidTxnStateError,
                                OutOfOrderSequenceNumberError)
from broker_core.log.log import LATEST_TIMESTAMP, IsolationLevel, Log, ProducerStateConfig
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches
from format.txn_index import AbortedTxn

from cleaner_kit import open_log as open_partition_log

T0 = 1_800_000_000_000


def open_log(tmp_path, clock=None, producer_state_config=ProducerStateConfig(), **overrides):
    config = LogConfig.from_props({k.replace("_", "."): v for k, v in overrides.items()})
    clock = clock or MockTime(current_time_ms=T0)
    return open_partition_log(tmp_path, clock, config, TopicPartition("topic", 0),
                              producer_state_config=producer_state_config), clock


def batch(n=3, pid=7, epoch=0, seq=0, txn=False, tag=b"v", ts=T0):
    return build_batch([SimpleRecord(tag + b"-%d" % i, None, ts) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def stored_batches(log):
    out = []
    for segment in log.segments:
        out.extend((b.header.base_offset, b.header.producer_id, b.header.base_sequence)
                   for b in segment.log.batches())
    return out


def snapshot_names(log):
    return sorted(n for n in os.listdir(log.dir) if n.endswith(".snapshot"))


def txn_indexes(log):
    return {s.base_offset: s.txn_index.all_aborted_txns() for s in log.segments}


def test_a_retried_batch_gets_its_original_offsets_and_is_written_once(tmp_path):
    log, _ = open_log(tmp_path)
    first = log.append(batch(3, seq=0))
    log.append(batch(2, pid=8))
    retry = log.append(batch(3, seq=0))
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (0, 2, True)
    assert log.log_end_offset == 5 and first.duplicate is False
    assert stored_batches(log) == [(0, 7, 0), (3, 8, 0)]


def test_any_of_the_last_five_batches_is_recognised_but_not_an_older_one(tmp_path):
    log, _ = open_log(tmp_path)
    for n in range(6):
        log.append(batch(1, seq=n))
    assert log.append(batch(1, seq=1)).first_offset == 1
    with pytest.raises(OutOfOrderSequenceNumberError, match="0 \\(incoming seq. number\\), 5"):
        log.append(batch(1, seq=0))
    assert log.log_end_offset == 6


def test_a_batch_out_of_sequence_is_refused_and_nothing_is_written(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(batch(3, seq=0))
    with pytest.raises(OutOfOrderSequenceNumberError,
                       match=r"Log\(topic-0\)|topic-0: out of order sequence number for producer 7 at offset 3: 5"):
        log.append(batch(1, seq=5))
    assert log.log_end_offset == 3 and log.size == len(batch(3, seq=0))


def test_an_older_producer_epoch_is_fenced(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(batch(1, epoch=1))
    with pytest.raises(InvalidProducerEpochError, match="epoch of producer 7 at offset 1 is 0, which is smaller "
                                                        "than the last seen epoch 1"):
        log.append(batch(1, epoch=0, seq=1))
    assert log.append(batch(1, epoch=2, seq=0)).first_offset == 1


def test_a_batch_with_a_producer_id_and_no_sequence_is_an_invalid_record(tmp_path):
    log, _ = open_log(tmp_path)
    with pytest.raises(InvalidRecordError, match="invalid sequence number -1 .* producer id 7"):
        log.append(batch(1, seq=-1))


def test_an_open_transaction_holds_the_last_stable_offset_at_its_first_offset(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(build_batch([SimpleRecord(b"plain")]))
    log.append(batch(2, pid=1, txn=True))
    log.append(batch(2, pid=2, txn=True))
    log.append(build_batch([SimpleRecord(b"plain")]))
    assert (log.last_stable_offset, log.high_watermark) == (1, 6)
    log.append_control_marker(1, 0, 0, commit=True)
    assert log.last_stable_offset == 3
    log.append_control_marker(2, 0, 0, commit=False)
    assert log.last_stable_offset == log.high_watermark == 8


def test_an_abort_marker_indexes_its_transaction_with_kafkas_last_stable_offset(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(batch(2, pid=1, txn=True))       # 0-1
    log.append(batch(2, pid=2, txn=True))       # 2-3
    log.append_control_marker(1, 0, 0, commit=False)  # 4: pid 2 still open at 2
    log.append_control_marker(2, 0, 0, commit=False)  # 5: nothing open after it
    assert txn_indexes(log) == {0: [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 5, 6)]}


def test_a_plain_batch_of_a_producer_inside_its_transaction_is_an_invalid_txn_state(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(batch(1, txn=True))
    with pytest.raises(InvalidTxnStateError, match="transaction open since offset 0"):
        log.append(batch(1, seq=1))


def test_a_marker_of_a_fenced_epoch_is_refused(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(batch(1, epoch=3, txn=True))
    with pytest.raises(InvalidProducerEpochError):
        log.append_control_marker(7, 2, 0, commit=True)
    assert log.last_stable_offset == 0
    log.append_control_marker(7, 4, 0, commit=False)  # a bumped epoch aborts a zombie's transaction
    assert log.last_stable_offset == 2


def test_read_committed_fetches_stop_at_the_lso_and_list_offsets_answers_it(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(build_batch([SimpleRecord(b"plain")]))
    log.append(batch(2, pid=1, txn=True))
    assert log.read(0, 1 << 20, max_offset=log.fetchable_offset(IsolationLevel.READ_COMMITTED)).records == \
        log.read(0, 1 << 20, max_offset=1).records
    offsets = [b.header.base_offset for b in
               iter_batches(log.read(0, 1 << 20, max_offset=log.fetchable_offset(IsolationLevel.READ_COMMITTED))
                            .records)]
    assert offsets == [0]
    assert log.fetch_offset_for_timestamp(LATEST_TIMESTAMP, IsolationLevel.READ_COMMITTED).offset == 1
    assert log.fetch_offset_for_timestamp(LATEST_TIMESTAMP, IsolationLevel.READ_UNCOMMITTED).offset == 3
    assert log.fetch_offset_for_timestamp(T0, IsolationLevel.READ_COMMITTED) is None


def test_a_snapshot_is_written_at_every_roll_and_on_close(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=400)
    for n in range(6):
        log.append(batch(2, seq=2 * n, tag=b"x" * 100))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    assert snapshot_names(log) == ["%020d.snapshot" % b for b in bases[1:]]
    log.close()
    assert snapshot_names(log)[-1] == "%020d.snapshot" % 12
    reopened = Log.open(log.dir, log.config, had_clean_shutdown=True, clock=clock)
    assert reopened.append(batch(2, seq=10, tag=b"x" * 100)).first_offset == 10  # the retry of the last batch
    assert reopened.log_end_offset == 12


def test_snapshots_go_with_their_segments(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=400, retention_ms=1000, file_delete_delay_ms=0)
    for n in range(6):
        log.append(batch(2, seq=2 * n, tag=b"x" * 100, ts=T0 + n))
    before = snapshot_names(log)
    clock.sleep(10_000)
    deleted = log.delete_retention_ms_breached_segments()
    assert deleted > 0
    gone = [n for n in before if int(n.split(".")[0]) < log.log_start_offset]
    assert gone and not set(gone) & set(snapshot_names(log))
    assert snapshot_names(log) == ["%020d.snapshot" % s.base_offset for s in log.segments]


def test_producers_expire_on_the_log_managers_scheduler(tmp_path):
    log, clock = open_log(tmp_path, producer_state_config=ProducerStateConfig(60_000, 1_000))
    log.append(batch(1, ts=T0))
    clock.sleep(59_000)
    log.scheduler.run_due()
    assert log.producer_state.last_entry(7) is not None
    clock.sleep(1_000)
    log.scheduler.run_due()
    assert log.producer_state.last_entry(7) is None
    assert log.append(batch(1, seq=0)).duplicate is False  # forgotten: the retry is a new batch


def test_truncation_reloads_the_producer_state_below_it(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(batch(1, seq=0))
    log.append(batch(1, seq=1, txn=True))
    log.truncate_to(1)
    assert log.last_stable_offset == 1
    assert log.producer_state.last_entry(7).last_seq == 0
    assert log.append(batch(1, seq=1)).first_offset == 1


def _transactional_history(log):
    """Producers 1..3 over several segments: commits, aborts, one transaction left open."""
    seqs = {1: 0, 2: 0, 3: 0}
    for round_ in range(6):
        for pid in (1, 2, 3):
            log.append(batch(2, pid=pid, seq=seqs[pid], txn=True, tag=b"r%d" % round_ + b"x" * 80))
            seqs[pid] += 2
        log.append_control_marker(1, 0, 0, commit=round_ % 2 == 0)
        log.append_control_marker(2, 0, 0, commit=False)
        if round_ < 5:
            log.append_control_marker(3, 0, 0, commit=round_ % 3 == 0)
    return seqs


def _state(log):
    """What a snapshot keeps (a restart knows each producer's last batch only, as in Kafka)."""
    producers = {pid: (e.producer_epoch, e.coordinator_epoch, e.batches[-1] if e.batches else None,
                       e.current_txn_first_offset)
                 for pid, e in log.producer_state.producers.items()}
    return producers, log.last_stable_offset, txn_indexes(log)


@pytest.mark.parametrize("snapshots", ["kept", "lost"])
def test_recovery_after_an_unclean_shutdown_rebuilds_producer_state_and_txnindex_as_a_clean_run(tmp_path,
                                                                                               snapshots):
    log, clock = open_log(tmp_path / "clean", segment_bytes=1500)
    _transactional_history(log)
    assert len(log.segments) > 3
    crashed_dir = str(tmp_path / "crashed" / "topic-0")
    shutil.copytree(log.dir, crashed_dir)  # as the files stood when the process died
    expected = _state(log)
    log.close()
    clean = Log.open(log.dir, log.config, had_clean_shutdown=True, clock=clock)
    assert _state(clean) == expected
    for name in os.listdir(crashed_dir):
        if name.endswith(".txnindex") or (snapshots == "lost" and name.endswith(".snapshot")):
            os.remove(os.path.join(crashed_dir, name))  # the index writes never reached the disk
    recovered = Log.open(crashed_dir, log.config, recovery_point=0, had_clean_shutdown=False, clock=clock)
    assert _state(recovered) == expected
    for segment in recovered.segments:
        clean_index = os.path.join(log.dir, "%020d.txnindex" % segment.base_offset)
        rebuilt = os.path.join(crashed_dir, "%020d.txnindex" % segment.base_offset)
        assert (open(rebuilt, "rb").read() if os.path.exists(rebuilt) else b"") == \
            (open(clean_index, "rb").read() if os.path.exists(clean_index) else b"")


def test_recovery_from_a_recovery_point_keeps_the_txnindex_below_it_and_rebuilds_the_rest(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=1500)
    _transactional_history(log)
    bases = [s.base_offset for s in log.segments]
    expected = _state(log)
    log.flush(bases[2])
    crashed = str(tmp_path / "crashed" / "topic-0")
    shutil.copytree(log.dir, crashed)
    active_index = os.path.join(crashed, "%020d.txnindex" % bases[-1])
    if os.path.exists(active_index):
        os.remove(active_index)
    recovered = Log.open(crashed, log.config, recovery_point=bases[2], had_clean_shutdown=False, clock=clock)
    assert _state(recovered) == expected
