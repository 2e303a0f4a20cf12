"""The classic group states and their transition table."""

from __future__ import annotations

import itertools

import pytest

from broker_core.clock import MockTime
from broker_core.coordinator.group import (VALID_PREVIOUS_STATES, GroupMetadata, GroupState,
                                           IllegalGroupStateTransitionError)
from broker_core.coordinator.group.group_state import check_transition

S = GroupState

#: Kafka's table, written out edge by edge: (from, to).
ALLOWED = {
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.STABLE, S.DEAD),
    (S.DEAD, S.DEAD),
}


def group_in(state: GroupState) -> GroupMetadata:
    group = GroupMetadata("g", state, clock=MockTime())
    return group


def test_the_table_is_kafkas() -> None:
    table = {(previous, target) for target, previous_states in VALID_PREVIOUS_STATES.items()
             for previous in previous_states}
    assert table == ALLOWED


def test_state_names_are_the_wire_names() -> None:
    assert [s.value for s in GroupState] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


@pytest.mark.parametrize("current,target", sorted(ALLOWED, key=str))
def test_allowed_transitions_move_the_group(current: GroupState, target: GroupState) -> None:
    clock = MockTime(current_time_ms=100)
    group = GroupMetadata("g", current, clock=clock)
    clock.sleep(5)
    group.transition_to(target)
    assert group.state is target
    assert group.current_state_timestamp == 105


@pytest.mark.parametrize("current,target", sorted(set(itertools.product(S, S)) - ALLOWED, key=str))
def test_every_other_transition_raises_and_leaves_the_state(current: GroupState, target: GroupState) -> None:
    group = group_in(current)
    with pytest.raises(IllegalGroupStateTransitionError) as raised:
        group.transition_to(target)
    assert group.state is current
    assert "'g'" in str(raised.value) and current.value in str(raised.value) and target.value in str(raised.value)


def test_dead_is_final() -> None:
    for target in S:
        if target is not S.DEAD:
            with pytest.raises(IllegalGroupStateTransitionError):
                check_transition("g", S.DEAD, target)


def test_only_empty_stable_and_completing_rebalance_can_start_a_rebalance() -> None:
    assert {s for s in S if group_in(s).can_rebalance} == {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}


def test_parse_matches_names_case_insensitively() -> None:
    assert GroupState.parse("stable") is S.STABLE
    assert GroupState.parse("PREPARINGREBALANCE") is S.PREPARING_REBALANCE
    assert GroupState.parse("Rebalancing") is None
