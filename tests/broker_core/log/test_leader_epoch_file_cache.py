"""The leader-epoch cache: Kafka's ``leader-epoch-checkpoint`` file and OffsetsForLeaderEpoch's answers."""

from __future__ import annotations

import pytest

from broker_core.log.leader_epoch_file_cache import UNDEFINED_EPOCH_END_OFFSET, EpochEndOffset, LeaderEpochFileCache
from format.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from format.errors import CheckpointError
from format.layout import LEADER_EPOCH_CHECKPOINT_FILE


def cache_in(tmp_path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache("t-0", LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_the_checkpoint_is_kafkas_format_version_0_a_count_and_epoch_start_offset_lines(tmp_path):
    cache_in(tmp_path, (0, 0), (2, 15), (5, 40))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n3\n0 0\n2 15\n5 40\n"


def test_a_new_cache_reads_back_what_every_change_wrote(tmp_path):
    cache = cache_in(tmp_path, (0, 0), (2, 15), (5, 40))
    cache.truncate_from_end(40)
    cache.truncate_from_start(7)
    reread = LeaderEpochFileCache("t-0", LeaderEpochCheckpointFile(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE))
    assert reread.epoch_entries() == [EpochEntry(0, 7), EpochEntry(2, 15)]


def test_the_latest_epoch_ends_at_the_log_end(tmp_path):
    cache = cache_in(tmp_path, (0, 0), (2, 15))
    assert cache.end_offset_for(2, log_end_offset=27) == EpochEndOffset(2, 27)


def test_an_older_epoch_ends_where_the_next_one_starts(tmp_path):
    cache = cache_in(tmp_path, (0, 0), (2, 15), (5, 40))
    assert cache.end_offset_for(0, log_end_offset=60) == EpochEndOffset(0, 15)
    assert cache.end_offset_for(2, log_end_offset=60) == EpochEndOffset(2, 40)


def test_an_epoch_the_log_skipped_answers_the_largest_epoch_below_it_and_the_next_start(tmp_path):
    # KIP-279: the requester learns the epoch it must look up in its own log next.
    cache = cache_in(tmp_path, (0, 0), (2, 15), (5, 40))
    assert cache.end_offset_for(3, log_end_offset=60) == EpochEndOffset(2, 40)
    assert cache.end_offset_for(1, log_end_offset=60) == EpochEndOffset(0, 15)


def test_an_epoch_below_every_cached_one_ends_where_the_first_cached_one_starts(tmp_path):
    cache = cache_in(tmp_path, (3, 100), (4, 120))
    assert cache.end_offset_for(1, log_end_offset=130) == EpochEndOffset(1, 100)


def test_an_undefined_or_a_newer_epoch_has_no_end_offset(tmp_path):
    cache = cache_in(tmp_path, (0, 0), (2, 15))
    assert cache.end_offset_for(-1, log_end_offset=20) == UNDEFINED_EPOCH_END_OFFSET
    assert cache.end_offset_for(7, log_end_offset=20) == UNDEFINED_EPOCH_END_OFFSET
    assert LeaderEpochFileCache("t-0", None).end_offset_for(0, log_end_offset=0) == UNDEFINED_EPOCH_END_OFFSET


def test_the_same_epoch_at_a_later_offset_changes_nothing(tmp_path):
    cache = cache_in(tmp_path, (0, 0), (2, 15))
    assert cache.assign(2, 30) is False
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 15)]


def test_a_new_epoch_at_a_lower_offset_replaces_the_entries_it_conflicts_with(tmp_path):
    # A follower takes in the leader's history: entries at or above the new epoch or its offset go.
    cache = cache_in(tmp_path, (0, 0), (2, 15), (5, 40))
    cache.assign(3, 20)
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 15), EpochEntry(3, 20)]
    cache.assign(1, 10)
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(1, 10)]


def test_truncating_from_the_end_drops_the_epochs_starting_at_or_past_the_new_log_end(tmp_path):
    cache = cache_in(tmp_path, (0, 0), (2, 15), (5, 40))
    assert cache.truncate_from_end(40) == [EpochEntry(5, 40)]
    assert cache.truncate_from_end(16) == []
    assert cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 15)]
    assert cache.latest_epoch == 2


def test_truncating_from_the_start_keeps_the_epoch_holding_the_new_log_start_offset(tmp_path):
    cache = cache_in(tmp_path, (0, 0), (2, 15), (5, 40))
    cache.truncate_from_start(20)
    assert cache.epoch_entries() == [EpochEntry(2, 20), EpochEntry(5, 40)]
    cache.truncate_from_start(40)
    assert cache.epoch_entries() == [EpochEntry(5, 40)]


def test_the_epoch_of_an_offset_is_the_one_whose_range_holds_it(tmp_path):
    cache = cache_in(tmp_path, (1, 10), (2, 15))
    assert [cache.epoch_for_offset(o) for o in (9, 10, 14, 15, 99)] == [None, 1, 1, 2, 2]


def test_a_negative_entry_in_the_checkpoint_is_refused_naming_the_file(tmp_path):
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_text("0\n2\n0 0\n-1 5\n")
    with pytest.raises(CheckpointError, match=f"{path}: invalid leader epoch entry: epoch -1 start offset 5"):
        LeaderEpochFileCache("t-0", LeaderEpochCheckpointFile(path))
