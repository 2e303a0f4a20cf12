"""The group coordinator of a cluster's broker: it coordinates the groups of the ``__consumer_offsets``
partitions its broker leads (Kafka's onElection and onResignation), loading them when elected and
unloading them when another broker takes over."""

from __future__ import annotations

import threading

from broker_core.coordinator.group import InMemoryGroupStore
from tests.broker_core.coordinator.coordinator_kit import COORDINATOR_LOAD_IN_PROGRESS, NONE, Harness, Member

NOT_COORDINATOR = 16
T0 = ("events", 0)


def _elected_harness(store: InMemoryGroupStore | None = None, group_id: str = "group") -> Harness:
    return Harness(store=store, group_id=group_id, elected_partitions_only=True)


def _other_group(h: Harness) -> str:
    """A group id whose partition is not the harness group's."""
    mine = h.coordinator.partition_for(h.group_id)
    return next(g for g in (f"g{n}" for n in range(100)) if h.coordinator.partition_for(g) != mine)


def test_a_cluster_coordinator_answers_not_coordinator_until_elected_for_the_groups_partition():
    h = _elected_harness()
    assert h.commit({T0: 5}) == {T0: NOT_COORDINATOR}
    assert h.fetch()["groups"][0]["error_code"] == NOT_COORDINATOR
    h.coordinator.on_election(h.coordinator.partition_for("group"), 0)
    assert h.commit({T0: 5}) == {T0: NONE}
    assert h.committed() == {T0: 5}
    assert h.commit({T0: 6}, group_id=_other_group(h)) == {T0: NOT_COORDINATOR}


def test_an_election_loads_the_groups_and_offsets_of_its_partition_only():
    store = InMemoryGroupStore(8)
    writer = Harness(store=store)
    other = _other_group(writer)
    assert writer.commit({T0: 7}) == {T0: NONE}
    assert writer.commit({T0: 9}, group_id=other) == {T0: NONE}
    writer.close()
    h = _elected_harness(store)
    h.coordinator.on_election(h.coordinator.partition_for("group"), 3)
    assert h.committed() == {T0: 7}
    assert h.coordinator.group_ids() == ["group"]
    assert h.fetch(group_id=other)["groups"][0]["error_code"] == NOT_COORDINATOR


def test_requests_for_a_partition_being_loaded_answer_coordinator_load_in_progress():
    class SlowStore(InMemoryGroupStore):
        def __init__(self) -> None:
            super().__init__(8)
            self.reading, self.release = threading.Event(), threading.Event()

        def load(self, partitions=None):
            self.reading.set()
            assert self.release.wait(10)
            return super().load(partitions)

    store = SlowStore()
    h = _elected_harness(store)
    election = threading.Thread(target=h.coordinator.on_election, args=(h.coordinator.partition_for("group"), 0))
    election.start()
    assert store.reading.wait(10)
    assert h.commit({T0: 1}) == {T0: COORDINATOR_LOAD_IN_PROGRESS}
    assert h.list_groups()["error_code"] == COORDINATOR_LOAD_IN_PROGRESS
    store.release.set()
    election.join(10)
    assert h.commit({T0: 1}) == {T0: NONE}


def test_resignation_unloads_the_partitions_groups_and_answers_their_parked_joins_not_coordinator():
    h = _elected_harness()
    partition = h.coordinator.partition_for("group")
    h.coordinator.on_election(partition, 0)
    parked = h.join_new(Member())  # waits out group.initial.rebalance.delay.ms
    assert not parked.done
    h.coordinator.on_resignation(partition)
    assert parked.error == NOT_COORDINATOR
    assert h.coordinator.group("group") is None
    assert h.commit({T0: 1}) == {T0: NOT_COORDINATOR}


def test_an_election_older_than_the_last_is_ignored_and_a_new_epoch_keeps_the_live_groups():
    h = _elected_harness()
    partition = h.coordinator.partition_for("group")
    h.coordinator.on_election(partition, 2)
    member = Member()
    joined = h.join_new(member)
    h.advance(3_000)
    assert joined.error == NONE and h.sync(member, {member.member_id: b"a"}).error == NONE
    generation = h.group.generation_id
    h.coordinator.on_resignation(partition)
    h.coordinator.on_election(partition, 1)  # stale: the partition stays unowned
    assert h.commit({T0: 1}) == {T0: NOT_COORDINATOR}
    h.coordinator.on_election(partition, 3)
    loaded = h.group
    assert (loaded.generation_id, loaded.member_ids) == (generation, [member.member_id])
    h.coordinator.on_election(partition, 4)  # a new leader epoch of a partition coordinated here already
    assert h.group is loaded
