"""Kafka's rebalance scenarios, on a fake clock: no network, no sleep."""

from __future__ import annotations

from typing import Iterator

import pytest

from broker_core.coordinator.group import GroupCoordinatorConfig, GroupState
from broker_core.errors import KafkaStorageError
from broker_core.offsets_topic import GroupMetadataKey, decode_record
from coordinator_kit import (COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
                             ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, INITIAL_DELAY_MS, INVALID_GROUP_ID,
                             INVALID_SESSION_TIMEOUT, MEMBER_ID_REQUIRED, NONE, REBALANCE_IN_PROGRESS,
                             REBALANCE_TIMEOUT_MS, SESSION_TIMEOUT_MS, UNKNOWN_MEMBER_ID, Harness, Member, Pending)

S = GroupState


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def assert_generation(pendings: list[Pending], generation_id: int, leader: Member, members: list[Member]) -> None:
    """Every JoinGroup of a generation names it and one leader; only the leader's lists the members."""
    responses = [p.response for p in pendings]
    assert [r["error_code"] for r in responses] == [NONE] * len(responses)
    assert {r["generation_id"] for r in responses} == {generation_id}
    assert {r["leader"] for r in responses} == {leader.member_id}
    listed = [r for r in responses if r["members"]]
    assert len(listed) == 1 and listed[0]["member_id"] == leader.member_id
    assert [m["member_id"] for m in listed[0]["members"]] == [m.member_id for m in members]


def stored_generations(h: Harness) -> list[tuple[int, list[str]]]:
    """(generation, member ids) of every group metadata record the group stored, in order."""
    out = []
    for key, value in h.store.records(h.group_id):
        decoded_key, decoded_value = decode_record(key, value)
        if isinstance(decoded_key, GroupMetadataKey) and decoded_value is not None:
            out.append((decoded_value.generation, [m.member_id for m in decoded_value.members]))
    return out


# --- the first rebalance ------------------------------------------------------------------


def test_first_rebalance_hands_out_ids_waits_the_initial_delay_and_syncs_the_leaders_assignment(h: Harness) -> None:
    a, b = Member(), Member()
    first = h.join(a)
    assert first.error == MEMBER_ID_REQUIRED
    assert a.member_id.startswith("consumer-") and len(a.member_id) == len("consumer-") + 36
    assert h.group.state is S.EMPTY and h.group.pending_members == {a.member_id}

    join_a = h.join(a)
    assert not join_a.done and h.group.state is S.PREPARING_REBALANCE and h.group.generation_id == 0
    assert h.join(b).error == MEMBER_ID_REQUIRED
    join_b = h.join(b)

    h.advance(INITIAL_DELAY_MS)
    # b arrived during the initial delay, which therefore runs once more.
    assert not join_a.done and not join_b.done
    h.advance(INITIAL_DELAY_MS - 1)
    assert not join_a.done
    h.advance(1)
    assert_generation([join_a, join_b], 1, leader=a, members=[a, b])
    assert join_a.response["protocol_type"] == "consumer" and join_a.response["protocol_name"] == "range"
    assert [m["metadata"] for m in join_a.response["members"]] == [b"sub", b"sub"]
    assert h.group.state is S.COMPLETING_REBALANCE

    sync_b = h.sync(b)
    assert not sync_b.done
    sync_a = h.sync(a, {a.member_id: b"partitions-0-1", b.member_id: b"partitions-2-3"})
    assert (sync_a.error, sync_a.response["assignment"]) == (NONE, b"partitions-0-1")
    assert (sync_b.error, sync_b.response["assignment"]) == (NONE, b"partitions-2-3")
    assert sync_b.response["protocol_name"] == "range"
    assert h.group.state is S.STABLE
    assert stored_generations(h) == [(1, [a.member_id, b.member_id])]
    assert (h.heartbeat(a), h.heartbeat(b)) == (NONE, NONE)


def test_a_lone_first_member_waits_exactly_the_initial_delay(h: Harness) -> None:
    a = Member()
    join = h.join_new(a)
    h.advance(INITIAL_DELAY_MS - 1)
    assert not join.done
    h.advance(1)
    assert_generation([join], 1, leader=a, members=[a])


def test_the_initial_delay_never_outlasts_the_rebalance_timeout(h: Harness) -> None:
    a, b = Member(), Member()
    join_a = h.join_new(a, rebalance_timeout_ms=5_000)
    join_b = h.join_new(b, rebalance_timeout_ms=5_000)
    h.advance(INITIAL_DELAY_MS)
    assert not join_a.done
    h.advance(5_000 - INITIAL_DELAY_MS)  # extended by the 2000 ms left, not another 3000
    assert_generation([join_a, join_b], 1, leader=a, members=[a, b])


def test_without_an_initial_delay_the_first_member_gets_its_generation_at_once() -> None:
    h = Harness(GroupCoordinatorConfig(group_initial_rebalance_delay_ms=0))
    a = Member()
    assert_generation([h.join_new(a)], 1, leader=a, members=[a])
    h.close()


def test_join_group_before_v4_joins_without_the_member_id_round_trip(h: Harness) -> None:
    a = Member()
    join = h.join(a, version=3)
    assert not join.done and h.group.size == 1
    h.advance(INITIAL_DELAY_MS)
    assert_generation([join], 1, leader=a, members=[a])


def test_a_leader_that_omits_a_member_gives_it_an_empty_assignment(h: Harness) -> None:
    a, b = Member(), Member()
    for m in (a, b):
        h.join_new(m)
    h.advance(2 * INITIAL_DELAY_MS)
    sync_b = h.sync(b)
    sync_a = h.sync(a, {a.member_id: b"all", "not-a-member": b"ignored"})
    assert (sync_a.response["assignment"], sync_b.response["assignment"]) == (b"all", b"")
    assert h.group.state is S.STABLE


# --- a rebalance started by the leader ------------------------------------------------------


def test_a_later_rebalance_started_by_the_leader(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    join_a = h.join(a)  # same metadata: the leader asks for a reassignment
    assert not join_a.done
    assert (h.group.state, h.group.generation_id) == (S.PREPARING_REBALANCE, 1)
    assert h.heartbeat(b) == REBALANCE_IN_PROGRESS
    assert h.sync(b).error == REBALANCE_IN_PROGRESS
    assert h.commit({("t", 0): 7}, b) == {("t", 0): NONE}  # commits of the old generation still count
    join_b = h.join(b)
    assert_generation([join_a, join_b], 2, leader=a, members=[a, b])
    h.sync_all(a, b)
    assert (h.group.state, h.group.generation_id) == (S.STABLE, 2)
    assert [g for g, _ in stored_generations(h)] == [1, 2]


def test_a_follower_rejoining_unchanged_gets_the_current_generation_without_a_rebalance(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    join_b = h.join(b)
    assert join_b.response["generation_id"] == 1 and join_b.response["leader"] == a.member_id
    assert join_b.response["members"] == []
    assert h.group.state is S.STABLE


# --- members rejoining before the leader ---------------------------------------------------------


def test_members_rejoining_before_the_leader_wait_for_it(h: Harness) -> None:
    a, b, c = Member(), Member(), Member()
    h.form_group(a, b, c)
    join_b = h.join(b, protocols=[("range", b"new-subscription")])  # metadata changed: rebalance
    assert h.group.state is S.PREPARING_REBALANCE
    assert h.heartbeat(c) == REBALANCE_IN_PROGRESS
    join_c = h.join(c)
    h.advance(SESSION_TIMEOUT_MS // 2)
    assert not join_b.done and not join_c.done
    assert h.heartbeat(a) == REBALANCE_IN_PROGRESS
    join_a = h.join(a)
    assert_generation([join_a, join_b, join_c], 2, leader=a, members=[a, b, c])
    assert dict((m["member_id"], m["metadata"]) for m in join_a.response["members"])[b.member_id] == \
        b"new-subscription"


def test_when_the_leader_never_rejoins_the_first_member_that_did_leads(h: Harness) -> None:
    a, b, c = Member(), Member(), Member()
    h.form_group(a, b, c)
    join_c = h.join(c, protocols=[("range", b"changed")])
    join_b = h.join(b)
    # a is gone: its session runs out before the rebalance timeout.
    h.advance(SESSION_TIMEOUT_MS)
    assert_generation([join_b, join_c], 2, leader=b, members=[b, c])
    assert not h.group.has(a.member_id)
    assert h.heartbeat(a) == UNKNOWN_MEMBER_ID


def test_a_member_that_keeps_heartbeating_but_never_rejoins_is_dropped_at_the_rebalance_timeout(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    join_a = h.join(a)
    for _ in range(3):
        h.advance(REBALANCE_TIMEOUT_MS // 4)
        assert h.heartbeat(b) == REBALANCE_IN_PROGRESS
    assert not join_a.done
    h.advance(REBALANCE_TIMEOUT_MS // 4)
    assert_generation([join_a], 2, leader=a, members=[a])
    assert h.heartbeat(b) == UNKNOWN_MEMBER_ID


# --- a new member joining ---------------------------------------------------------------------------


def test_a_new_member_joining_a_stable_group_triggers_a_rebalance(h: Harness) -> None:
    a, b, c = Member(), Member(), Member()
    h.form_group(a, b)
    assert h.join(c).error == MEMBER_ID_REQUIRED
    assert h.group.state is S.STABLE  # a member id handed out changes nothing yet
    join_c = h.join(c)
    assert h.group.state is S.PREPARING_REBALANCE
    assert (h.heartbeat(a), h.heartbeat(b)) == (REBALANCE_IN_PROGRESS, REBALANCE_IN_PROGRESS)
    join_a, join_b = h.join(a), h.join(b)
    assert_generation([join_a, join_b, join_c], 2, leader=a, members=[a, b, c])
    h.sync_all(a, b, c)
    assert h.group.state is S.STABLE and h.group.size == 3


def test_a_pending_member_id_holds_the_rebalance_until_it_expires(h: Harness) -> None:
    a, c = Member(), Member()
    h.form_group(a)
    assert h.join(c).error == MEMBER_ID_REQUIRED
    join_a = h.join(a)  # the leader starts a rebalance; c's id is still expected
    assert not join_a.done
    h.advance(SESSION_TIMEOUT_MS)
    assert_generation([join_a], 2, leader=a, members=[a])
    assert h.group.pending_members == frozenset()
    assert h.join(c).error == UNKNOWN_MEMBER_ID  # the id expired with c's session


def test_a_new_member_parked_too_long_is_dropped_and_told_so(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    join_c = h.join_new(Member(), rebalance_timeout_ms=10 * 60_000)
    # a and b keep their sessions but never rejoin; c's join may wait 5 minutes at most.
    for _ in range(5 * 60_000 // 5_000):
        h.advance(5_000)
        h.heartbeat(a)
        h.heartbeat(b)
    assert join_c.error == UNKNOWN_MEMBER_ID and join_c.response["member_id"] == ""
    assert h.group.size == 2


# --- sessions expiring ---------------------------------------------------------------------------------


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    h.advance(SESSION_TIMEOUT_MS // 2)
    assert h.heartbeat(a) == NONE
    h.advance(SESSION_TIMEOUT_MS // 2 - 1)
    assert h.group.state is S.STABLE and h.group.size == 2
    h.advance(1)  # b's session, started when it got its assignment, runs out
    assert h.group.state is S.PREPARING_REBALANCE and h.group.member_ids == [a.member_id]
    assert h.heartbeat(a) == REBALANCE_IN_PROGRESS
    join_a = h.join(a)
    assert_generation([join_a], 2, leader=a, members=[a])
    assert h.heartbeat(b) == UNKNOWN_MEMBER_ID


def test_when_the_leaders_session_expires_the_next_member_leads(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    h.advance(SESSION_TIMEOUT_MS - 1)
    h.heartbeat(b)
    h.advance(1)
    assert h.group.leader_id == b.member_id
    assert_generation([h.join(b)], 2, leader=b, members=[b])


def test_heartbeats_keep_a_member_alive_indefinitely(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    for _ in range(20):
        h.advance(SESSION_TIMEOUT_MS - 1)
        assert h.heartbeat(a) == NONE
    assert (h.group.state, h.group.generation_id) == (S.STABLE, 1)


def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    h.join(a)
    h.join(b)
    assert h.group.state is S.COMPLETING_REBALANCE
    assert h.sync(a, {a.member_id: b"x", b.member_id: b"y"}).error == NONE
    for _ in range(3):
        h.advance(REBALANCE_TIMEOUT_MS // 4)
        assert (h.heartbeat(a), h.heartbeat(b)) == (NONE, NONE)  # b lives, but never asks for its assignment
    h.advance(REBALANCE_TIMEOUT_MS // 4)
    assert h.group.state is S.PREPARING_REBALANCE and h.group.member_ids == [a.member_id]


# --- members leaving ----------------------------------------------------------------------------------------


def test_a_member_leaving_triggers_a_rebalance_without_it(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    response = h.leave(b)
    assert response["error_code"] == NONE
    assert response["members"] == [{"member_id": b.member_id, "group_instance_id": None, "error_code": NONE}]
    assert h.group.state is S.PREPARING_REBALANCE and h.group.member_ids == [a.member_id]
    assert h.heartbeat(b) == UNKNOWN_MEMBER_ID
    assert_generation([h.join(a)], 2, leader=a, members=[a])


def test_the_leader_leaving_hands_leadership_to_the_next_member(h: Harness) -> None:
    a, b, c = Member(), Member(), Member()
    h.form_group(a, b, c)
    assert h.leave(a, version=0) == {"throttle_time_ms": 0, "error_code": NONE}
    assert h.group.leader_id == b.member_id
    assert_generation([h.join(c), h.join(b)], 2, leader=b, members=[b, c])


def test_the_last_member_leaving_empties_the_group_and_stores_the_empty_generation(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    h.leave(a)
    assert (h.group.state, h.group.generation_id, h.group.protocol_name) == (S.EMPTY, 2, None)
    assert stored_generations(h) == [(1, [a.member_id]), (2, [])]
    assert h.describe()[0]["group_state"] == "Empty"


def test_leaving_members_are_answered_one_by_one(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    stranger = Member(member_id="consumer-unknown")
    response = h.leave(stranger, b)
    assert [(m["member_id"], m["error_code"]) for m in response["members"]] == [
        (stranger.member_id, UNKNOWN_MEMBER_ID), (b.member_id, NONE)]
    assert h.leave(stranger, version=2)["error_code"] == UNKNOWN_MEMBER_ID


def test_a_pending_member_can_leave_before_joining(h: Harness) -> None:
    a = Member()
    assert h.join(a).error == MEMBER_ID_REQUIRED
    assert h.leave(a)["members"][0]["error_code"] == NONE
    assert h.group.pending_members == frozenset()


# --- stale generations and unknown members ------------------------------------------------------------


def test_requests_of_a_stale_generation_get_illegal_generation(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    h.join(a)
    h.join(b)
    h.sync_all(a, b)
    assert h.group.generation_id == 2
    assert h.heartbeat(b, generation_id=1) == ILLEGAL_GENERATION
    assert h.sync(b, generation_id=1).error == ILLEGAL_GENERATION
    assert h.commit({("t", 0): 1}, b, generation_id=1) == {("t", 0): ILLEGAL_GENERATION}
    assert h.heartbeat(b) == NONE


def test_requests_of_unknown_members_get_unknown_member_id(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    stranger = Member(member_id="consumer-stranger", generation_id=1)
    assert h.heartbeat(stranger) == UNKNOWN_MEMBER_ID
    assert h.sync(stranger).error == UNKNOWN_MEMBER_ID
    assert h.join(stranger).error == UNKNOWN_MEMBER_ID
    assert h.commit({("t", 0): 1}, stranger) == {("t", 0): UNKNOWN_MEMBER_ID}
    assert h.group.member_ids == [a.member_id] and h.group.state is S.STABLE


def test_a_member_of_an_unknown_group_is_unknown(h: Harness) -> None:
    ghost = Member(member_id="consumer-ghost", generation_id=3)
    assert h.heartbeat(ghost) == UNKNOWN_MEMBER_ID
    assert h.sync(ghost).error == UNKNOWN_MEMBER_ID
    assert h.join(ghost).error == UNKNOWN_MEMBER_ID
    assert h.coordinator.group(h.group_id) is None  # a member id does not create a group


def test_a_member_removed_while_parked_in_join_group_is_told_unknown_member_id(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    join_b = h.join(b, protocols=[("range", b"changed")])
    h.leave(b)
    assert join_b.error == UNKNOWN_MEMBER_ID


# --- protocol checks --------------------------------------------------------------------------------------


def test_a_member_with_another_protocol_type_is_refused(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    join = h.join(Member(), protocol_type="connect")
    assert (join.error, join.response["member_id"]) == (INCONSISTENT_GROUP_PROTOCOL, "")


def test_a_member_sharing_no_protocol_with_the_group_is_refused(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    assert h.join(Member(), protocols=[("sticky", b"")]).error == INCONSISTENT_GROUP_PROTOCOL
    # Not even the only member may switch in one step: the group's protocol must stay common.
    assert h.join(a, protocols=[("sticky", b"")]).error == INCONSISTENT_GROUP_PROTOCOL
    assert h.group.state is S.STABLE


def test_the_group_switches_to_the_protocol_most_members_prefer(h: Harness) -> None:
    a, b, c = Member(), Member(), Member()
    both = [("roundrobin", b"rr"), ("range", b"r")]
    for m in (a, b, c):
        h.join_new(m, protocols=both if m is not a else [("range", b"r"), ("roundrobin", b"rr")])
    h.advance(3 * INITIAL_DELAY_MS)
    assert h.group.protocol_name == "roundrobin"


def test_a_join_without_protocol_type_or_protocols_is_refused(h: Harness) -> None:
    assert h.join(Member(), protocol_type="").error == INCONSISTENT_GROUP_PROTOCOL
    assert h.join(Member(), protocols=[]).error == INCONSISTENT_GROUP_PROTOCOL


def test_sync_group_v5_checks_protocol_type_and_name(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    assert h.sync(a, protocol_name="roundrobin").error == INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, protocol_name=None).error == INCONSISTENT_GROUP_PROTOCOL  # mandatory from v5
    assert h.sync(a, version=4).error == NONE


def test_session_timeouts_outside_the_broker_limits_are_refused(h: Harness) -> None:
    assert h.join(Member(), session_timeout_ms=5_999).error == INVALID_SESSION_TIMEOUT
    assert h.join(Member(), session_timeout_ms=30 * 60_000 + 1).error == INVALID_SESSION_TIMEOUT
    assert h.coordinator.group(h.group_id) is None


def test_an_empty_group_id_is_invalid_for_the_membership_apis(h: Harness) -> None:
    assert h.join(Member(), group_id="").error == INVALID_GROUP_ID


def test_group_max_size_refuses_members_beyond_it() -> None:
    h = Harness(GroupCoordinatorConfig(group_initial_rebalance_delay_ms=INITIAL_DELAY_MS, group_max_size=2))
    a, b, c = Member(), Member(), Member()
    h.form_group(a, b)
    join_c = h.join(c)
    assert (join_c.error, join_c.response["member_id"]) == (GROUP_MAX_SIZE_REACHED, "")
    assert h.group.size == 2 and h.group.state is S.STABLE
    h.close()


# --- CompletingRebalance --------------------------------------------------------------------------------


def test_a_member_that_lost_its_join_response_gets_it_again(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    h.join(a)
    h.join(b)
    assert h.group.state is S.COMPLETING_REBALANCE
    again = h.join(a)
    assert_generation([again], 2, leader=a, members=[a, b])
    assert h.group.state is S.COMPLETING_REBALANCE


def test_new_metadata_while_completing_cancels_the_parked_syncs(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    h.join(a)
    h.join(b)
    sync_b = h.sync(b)
    assert not sync_b.done
    join_a = h.join(a, protocols=[("range", b"other")])
    assert sync_b.error == REBALANCE_IN_PROGRESS
    assert h.group.state is S.PREPARING_REBALANCE
    assert_generation([join_a, h.join(b)], 3, leader=a, members=[a, b])


def test_commits_and_heartbeats_while_completing(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    h.join(a)
    h.join(b)
    assert h.heartbeat(b) == NONE
    assert h.commit({("t", 0): 1}, b) == {("t", 0): REBALANCE_IN_PROGRESS}


def test_a_failed_store_of_the_assignment_fails_every_sync_and_rebalances(h: Harness) -> None:
    a, b = Member(), Member()
    for m in (a, b):
        h.join_new(m)
    h.advance(2 * INITIAL_DELAY_MS)
    sync_b = h.sync(b)
    h.store.fail_with = KafkaStorageError("disk gone")
    sync_a = h.sync(a, {a.member_id: b"x", b.member_id: b"y"})
    assert (sync_a.error, sync_b.error) == (16, 16)  # NOT_COORDINATOR: the client looks for the coordinator again
    assert h.group.state is S.PREPARING_REBALANCE


def test_a_join_repeated_while_parked_answers_the_first_one(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    first = h.join(b, protocols=[("range", b"v2")])
    second = h.join(b, protocols=[("range", b"v2")])
    assert first.error == REBALANCE_IN_PROGRESS and not second.done
    assert_generation([second, h.join(a)], 2, leader=a, members=[a, b])


# --- static members -------------------------------------------------------------------------------------


def test_a_static_member_joins_without_the_member_id_round_trip(h: Harness) -> None:
    a = Member(group_instance_id="instance-a")
    join = h.join(a)
    assert not join.done
    h.advance(INITIAL_DELAY_MS)
    assert join.error == NONE and a.member_id.startswith("instance-a-")


def test_a_restarted_static_member_replaces_its_old_id_without_a_rebalance(h: Harness) -> None:
    a, b = Member(group_instance_id="instance-a"), Member()
    h.form_group(a, b)
    old = Member(a.member_id, a.generation_id, "instance-a")
    restarted = Member(group_instance_id="instance-a")
    join = h.join(restarted, version=8)
    assert join.error == NONE
    assert (join.response["generation_id"], join.response["leader"]) == (1, old.member_id)  # old id: no reassignment
    assert restarted.member_id != old.member_id
    assert h.group.state is S.STABLE and h.group.leader_id == restarted.member_id
    assert h.heartbeat(old) == FENCED_INSTANCE_ID
    assert h.sync(restarted).response["assignment"] == f"assignment-of-{old.member_id}".encode()
    assert stored_generations(h)[-1] == (1, [b.member_id, restarted.member_id])


def test_a_restarted_static_leader_is_told_to_skip_the_assignment_in_v9(h: Harness) -> None:
    a, b = Member(group_instance_id="instance-a"), Member()
    h.form_group(a, b)
    restarted = Member(group_instance_id="instance-a")
    response = h.join(restarted).response
    assert response["skip_assignment"] is True and response["leader"] == restarted.member_id
    assert len(response["members"]) == 2


def test_a_static_member_can_be_removed_by_its_instance_id(h: Harness) -> None:
    a, b = Member(group_instance_id="instance-a"), Member()
    h.form_group(a, b)
    response = h.leave(Member(group_instance_id="instance-a"))
    assert response["members"][0]["error_code"] == NONE
    assert h.group.member_ids == [b.member_id] and h.group.state is S.PREPARING_REBALANCE
    assert h.leave(Member(group_instance_id="instance-x"))["members"][0]["error_code"] == UNKNOWN_MEMBER_ID


def test_a_static_member_that_does_not_rejoin_keeps_its_place(h: Harness) -> None:
    a, b = Member(group_instance_id="instance-a"), Member()
    h.form_group(a, b)
    join_b = h.join(b, protocols=[("range", b"changed")])
    for _ in range(3):
        h.advance(REBALANCE_TIMEOUT_MS // 4)
        h.heartbeat(a)
    h.advance(REBALANCE_TIMEOUT_MS // 4)
    # Generation 2 goes on with a; b, the only one that rejoined, leads it.
    assert_generation([join_b], 2, leader=b, members=[a, b])


def test_a_wrong_member_id_for_a_static_instance_is_fenced(h: Harness) -> None:
    a = Member(group_instance_id="instance-a")
    h.form_group(a)
    impostor = Member(member_id="instance-a-impostor", generation_id=1, group_instance_id="instance-a")
    assert h.heartbeat(impostor) == FENCED_INSTANCE_ID
    assert h.sync(impostor).error == FENCED_INSTANCE_ID
    assert h.commit({("t", 0): 1}, impostor) == {("t", 0): FENCED_INSTANCE_ID}


# --- the coordinator going away ------------------------------------------------------------------------


def test_a_coordinator_that_shut_down_answers_coordinator_not_available(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    h.coordinator.shutdown()
    assert h.heartbeat(a) == COORDINATOR_NOT_AVAILABLE
    assert h.join(Member()).error == COORDINATOR_NOT_AVAILABLE
