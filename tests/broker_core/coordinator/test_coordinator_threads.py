"""The coordinator as a server runs it: reaper threads, a timer executor, requests from many threads.

Time is still simulated; the tests wait only for other threads to deliver
responses (an Event with a generous bound), never for time to pass.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from broker_core.broker import Broker
from broker_core.clock import MockTime
from broker_core.coordinator.group import (GroupCoordinator, GroupCoordinatorConfig, InMemoryGroupStore,
                                           JoinGroupRequest, JoinGroupResult)
from coordinator_kit import START_MS

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10.0


# A new dynamic member that joins straight in (no MEMBER_ID_REQUIRED round trip, as before JoinGroup v4).
JOIN = JoinGroupRequest(group_id="group", member_id="", group_instance_id=None, session_timeout_ms=10_000,
                        rebalance_timeout_ms=30_000, protocol_type="consumer", protocols=(("range", b"sub"),),
                        require_known_member_id=False, supports_skip_assignment=False)


class Responses:
    """Collects JoinGroup results delivered on any thread; ``wait(n)`` until n have arrived."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self.results: list[JoinGroupResult] = []

    def __call__(self, result: JoinGroupResult) -> None:
        with self._condition:
            self.results.append(result)
            self._condition.notify_all()

    def wait(self, count: int, timeout_s: float = WAIT_S) -> list[JoinGroupResult]:
        with self._condition:
            assert self._condition.wait_for(lambda: len(self.results) >= count, timeout_s), self.results
            return list(self.results)

    def arrived(self, count: int, timeout_s: float) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: len(self.results) >= count, timeout_s)


def test_the_reaper_thread_completes_the_initial_delay() -> None:
    clock = MockTime(current_time_ms=START_MS)
    coordinator = GroupCoordinator(0, GroupCoordinatorConfig(group_initial_rebalance_delay_ms=100),
                                   InMemoryGroupStore(), clock=clock)
    coordinator.startup()
    responses = Responses()
    coordinator.join_group(JOIN, responses)
    clock.sleep(100)
    (result,) = responses.wait(1)
    assert (result.error_code, result.generation_id, result.leader_id) == (0, 1, result.member_id)
    coordinator.shutdown()


def test_members_joining_from_many_threads_form_one_generation_with_one_leader() -> None:
    clock = MockTime(current_time_ms=START_MS)
    coordinator = GroupCoordinator(0, GroupCoordinatorConfig(group_initial_rebalance_delay_ms=100),
                                   InMemoryGroupStore(), clock=clock)
    coordinator.startup()
    responses = Responses()
    members = 16
    threads = [threading.Thread(target=coordinator.join_group, args=(JOIN, responses))
               for _ in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    # Arrivals during the initial delay extend it, delay after delay: move
    # time one delay at a time, letting the reaper thread run each.
    for _ in range(300):
        clock.sleep(100)
        if responses.arrived(members, 0.05):
            break
    results = responses.wait(members)
    assert {r.generation_id for r in results} == {1}
    assert len({r.leader_id for r in results}) == 1
    assert len({r.member_id for r in results}) == members
    assert sum(1 for r in results if r.members) == 1
    coordinator.shutdown()


def test_shutdown_answers_parked_joins_not_coordinator() -> None:
    clock = MockTime(current_time_ms=START_MS)
    coordinator = GroupCoordinator(0, GroupCoordinatorConfig(), InMemoryGroupStore(), clock=clock)
    coordinator.startup()
    responses = Responses()
    coordinator.join_group(JOIN, responses)
    coordinator.shutdown()
    (result,) = responses.wait(1)
    assert result.error_code == 16  # NOT_COORDINATOR


def test_for_broker_wires_the_coordinator_to_the_brokers_offsets_topic(tmp_path: Path) -> None:
    clock = MockTime(current_time_ms=START_MS)
    with Broker(str(tmp_path), {"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0},
                clock=clock, background=False) as broker:
        coordinator = GroupCoordinator.for_broker(broker)
        coordinator.startup()
        responses = Responses()
        coordinator.join_group(JOIN, responses)
        (result,) = responses.wait(1)
        assert result.generation_id == 1
        assert coordinator.store.num_partitions == 2 and coordinator.clock is clock
        coordinator.shutdown()
