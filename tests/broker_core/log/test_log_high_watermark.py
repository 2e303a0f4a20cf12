"""The high watermark: the log end on a single broker, moved by replication otherwise, never above the log
end, checkpointed in ``replication-offset-checkpoint`` and restored at open."""

from __future__ import annotations

import os

import pytest

from broker_core.clock import MockTime
from broker_core.config import BrokerConfig, LogConfig
from broker_core.log.log import Log
from broker_core.log.log_manager import LogManager
from format.checkpoint import OffsetCheckpointFile
from format.layout import REPLICATED_MARKER_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE, TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

T0 = 1_800_000_000_000
TP = TopicPartition("t", 0)


def batch(*values: bytes) -> bytes:
    return build_batch([SimpleRecord(v, None, T0 + i) for i, v in enumerate(values)])


def open_log(path, **kwargs) -> Log:
    return Log.open(str(path / "t-0"), LogConfig(), clock=MockTime(current_time_ms=T0), had_clean_shutdown=True,
                    **kwargs)


def offsets_read(log: Log, start: int = 0) -> list[int]:
    return [r.offset for b in iter_batches(log.read(start, 1 << 20).records) for r in b.records()]


def test_on_a_single_broker_every_append_is_committed_the_high_watermark_is_the_log_end(tmp_path):
    log = open_log(tmp_path)
    for n in range(1, 4):
        log.append(batch(b"x", b"y"))
        assert log.high_watermark == log.log_end_offset == 2 * n
    log.truncate_to(4)
    assert log.high_watermark == log.log_end_offset == 4


def test_a_replicated_log_holds_its_high_watermark_until_told_and_readers_stop_there(tmp_path):
    log = open_log(tmp_path, sole_replica=False)
    log.append(batch(b"a", b"b", b"c"))
    assert (log.log_end_offset, log.high_watermark) == (3, 0)
    assert offsets_read(log) == []
    assert log.maybe_increment_high_watermark(2) == 0
    assert offsets_read(log) == [0, 1, 2]  # whole batches: the one holding offset 1 is served
    assert log.read(0, 1 << 20, max_offset=log.log_end_offset).records  # a follower reads to the log end


def test_the_high_watermark_only_moves_forward_and_never_past_the_log_end(tmp_path):
    log = open_log(tmp_path, sole_replica=False)
    log.append(batch(b"a", b"b", b"c"))
    log.maybe_increment_high_watermark(2)
    assert log.maybe_increment_high_watermark(1) is None and log.high_watermark == 2
    with pytest.raises(ValueError, match=r"Log\(t-0\): high watermark 4 would be above the log end offset 3"):
        log.maybe_increment_high_watermark(4)
    assert log.update_high_watermark(9) == 3  # a follower takes the leader's, bounded by its own log end


def test_truncation_below_the_high_watermark_brings_it_down_with_the_log_end(tmp_path):
    log = open_log(tmp_path, sole_replica=False)
    for value in (b"a", b"b", b"c"):
        log.append(batch(value))
    log.maybe_increment_high_watermark(3)
    log.truncate_to(1)
    assert (log.log_end_offset, log.high_watermark) == (1, 1)


def test_a_replicated_log_restores_its_checkpointed_high_watermark_bounded_by_its_log_end(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(b"a", b"b", b"c"))
    log.close()
    assert open_log(tmp_path, sole_replica=False, high_watermark=2).high_watermark == 2
    assert open_log(tmp_path, sole_replica=False, high_watermark=50).high_watermark == 3
    assert open_log(tmp_path, high_watermark=2).high_watermark == 3  # one replica: all it holds is committed


def test_the_log_manager_checkpoints_high_watermarks_and_hands_them_back_at_open(tmp_path):
    config = BrokerConfig(log_dirs=(str(tmp_path),), replica_high_watermark_checkpoint_interval_ms=5000)
    clock = MockTime(current_time_ms=T0)
    manager = LogManager(config, clock=clock)
    manager.load_logs()
    log = manager.get_or_create_log(TP, LogConfig())
    for value in (b"a", b"b", b"c", b"d"):
        log.append(batch(value))
    path = os.path.join(str(tmp_path), REPLICATION_OFFSET_CHECKPOINT_FILE)
    manager.tick()
    assert not os.path.exists(path)
    clock.sleep(5000)
    manager.tick()
    assert OffsetCheckpointFile(path).read() == {TP: 4}
    log.sole_replica = False
    log.truncate_to(2)
    log.append(batch(b"e"))
    manager.shutdown()
    assert (tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE).read_text() == "0\n1\nt 0 2\n"
    reopened = LogManager(config, clock=clock, sole_replica=False)
    reopened.load_logs()
    assert (reopened.get_log(TP).log_end_offset, reopened.get_log(TP).high_watermark) == (3, 2)
    reopened.shutdown()
    single = LogManager(config, clock=clock)
    single.load_logs()
    assert single.get_log(TP).high_watermark == 3
    single.shutdown()


def test_a_log_manager_in_cluster_mode_marks_its_log_dirs_as_holding_replicas_and_a_single_broker_unmarks_them(
        tmp_path):
    config = BrokerConfig(log_dirs=(str(tmp_path / "a"), str(tmp_path / "b")))
    markers = [tmp_path / d / REPLICATED_MARKER_FILE for d in ("a", "b")]
    replicas = LogManager(config, sole_replica=False)
    replicas.load_logs()
    assert all(m.exists() for m in markers)
    replicas.shutdown()
    assert all(m.exists() for m in markers)
    read_only = LogManager(config, read_only=True)  # a reader writes nothing
    read_only.load_logs()
    read_only.shutdown()
    assert all(m.exists() for m in markers)
    single = LogManager(config)
    single.load_logs()
    assert not any(m.exists() for m in markers)
    single.shutdown()


def test_a_transaction_whose_marker_is_above_the_high_watermark_still_holds_the_last_stable_offset(tmp_path):
    from broker_core.log.log import IsolationLevel

    log = open_log(tmp_path, sole_replica=False)
    log.append(batch(b"plain"))
    log.append(build_batch([SimpleRecord(b"t%d" % i, None, T0 + i) for i in range(2)], producer_id=7,
                           producer_epoch=0, base_sequence=0, is_transactional=True))  # offsets 1..2
    log.append_control_marker(7, 0, 0, commit=True)  # offset 3
    log.maybe_increment_high_watermark(3)
    assert (log.high_watermark, log.last_stable_offset) == (3, 1)  # the commit is not replicated yet
    assert log.fetchable_offset(IsolationLevel.READ_COMMITTED) == 1
    log.maybe_increment_high_watermark(4)
    assert log.last_stable_offset == 4
