"""Follower truncation by leader epoch (KIP-101, KIP-279): the decision as a pure function, then the seed's
failover scenarios on real logs — where truncating by the high watermark loses or diverges and
truncating by epoch ends with identical logs and every acknowledged record kept."""

from __future__ import annotations

import os

import pytest

from broker_core.clock import MockTime
from broker_core.cluster.partition import LeaderAndIsr, Partition
from broker_core.log.leader_epoch_file_cache import UNDEFINED_EPOCH_END_OFFSET, EpochEndOffset
from broker_core.server.delayed_fetch import diverging_epoch
from broker_core.server.offset_truncation import (OffsetTruncationState, offset_truncation_state,
                                                  truncate_by_leader_epoch, truncate_to_diverging_epoch)
from format.checkpoint import EpochEntry
from format.layout import log_file_name

from tests.broker_core.cluster.replication_kit import (T0, catch_up, committed_bytes, elect, fetch, log_dir,
                                                       offsets_for_leader_epoch, open_replica, records, values)

# --- the decision -------------------------------------------------------------------


def test_the_leader_and_the_follower_agree_on_the_epoch_truncate_to_the_smaller_end():
    assert offset_truncation_state(EpochEndOffset(2, 40), EpochEndOffset(2, 45), log_end_offset=50,
                                   fetch_offset=30) == OffsetTruncationState(40, True)
    assert offset_truncation_state(EpochEndOffset(2, 60), EpochEndOffset(2, 50), log_end_offset=50,
                                   fetch_offset=30) == OffsetTruncationState(50, True)


def test_an_epoch_the_follower_does_not_have_cuts_to_its_own_epoch_below_and_asks_again():
    # KIP-279: the leader answered epoch 2; the follower's largest epoch at or below 2 is 1, ending at 35.
    assert offset_truncation_state(EpochEndOffset(2, 40), EpochEndOffset(1, 35), log_end_offset=50,
                                   fetch_offset=30) == OffsetTruncationState(35, False)


def test_a_leader_without_the_epoch_leaves_the_follower_at_its_high_watermark():
    assert offset_truncation_state(UNDEFINED_EPOCH_END_OFFSET, None, log_end_offset=50,
                                   fetch_offset=30) == OffsetTruncationState(30, True)


def test_a_follower_without_epochs_that_far_back_takes_the_leaders_end_offset():
    assert offset_truncation_state(EpochEndOffset(1, 20), None, log_end_offset=50,
                                   fetch_offset=30) == OffsetTruncationState(20, True)


def test_the_truncation_never_goes_past_the_followers_log_end():
    assert offset_truncation_state(EpochEndOffset(3, 90), EpochEndOffset(3, 90), log_end_offset=50,
                                   fetch_offset=30) == OffsetTruncationState(50, True)


# --- the scenarios ------------------------------------------------------------------


@pytest.fixture()
def clock():
    return MockTime(current_time_ms=T0)


class AcksAllProducer:
    """Writes one record per batch with acks=all and remembers what was acknowledged."""

    def __init__(self):
        self.pending: list[tuple[Partition, int, bytes]] = []
        self.acknowledged: list[tuple[int, bytes]] = []

    def send(self, leader: Partition, value: bytes) -> None:
        info = leader.append_records_to_leader(records(value), required_acks=-1)
        self.pending.append((leader, info.first_offset, value))
        self.poll()

    def poll(self) -> None:
        """Answer the writes whose acks=all is complete (the leader's DelayedProduce check)."""
        waiting = []
        for leader, offset, value in self.pending:
            done, error = leader.check_enough_replicas_reach_offset(offset + 1)
            if done and error is None:
                self.acknowledged.append((offset, value))
            elif not done and leader.is_leader:
                waiting.append((leader, offset, value))
        self.pending = waiting


def crash(partition: Partition) -> None:
    partition.log.close()


def test_a_returning_leader_with_a_diverged_tail_truncates_by_epoch_and_ends_identical_losing_no_acknowledged_record(
        tmp_path, clock):
    a, b = open_replica(tmp_path, 1, clock), open_replica(tmp_path, 2, clock)
    producer = AcksAllProducer()
    elect(a, [b], epoch=0, isr=[1, 2])
    for n in range(5):
        producer.send(a, b"committed-%d" % n)
    catch_up(a, b)
    producer.poll()
    assert [o for o, _ in producer.acknowledged] == [0, 1, 2, 3, 4]
    # A takes two more records; B fetches the first only, and A never hears of it: nothing more is acknowledged.
    producer.send(a, b"a-5")
    producer.send(a, b"a-6")
    fetch(a, b, max_bytes=1)
    producer.poll()
    assert (a.log.high_watermark, b.log.log_end_offset) == (5, 6)

    crash(a)
    elect(b, [], epoch=1, isr=[2])  # the controller: B leads from the ISR, epoch bumped
    for n in range(6, 9):
        producer.send(b, b"b-%d" % n)  # committed on B's ISR of one
    assert [o for o, _ in producer.acknowledged][-3:] == [6, 7, 8]

    a = open_replica(tmp_path, 1, clock, had_clean_shutdown=False, high_watermark=5)
    elect(b, [a], epoch=1, isr=[2])
    assert values(a.log)[5:] == [(5, b"a-5"), (6, b"a-6")]  # A's tail: a-6 where B has b-6
    fetch_from = truncate_by_leader_epoch(a.log, offsets_for_leader_epoch(b))
    assert fetch_from == 6
    catch_up(b, a)  # caught up: B proposes A back into the ISR; the controller writes it
    assert b.pending_isr_change.proposed == LeaderAndIsr(2, 1, (1, 2), 0)
    b.on_isr_update_committed(LeaderAndIsr(2, 1, (1, 2), 1))
    producer.send(b, b"b-9")
    catch_up(b, a)
    producer.poll()

    end = b.log.high_watermark
    assert end == b.log.log_end_offset == a.log.log_end_offset == 10
    assert committed_bytes(a.log, end) == committed_bytes(b.log, end)
    assert a.log.leader_epoch_cache.epoch_entries() == b.log.leader_epoch_cache.epoch_entries() == [
        EpochEntry(0, 0), EpochEntry(1, 6)]
    for log in (a.log, b.log):
        held = dict(values(log))
        assert all(held.get(offset) == value for offset, value in producer.acknowledged), log
    # committed-0..4 and b-6..b-9; a-5 was committed by B's election, but its request to A timed out unanswered.
    assert [o for o, _ in producer.acknowledged] == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert values(a.log)[5] == values(b.log)[5] == (5, b"a-5")


def kip_101_first_case(tmp_path, clock, truncate):
    """A leads, B fetched A's two records but never got the response that told it A's high watermark
    moved (so acks=all answered); B restarts and truncates as ``truncate`` says while A still leads;
    then A dies and B leads. Returns the producer and B."""
    a, b = open_replica(tmp_path, 1, clock), open_replica(tmp_path, 2, clock)
    producer = AcksAllProducer()
    elect(a, [b], epoch=0, isr=[1, 2])
    producer.send(a, b"m0")
    producer.send(a, b"m1")
    fetch(a, b)                                      # B has m0 m1, its high watermark is 0
    a.update_follower_fetch_state(2, b.log.log_end_offset)  # B's next fetch reaches A; the answer is lost
    producer.poll()
    assert [o for o, _ in producer.acknowledged] == [0, 1]
    crash(b)
    b = open_replica(tmp_path, 2, clock, had_clean_shutdown=False, high_watermark=0)
    elect(a, [b], epoch=0, isr=[1, 2])
    truncate(a, b)
    crash(a)
    elect(b, [], epoch=1, isr=[2])
    return producer, b


def test_truncating_by_the_high_watermark_loses_records_acknowledged_under_acks_all(tmp_path, clock):
    producer, b = kip_101_first_case(tmp_path, clock, lambda leader, follower: follower.log.truncate_to(
        follower.log.high_watermark))
    assert values(b.log) == []
    assert producer.acknowledged == [(0, b"m0"), (1, b"m1")]  # both acknowledged, both gone


def test_truncating_by_leader_epoch_keeps_the_records_acknowledged_under_acks_all(tmp_path, clock):
    producer, b = kip_101_first_case(tmp_path, clock, lambda leader, follower: truncate_by_leader_epoch(
        follower.log, offsets_for_leader_epoch(leader)))
    assert values(b.log) == producer.acknowledged == [(0, b"m0"), (1, b"m1")]


def kip_101_second_case(tmp_path, clock, truncate):
    """A leads with B in sync; both lose power and B loses the record it had not flushed. B comes back
    first and leads in epoch 1 with a record of its own at that offset; A returns and truncates as
    ``truncate`` says, then fetches from B. Returns A and B."""
    a, b = open_replica(tmp_path, 1, clock), open_replica(tmp_path, 2, clock)
    elect(a, [b], epoch=0, isr=[1, 2])
    for value in (b"m0", b"m1"):
        a.append_records_to_leader(records(value), required_acks=-1)
        catch_up(a, b)
    assert (a.log.high_watermark, b.log.high_watermark) == (2, 2)
    crash(a)
    crash(b)
    segment = os.path.join(log_dir(tmp_path, 2), log_file_name(0))
    os.truncate(segment, len(records(b"m0")))  # m1 never reached B's disk
    b = open_replica(tmp_path, 2, clock, had_clean_shutdown=False, high_watermark=2)
    elect(b, [], epoch=1, isr=[2])
    b.append_records_to_leader(records(b"m2"), required_acks=-1)
    b.append_records_to_leader(records(b"m3"), required_acks=-1)
    a = open_replica(tmp_path, 1, clock, had_clean_shutdown=False, high_watermark=2)
    elect(b, [a], epoch=1, isr=[2])
    truncate(b, a)
    catch_up(b, a)
    return a, b


def test_truncating_by_the_high_watermark_leaves_a_diverged_log_after_a_crash(tmp_path, clock):
    a, b = kip_101_second_case(tmp_path, clock, lambda leader, follower: follower.log.truncate_to(
        follower.log.high_watermark))
    assert values(b.log) == [(0, b"m0"), (1, b"m2"), (2, b"m3")]
    assert values(a.log) == [(0, b"m0"), (1, b"m1"), (2, b"m3")]  # offset 1 differs for good
    assert committed_bytes(a.log, 3) != committed_bytes(b.log, 3)


def test_truncating_by_leader_epoch_after_a_crash_ends_with_identical_logs(tmp_path, clock):
    a, b = kip_101_second_case(tmp_path, clock, lambda leader, follower: truncate_by_leader_epoch(
        follower.log, offsets_for_leader_epoch(leader)))
    assert values(a.log) == values(b.log) == [(0, b"m0"), (1, b"m2"), (2, b"m3")]
    assert committed_bytes(a.log, 3) == committed_bytes(b.log, 3)


def test_a_follower_several_epochs_apart_asks_again_until_the_histories_meet(tmp_path, clock):
    # KIP-279: the follower's epochs 0, 2, 4; the leader's 0, 3: the follower asks for 4, hears (3, ..),
    # has no 3, cuts to the end of its 2 and asks for 2.
    leader, follower = open_replica(tmp_path, 1, clock), open_replica(tmp_path, 2, clock)
    for log, history in ((follower.log, [(0, b"x0"), (0, b"x1"), (2, b"f2"), (4, b"f3"), (4, b"f4")]),
                         (leader.log, [(0, b"x0"), (0, b"x1"), (3, b"l2"), (3, b"l3")])):
        for epoch, value in history:
            log.append(records(value), leader_epoch=epoch)
    elect(leader, [follower], epoch=5, isr=[1])
    asked = []
    ask = offsets_for_leader_epoch(leader)

    def recording(epoch):
        asked.append(epoch)
        return ask(epoch)

    assert truncate_by_leader_epoch(follower.log, recording) == 2
    assert asked == [4, 2]
    catch_up(leader, follower)
    assert values(follower.log) == values(leader.log)


def truncate_by_diverging_epoch(leader: Partition, follower: Partition) -> None:
    """The Fetch v12 way: fetch with the last fetched epoch, truncate to the diverging epoch, again."""
    for _ in range(10):
        last_epoch = follower.log.latest_epoch
        found = diverging_epoch(leader.log, -1 if last_epoch is None else last_epoch, follower.log.log_end_offset)
        if found is None:
            return
        truncate_to_diverging_epoch(follower.log, found)
    raise AssertionError(f"{follower.log} kept diverging from {leader.log}")


def test_a_follower_fetching_with_its_last_fetched_epoch_truncates_to_the_diverging_epoch(tmp_path, clock):
    a, b = kip_101_second_case(tmp_path, clock, truncate_by_diverging_epoch)
    assert values(a.log) == values(b.log) == [(0, b"m0"), (1, b"m2"), (2, b"m3")]
    assert committed_bytes(a.log, 3) == committed_bytes(b.log, 3)
