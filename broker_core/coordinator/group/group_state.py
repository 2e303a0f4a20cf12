"""The states of a classic consumer group and the one table that says how they may change.

Kafka's classic group protocol moves a group through five states::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
      ^                 |    ^                                         |
      |   nobody left   |    |  join, leave, failure                   | leader's SyncGroup
      +-----------------+    +-----------------------------------------+--> Stable
                             ^                                              |
                             +--------- join, leave, failure ---------------+

and any state may end in Dead (deleted, expired or unloaded). The table below
is the only place that knows this: ``GroupMetadata.transition_to`` checks every
change against it, so a coordinator bug shows up as an exception naming the
group and both states instead of as a group silently stuck.
"""

from __future__ import annotations

import enum
from types import MappingProxyType
from typing import Mapping

__all__ = ["GroupState", "VALID_PREVIOUS_STATES", "IllegalGroupStateTransitionError", "check_transition"]


class GroupState(enum.Enum):
    """A classic group's state; the value is Kafka's name for it (DescribeGroups, ListGroups)."""

    #: No members, but the group lingers for its offsets (or a member is about to join).
    EMPTY = "Empty"
    #: A rebalance started: JoinGroup requests are parked until every expected member has joined.
    PREPARING_REBALANCE = "PreparingRebalance"
    #: A new generation exists: waiting for the leader's assignment in SyncGroup.
    COMPLETING_REBALANCE = "CompletingRebalance"
    #: Every member has its assignment; heartbeats keep the generation alive.
    STABLE = "Stable"
    #: Removed (deleted, expired, unloaded); no transition leaves it.
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """The state named ``name`` (case-insensitive, as ListGroups filters match), or None."""
        lowered = name.lower()
        for state in cls:
            if state.value.lower() == lowered:
                return state
        return None

    def __str__(self) -> str:
        return self.value


_S = GroupState

#: For each target state, the states a group may move to it from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: Mapping[GroupState, frozenset[GroupState]] = MappingProxyType({
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
})


class IllegalGroupStateTransitionError(RuntimeError):
    """A transition the table does not allow: always a coordinator bug, never a client's fault."""

    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        allowed = ", ".join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))
        super().__init__(f"group {group_id!r} cannot move from {current.value} to {target.value}: "
                         f"{target.value} is reached only from {allowed}")
        self.group_id = group_id
        self.current = current
        self.target = target


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raise IllegalGroupStateTransitionError unless ``current -> target`` is in the table."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalGroupStateTransitionError(group_id, current, target)
