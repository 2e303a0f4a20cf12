"""FindCoordinator, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, and answers while the coordinator loads."""

from __future__ import annotations

from typing import Iterator

import pytest

from broker_core.consumer_protocol import encode_subscription
from broker_core.coordinator.group import InMemoryGroupStore
from broker_core.offsets_topic import GroupMetadataKey, OffsetCommitKey, decode_record
from coordinator_kit import (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, GROUP_ID_NOT_FOUND,
                             INITIAL_DELAY_MS, INVALID_GROUP_ID, NON_EMPTY_GROUP, NONE, REBALANCE_IN_PROGRESS, Harness,
                             Member)

GROUP_SUBSCRIBED_TO_TOPIC = 86


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


# --- FindCoordinator -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 4))
def test_find_coordinator_names_this_broker(h: Harness, version: int) -> None:
    response = h.find_coordinator(version, key="group", key_type=0)
    assert (response["error_code"], response["node_id"], response["host"], response["port"]) == (
        NONE, 0, "broker.local", 9092)


def test_find_coordinator_v4_answers_each_key(h: Harness) -> None:
    response = h.find_coordinator(6, key_type=0, coordinator_keys=["a", "b"])
    assert [(c["key"], c["node_id"], c["error_code"]) for c in response["coordinators"]] == [
        ("a", 0, NONE), ("b", 0, NONE)]


def test_find_coordinator_for_transactions_is_not_available_yet(h: Harness) -> None:
    response = h.find_coordinator(3, key="txn", key_type=1)
    assert (response["error_code"], response["node_id"], response["error_message"]) == (
        COORDINATOR_NOT_AVAILABLE, -1, "COORDINATOR_NOT_AVAILABLE")


# --- DescribeGroups ------------------------------------------------------------------------------


def test_describe_a_stable_group_shows_members_metadata_and_assignments(h: Harness) -> None:
    a, b = Member(), Member()
    h.form_group(a, b)
    (group,) = h.describe()
    assert (group["error_code"], group["group_state"], group["protocol_type"], group["protocol_data"]) == (
        NONE, "Stable", "consumer", "range")
    assert [(m["member_id"], m["client_id"], m["client_host"], m["member_metadata"], m["member_assignment"])
            for m in group["members"]] == [
        (a.member_id, "consumer", "/127.0.0.1", b"sub", f"assignment-of-{a.member_id}".encode()),
        (b.member_id, "consumer", "/127.0.0.1", b"sub", f"assignment-of-{b.member_id}".encode())]


def test_describe_a_rebalancing_group_shows_members_without_metadata(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    h.join(a)
    h.join_new(Member())
    (group,) = h.describe()
    assert (group["group_state"], group["protocol_data"]) == ("PreparingRebalance", "")
    assert [(m["member_metadata"], m["member_assignment"]) for m in group["members"]] == [(b"", b"")] * 2


def test_describe_an_unknown_group_answers_dead(h: Harness) -> None:
    (group,) = h.describe("nobody")
    assert (group["error_code"], group["group_state"], group["members"]) == (NONE, "Dead", [])


@pytest.mark.parametrize("version", range(0, 6))
def test_describe_answers_at_every_version(h: Harness, version: int) -> None:
    h.form_group(Member(group_instance_id="i") if version >= 4 else Member())
    (group,) = h.describe(version=version)
    assert group["group_state"] == "Stable"


# --- ListGroups -------------------------------------------------------------------------------------


def test_list_groups_names_every_group_with_its_state(h: Harness) -> None:
    h.form_group(Member())
    h.commit({("orders", 0): 1}, group_id="offsets-only")
    assert h.list_groups()["groups"] == [
        {"group_id": "group", "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"},
        {"group_id": "offsets-only", "protocol_type": "", "group_state": "Empty", "group_type": "classic"}]


def test_list_groups_filters_by_state_and_type(h: Harness) -> None:
    h.form_group(Member())
    h.commit({("orders", 0): 1}, group_id="offsets-only")
    assert [g["group_id"] for g in h.list_groups(states=["empty"])["groups"]] == ["offsets-only"]
    assert [g["group_id"] for g in h.list_groups(states=["Stable", "Empty"])["groups"]] == ["group", "offsets-only"]
    assert h.list_groups(types=["consumer"])["groups"] == []
    assert len(h.list_groups(types=["Classic"])["groups"]) == 2


@pytest.mark.parametrize("version", range(0, 6))
def test_list_groups_answers_at_every_version(h: Harness, version: int) -> None:
    h.form_group(Member())
    assert [g["group_id"] for g in h.list_groups(version=version)["groups"]] == ["group"]


# --- OffsetDelete ----------------------------------------------------------------------------------------


def test_delete_offsets_of_an_empty_group_writes_tombstones_and_forgets_them(h: Harness) -> None:
    h.commit({("orders", 0): 5, ("orders", 1): 7, ("payments", 0): 3})
    assert h.delete_offsets([("orders", 0), ("orders", 1), ("orders", 2)]) == (
        NONE, {("orders", 0): NONE, ("orders", 1): NONE, ("orders", 2): NONE})
    assert h.committed() == {("payments", 0): 3}
    tombstones = [decode_record(k, v)[0] for k, v in h.store.records("group") if v is None]
    # Only where an offset was committed; the group itself stays.
    assert tombstones == [OffsetCommitKey("group", "orders", 0), OffsetCommitKey("group", "orders", 1)]
    assert [(tp.topic, tp.partition) for tp in h.store.load().offsets["group"]] == [("payments", 0)]
    assert h.coordinator.group("group") is not None


def test_delete_offsets_of_a_topic_the_members_consume_is_group_subscribed_to_topic(h: Harness) -> None:
    a = Member()
    h.form_group(a, protocols=[("range", encode_subscription(["orders"]))])
    h.commit({("orders", 0): 5, ("archive", 0): 9}, a)
    # A topic the generation does not consume loses its offsets while the group runs.
    assert h.delete_offsets([("orders", 0), ("archive", 0)]) == (
        NONE, {("orders", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("archive", 0): NONE})
    assert h.committed() == {("orders", 0): 5}


def test_delete_offsets_of_a_consumer_group_whose_subscriptions_do_not_parse_is_refused_for_every_topic(
        h: Harness) -> None:
    a = Member()
    h.form_group(a)  # metadata b"sub" is no ConsumerProtocolSubscription
    h.commit({("archive", 0): 9}, a)
    assert h.delete_offsets([("archive", 0)]) == (NONE, {("archive", 0): GROUP_SUBSCRIBED_TO_TOPIC})


def test_delete_offsets_of_a_running_group_of_another_protocol_is_non_empty_group(h: Harness) -> None:
    a = Member()
    h.form_group(a, protocol_type="connect", protocols=[("range", b"worker")])
    assert h.delete_offsets([("orders", 0)]) == (NON_EMPTY_GROUP, {})


def test_delete_offsets_of_an_unknown_group_is_group_id_not_found(h: Harness) -> None:
    assert h.delete_offsets([("orders", 0)], group_id="nobody") == (GROUP_ID_NOT_FOUND, {})
    assert h.delete_offsets([("orders", 0)], group_id="") == (INVALID_GROUP_ID, {})


# --- DeleteGroups -------------------------------------------------------------------------------------


def test_delete_an_empty_group_removes_it_and_its_offsets(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    h.commit({("orders", 0): 1, ("orders", 1): 2}, a)
    h.leave(a)
    assert h.delete("group") == {"group": NONE}
    assert h.coordinator.group("group") is None
    assert h.committed([("orders", 0)]) == {("orders", 0): -1}
    keys = [decode_record(k, v)[0] for k, v in h.store.records("group") if v is None]
    assert keys == [OffsetCommitKey("group", "orders", 0), OffsetCommitKey("group", "orders", 1),
                    GroupMetadataKey("group")]
    assert h.store.load().groups == {} and h.store.load().offsets == {}


def test_delete_a_group_with_members_is_refused(h: Harness) -> None:
    h.form_group(Member())
    assert h.delete("group") == {"group": NON_EMPTY_GROUP}
    assert h.coordinator.group("group") is not None


def test_delete_an_unknown_group_is_group_id_not_found(h: Harness) -> None:
    h.commit({("orders", 0): 1})
    assert h.delete("group", "nobody", version=0) == {"group": NONE, "nobody": GROUP_ID_NOT_FOUND}
    assert h.delete("group") == {"group": GROUP_ID_NOT_FOUND}


def test_a_deleted_group_can_be_formed_again_from_scratch(h: Harness) -> None:
    h.commit({("orders", 0): 1})
    h.delete("group")
    a = Member()
    h.form_group(a)
    assert h.group.generation_id == 1 and h.committed([("orders", 0)]) == {("orders", 0): -1}


# --- loading -------------------------------------------------------------------------------------------


def test_every_api_answers_load_in_progress_until_the_groups_are_loaded() -> None:
    store = InMemoryGroupStore()
    first = Harness(store=store)
    a = Member()
    first.form_group(a)
    first.commit({("orders", 0): 5}, a)
    first.close()

    h = Harness(store=store, load=False)
    assert h.coordinator.is_loading
    assert h.join(Member()).error == COORDINATOR_LOAD_IN_PROGRESS
    assert h.sync(a).error == REBALANCE_IN_PROGRESS  # what older clients understand: rejoin
    assert h.heartbeat(a) == NONE  # nothing to tell the member yet
    assert h.commit({("orders", 0): 6}, a) == {("orders", 0): COORDINATOR_LOAD_IN_PROGRESS}
    assert h.fetch([("orders", 0)])["groups"][0] == {"group_id": "group", "error_code": COORDINATOR_LOAD_IN_PROGRESS,
                                                     "topics": []}
    assert h.fetch([("orders", 0)], version=7)["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    v1 = h.fetch([("orders", 0)], version=1)
    assert v1["topics"][0]["partitions"][0]["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    assert h.describe()[0]["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    assert h.list_groups()["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    assert h.delete("group") == {"group": COORDINATOR_LOAD_IN_PROGRESS}
    assert h.leave(a)["error_code"] == COORDINATOR_LOAD_IN_PROGRESS

    h.coordinator.load()
    assert not h.coordinator.is_loading
    assert h.heartbeat(a) == NONE and h.committed() == {("orders", 0): 5}
    assert h.list_groups()["error_code"] == NONE
    h.close()


def test_initial_rebalance_delay_applies_again_after_the_group_emptied(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    h.leave(a)
    join = h.join_new(Member())
    h.advance(INITIAL_DELAY_MS - 1)
    assert not join.done
    h.advance(1)
    assert join.response["generation_id"] == 3  # 1 formed, 2 empty, 3 again
