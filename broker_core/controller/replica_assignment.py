"""Which brokers hold the replicas of each partition: Kafka's ``AdminUtils.assignReplicasToBrokers``.

The same placement Kafka computes, so a topic created here lands as it would on
a Kafka cluster of the same brokers:

* without racks, partition ``p``'s first replica (its preferred leader) is
  broker ``(p + start) % n`` and the followers are shifted round the broker
  list, the shift growing every ``n`` partitions, so leaders and followers
  both spread evenly;
* when every broker has ``broker.rack``, the broker list is first alternated
  across racks and a follower is skipped while a rack (or broker) without a
  replica of the partition remains — replicas spread over racks first;
* a mix of brokers with and without a rack is refused, as Kafka does.

``start_index`` and the shift are random unless fixed (tests and partition
increases fix them). Also here: checking an explicit assignment
(``replica.assignment``, ``--replica-assignment 0:1,1:2``) and the placement of
new partitions added to a topic.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError

__all__ = [
    "BrokerMetadata",
    "assign_replicas_to_brokers",
    "rack_alternated_broker_list",
    "parse_replica_assignment",
    "validate_replica_assignment",
    "assign_new_partitions",
]


@dataclass(frozen=True, order=True)
class BrokerMetadata:
    """A broker as placement sees it: its id and ``broker.rack`` (``None`` when unset)."""

    id: int
    rack: str | None = None


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn (racks and the brokers within each sorted)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(broker_racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    iterators = {rack: iter(brokers) for rack, brokers in by_rack.items()}
    racks = sorted(by_rack)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_racks):
        broker = next(iterators[racks[rack_index]], None)
        if broker is not None:
            result.append(broker)
        rack_index = (rack_index + 1) % len(racks)
    return result


def assign_replicas_to_brokers(brokers: Sequence[BrokerMetadata], n_partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """Partition id → replica list for ``n_partitions`` new partitions numbered from ``start_partition_id``."""
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    brokers = sorted(brokers)
    rng = rng or random.Random()
    if all(b.rack is None for b in brokers):
        arranged = [b.id for b in brokers]
        racks: dict[int, str] = {}
    elif any(b.rack is None for b in brokers):
        missing = [b.id for b in brokers if b.rack is None]
        raise InvalidReplicaAssignmentError(
            f"Not all brokers have rack information for replica rack aware assignment: brokers {missing} have no "
            f"broker.rack")
    else:
        racks = {b.id: b.rack for b in brokers if b.rack is not None}
        arranged = rack_alternated_broker_list(racks)
    n_brokers = len(arranged)
    n_racks = len(set(racks.values()))
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n_brokers)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n_brokers)
    current = max(0, start_partition_id)
    assignment: dict[int, tuple[int, ...]] = {}
    for _ in range(n_partitions):
        if current > 0 and current % n_brokers == 0:
            next_replica_shift += 1
        first = (current + start_index) % n_brokers
        replicas = [arranged[first]]
        if not racks:
            replicas += [arranged[_replica_index(first, next_replica_shift, j, n_brokers)]
                         for j in range(replication_factor - 1)]
        else:
            racks_with_replicas = {racks[replicas[0]]}
            k = 0
            for _ in range(replication_factor - 1):
                while True:
                    broker = arranged[_replica_index(first, next_replica_shift * n_racks, k, n_brokers)]
                    k += 1
                    # Skip a broker whose rack already has a replica while some rack has none, and a broker
                    # that already has one while some broker has none.
                    if ((racks[broker] not in racks_with_replicas or len(racks_with_replicas) == n_racks)
                            and (broker not in replicas or len(replicas) == n_brokers)):
                        replicas.append(broker)
                        racks_with_replicas.add(racks[broker])
                        break
        assignment[current] = tuple(replicas)
        current += 1
    return assignment


def parse_replica_assignment(text: str) -> dict[int, tuple[int, ...]]:
    """``0:1:2,1:2:0``: partition ``i``'s replicas are the ``i``-th comma-separated list of broker ids."""
    assignment: dict[int, tuple[int, ...]] = {}
    for partition, entry in enumerate(text.split(",")):
        parts = [p.strip() for p in entry.split(":")]
        if not all(p.lstrip("-").isdigit() for p in parts):
            raise InvalidReplicaAssignmentError(
                f"replica assignment {text!r}: partition {partition}'s replicas {entry!r} are not broker ids "
                f"separated by ':'")
        assignment[partition] = tuple(int(p) for p in parts)
    return assignment


def validate_replica_assignment(topic: str, assignment: Mapping[int, Sequence[int]],
                                live_brokers: Iterable[int], first_partition: int = 0) -> None:
    """Refuse an explicit assignment Kafka would refuse: gaps in partition ids, no replicas, duplicate
    replicas, replica lists of different lengths, brokers that are not registered."""
    partitions = sorted(assignment)
    if partitions != list(range(first_partition, first_partition + len(partitions))):
        raise InvalidReplicaAssignmentError(
            f"Topic {topic}: partitions {partitions} of the replica assignment must be numbered "
            f"{first_partition}..{first_partition + len(partitions) - 1} without gaps")
    live = set(live_brokers)
    sizes = {len(assignment[p]) for p in partitions}
    for partition in partitions:
        replicas = list(assignment[partition])
        if not replicas:
            raise InvalidReplicaAssignmentError(f"Topic {topic}: partition {partition} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"Topic {topic}: duplicate brokers in the replica assignment of partition {partition}: {replicas}")
        unknown = sorted(set(replicas) - live)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Topic {topic}: the replica assignment of partition {partition} names brokers {unknown}, "
                f"which are not registered (live brokers: {sorted(live)})")
    if len(sizes) > 1:
        raise InvalidReplicaAssignmentError(
            f"Topic {topic}: all partitions should have the same number of replicas, got sizes {sorted(sizes)}")


def assign_new_partitions(existing: Mapping[int, Sequence[int]], total_partitions: int,
                          brokers: Sequence[BrokerMetadata], rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """Replicas for the partitions a partition increase adds, placed after the existing ones the way
    Kafka's ``AdminZkClient.addPartitions`` does (start at partition 0's first replica, same factor)."""
    if total_partitions <= len(existing):
        raise InvalidPartitionsError(
            f"The topic currently has {len(existing)} partitions, {total_partitions} would not be an increase.")
    first = list(existing[0])
    ordered = sorted(brokers)
    start_index = next((i for i, b in enumerate(ordered) if b.id >= first[0]), 0)
    return assign_replicas_to_brokers(ordered, total_partitions - len(existing), len(first), start_index,
                                      len(existing), rng)
