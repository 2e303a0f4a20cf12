"""Leader elections, as pure functions of a partition's state: Kafka's ``Election`` and
``PartitionLeaderElectionAlgorithms``.

Each election answers the partition's next ``PartitionState`` (leader epoch
bumped) or ``None`` when no replica may lead:

* **offline** (the leader's broker is gone, or the partition has no leader):
  the first replica in assignment order that is live and in the ISR; the new
  ISR is the live part of the old one. With ``unclean.leader.election.enable``
  and no such replica, the first live replica at all, alone in the ISR — it may
  lack acknowledged records, and the result says ``unclean``;
* **preferred replica**: the first assigned replica, if it is live and in sync;
  the ISR is kept;
* **controlled shutdown**: the first replica that is live, in sync and not
  shutting down; the shutting-down brokers leave the ISR.

``remove_replica_from_isr`` is what happens to partitions whose follower (or
leader) went offline without an election: the replica leaves the ISR, except
that the ISR never becomes empty — its last member stays, so the partition can
come back cleanly when that broker returns (Kafka's ``removeReplicasFromIsr``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Sequence

from .partition_state import NO_LEADER, PartitionState

__all__ = [
    "ElectionResult",
    "offline_partition_leader_election",
    "preferred_replica_partition_leader_election",
    "controlled_shutdown_partition_leader_election",
    "remove_replica_from_isr",
]


@dataclass(frozen=True)
class ElectionResult:
    """The state after an election; ``unclean`` when the leader came from outside the ISR."""

    state: PartitionState
    unclean: bool = False


def offline_partition_leader_election(assignment: Sequence[int], state: PartitionState,
                                      live_brokers: AbstractSet[int], unclean_leader_election_enable: bool,
                                      controller_epoch: int) -> ElectionResult | None:
    live_replicas = [r for r in assignment if r in live_brokers]
    leader = next((r for r in live_replicas if r in state.isr), None)
    if leader is not None:
        isr = [r for r in state.isr if r in live_brokers]
        return ElectionResult(state.new_leader_and_isr(leader, isr, controller_epoch))
    if unclean_leader_election_enable and live_replicas:
        leader = live_replicas[0]
        return ElectionResult(state.new_leader_and_isr(leader, [leader], controller_epoch), unclean=True)
    return None


def preferred_replica_partition_leader_election(assignment: Sequence[int], state: PartitionState,
                                                live_brokers: AbstractSet[int],
                                                controller_epoch: int) -> ElectionResult | None:
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred not in live_brokers or preferred not in state.isr:
        return None
    return ElectionResult(state.new_leader_and_isr(preferred, state.isr, controller_epoch))


def controlled_shutdown_partition_leader_election(assignment: Sequence[int], state: PartitionState,
                                                  live_brokers: AbstractSet[int],
                                                  shutting_down: AbstractSet[int],
                                                  controller_epoch: int) -> ElectionResult | None:
    leader = next((r for r in assignment if r in live_brokers and r in state.isr and r not in shutting_down), None)
    if leader is None:
        return None
    isr = [r for r in state.isr if r not in shutting_down]
    return ElectionResult(state.new_leader_and_isr(leader, isr, controller_epoch))


def remove_replica_from_isr(state: PartitionState, replica: int, controller_epoch: int) -> PartitionState | None:
    """The state without ``replica`` in the ISR (nor as leader); ``None`` when nothing changes."""
    if replica not in state.isr and replica != state.leader:
        return None
    isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != replica)
    leader = NO_LEADER if state.leader == replica else state.leader
    if (leader, isr) == (state.leader, state.isr):
        return None  # the last in-sync replica stays, and it already does not lead
    return state.new_leader_and_isr(leader, isr, controller_epoch)
