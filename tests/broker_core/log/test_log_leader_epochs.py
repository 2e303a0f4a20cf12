"""The Log keeps its leader-epoch cache in step with its batches: appends as leader and as follower,
truncation, retention, and loading (a missing file rebuilt, a file ahead of the log trimmed)."""

from __future__ import annotations

import os

from broker_core.clock import MockTime
from broker_core.config import LogConfig
from broker_core.log.leader_epoch_file_cache import EpochEndOffset
from broker_core.log.log import Log
from format.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from format.layout import LEADER_EPOCH_CHECKPOINT_FILE
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

T0 = 1_800_000_000_000


def batch(*values: bytes, epoch: int = -1, base_offset: int = 0) -> bytes:
    return build_batch([SimpleRecord(v, None, T0 + i) for i, v in enumerate(values)], base_offset=base_offset,
                       partition_leader_epoch=epoch)


def open_log(path, clock=None, **props) -> Log:
    config = LogConfig.from_props({"segment.bytes": 1 << 20, **props})
    return Log.open(str(path / "t-0"), config, clock=clock or MockTime(current_time_ms=T0),
                    had_clean_shutdown=True)


def checkpoint_of(log: Log) -> list[EpochEntry]:
    return LeaderEpochCheckpointFile(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILE)).read()


def stored_epochs(log: Log) -> list[tuple[int, int]]:
    return [(b.header.base_offset, b.header.partition_leader_epoch)
            for b in iter_batches(log.read(log.log_start_offset, 1 << 24, max_offset=log.log_end_offset).records)]


def test_appends_as_leader_stamp_the_leader_epoch_and_start_it_in_the_cache(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(b"a", b"b"))                      # the single broker's epoch 0
    log.maybe_assign_epoch_start_offset(3, log.log_end_offset)
    log.append(batch(b"c"), leader_epoch=3)
    log.append(batch(b"d", b"e"), leader_epoch=3)
    assert stored_epochs(log) == [(0, 0), (2, 3), (3, 3)]
    assert checkpoint_of(log) == [EpochEntry(0, 0), EpochEntry(3, 2)]
    assert log.leader_epoch == 3
    assert log.end_offset_for_epoch(0) == EpochEndOffset(0, 2)
    assert log.end_offset_for_epoch(3) == EpochEndOffset(3, 5)


def test_a_follower_append_keeps_the_leaders_offsets_and_epochs(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(batch(b"a", epoch=1, base_offset=0) + batch(b"b", b"c", epoch=4, base_offset=1))
    assert stored_epochs(log) == [(0, 1), (1, 4)]
    assert checkpoint_of(log) == [EpochEntry(1, 0), EpochEntry(4, 1)]


def test_truncating_the_log_removes_the_epochs_past_its_new_end(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(batch(b"a", b"b", epoch=1) + batch(b"c", epoch=2, base_offset=2)
                           + batch(b"d", epoch=5, base_offset=3))
    log.truncate_to(3)
    assert checkpoint_of(log) == [EpochEntry(1, 0), EpochEntry(2, 2)]
    assert log.end_offset_for_epoch(2) == EpochEndOffset(2, 3)
    assert log.end_offset_for_epoch(5) is None


def test_an_epoch_a_leader_began_and_wrote_nothing_in_goes_when_the_log_truncates_to_its_end(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(b"a"))
    log.maybe_assign_epoch_start_offset(6, 1)
    log.truncate_to(1)
    assert checkpoint_of(log) == [EpochEntry(0, 0)]


def test_deleting_old_segments_moves_the_first_epoch_to_the_new_log_start_offset(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(batch(b"a", b"b", epoch=1))
    log.roll()
    log.append_as_follower(batch(b"c", epoch=1, base_offset=2) + batch(b"d", epoch=2, base_offset=3))
    log.roll()
    assert log.delete_old_segments(lambda segment, _: segment.base_offset == 0, "test") == 1
    assert log.log_start_offset == 2
    assert checkpoint_of(log) == [EpochEntry(1, 2), EpochEntry(2, 3)]


def test_a_missing_checkpoint_is_rebuilt_from_the_batches_partition_leader_epochs(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(batch(b"a", epoch=0) + batch(b"b", epoch=2, base_offset=1)
                           + batch(b"c", epoch=2, base_offset=2) + batch(b"d", epoch=7, base_offset=3))
    log.close()
    os.remove(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILE))
    reopened = open_log(tmp_path)
    assert checkpoint_of(reopened) == [EpochEntry(0, 0), EpochEntry(2, 1), EpochEntry(7, 3)]
    assert reopened.leader_epoch == 7


def test_epochs_the_file_holds_past_the_log_end_after_a_crash_are_dropped_at_open(tmp_path):
    # The epoch is written before the batch: a crash between the two leaves the file ahead of the log.
    log = open_log(tmp_path)
    log.append(batch(b"a", b"b"))
    log.close()
    LeaderEpochCheckpointFile(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILE)).write(
        [EpochEntry(0, 0), EpochEntry(4, 2)])
    reopened = open_log(tmp_path)
    assert checkpoint_of(reopened) == [EpochEntry(0, 0)]
    assert reopened.leader_epoch == 0


def test_recovery_after_an_unclean_shutdown_takes_in_the_epochs_of_the_recovered_batches(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(batch(b"a", epoch=0) + batch(b"b", epoch=3, base_offset=1))
    log.close()
    LeaderEpochCheckpointFile(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILE)).write([EpochEntry(0, 0)])
    config = LogConfig.from_props({"segment.bytes": 1 << 20})
    recovered = Log.open(log.dir, config, clock=MockTime(current_time_ms=T0), had_clean_shutdown=False)
    assert checkpoint_of(recovered) == [EpochEntry(0, 0), EpochEntry(3, 1)]


def test_a_read_only_view_reads_the_epochs_and_writes_nothing(tmp_path):
    log = open_log(tmp_path)
    log.append(batch(b"a"))
    path = os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILE)
    before = os.stat(path).st_mtime_ns
    view = Log.open(log.dir, log.config, read_only=True)
    assert view.leader_epoch_cache.epoch_entries() == [EpochEntry(0, 0)]
    assert os.stat(path).st_mtime_ns == before


def test_a_log_kafka_left_in_a_later_epoch_appends_under_that_epoch(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(batch(b"a", epoch=0) + batch(b"b", epoch=5, base_offset=1))
    log.close()
    LeaderEpochCheckpointFile(os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT_FILE)).write(
        [EpochEntry(0, 0), EpochEntry(5, 1)])
    reopened = open_log(tmp_path)
    reopened.append(batch(b"c"))
    assert stored_epochs(reopened) == [(0, 0), (1, 5), (2, 5)]
    assert checkpoint_of(reopened) == [EpochEntry(0, 0), EpochEntry(5, 1)]
