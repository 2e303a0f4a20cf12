"""The leader's view of its partition on a simulated clock: followers' fetches, the high watermark, ISR
shrink and expansion proposed for the controller's compare-and-set, acks=all and min.insync.replicas."""

from __future__ import annotations

import pytest

from broker_core.clock import MockTime
from broker_core.cluster.partition import LeaderAndIsr
from broker_core.errors import (FencedLeaderEpochError, NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                                NotLeaderOrFollowerError, UnknownLeaderEpochError)
from broker_core.log.leader_epoch_file_cache import EpochEndOffset
from format.checkpoint import EpochEntry

from tests.broker_core.cluster.replication_kit import T0, catch_up, elect, fetch, open_replica, records

LAG_MS = 30_000


@pytest.fixture()
def clock():
    return MockTime(current_time_ms=T0)


def three_replicas(tmp_path, clock, min_insync_replicas: int = 2):
    """Broker 1 leads t-0 in epoch 1 with brokers 2 and 3 in sync."""
    leader, *followers = (open_replica(tmp_path, b, clock, min_insync_replicas=min_insync_replicas,
                                       replica_lag_time_max_ms=LAG_MS) for b in (1, 2, 3))
    elect(leader, followers, epoch=1, isr=[1, 2, 3])
    return leader, followers


def test_a_new_leader_begins_its_epoch_at_its_log_end(tmp_path, clock):
    leader = open_replica(tmp_path, 1, clock)
    leader.log.append(records(b"before"))
    elect(leader, [], epoch=4, isr=[1])
    leader.append_records_to_leader(records(b"after"), required_acks=1)
    assert leader.log.leader_epoch_cache.epoch_entries() == [EpochEntry(0, 0), EpochEntry(4, 1)]
    assert leader.leader_epoch_start_offset == 1


def test_the_high_watermark_is_the_smallest_log_end_offset_over_the_isr(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    leader.append_records_to_leader(records(b"a", b"b"), required_acks=-1)
    leader.append_records_to_leader(records(b"c"), required_acks=-1)
    assert leader.log.high_watermark == 0
    fetch(leader, two)        # broker 2 fetches from 0, gets 0..2
    fetch(leader, two)        # and says so: at 3
    assert leader.log.high_watermark == 0  # broker 3 has nothing
    fetch(leader, three, max_bytes=1)  # one batch: 0..1
    fetch(leader, three, max_bytes=1)  # at 2
    assert leader.log.high_watermark == 2
    fetch(leader, three)
    assert leader.log.high_watermark == 3
    assert (two.log.high_watermark, three.log.high_watermark) == (0, 3)  # what each learnt at its last fetch


def test_the_high_watermark_never_moves_back(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    leader.append_records_to_leader(records(b"a"), required_acks=-1)
    catch_up(leader, two)
    catch_up(leader, three)
    assert leader.log.high_watermark == 1
    leader.update_follower_fetch_state(3, 0)  # a stale fetch from before
    assert leader.log.high_watermark == 1


def test_a_follower_not_caught_up_for_replica_lag_time_max_ms_is_proposed_out_of_the_isr(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    leader.append_records_to_leader(records(b"a"), required_acks=-1)
    catch_up(leader, two)
    clock.sleep(LAG_MS)
    assert leader.maybe_shrink_isr() is None  # broker 3 was caught up at the election, exactly LAG_MS ago
    clock.sleep(1)
    catch_up(leader, two)
    assert leader.out_of_sync_replicas() == {3}
    assert leader.maybe_shrink_isr() == LeaderAndIsr(1, 1, (1, 2), 0)
    assert leader.isr == {1, 2, 3}  # proposed, not written: the controller writes it


def test_a_follower_that_fetches_the_whole_log_in_time_stays_in_sync(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    for n in range(5):
        leader.append_records_to_leader(records(b"x%d" % n), required_acks=-1)
        clock.sleep(LAG_MS // 2)
        catch_up(leader, two)
        catch_up(leader, three)
    assert leader.out_of_sync_replicas() == set() and leader.maybe_shrink_isr() is None


def test_a_follower_fetching_but_always_behind_falls_out_of_sync(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    for n in range(4):
        leader.append_records_to_leader(records(b"x%d" % n), required_acks=1)
        catch_up(leader, two)
        leader.append_records_to_leader(records(b"y%d" % n), required_acks=1)
        fetch(leader, three, max_bytes=1)  # fetches, one batch at a time, never at the end
        clock.sleep(LAG_MS // 3)
    catch_up(leader, two)
    assert leader.out_of_sync_replicas() == {3}


def test_a_committed_shrink_lets_the_high_watermark_advance_without_the_removed_follower(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    leader.append_records_to_leader(records(b"a"), required_acks=-1)
    catch_up(leader, two)
    clock.sleep(LAG_MS + 1)
    catch_up(leader, two)
    proposed = leader.maybe_shrink_isr()
    assert leader.log.high_watermark == 0  # the maximal ISR still holds broker 3 until the write
    assert leader.maybe_shrink_isr() is None  # one change in flight at a time
    leader.on_isr_update_committed(LeaderAndIsr(1, 1, proposed.isr, partition_epoch=1))
    assert (leader.isr, leader.partition_epoch, leader.log.high_watermark) == ({1, 2}, 1, 1)


def test_a_failed_isr_change_leaves_the_committed_isr(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    clock.sleep(LAG_MS + 1)
    leader.append_records_to_leader(records(b"a"), required_acks=1)
    catch_up(leader, two)
    assert leader.maybe_shrink_isr() is not None
    leader.on_isr_update_failed("the partition epoch moved on")
    assert leader.isr == {1, 2, 3} and leader.pending_isr_change is None
    assert leader.maybe_shrink_isr() == LeaderAndIsr(1, 1, (1, 2), 0)  # proposed again


def test_an_isr_update_of_another_leader_epoch_is_ignored(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    leader.maybe_expand_isr(2)
    assert leader.on_isr_update_committed(LeaderAndIsr(1, 0, (1,), 7)) is False
    assert (leader.isr, leader.partition_epoch) == ({1, 2, 3}, 0)


def test_a_follower_caught_up_to_the_high_watermark_is_proposed_into_the_isr(tmp_path, clock):
    leader = open_replica(tmp_path, 1, clock, replica_lag_time_max_ms=LAG_MS)
    two = open_replica(tmp_path, 2, clock)
    elect(leader, [two], epoch=1, isr=[1])
    leader.append_records_to_leader(records(b"a", b"b"), required_acks=1)
    assert leader.log.high_watermark == 2  # the ISR is the leader alone
    assert fetch(leader, two).isr_expansion is None  # at 0: below the high watermark
    result = fetch(leader, two)
    assert result.isr_expansion == LeaderAndIsr(1, 1, (1, 2), 0)
    assert leader.maximal_isr == {1, 2} and leader.isr == {1}


def test_a_follower_below_the_leader_epoch_start_offset_is_not_proposed_into_the_isr(tmp_path, clock):
    leader = open_replica(tmp_path, 1, clock)
    two = open_replica(tmp_path, 2, clock)
    leader.log.append(records(b"old", b"er"))
    leader.log.update_high_watermark(0)
    elect(leader, [two], epoch=3, isr=[1])  # epoch 3 starts at offset 2
    assert leader.log.high_watermark == 2
    fetch(leader, two, max_bytes=1)
    leader.log.update_high_watermark(0)  # as if the follower were at the high watermark but not in this epoch
    assert leader.is_follower_in_sync(2) is False


def test_acks_all_is_refused_with_not_enough_replicas_while_the_isr_is_below_min_insync_replicas(tmp_path, clock):
    leader = open_replica(tmp_path, 1, clock, min_insync_replicas=2)
    two = open_replica(tmp_path, 2, clock)
    elect(leader, [two], epoch=1, isr=[1])
    with pytest.raises(NotEnoughReplicasError, match=r"Partition\(t-0\): the ISR \[1\] is smaller than "
                                                     r"min.insync.replicas 2"):
        leader.append_records_to_leader(records(b"a"), required_acks=-1)
    assert leader.log.log_end_offset == 0
    assert leader.append_records_to_leader(records(b"a"), required_acks=1).first_offset == 0


def test_acks_all_completes_when_every_isr_member_has_the_records(tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock)
    info = leader.append_records_to_leader(records(b"a", b"b"), required_acks=-1)
    required = info.last_offset + 1
    assert leader.check_enough_replicas_reach_offset(required) == (False, None)
    catch_up(leader, two)
    assert leader.check_enough_replicas_reach_offset(required) == (False, None)
    catch_up(leader, three)
    assert leader.check_enough_replicas_reach_offset(required) == (True, None)


def test_acks_all_completed_after_the_isr_shrank_below_min_insync_replicas_is_not_enough_replicas_after_append(
        tmp_path, clock):
    leader, (two, three) = three_replicas(tmp_path, clock, min_insync_replicas=3)
    info = leader.append_records_to_leader(records(b"a"), required_acks=-1)
    catch_up(leader, two)
    clock.sleep(LAG_MS + 1)
    catch_up(leader, two)
    leader.on_isr_update_committed(LeaderAndIsr(1, 1, leader.maybe_shrink_isr().isr, 1))
    done, error = leader.check_enough_replicas_reach_offset(info.last_offset + 1)
    assert done and isinstance(error, NotEnoughReplicasAfterAppendError)
    assert "the ISR [1, 2] is smaller than min.insync.replicas 3" in str(error)


def test_min_insync_replicas_above_the_replication_factor_counts_as_the_replication_factor(tmp_path, clock):
    leader = open_replica(tmp_path, 1, clock, min_insync_replicas=3)
    elect(leader, [], epoch=1, isr=[1])
    info = leader.append_records_to_leader(records(b"a"), required_acks=-1)
    assert leader.check_enough_replicas_reach_offset(info.last_offset + 1) == (True, None)


def test_requests_naming_an_older_or_a_newer_leader_epoch_are_fenced(tmp_path, clock):
    leader, (two, _) = three_replicas(tmp_path, clock)
    leader.append_records_to_leader(records(b"a"), required_acks=1)
    assert leader.last_offset_for_leader_epoch(-1, 1) == EpochEndOffset(1, 1)
    assert leader.last_offset_for_leader_epoch(1, 1) == EpochEndOffset(1, 1)
    with pytest.raises(FencedLeaderEpochError, match="leader epoch 0 is older than the current leader epoch 1"):
        leader.last_offset_for_leader_epoch(0, 1)
    with pytest.raises(UnknownLeaderEpochError, match="leader epoch 2 is newer than the current leader epoch 1"):
        leader.last_offset_for_leader_epoch(2, 1)
    with pytest.raises(NotLeaderOrFollowerError):
        two.last_offset_for_leader_epoch(1, 1)
    with pytest.raises(NotLeaderOrFollowerError):
        two.append_records_to_leader(records(b"b"), required_acks=1)
