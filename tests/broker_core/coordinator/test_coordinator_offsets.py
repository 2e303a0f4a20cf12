"""OffsetCommit, OffsetFetch and offsets.retention.minutes."""

from __future__ import annotations

from typing import Iterator

import pytest

from broker_core.coordinator.group import (GroupCoordinatorConfig, GroupState, OffsetAndMetadata, OffsetCommitPartition,
                                           OffsetCommitRequest, OffsetFetchGroup, OffsetFetchRequest)
from broker_core.errors import RecordListTooLargeError, UnknownTopicOrPartitionError
from broker_core.offsets_topic import GroupMetadataKey, OffsetCommitKey, decode_record
from coordinator_kit import (COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INITIAL_DELAY_MS, NONE,
                             OFFSET_METADATA_TOO_LARGE, SESSION_TIMEOUT_MS, START_MS, UNKNOWN_MEMBER_ID, Harness,
                             Member)
from format.layout import TopicPartition

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
