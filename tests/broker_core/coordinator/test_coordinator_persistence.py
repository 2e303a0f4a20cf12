"""Groups and offsets in ``__consumer_offsets``: stored in Kafka's layout, loaded by the next coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from broker_core.broker import Broker
from broker_core.clock import MockTime
from broker_core.coordinator.group import (BrokerGroupStore, GroupCoordinatorConfig, GroupState, InMemoryGroupStore,
                                           OffsetAndMetadata)
from broker_core.group_offsets import commit_offsets, committed_offsets, read_offsets_topic
from broker_core.offsets_topic import OFFSETS_TOPIC, partition_for_group
from coordinator_kit import (INITIAL_DELAY_MS, NONE, REBALANCE_IN_PROGRESS, SESSION_TIMEOUT_MS, START_MS,
                             UNKNOWN_MEMBER_ID, Harness, Member)
from format.layout import TopicPartition
from tests.broker_core.offsets_kit import commit_in_transaction, end_transaction

S = GroupState
PARTITIONS = 3


class BrokerFixture:
    """A broker on a log directory that can be stopped and started again, on one fake clock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.clock = MockTime(current_time_ms=START_MS)
        self.broker: Broker | None = None

    def start(self) -> Broker:
        self.broker = Broker(str(self.path), {"offsets.topic.num.partitions": PARTITIONS}, clock=self.clock,
                             background=False)
        return self.broker

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.close()
            self.broker = None

    def harness(self, *, load: bool = True) -> Harness:
        broker = self.broker or self.start()
        config = GroupCoordinatorConfig.from_broker_config(broker.config)
        return Harness(config, BrokerGroupStore(broker), self.clock, load=load)


@pytest.fixture
def fx(tmp_path: Path) -> Iterator[BrokerFixture]:
    fixture = BrokerFixture(tmp_path / "logs")
    yield fixture
    fixture.stop()


def restart(fx: BrokerFixture, h: Harness) -> Harness:
    h.close()
    fx.stop()
    fx.start()
    return fx.harness()


def test_the_coordinators_settings_come_from_the_broker_config(fx: BrokerFixture) -> None:
    h = fx.harness()
    assert h.config.offsets_topic_num_partitions == PARTITIONS
    assert h.config.group_initial_rebalance_delay_ms == INITIAL_DELAY_MS
    assert h.coordinator.store.num_partitions == PARTITIONS
    # Created with the first record, as Kafka creates it when a group first needs it.
    assert fx.broker is not None and fx.broker.topics.get(OFFSETS_TOPIC) is None
    assert h.commit({("orders", 0): 1}) == {("orders", 0): NONE}
    assert fx.broker.describe_topic(OFFSETS_TOPIC).config["cleanup.policy"] == "compact"
    assert fx.broker.describe_topic(OFFSETS_TOPIC).partition_count == PARTITIONS
    h.close()


def test_a_new_coordinator_loads_the_same_offsets_and_group(fx: BrokerFixture) -> None:
    h = fx.harness()
    a, b = Member(), Member()
    h.form_group(a, b)
    assert h.commit({("orders", 0): 10, ("orders", 1): 11}, a) == {("orders", 0): NONE, ("orders", 1): NONE}
    before = h.group
    stored = (before.generation_id, before.leader_id, before.protocol_name, before.member_ids,
              [m.assignment for m in before.members])

    h = restart(fx, h)
    group = h.group
    assert group.state is S.STABLE
    assert (group.generation_id, group.leader_id, group.protocol_name, group.member_ids,
            [m.assignment for m in group.members]) == stored
    assert group.protocol_type == "consumer"
    assert h.committed() == {("orders", 0): 10, ("orders", 1): 11}
    offset = group.offsets[TopicPartition("orders", 0)]
    assert offset == OffsetAndMetadata(10, "", START_MS + 2 * INITIAL_DELAY_MS, None, None)
    # The members go on where they were: same generation, same assignment.
    assert h.heartbeat(a) == NONE and h.heartbeat(b) == NONE
    assert h.sync(b).response["assignment"] == f"assignment-of-{b.member_id}".encode()
    h.close()


def test_loaded_members_that_never_heartbeat_again_expire(fx: BrokerFixture) -> None:
    h = fx.harness()
    a, b = Member(), Member()
    h.form_group(a, b)
    h = restart(fx, h)
    h.advance(SESSION_TIMEOUT_MS - 1)
    assert h.heartbeat(a) == NONE
    h.advance(1)
    assert h.group.member_ids == [a.member_id] and h.group.state is S.PREPARING_REBALANCE
    assert h.heartbeat(a) == REBALANCE_IN_PROGRESS
    assert h.join(a).response["generation_id"] == 2
    h.close()


def test_records_are_in_the_groups_partition_and_readable_by_the_offsets_tools(fx: BrokerFixture) -> None:
    h = fx.harness()
    h.commit({("orders", 2): 7})
    broker = fx.broker
    assert broker is not None
    wanted = partition_for_group("group", PARTITIONS)
    sizes = {p.partition: p.log_end_offset for p in broker.describe_topic(OFFSETS_TOPIC).partitions}
    assert sizes[wanted] == 1 and sum(sizes.values()) == 1
    assert committed_offsets(broker, "group")[TopicPartition("orders", 2)].offset == 7
    snapshot = read_offsets_topic(None, str(fx.path))
    assert snapshot.offsets["group"][TopicPartition("orders", 2)].offset == 7
    h.close()


def test_group_metadata_is_readable_by_the_offsets_tools(fx: BrokerFixture) -> None:
    h = fx.harness()
    a = Member(group_instance_id="instance-a")
    h.form_group(a)
    metadata = read_offsets_topic(None, str(fx.path)).groups["group"]
    assert (metadata.protocol_type, metadata.generation, metadata.protocol, metadata.leader) == (
        "consumer", 1, "range", a.member_id)
    assert [(m.member_id, m.group_instance_id, m.subscription) for m in metadata.members] == [
        (a.member_id, "instance-a", b"sub")]
    h.close()


def test_offsets_committed_by_the_embedded_broker_api_are_loaded(fx: BrokerFixture) -> None:
    broker = fx.start()
    commit_offsets(broker, "spark-job", {TopicPartition("orders", 0): 99}, metadata="batch-3")
    h = fx.harness()
    h.group_id = "spark-job"
    assert h.committed() == {("orders", 0): 99}
    assert h.group.state is S.EMPTY and h.group.protocol_type is None
    h.close()


def test_a_deleted_group_stays_deleted(fx: BrokerFixture) -> None:
    h = fx.harness()
    h.commit({("orders", 0): 1})
    assert h.delete("group") == {"group": NONE}
    h = restart(fx, h)
    assert h.coordinator.group("group") is None
    assert fx.broker is not None and committed_offsets(fx.broker, "group") == {}
    h.close()


def test_an_emptied_group_is_loaded_empty_with_its_generation(fx: BrokerFixture) -> None:
    h = fx.harness()
    a = Member()
    h.form_group(a)
    h.commit({("orders", 0): 4}, a)
    h.leave(a)
    h = restart(fx, h)
    assert (h.group.state, h.group.generation_id, h.group.protocol_type) == (S.EMPTY, 2, "consumer")
    assert h.committed() == {("orders", 0): 4}
    assert h.heartbeat(a) == UNKNOWN_MEMBER_ID
    h.close()


def test_expiry_is_remembered_across_restarts(fx: BrokerFixture) -> None:
    h = fx.harness()
    h.commit({("orders", 0): 1})
    retention = h.config.offsets_retention_ms
    assert h.coordinator.cleanup_expired_offsets(h.clock.milliseconds() + retention) == 1
    h = restart(fx, h)
    assert h.coordinator.group("group") is None
    h.close()


def test_offsets_committed_in_a_transaction_count_only_once_committed(fx: BrokerFixture) -> None:
    broker = fx.start()
    commit_in_transaction(broker, "group", {TopicPartition("orders", 1): 10}, producer_id=1)
    commit_in_transaction(broker, "group", {TopicPartition("orders", 2): 20}, producer_id=2)
    end_transaction(broker, "group", 1)
    end_transaction(broker, "group", 2, commit=False)
    commit_in_transaction(broker, "group", {TopicPartition("orders", 3): 30}, producer_id=3)  # still open
    loaded = BrokerGroupStore(broker).load()
    assert {tp: o.offset for tp, o in loaded.offsets["group"].items()} == {TopicPartition("orders", 1): 10}


def test_a_plain_commit_between_a_transactions_record_and_its_marker_is_loaded(fx: BrokerFixture) -> None:
    h = fx.harness()
    assert h.commit({("orders", 0): 1}) == {("orders", 0): NONE}
    assert fx.broker is not None
    commit_in_transaction(fx.broker, "group", {TopicPartition("orders", 0): 5}, producer_id=1)
    assert h.commit({("orders", 0): 3}) == {("orders", 0): NONE}
    end_transaction(fx.broker, "group", 1)
    h = restart(fx, h)
    # Kafka keeps the newer record: the plain commit at a later log offset than the transaction's.
    assert h.committed() == {("orders", 0): 3}
    h.close()


def test_the_in_memory_store_replays_like_the_topic() -> None:
    store = InMemoryGroupStore(num_partitions=PARTITIONS)
    h = Harness(GroupCoordinatorConfig(offsets_topic_num_partitions=PARTITIONS,
                                       group_initial_rebalance_delay_ms=INITIAL_DELAY_MS), store)
    a = Member()
    h.form_group(a)
    h.commit({("orders", 0): 3}, a)
    h.commit({("orders", 0): 4}, a)
    h.close()
    again = Harness(h.config, store, h.clock)
    assert again.committed() == {("orders", 0): 4}
    assert again.group.member_ids == [a.member_id]
    again.close()
