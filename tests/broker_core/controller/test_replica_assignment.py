"""Replica placement matches Kafka's ``AdminUtils.assignReplicasToBrokers``, case for case."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from broker_core.controller.replica_assignment import (BrokerMetadata, assign_new_partitions,
                                                       assign_replicas_to_brokers, parse_replica_assignment,
                                                       rack_alternated_broker_list, validate_replica_assignment)
from broker_core.errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


def _brokers(ids, racks=None):
    return [BrokerMetadata(i, (racks or {}).get(i)) for i in ids]


def test_without_racks_the_assignment_is_kafkas_for_five_brokers_and_ten_partitions():
    # Kafka's AdminUtilsTest.testReplicaAssignment.
    assert assign_replicas_to_brokers(_brokers(range(5)), 10, 3, fixed_start_index=0) == {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2),
    }


def test_the_rack_alternated_broker_list_takes_one_broker_per_rack_in_turn():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_with_racks_the_assignment_is_kafkas_and_spreads_each_partition_over_racks():
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assignment = assign_replicas_to_brokers(_brokers(range(6), racks), 7, 3, fixed_start_index=0,
                                            start_partition_id=0)
    assert assignment == {0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3),
                          6: (0, 4, 2)}
    assert all(len({racks[b] for b in replicas}) == 3 for replicas in assignment.values())


def test_leaders_and_replicas_spread_evenly_with_a_random_start():
    assignment = assign_replicas_to_brokers(_brokers([1, 2, 3]), 30, 2, rng=random.Random(7))
    assert Counter(r[0] for r in assignment.values()) == {1: 10, 2: 10, 3: 10}
    assert Counter(b for r in assignment.values() for b in r) == {1: 20, 2: 20, 3: 20}
    assert all(len(set(r)) == 2 for r in assignment.values())


def test_a_replication_factor_above_the_broker_count_is_refused():
    with pytest.raises(InvalidReplicationFactorError, match="Replication factor: 4 larger than available brokers: 3."):
        assign_replicas_to_brokers(_brokers([1, 2, 3]), 1, 4)


def test_zero_partitions_or_replicas_are_refused():
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(_brokers([1]), 0, 1)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers(_brokers([1]), 1, 0)


def test_brokers_with_and_without_racks_are_refused_together():
    with pytest.raises(InvalidReplicaAssignmentError, match="brokers \\[2\\] have no broker.rack"):
        assign_replicas_to_brokers(_brokers([1, 2], {1: "a"}), 1, 1)


def test_new_partitions_continue_the_placement_of_the_existing_ones():
    brokers = _brokers(range(5))
    existing = assign_replicas_to_brokers(brokers, 5, 3, fixed_start_index=0)
    added = assign_new_partitions(existing, 10, brokers)
    assert {**existing, **added} == assign_replicas_to_brokers(brokers, 10, 3, fixed_start_index=0)


def test_a_partition_increase_must_grow_the_topic():
    with pytest.raises(InvalidPartitionsError, match="currently has 2 partitions, 2 would not be an increase"):
        assign_new_partitions({0: (1,), 1: (1,)}, 2, _brokers([1]))


def test_an_explicit_assignment_is_parsed_as_kafka_topics_replica_assignment():
    assert parse_replica_assignment("0:1:2,1:2:0") == {0: (0, 1, 2), 1: (1, 2, 0)}
    with pytest.raises(InvalidReplicaAssignmentError, match="partition 1's replicas 'x' are not broker ids"):
        parse_replica_assignment("0,x")


@pytest.mark.parametrize("assignment, message", [
    ({0: (1, 1)}, "duplicate brokers in the replica assignment of partition 0: \\[1, 1\\]"),
    ({0: (1, 2), 1: (1,)}, "same number of replicas, got sizes \\[1, 2\\]"),
    ({0: (1,), 2: (2,)}, "must be numbered 0..1 without gaps"),
    ({0: ()}, "partition 0 has no replicas"),
])
def test_a_malformed_explicit_assignment_is_refused(assignment, message):
    with pytest.raises(InvalidReplicaAssignmentError, match=message):
        validate_replica_assignment("t", assignment, [1, 2])
