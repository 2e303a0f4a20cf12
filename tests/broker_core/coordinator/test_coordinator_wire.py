"""The group APIs at every version: requests decoded by the protocol package, responses it can encode,
and the typed requests ``wire`` makes of each version's body."""

from __future__ import annotations

import dataclasses
from typing import Iterator

import pytest

from broker_core.coordinator.group import (FindCoordinatorRequest, JoinGroupRequest, JoinGroupResult, LeaveGroupRequest,
                                           LeavingMember, ListGroupsRequest, OffsetCommitPartition, OffsetFetchGroup,
                                           OffsetFetchRequest, wire)
from broker_core.protocol import ApiKey
from coordinator_kit import (INCONSISTENT_GROUP_PROTOCOL, INITIAL_DELAY_MS, LATEST, MEMBER_ID_REQUIRED, NONE,
                             SESSION_TIMEOUT_MS, Harness, Member, request_body)
from format.layout import TopicPartition


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


@pytest.mark.parametrize("join_version", range(0, LATEST[ApiKey.JOIN_GROUP] + 1))
@pytest.mark.parametrize("sync_version", range(0, LATEST[ApiKey.SYNC_GROUP] + 1))
def test_a_group_forms_at_every_join_and_sync_version(h: Harness, join_version: int, sync_version: int) -> None:
    a, b = Member(), Member()
    joins = [h.join_new(m, version=join_version) for m in (a, b)]
    h.advance(2 * INITIAL_DELAY_MS)
    assert [j.response["generation_id"] for j in joins] == [1, 1]
    assert joins[0].response["protocol_name"] == "range"
    sync_b = h.sync(b, version=sync_version)
    sync_a = h.sync(a, {a.member_id: b"A", b.member_id: b"B"}, version=sync_version)
    assert (sync_a.response["assignment"], sync_b.response["assignment"]) == (b"A", b"B")


def test_join_group_v0_takes_the_session_timeout_as_rebalance_timeout(h: Harness) -> None:
    a = Member()
    h.join(a, version=0, session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=99_999)
    assert h.group.members[0].rebalance_timeout_ms == SESSION_TIMEOUT_MS


@pytest.mark.parametrize("version,protocol_name", [(6, ""), (7, None)])
def test_a_failed_join_has_no_protocol_name_in_each_versions_spelling(h: Harness, version: int,
                                                                      protocol_name: str | None) -> None:
    response = h.join(Member(), protocol_type="", version=version).response
    assert (response["error_code"], response["protocol_name"], response["generation_id"]) == (
        INCONSISTENT_GROUP_PROTOCOL, protocol_name, -1)


@pytest.mark.parametrize("version", range(0, LATEST[ApiKey.HEARTBEAT] + 1))
def test_heartbeat_at_every_version(h: Harness, version: int) -> None:
    a = Member()
    h.form_group(a)
    assert h.heartbeat(a, version=version) == NONE


@pytest.mark.parametrize("version", range(0, LATEST[ApiKey.LEAVE_GROUP] + 1))
def test_leave_group_at_every_version(h: Harness, version: int) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    assert h.leave(b, version=version)["error_code"] == NONE
    assert h.group.member_ids == [a.member_id]


@pytest.mark.parametrize("version", range(2, LATEST[ApiKey.OFFSET_COMMIT] + 1))
def test_offset_commit_at_every_version(h: Harness, version: int) -> None:
    a = Member()
    h.form_group(a)
    assert h.commit({("orders", 0): 5, ("orders", 1): 6}, a, version=version) == {("orders", 0): NONE,
                                                                                  ("orders", 1): NONE}
    assert h.committed() == {("orders", 0): 5, ("orders", 1): 6}


@pytest.mark.parametrize("version", range(0, LATEST[ApiKey.DELETE_GROUPS] + 1))
def test_delete_groups_at_every_version(h: Harness, version: int) -> None:
    h.commit({("orders", 0): 5})
    assert h.delete("group", version=version) == {"group": NONE}


# --- the typed requests each version's body becomes ---------------------------------------------


def _join_body(version: int, **fields: object) -> dict:
    return request_body(ApiKey.JOIN_GROUP, version, **{
        "group_id": "group", "session_timeout_ms": SESSION_TIMEOUT_MS, "rebalance_timeout_ms": 30_000,
        "member_id": "", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b"sub"}],
        **fields})


@pytest.mark.parametrize("version,require_known_member_id", [(3, False), (4, True), (5, True), (9, True)])
def test_a_new_member_must_know_its_id_from_join_group_v4(version: int, require_known_member_id: bool) -> None:
    request = wire.parse_join_group(_join_body(version), version)
    assert (request.member_id, request.group_instance_id, request.require_known_member_id) == (
        "", None, require_known_member_id)


def test_the_same_join_group_at_v3_and_v5_differs_only_in_the_flags_the_version_sets() -> None:
    v3 = wire.parse_join_group(_join_body(3), 3, client_id="app", client_host="/10.0.0.1")
    v5 = wire.parse_join_group(_join_body(5), 5, client_id="app", client_host="/10.0.0.1")
    assert v3 == JoinGroupRequest(group_id="group", member_id="", group_instance_id=None,
                                  session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=30_000,
                                  protocol_type="consumer", protocols=(("range", b"sub"),), reason=None,
                                  client_id="app", client_host="/10.0.0.1", require_known_member_id=False,
                                  supports_skip_assignment=False)
    assert v5 == dataclasses.replace(v3, require_known_member_id=True)


def test_a_static_member_from_join_group_v5_is_not_asked_for_a_member_id() -> None:
    request = wire.parse_join_group(_join_body(5, group_instance_id="instance-1"), 5)
    assert (request.group_instance_id, request.require_known_member_id) == ("instance-1", False)


@pytest.mark.parametrize("version,supports_skip_assignment,reason", [(8, False, "restart"), (9, True, "restart")])
def test_join_group_v9_lets_a_restarted_static_leader_skip_assignment(version: int, supports_skip_assignment: bool,
                                                                      reason: str) -> None:
    request = wire.parse_join_group(_join_body(version, group_instance_id="i", reason=reason), version)
    assert (request.supports_skip_assignment, request.reason) == (supports_skip_assignment, reason)


def test_join_group_v0_uses_the_session_timeout_as_rebalance_timeout() -> None:
    assert wire.parse_join_group(_join_body(0), 0).rebalance_timeout_ms == SESSION_TIMEOUT_MS
    assert wire.parse_join_group(_join_body(1), 1).rebalance_timeout_ms == 30_000


@pytest.mark.parametrize("version,required", [(4, False), (5, True)])
def test_sync_group_requires_protocol_type_and_name_from_v5(version: int, required: bool) -> None:
    body = request_body(ApiKey.SYNC_GROUP, version, group_id="group", generation_id=1, member_id="m",
                        assignments=[{"member_id": "m", "assignment": b"A"}])
    request = wire.parse_sync_group(body, version)
    assert (request.protocol_type_and_name_required, request.protocol_type, request.assignments) == (
        required, None, {"m": b"A"})


def test_a_sync_group_v5_without_protocol_name_is_inconsistent(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    assert h.sync(a, version=5, protocol_name=None).error == INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, version=4).error == NONE


def test_leave_group_before_v3_names_one_member_and_from_v3_a_batch() -> None:
    v2 = wire.parse_leave_group(request_body(ApiKey.LEAVE_GROUP, 2, group_id="group", member_id="m1"), 2)
    v3 = wire.parse_leave_group(request_body(ApiKey.LEAVE_GROUP, 5, group_id="group", members=[
        {"member_id": "m1", "group_instance_id": None, "reason": "closing"},
        {"member_id": "", "group_instance_id": "instance-2", "reason": None}]), 5)
    assert v2 == LeaveGroupRequest(group_id="group", members=(LeavingMember("m1"),))
    assert v3 == LeaveGroupRequest(group_id="group", members=(LeavingMember("m1", None, "closing"),
                                                              LeavingMember("", "instance-2", None)))


@pytest.mark.parametrize("version,retention_ms", [(2, 5_000), (4, 5_000), (5, None)])
def test_offset_commit_carries_its_own_retention_only_in_v2_to_v4(version: int, retention_ms: int | None) -> None:
    fields: dict = {"group_id": "group", "generation_id_or_member_epoch": -1, "member_id": "",
                    "topics": [{"name": "orders", "partitions": [
                        {"partition_index": 0, "committed_offset": 7, "committed_metadata": "m"}]}]}
    if version <= 4:
        fields["retention_time_ms"] = 5_000
    request = wire.parse_offset_commit(request_body(ApiKey.OFFSET_COMMIT, version, **fields), version)
    assert request.retention_ms == retention_ms
    assert request.offsets == {TopicPartition("orders", 0): OffsetCommitPartition(7, "m", None)}


def test_offset_commit_response_lists_partitions_by_topic_in_request_order() -> None:
    request = wire.parse_offset_commit(request_body(
        ApiKey.OFFSET_COMMIT, 8, group_id="group", generation_id_or_member_epoch=-1, member_id="", topics=[
            {"name": "b", "partitions": [{"partition_index": 1, "committed_offset": 1, "committed_leader_epoch": 3,
                                          "committed_metadata": None}]},
            {"name": "a", "partitions": [{"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1,
                                          "committed_metadata": None}]}]), 8)
    assert list(request.offsets.values()) == [OffsetCommitPartition(1, "", 3), OffsetCommitPartition(2, "", None)]
    errors = {TopicPartition("b", 1): NONE, TopicPartition("a", 0): 3}
    assert wire.offset_commit_response(request, errors)["topics"] == [
        {"name": "b", "partitions": [{"partition_index": 1, "error_code": NONE}]},
        {"name": "a", "partitions": [{"partition_index": 0, "error_code": 3}]}]


@pytest.mark.parametrize("version", [7, 8])
def test_offset_fetch_names_one_group_before_v8_and_a_batch_from_v8(version: int) -> None:
    topics = [{"name": "orders", "partition_indexes": [0, 1]}]
    if version >= 8:
        fields: dict = {"groups": [{"group_id": "g1", "topics": topics}, {"group_id": "g2", "topics": None}],
                        "require_stable": True}
        expected = (OffsetFetchGroup("g1", (TopicPartition("orders", 0), TopicPartition("orders", 1))),
                    OffsetFetchGroup("g2", None))
    else:
        fields = {"group_id": "g1", "topics": topics, "require_stable": True}
        expected = (OffsetFetchGroup("g1", (TopicPartition("orders", 0), TopicPartition("orders", 1))),)
    request = wire.parse_offset_fetch(request_body(ApiKey.OFFSET_FETCH, version, **fields), version)
    assert request == OffsetFetchRequest(groups=expected, require_stable=True)


@pytest.mark.parametrize("version,keys", [(3, ("group",)), (4, ("a", "b"))])
def test_find_coordinator_asks_for_one_key_before_v4_and_a_batch_from_v4(version: int,
                                                                        keys: tuple[str, ...]) -> None:
    fields = {"key": "group"} if version < 4 else {"coordinator_keys": ["a", "b"]}
    body = request_body(ApiKey.FIND_COORDINATOR, version, key_type=0, **fields)
    assert wire.parse_find_coordinator(body, version) == FindCoordinatorRequest(key_type=0, keys=keys)


@pytest.mark.parametrize("version,states,types", [(3, (), ()), (4, ("Stable",), ()), (5, ("Stable",), ("classic",))])
def test_list_groups_filters_by_state_from_v4_and_by_type_from_v5(version: int, states: tuple[str, ...],
                                                                  types: tuple[str, ...]) -> None:
    fields: dict = {}
    if version >= 4:
        fields["states_filter"] = ["Stable"]
    if version >= 5:
        fields["types_filter"] = ["classic"]
    request = wire.parse_list_groups(request_body(ApiKey.LIST_GROUPS, version, **fields), version)
    assert request == ListGroupsRequest(states_filter=states, types_filter=types)


def test_the_coordinator_takes_a_typed_join_without_member_id_round_trip_when_not_required(h: Harness) -> None:
    results: list[JoinGroupResult] = []
    request = wire.parse_join_group(_join_body(3), 3)
    h.coordinator.join_group(request, results.append)
    h.coordinator.join_group(dataclasses.replace(request, require_known_member_id=True), results.append)
    h.advance(INITIAL_DELAY_MS)
    assert sorted(r.error_code for r in results) == [NONE, MEMBER_ID_REQUIRED]
    assert [m.member_id for m in h.group.members] == [r.member_id for r in results if r.error_code == NONE]
