"""The compaction lease table on an embedded broker with a simulated clock: leasing pauses the
broker's cleaner, all or nothing; leases renew, release and lapse; ReplaceSegments' swap."""

from __future__ import annotations

import os

import pytest

from broker_core.broker import Broker
from broker_core.clock import MockTime
from broker_core.errors import (ConcurrentTransactionsError, InvalidRequestError, KafkaStorageError,
                                UnknownMemberIdError, UnknownTopicOrPartitionError)
from broker_core.log.cleaner.cleaner import new_cleaned_segment
from broker_core.log.cleaner.log_cleaner_manager import Paused
from broker_core.log.compaction_leases import LEASE_EXPIRATION_CHECK_INTERVAL_MS, CleanedSegment, CompactionLeases
from format import layout
from format.checkpoint import OffsetCheckpointFile
from format.layout import TopicPartition

T0 = 1_767_225_600_000
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": 1000, "min.cleanable.dirty.ratio": 0.99,
             "file.delete.delay.ms": 0}
TABLE0 = TopicPartition("table", 0)
TABLE1 = TopicPartition("table", 1)


@pytest.fixture()
def clock() -> MockTime:
    return MockTime(current_time_ms=T0)


@pytest.fixture()
def broker(tmp_path, clock):
    with Broker(str(tmp_path / "logs"), {"log.cleaner.enable": True}, clock=clock, background=False) as b:
        b.create_topic("table", 2, COMPACTED)
        b.create_topic("events", 1, {"cleanup.policy": "delete"})
        yield b


@pytest.fixture()
def leases(broker) -> CompactionLeases:
    return broker.compaction_leases


def cleaning_state(broker, tp):
    return broker.log_manager.cleaner.manager.state(tp)


def key_of(i: int) -> bytes:
    # Every fourth record has a key of its own (it survives compaction); the rest share five keys.
    return b"u%d" % i if i % 4 == 0 else b"k%d" % (i % 5)


def fill(broker, n: int = 60, tp: TopicPartition = TABLE0) -> list[tuple[int, bytes, bytes]]:
    """``n`` keyed records, one batch each; (offset, key, value) of each."""
    out = []
    for i in range(n):
        (meta,) = broker.produce(tp.topic, [(key_of(i), b"value-%d" % i)], partition=tp.partition)
        out.append((meta.offset, key_of(i), b"value-%d" % i))
    return out


def write_cleaned(lg, group, keep: set[int]) -> None:
    """A cleaned copy of ``group``: the batches whose base offset is in ``keep``, as a job writes it."""
    dest = new_cleaned_segment(lg.dir, group[0].base_offset, lg.config)
    for segment in group:
        for batch in segment.log.batches():
            if batch.header.base_offset in keep:
                dest.append(bytes(batch))
    dest.on_becoming_inactive_segment()
    dest.flush()
    dest.close()


def latest_offsets(records) -> set[int]:
    latest = {}
    for offset, key, _ in records:
        latest[key] = offset
    return set(latest.values())


def read_all(broker, tp: TopicPartition = TABLE0) -> list[tuple[int, bytes, bytes]]:
    out = []
    offset = 0
    lg = broker.log_manager.get_log(tp)
    while offset < lg.log_end_offset:
        records = broker.fetch(tp.topic, tp.partition, offset).decoded(offset)
        out.extend((r.offset, r.key, r.value) for r in records)
        offset = records[-1].offset + 1
    return out


# --- acquire ---------------------------------------------------------------------------


def test_acquire_pauses_cleaning_of_each_partition_and_names_its_log_dir(broker, leases):
    outcome = leases.acquire("job-1", [TABLE0, TABLE1], 30_000)
    log_dir = broker.log_manager.log_dirs[0]
    assert [(p.topic_partition, p.log_dir, p.error) for p in outcome.values()] == [
        (TABLE0, log_dir, None), (TABLE1, log_dir, None)]
    assert os.path.isabs(log_dir)
    assert cleaning_state(broker, TABLE0) == Paused(1) and cleaning_state(broker, TABLE1) == Paused(1)
    assert leases.holder(TABLE0) == "job-1" and leases.leased_partitions("job-1") == [TABLE0, TABLE1]


def test_acquire_is_all_or_nothing_when_another_lease_holds_a_partition(broker, leases):
    leases.acquire("job-1", [TABLE1], 30_000)
    outcome = leases.acquire("job-2", [TABLE0, TABLE1], 30_000)
    assert outcome[TABLE0].error is None and outcome[TABLE0].log_dir == ""
    assert isinstance(outcome[TABLE1].error, ConcurrentTransactionsError)
    assert outcome[TABLE1].error.code == 51 and "'job-1'" in str(outcome[TABLE1].error)
    assert leases.holder(TABLE0) is None and leases.leased_partitions("job-2") == []
    assert cleaning_state(broker, TABLE0) is None  # not paused, not even for a moment left over
    assert cleaning_state(broker, TABLE1) == Paused(1)


def test_acquire_of_an_unknown_partition_leases_nothing(broker, leases):
    outcome = leases.acquire("job-1", [TABLE0, TopicPartition("table", 7)], 30_000)
    assert outcome[TABLE0].error is None
    error = outcome[TopicPartition("table", 7)].error
    assert isinstance(error, UnknownTopicOrPartitionError) and error.code == 3
    assert leases.holder(TABLE0) is None and cleaning_state(broker, TABLE0) is None


def test_acquire_of_a_partition_that_is_not_compacted_is_an_invalid_request(broker, leases):
    outcome = leases.acquire("job-1", [TABLE0, TopicPartition("events", 0)], 30_000)
    error = outcome[TopicPartition("events", 0)].error
    assert isinstance(error, InvalidRequestError) and error.code == 42
    assert "cleanup.policy is delete" in str(error)
    assert leases.holder(TABLE0) is None


def test_acquiring_again_with_the_same_lease_id_renews_without_pausing_twice(broker, leases, clock):
    leases.acquire("job-1", [TABLE0], 1_000)
    clock.sleep(900)
    again = leases.acquire("job-1", [TABLE0], 1_000)
    assert again[TABLE0].error is None
    assert cleaning_state(broker, TABLE0) == Paused(1)
    clock.sleep(900)  # 1800 ms after the first acquire, 900 after the second
    assert leases.holder(TABLE0) == "job-1"
    clock.sleep(100)
    assert leases.holder(TABLE0) is None and cleaning_state(broker, TABLE0) is None


def test_acquiring_more_partitions_with_the_same_lease_id_adds_them(broker, leases):
    leases.acquire("job-1", [TABLE0], 30_000)
    leases.acquire("job-1", [TABLE1], 30_000)
    assert leases.leased_partitions("job-1") == [TABLE0, TABLE1]
    assert cleaning_state(broker, TABLE0) == Paused(1) and cleaning_state(broker, TABLE1) == Paused(1)


@pytest.mark.parametrize("lease_id,lease_ms", [("", 1000), ("job", 0), ("job", -5)])
def test_an_empty_lease_id_or_a_lease_ms_below_one_is_refused(leases, lease_id, lease_ms):
    with pytest.raises(InvalidRequestError):
        leases.acquire(lease_id, [TABLE0], lease_ms)


# --- renew, release, expiry ----------------------------------------------------------------


def test_renew_extends_the_lease_from_now(broker, leases, clock):
    leases.acquire("job-1", [TABLE0], 1_000)
    clock.sleep(800)
    assert [p.topic_partition for p in leases.renew("job-1", 1_000)] == [TABLE0]
    clock.sleep(999)
    assert leases.holder(TABLE0) == "job-1"
    clock.sleep(1)
    assert leases.holder(TABLE0) is None


def test_release_resumes_cleaning_and_forgets_the_lease(broker, leases):
    leases.acquire("job-1", [TABLE0, TABLE1], 30_000)
    released = leases.release("job-1")
    assert [p.topic_partition for p in released] == [TABLE0, TABLE1]
    assert cleaning_state(broker, TABLE0) is None and cleaning_state(broker, TABLE1) is None
    assert leases.holder(TABLE0) is None
    with pytest.raises(UnknownMemberIdError, match="'job-1' is unknown or has expired"):
        leases.renew("job-1", 1_000)
    assert leases.acquire("job-2", [TABLE0], 1_000)[TABLE0].error is None


@pytest.mark.parametrize("call", ["renew", "release"])
def test_an_unknown_lease_id_is_unknown_member_id(leases, call):
    with pytest.raises(UnknownMemberIdError) as caught:
        leases.renew("nobody", 1_000) if call == "renew" else leases.release("nobody")
    assert caught.value.code == 25


def test_the_scheduler_expires_a_lapsed_lease_and_resumes_cleaning(broker, leases, clock):
    leases.acquire("job-1", [TABLE0], 5_000)
    clock.sleep(4_999)
    broker.tick()
    assert cleaning_state(broker, TABLE0) == Paused(1)
    clock.sleep(LEASE_EXPIRATION_CHECK_INTERVAL_MS)
    broker.tick()  # no lease call: only the scheduled check can have resumed it
    assert cleaning_state(broker, TABLE0) is None
    assert leases.leased_partitions("job-1") == []
    with pytest.raises(UnknownMemberIdError):
        leases.release("job-1")


def test_a_lapsed_lease_no_longer_blocks_another(broker, leases, clock):
    leases.acquire("job-1", [TABLE0], 1_000)
    clock.sleep(1_000)
    assert leases.acquire("job-2", [TABLE0], 1_000)[TABLE0].error is None
    assert leases.holder(TABLE0) == "job-2" and cleaning_state(broker, TABLE0) == Paused(1)


def test_a_partition_deleted_while_leased_is_dropped_from_the_lease(broker, leases):
    broker.create_topic("other", 1, COMPACTED)
    other = TopicPartition("other", 0)
    leases.acquire("job-1", [TABLE0, other], 30_000)
    broker.delete_topic("other")
    assert leases.leased_partitions("job-1") == [TABLE0]
    assert cleaning_state(broker, other) is None
    # Created again, it is another log: free to lease, and leasing pauses it once.
    broker.create_topic("other", 1, COMPACTED)
    assert leases.acquire("job-2", [other], 30_000)[other].error is None
    assert cleaning_state(broker, other) == Paused(1)
    assert [p.topic_partition for p in leases.release("job-1")] == [TABLE0]


def test_without_a_cleaner_leases_pause_nothing_but_still_exclude_each_other(tmp_path, clock):
    with Broker(str(tmp_path / "logs"), {"log.cleaner.enable": False}, clock=clock, background=False) as b:
        b.create_topic("table", 1, COMPACTED)
        assert b.log_manager.cleaner is None
        assert b.compaction_leases.acquire("job-1", [TABLE0], 1_000)[TABLE0].error is None
        assert b.compaction_leases.acquire("job-2", [TABLE0], 1_000)[TABLE0].error.code == 51
        clock.sleep(1_000)
        b.tick()
        assert b.compaction_leases.holder(TABLE0) is None


# --- replace_segments --------------------------------------------------------------------


def leased_log_with_segments(broker, leases, n: int = 60):
    records = fill(broker, n)
    leases.acquire("job-1", [TABLE0], 30_000)
    lg = broker.log_manager.get_log(TABLE0)
    assert len(lg.segments) >= 4
    return lg, records


def test_replace_segments_swaps_the_cleaned_segment_in_and_moves_the_checkpoint(broker, leases):
    lg, records = leased_log_with_segments(broker, leases)
    group = lg.segments[:3]
    end = lg.segments[3].base_offset
    keep = latest_offsets(records) & set(range(end))
    write_cleaned(lg, group, keep)
    leases.replace_segments("job-1", TABLE0, [CleanedSegment(group[0].base_offset,
                                                             tuple(s.base_offset for s in group))], end)
    assert [s.base_offset for s in lg.segments][:2] == [group[0].base_offset, end]
    assert read_all(broker) == [r for r in records if r[0] >= end or r[0] in keep]
    checkpoint = OffsetCheckpointFile(os.path.join(broker.log_manager.log_dirs[0],
                                                   layout.CLEANER_OFFSET_CHECKPOINT_FILE)).read()
    assert checkpoint[TABLE0] == end
    assert not [n for n in os.listdir(lg.dir) if n.endswith(layout.CLEANED_FILE_SUFFIX)]
    assert leases.holder(TABLE0) == "job-1" and cleaning_state(broker, TABLE0) == Paused(1)


def test_replace_segments_swaps_several_groups_in_offset_order(broker, leases):
    lg, records = leased_log_with_segments(broker, leases, 90)
    segments = lg.segments
    assert len(segments) >= 5
    end = segments[4].base_offset
    keep = latest_offsets(records) & set(range(end))
    write_cleaned(lg, segments[2:4], keep)
    write_cleaned(lg, segments[0:2], keep)
    leases.replace_segments("job-1", TABLE0, [
        CleanedSegment(segments[2].base_offset, (segments[2].base_offset, segments[3].base_offset)),
        CleanedSegment(segments[0].base_offset, (segments[0].base_offset, segments[1].base_offset)),
    ], end)
    assert [s.base_offset for s in lg.segments][:3] == [segments[0].base_offset, segments[2].base_offset, end]
    assert read_all(broker) == [r for r in records if r[0] >= end or r[0] in keep]


def test_replace_segments_needs_the_lease_to_hold_the_partition(broker, leases):
    lg, _ = leased_log_with_segments(broker, leases)
    base = lg.segments[0].base_offset
    with pytest.raises(UnknownMemberIdError, match="does not hold partition table-1"):
        leases.replace_segments("job-1", TABLE1, [], 0)
    with pytest.raises(UnknownMemberIdError, match="unknown or has expired"):
        leases.replace_segments("job-2", TABLE0, [CleanedSegment(base, (base,))], 0)


def _invalid_cases(lg):
    s = [seg.base_offset for seg in lg.segments]
    active = s[-1]
    return {
        "active": ([CleanedSegment(s[-2], (s[-2], active))], s[-2], "is the active segment"),
        "not current": ([CleanedSegment(s[0], (s[0], s[1] + 1))], s[0], "is not the base offset of a current"),
        "gap": ([CleanedSegment(s[0], (s[0], s[2]))], s[0], "are not consecutive"),
        "first is not base": ([CleanedSegment(s[0], (s[1], s[2]))], s[0], "must start the segments"),
        "twice": ([CleanedSegment(s[0], (s[0], s[1])), CleanedSegment(s[1], (s[1],))], s[0], "replaced twice"),
        "no file": ([CleanedSegment(s[1], (s[1],))], s[0], "does not exist"),
        "checkpoint past active": ([CleanedSegment(s[0], (s[0],))], active + 1, "cleaned-through offset"),
    }


@pytest.mark.parametrize("case", ["active", "not current", "gap", "first is not base", "twice", "no file",
                                  "checkpoint past active"])
def test_replace_segments_checks_everything_before_swapping_anything(broker, leases, case):
    lg, records = leased_log_with_segments(broker, leases)
    write_cleaned(lg, lg.segments[:1], set())  # only segment 0 has cleaned files
    segments, through, message = _invalid_cases(lg)[case]
    before = [(s.base_offset, s.size) for s in lg.segments]
    with pytest.raises(InvalidRequestError, match=message):
        leases.replace_segments("job-1", TABLE0, segments, through)
    assert [(s.base_offset, s.size) for s in lg.segments] == before
    assert read_all(broker) == records


def test_a_cleaned_segment_reaching_past_the_segments_it_replaces_is_refused(broker, leases):
    lg, records = leased_log_with_segments(broker, leases)
    s = lg.segments
    write_cleaned(lg, s[:2], set(range(s[2].base_offset)))
    with pytest.raises(InvalidRequestError, match="past the segments it replaces"):
        leases.replace_segments("job-1", TABLE0, [CleanedSegment(s[0].base_offset, (s[0].base_offset,))],
                                s[1].base_offset)
    assert read_all(broker) == records


def test_a_torn_cleaned_segment_is_a_storage_error_and_nothing_is_swapped(broker, leases):
    lg, records = leased_log_with_segments(broker, leases)
    s = lg.segments
    write_cleaned(lg, s[:1], set(range(s[1].base_offset)))
    path = os.path.join(lg.dir, layout.log_file_name(s[0].base_offset) + layout.CLEANED_FILE_SUFFIX)
    os.truncate(path, os.path.getsize(path) - 7)
    with pytest.raises(KafkaStorageError, match="cannot read cleaned segment"):
        leases.replace_segments("job-1", TABLE0, [CleanedSegment(s[0].base_offset, (s[0].base_offset,))],
                                s[1].base_offset)
    assert read_all(broker) == records
