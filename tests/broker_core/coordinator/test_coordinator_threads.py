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
from broker_core.coordinator import GroupCoordinator, GroupCoordinatorConfig, InMemoryGroupStore
from broker_core.protocol import ApiKey
from coordinator_kit import START_MS, check_response, request_body

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10.0


def join_body(member_id: str = "") -> dict:
    return request_body(ApiKey.JOIN_GROUP, 3, group_id="group", session_timeout_ms=10_000,
                        rebalance_timeout_ms=30_000, member_id=member_id, protocol_type="consumer",
                        protocols=[{"name": "range", "metadata": b"sub"}])


class Responses:
    """Collects responses delivered on any thread; ``wait(n)`` until n have arrived."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self.bodies: list[dict] = []

    def __call__(self, body: dict) -> None:
        check_response(ApiKey.JOIN_GROUP, 3, body)
        with self._condition:
            self.bodies.append(body)
            self._condition.notify_all()

    def wait(self, count: int, timeout_s: float = WAIT_S) -> list[dict]:
        with self._condition:
            assert self._condition.wait_for(lambda: len(self.bodies) >= count, timeout_s), self.bodies
            return list(self.bodies)

    def arrived(self, count: int, timeout_s: float) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: len(self.bodies) >= count, timeout_s)


def test_the_reaper_thread_completes_the_initial_delay() -> None:
    clock = MockTime(current_time_ms=START_MS)
    coordinator = GroupCoordinator(0, GroupCoordinatorConfig(group_initial_rebalance_delay_ms=100),
                                   InMemoryGroupStore(), clock=clock)
    coordinator.startup()
    responses = Responses()
    coordinator.handle_join_group(join_body(), 3, responses)
    clock.sleep(100)
    (body,) = responses.wait(1)
    assert (body["error_code"], body["generation_id"], body["leader"]) == (0, 1, body["member_id"])
    coordinator.shutdown()


def test_members_joining_from_many_threads_form_one_generation_with_one_leader() -> None:
    clock = MockTime(current_time_ms=START_MS)
    coordinator = GroupCoordinator(0, GroupCoordinatorConfig(group_initial_rebalance_delay_ms=100),
                                   InMemoryGroupStore(), clock=clock)
    coordinator.startup()
    responses = Responses()
    members = 16
    threads = [threading.Thread(target=coordinator.handle_join_group, args=(join_body(), 3, responses))
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
    bodies = responses.wait(members)
    assert {b["generation_id"] for b in bodies} == {1}
    assert len({b["leader"] for b in bodies}) == 1
    assert len({b["member_id"] for b in bodies}) == members
    assert sum(1 for b in bodies if b["members"]) == 1
    coordinator.shutdown()


def test_shutdown_answers_parked_joins_not_coordinator() -> None:
    clock = MockTime(current_time_ms=START_MS)
    coordinator = GroupCoordinator(0, GroupCoordinatorConfig(), InMemoryGroupStore(), clock=clock)
    coordinator.startup()
    responses = Responses()
    coordinator.handle_join_group(join_body(), 3, responses)
    coordinator.shutdown()
    (body,) = responses.wait(1)
    assert body["error_code"] == 16  # NOT_COORDINATOR


def test_for_broker_wires_the_coordinator_to_the_brokers_offsets_topic(tmp_path: Path) -> None:
    clock = MockTime(current_time_ms=START_MS)
    with Broker(str(tmp_path), {"offsets.topic.num.partitions": 2, "group.initial.rebalance.delay.ms": 0},
                clock=clock, background=False) as broker:
        coordinator = GroupCoordinator.for_broker(broker)
        coordinator.startup()
        responses = Responses()
        coordinator.handle_join_group(join_body(), 3, responses)
        (body,) = responses.wait(1)
        assert body["generation_id"] == 1
        assert coordinator.store.num_partitions == 2 and coordinator.clock is clock
        coordinator.shutdown()
