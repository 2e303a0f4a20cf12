"""OffsetCommit, OffsetFetch and offsets.retention.minutes."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from broker_core.broker import Broker
from broker_core.clock import MockTime
from broker_core.coordinator.group import (BrokerGroupStore, GroupCoordinatorConfig, GroupState, OffsetAndMetadata,
                                           OffsetCommitPartition, OffsetCommitRequest, OffsetFetchGroup,
                                           OffsetFetchRequest)
from broker_core.errors import RecordListTooLargeError, UnknownTopicOrPartitionError
from broker_core.offsets_topic import GroupMetadataKey, OffsetCommitKey, decode_record
from coordinator_kit import (COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INITIAL_DELAY_MS, NONE,
                             OFFSET_METADATA_TOO_LARGE, SESSION_TIMEOUT_MS, START_MS, UNKNOWN_MEMBER_ID, Harness,
                             Member)
from format.layout import TopicPartition
from tests.broker_core.offsets_kit import end_transaction

S = GroupState
RETENTION_MS = 60_000
CHECK_INTERVAL_MS = 1_000


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness(GroupCoordinatorConfig(group_initial_rebalance_delay_ms=INITIAL_DELAY_MS,
                                             offsets_retention_minutes=RETENTION_MS // 60_000,
                                             offsets_retention_check_interval_ms=CHECK_INTERVAL_MS))
    yield harness
    harness.close()


def tombstones(h: Harness) -> list[object]:
    """The keys of the tombstones the group wrote, in order."""
    return [decode_record(key, None)[0] for key, value in h.store.records(h.group_id) if value is None]


# --- OffsetCommit ------------------------------------------------------------------------------


def test_a_plain_commit_creates_a_group_that_only_stores_offsets(h: Harness) -> None:
    assert h.commit({("orders", 0): 10, ("orders", 1): 20}) == {("orders", 0): NONE, ("orders", 1): NONE}
    assert h.committed() == {("orders", 0): 10, ("orders", 1): 20}
    assert (h.group.state, h.group.protocol_type, h.group.generation_id) == (S.EMPTY, None, 0)
    assert h.list_groups()["groups"] == [{"group_id": "group", "protocol_type": "", "group_state": "Empty",
                                          "group_type": "classic"}]


def test_a_plain_commit_into_a_group_with_members_is_refused(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    assert h.commit({("orders", 0): 10}) == {("orders", 0): UNKNOWN_MEMBER_ID}
    assert h.committed([("orders", 0)]) == {("orders", 0): -1}


def test_a_commit_naming_a_generation_of_an_unknown_group_is_stale(h: Harness) -> None:
    stale = Member(member_id="consumer-old", generation_id=4)
    assert h.commit({("orders", 0): 10}, stale) == {("orders", 0): ILLEGAL_GENERATION}
    assert h.coordinator.group(h.group_id) is None


def test_a_member_of_the_current_generation_commits_and_stays_alive_by_it(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    for offset in range(3):
        h.advance(SESSION_TIMEOUT_MS - 1)
        assert h.commit({("orders", 0): offset}, a) == {("orders", 0): NONE}
    assert h.group.state is S.STABLE and h.committed() == {("orders", 0): 2}


def test_a_plain_commit_into_an_emptied_group_is_taken(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    assert h.commit({("orders", 0): 5}, a) == {("orders", 0): NONE}
    h.leave(a)
    assert h.group.state is S.EMPTY
    assert h.commit({("orders", 0): 6}) == {("orders", 0): NONE}
    assert h.commit({("orders", 0): 7}, a) == {("orders", 0): UNKNOWN_MEMBER_ID}  # its generation is over
    assert h.committed() == {("orders", 0): 6}


def test_metadata_longer_than_offset_metadata_max_bytes_is_refused() -> None:
    h = Harness(GroupCoordinatorConfig(offset_metadata_max_bytes=8))
    assert h.commit({("orders", 0): 1}, metadata="x" * 9) == {("orders", 0): OFFSET_METADATA_TOO_LARGE}
    assert h.commit({("orders", 0): 1}, metadata="x" * 8) == {("orders", 0): NONE}
    assert h.fetch([("orders", 0)])["groups"][0]["topics"][0]["partitions"][0]["metadata"] == "x" * 8
    h.close()


@pytest.mark.parametrize("failure,code", [
    (RecordListTooLargeError("too big"), 28),          # INVALID_COMMIT_OFFSET_SIZE
    (UnknownTopicOrPartitionError("no topic"), COORDINATOR_NOT_AVAILABLE),
    (OSError("disk"), -1),                              # UNKNOWN_SERVER_ERROR
])
def test_a_failed_append_answers_kafkas_error_and_changes_nothing(h: Harness, failure: Exception,
                                                                  code: int) -> None:
    h.store.fail_with = failure
    assert h.commit({("orders", 0): 1}) == {("orders", 0): code}
    h.store.fail_with = None
    assert h.committed([("orders", 0)]) == {("orders", 0): -1}


def test_commits_carry_leader_epoch_and_metadata_through_fetch(h: Harness) -> None:
    commit = OffsetCommitRequest(group_id="group", generation_id=-1, member_id="", offsets={
        TopicPartition("orders", 3): OffsetCommitPartition(42, "checkpoint-9", leader_epoch=7)})
    assert h.coordinator.commit_offsets(commit) == {TopicPartition("orders", 3): NONE}
    assert h.group.offsets[TopicPartition("orders", 3)] == OffsetAndMetadata(
        offset=42, metadata="checkpoint-9", commit_timestamp=START_MS, leader_epoch=7)
    (partition,) = h.fetch([("orders", 3)])["groups"][0]["topics"][0]["partitions"]
    assert partition == {"partition_index": 3, "committed_offset": 42, "committed_leader_epoch": 7,
                         "metadata": "checkpoint-9", "error_code": NONE}


# --- OffsetFetch ------------------------------------------------------------------------------------


def test_fetch_of_named_partitions_answers_minus_one_for_those_without_a_commit(h: Harness) -> None:
    h.commit({("orders", 0): 10})
    assert h.committed([("orders", 0), ("orders", 1), ("users", 0)]) == {
        ("orders", 0): 10, ("orders", 1): -1, ("users", 0): -1}


def test_fetch_of_all_partitions_lists_every_commit(h: Harness) -> None:
    h.commit({("users", 2): 5, ("orders", 1): 10, ("orders", 0): 3})
    assert h.committed(None) == {("orders", 0): 3, ("orders", 1): 10, ("users", 2): 5}


def test_fetch_for_an_unknown_group_is_not_an_error(h: Harness) -> None:
    assert h.fetch([("orders", 0)], group_id="nobody")["groups"] == [{"group_id": "nobody", "error_code": NONE,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
             "error_code": NONE}]}]}]
    assert h.fetch(None, group_id="nobody")["groups"][0]["topics"] == []


def test_fetch_answers_several_groups_at_once_in_request_order(h: Harness) -> None:
    h.commit({("orders", 0): 1}, group_id="g1")
    h.commit({("orders", 0): 2}, group_id="g2")
    results = h.coordinator.fetch_offsets(OffsetFetchRequest(groups=(
        OffsetFetchGroup("g2", None), OffsetFetchGroup("g1", (TopicPartition("orders", 0),)))))
    assert [(r.error_code, {tp: o.offset for tp, o in r.offsets.items()}) for r in results] == [
        (NONE, {TopicPartition("orders", 0): 2}), (NONE, {TopicPartition("orders", 0): 1})]


@pytest.mark.parametrize("version", range(1, 8))
def test_fetch_before_v8_answers_one_group(h: Harness, version: int) -> None:
    h.commit({("orders", 0): 9})
    response = h.fetch([("orders", 0)], version=version)
    assert response["topics"][0]["partitions"][0]["committed_offset"] == 9
    if version >= 2:
        assert response["error_code"] == NONE


# --- OffsetFetch with require_stable (KIP-447) ------------------------------------------------------

UNSTABLE_OFFSET_COMMIT = 88


def partitions_of(response: dict) -> dict[tuple[str, int], tuple[int, int]]:
    """(committed offset, error code) of each partition of a one-group OffsetFetch response."""
    topics = response["groups"][0]["topics"] if "groups" in response else response["topics"]
    return {(t["name"], p["partition_index"]): (p["committed_offset"], p["error_code"])
            for t in topics for p in t["partitions"]}


@pytest.fixture
def offsets_broker(tmp_path: Path) -> Iterator[Broker]:
    """The broker whose ``__consumer_offsets`` holds the transactional offsets and their markers."""
    broker = Broker(str(tmp_path / "logs"), {"offsets.topic.num.partitions": 1},
                    clock=MockTime(current_time_ms=START_MS), background=False)
    yield broker
    broker.close()


@pytest.fixture
def pending(offsets_broker: Broker) -> Iterator[Harness]:
    """orders-0 committed at 3; an open transaction of producer 5 has committed orders-0 at 7 and orders-1 at 8."""
    h = Harness(GroupCoordinatorConfig.from_broker_config(offsets_broker.config), BrokerGroupStore(offsets_broker),
                offsets_broker.clock)
    h.commit({("orders", 0): 3})
    assert h.txn_commit({("orders", 0): 7, ("orders", 1): 8}, producer_id=5) == {("orders", 0): NONE,
                                                                                ("orders", 1): NONE}
    yield h
    h.close()


def end(h: Harness, producer_id: int, *, commit: bool) -> None:
    """The transaction's marker lands in the group's partition, and the coordinator hears of it."""
    end_transaction(h.store.broker, h.group_id, producer_id, commit=commit)
    h.end_transaction(producer_id, commit=commit)


WANTED = [("orders", 0), ("orders", 1), ("orders", 2)]


def test_a_stable_fetch_answers_unstable_offset_commit_for_partitions_an_open_transaction_committed(
        pending: Harness) -> None:
    assert partitions_of(pending.fetch(WANTED, require_stable=True)) == {
        ("orders", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("orders", 1): (-1, UNSTABLE_OFFSET_COMMIT),
        ("orders", 2): (-1, NONE)}


def test_a_fetch_without_require_stable_answers_the_offsets_committed_before_the_open_transaction(
        pending: Harness) -> None:
    assert partitions_of(pending.fetch(WANTED)) == {
        ("orders", 0): (3, NONE), ("orders", 1): (-1, NONE), ("orders", 2): (-1, NONE)}


def test_a_stable_fetch_sees_the_transactions_offsets_once_it_commits(pending: Harness) -> None:
    end(pending, 5, commit=True)
    assert partitions_of(pending.fetch(WANTED, require_stable=True)) == {
        ("orders", 0): (7, NONE), ("orders", 1): (8, NONE), ("orders", 2): (-1, NONE)}


def test_a_stable_fetch_sees_the_offsets_before_the_transaction_once_it_aborts(pending: Harness) -> None:
    end(pending, 5, commit=False)
    assert partitions_of(pending.fetch(WANTED, require_stable=True)) == {
        ("orders", 0): (3, NONE), ("orders", 1): (-1, NONE), ("orders", 2): (-1, NONE)}


def test_a_stable_fetch_of_all_partitions_lists_the_committed_ones_and_marks_the_unstable(pending: Harness) -> None:
    # As Kafka's fetchAllOffsets: orders-1 has no committed offset yet, so it is not listed.
    assert partitions_of(pending.fetch(None, require_stable=True)) == {("orders", 0): (-1, UNSTABLE_OFFSET_COMMIT)}
    assert partitions_of(pending.fetch(None)) == {("orders", 0): (3, NONE)}


def test_another_producers_open_transaction_leaves_the_partitions_it_did_not_commit_stable(pending: Harness) -> None:
    pending.txn_commit({("orders", 2): 4}, producer_id=6)
    end(pending, 5, commit=True)
    assert partitions_of(pending.fetch(WANTED, require_stable=True)) == {
        ("orders", 0): (7, NONE), ("orders", 1): (8, NONE), ("orders", 2): (-1, UNSTABLE_OFFSET_COMMIT)}


def test_a_coordinator_loading_the_offsets_topic_while_the_transaction_is_open_answers_its_offsets_unstable(
        pending: Harness) -> None:
    pending.close()
    loaded = Harness(pending.config, BrokerGroupStore(pending.store.broker), pending.clock)
    try:
        assert partitions_of(loaded.fetch(WANTED, require_stable=True)) == {
            ("orders", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("orders", 1): (-1, UNSTABLE_OFFSET_COMMIT),
            ("orders", 2): (-1, NONE)}
        end(loaded, 5, commit=True)
        assert partitions_of(loaded.fetch(WANTED, require_stable=True))[("orders", 1)] == (8, NONE)
    finally:
        loaded.close()


@pytest.mark.parametrize("version", [7, 8, 9])
def test_unstable_offset_commit_is_a_partition_error_and_the_group_has_none(pending: Harness, version: int) -> None:
    response = pending.fetch([("orders", 0)], version=version, require_stable=True)
    group_error = response["groups"][0]["error_code"] if version >= 8 else response["error_code"]
    assert group_error == NONE
    assert partitions_of(response) == {("orders", 0): (-1, UNSTABLE_OFFSET_COMMIT)}


def test_the_typed_fetch_names_the_unstable_partitions_and_shows_no_offset_for_them(pending: Harness) -> None:
    (result,) = pending.coordinator.fetch_offsets(OffsetFetchRequest(groups=(
        OffsetFetchGroup(pending.group_id, (TopicPartition("orders", 0), TopicPartition("orders", 2))),),
        require_stable=True))
    assert result.unstable == {TopicPartition("orders", 0)}
    assert result.offsets == {TopicPartition("orders", 0): None, TopicPartition("orders", 2): None}


# --- offsets.retention.minutes ------------------------------------------------------------------------


def test_an_empty_groups_offsets_expire_retention_after_it_became_empty(h: Harness) -> None:
    a = Member()
    h.form_group(a)
    h.commit({("orders", 0): 10}, a)
    for _ in range(2 * RETENTION_MS // (SESSION_TIMEOUT_MS // 2)):
        h.advance(SESSION_TIMEOUT_MS // 2)
        assert h.heartbeat(a) == NONE
    # A group with members keeps its offsets however old they are.
    assert h.committed() == {("orders", 0): 10}
    h.advance(SESSION_TIMEOUT_MS)  # a dies; the group empties now
    assert h.group.state is S.EMPTY
    h.advance(RETENTION_MS - CHECK_INTERVAL_MS)
    assert h.committed() == {("orders", 0): 10}
    h.advance(CHECK_INTERVAL_MS)
    assert h.coordinator.group(h.group_id) is None  # expired, then removed: Empty and without offsets
    assert h.committed([("orders", 0)]) == {("orders", 0): -1}
    assert tombstones(h) == [OffsetCommitKey("group", "orders", 0), GroupMetadataKey("group")]


def test_offsets_of_a_group_that_only_stores_offsets_expire_one_by_one(h: Harness) -> None:
    h.commit({("orders", 0): 1})
    h.advance(RETENTION_MS // 2)
    h.commit({("orders", 1): 2})
    h.advance(RETENTION_MS // 2)
    assert h.committed() == {("orders", 1): 2}
    assert h.group.state is S.EMPTY
    h.advance(RETENTION_MS // 2)
    assert h.coordinator.group(h.group_id) is None


def test_a_fresh_commit_restarts_the_retention_of_a_standalone_offset(h: Harness) -> None:
    h.commit({("orders", 0): 1})
    h.advance(RETENTION_MS - CHECK_INTERVAL_MS)
    h.commit({("orders", 0): 2})
    h.advance(RETENTION_MS - CHECK_INTERVAL_MS)
    assert h.committed() == {("orders", 0): 2}


def test_a_commit_with_its_own_retention_time_expires_then(h: Harness) -> None:
    assert h.commit({("orders", 0): 1}, version=2, retention_time_ms=5 * CHECK_INTERVAL_MS) == {("orders", 0): NONE}
    h.advance(4 * CHECK_INTERVAL_MS)
    assert h.committed() == {("orders", 0): 1}
    h.advance(CHECK_INTERVAL_MS)
    assert h.coordinator.group(h.group_id) is None


def test_cleanup_can_be_called_with_an_explicit_time(h: Harness) -> None:
    h.commit({("orders", 0): 1})
    now = h.clock.milliseconds()
    assert h.coordinator.cleanup_expired_offsets(now + RETENTION_MS - 1) == 0
    assert h.coordinator.cleanup_expired_offsets(now + RETENTION_MS) == 1
