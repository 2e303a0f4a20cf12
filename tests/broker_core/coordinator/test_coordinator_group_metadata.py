"""GroupMetadata on its own: protocol selection, leader choice, members and offsets expiry."""

from __future__ import annotations

import pytest

from broker_core.clock import MockTime
from broker_core.coordinator.group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from format.layout import TopicPartition

S = GroupState
RETENTION_MS = 1000


def member(member_id: str, protocols: list[str], *, instance_id: str | None = None,
           rebalance_timeout_ms: int = 5000) -> MemberMetadata:
    return MemberMetadata(member_id=member_id, group_id="g", group_instance_id=instance_id, client_id="c",
                          client_host="h", rebalance_timeout_ms=rebalance_timeout_ms, session_timeout_ms=1000,
                          protocol_type="consumer",
                          supported_protocols=[(p, f"{member_id}:{p}".encode()) for p in protocols])


def group_with(*members: MemberMetadata, clock: MockTime | None = None) -> GroupMetadata:
    group = GroupMetadata("g", clock=clock or MockTime())
    group.transition_to(S.PREPARING_REBALANCE)
    for m in members:
        group.add(m, callback=lambda result: None)
    return group


def test_the_protocol_supported_by_all_with_the_most_votes_is_selected() -> None:
    group = group_with(member("a", ["roundrobin", "range"]),
                       member("b", ["range", "roundrobin", "sticky"]),
                       member("c", ["range", "sticky", "roundrobin"]))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "range"


def test_a_protocol_not_supported_by_everyone_never_wins() -> None:
    # "sticky" is everyone's favourite but "a" lacks it.
    group = group_with(member("a", ["range"]), member("b", ["sticky", "range"]), member("c", ["sticky", "range"]))
    assert group.select_protocol() == "range"


def test_a_tie_goes_to_the_first_member_s_choice() -> None:
    group = group_with(member("a", ["roundrobin", "range"]), member("b", ["range", "roundrobin"]))
    assert group.select_protocol() == "roundrobin"


def test_an_empty_group_takes_any_protocol_then_only_compatible_ones() -> None:
    group = GroupMetadata("g", clock=MockTime())
    assert group.supports_protocols("consumer", ["anything"])
    assert not group.supports_protocols("", ["range"])
    assert not group.supports_protocols("consumer", [])
    group.transition_to(S.PREPARING_REBALANCE)
    group.add(member("a", ["range", "roundrobin"]))
    assert group.supports_protocols("consumer", ["sticky", "roundrobin"])
    assert not group.supports_protocols("consumer", ["sticky"])
    assert not group.supports_protocols("connect", ["range"])


def test_the_first_member_leads_and_the_oldest_remaining_member_takes_over() -> None:
    group = group_with(member("a", ["range"]), member("b", ["range"]), member("c", ["range"]))
    assert group.leader_id == "a"
    group.remove("b")
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "c"
    group.remove("c")
    assert group.leader_id is None
    group.check_invariants()


def test_a_leader_that_did_not_rejoin_is_replaced_by_one_that_did() -> None:
    group = group_with(member("a", ["range"]), member("b", ["range"]))
    group.get("a").awaiting_join_callback = None
    assert group.maybe_elect_new_joined_leader()
    assert group.leader_id == "b"
    group.get("b").awaiting_join_callback = None
    assert not group.maybe_elect_new_joined_leader()


def test_all_members_joined_needs_every_member_parked_and_no_pending_member() -> None:
    group = group_with(member("a", ["range"]), member("b", ["range"]))
    assert group.has_all_members_joined()
    group.add_pending_member("p")
    assert not group.has_all_members_joined()
    group.remove_pending_member("p")
    group.get("b").awaiting_join_callback = None
    assert not group.has_all_members_joined()
    assert [m.member_id for m in group.not_yet_rejoined_members] == ["b"]


def test_the_rebalance_timeout_is_the_longest_of_the_members() -> None:
    group = group_with(member("a", ["range"], rebalance_timeout_ms=100), member("b", ["range"],
                                                                               rebalance_timeout_ms=900))
    assert group.rebalance_timeout_ms == 900


def test_next_generation_chooses_the_protocol_and_awaits_sync() -> None:
    group = group_with(member("a", ["range"]), member("b", ["range"]))
    group.init_next_generation()
    assert (group.state, group.generation_id, group.protocol_name) == (S.COMPLETING_REBALANCE, 1, "range")
    assert [m.member_id for m in group.current_member_metadata()] == ["a", "b"]
    assert group.current_member_metadata()[1].metadata == b"b:range"


def test_next_generation_of_a_group_without_members_is_empty() -> None:
    group = group_with()
    group.init_next_generation()
    assert (group.state, group.generation_id, group.protocol_name) == (S.EMPTY, 1, None)


def test_a_static_member_replaced_keeps_its_place_and_leadership() -> None:
    fenced = []
    group = group_with(member("a", ["range"], instance_id="i-a"), member("b", ["range"]))
    group.get("a").awaiting_join_callback = fenced.append
    replaced = group.replace_static_member("i-a", "a", "a2")
    assert replaced.member_id == "a2" and group.leader_id == "a2"
    assert group.member_ids == ["b", "a2"]
    assert group.current_static_member_id("i-a") == "a2"
    assert [r.error_code for r in fenced] == [82]
    group.check_invariants()


def test_adding_a_second_member_with_the_same_instance_id_is_refused() -> None:
    group = group_with(member("a", ["range"], instance_id="i"))
    with pytest.raises(ValueError, match="group.instance.id"):
        group.add(member("b", ["range"], instance_id="i"))


def offsets_at(*commit_timestamps: int, expire: int | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
    return {TopicPartition("t", i): OffsetAndMetadata(i, "", ts, None, expire)
            for i, ts in enumerate(commit_timestamps)}


def test_an_empty_consumer_group_expires_offsets_retention_after_it_became_empty() -> None:
    clock = MockTime(current_time_ms=10_000)
    group = group_with(member("a", ["range"]), clock=clock)
    group.offsets.update(offsets_at(1_000, 9_000))
    group.remove("a")
    group.init_next_generation()  # Empty at 10_000
    assert group.remove_expired_offsets(10_999, RETENTION_MS) == {}
    assert set(group.remove_expired_offsets(11_000, RETENTION_MS)) == {TopicPartition("t", 0), TopicPartition("t", 1)}
    assert not group.has_offsets()


def test_a_group_with_members_keeps_its_offsets() -> None:
    group = group_with(member("a", ["range"]))
    group.offsets.update(offsets_at(0))
    assert group.remove_expired_offsets(10**12, RETENTION_MS) == {}


def test_a_group_that_only_stores_offsets_expires_each_retention_after_its_commit() -> None:
    group = GroupMetadata("g", clock=MockTime())
    group.offsets.update(offsets_at(1_000, 5_000))
    assert set(group.remove_expired_offsets(2_000, RETENTION_MS)) == {TopicPartition("t", 0)}
    assert set(group.offsets) == {TopicPartition("t", 1)}


def test_an_explicit_expire_timestamp_wins_over_retention() -> None:
    group = GroupMetadata("g", clock=MockTime())
    group.offsets.update(offsets_at(1_000, expire=1_500))
    assert set(group.remove_expired_offsets(1_500, 10**9)) == {TopicPartition("t", 0)}


def test_stored_value_round_trips_through_loaded() -> None:
    clock = MockTime(current_time_ms=42)
    group = group_with(member("a", ["range", "rr"], instance_id="i-a"), member("b", ["rr", "range"]), clock=clock)
    group.init_next_generation()
    value = group.stored_value({"a": b"A", "b": b"B"})
    assert value.protocol == "range" and value.generation == 1 and value.leader == "a"
    assert [(m.member_id, m.subscription, m.assignment) for m in value.members] == [
        ("a", b"a:range", b"A"), ("b", b"b:range", b"B")]
    loaded = GroupMetadata.loaded("g", value, clock=clock)
    assert (loaded.state, loaded.generation_id, loaded.leader_id, loaded.protocol_name, loaded.protocol_type) == (
        S.STABLE, 1, "a", "range", "consumer")
    assert loaded.current_static_member_id("i-a") == "a"
    assert loaded.get("b").assignment == b"B"
