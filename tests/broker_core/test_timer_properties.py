"""Property: under any mix of add, cancel and clock advances, the SystemTimer runs
every uncancelled task exactly once, at the first advance that reaches its
expiration (never before it), and ``size`` counts exactly the waiting tasks.

The wheel's precision is one tick of the lowest wheel: an expiration inside a
tick is treated as the start of that tick (Kafka's quantization). With the
default 1 ms tick, and for any expiration on a tick boundary, that is the
expiration itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.clock import MockTime
from broker_core.timer import InlineExecutor, SystemTimer, TimerTask

pytestmark = pytest.mark.timeout(120)


class ModelTask(TimerTask):
    def __init__(self, delay_ms: int, expiration_ms: int, clock: MockTime) -> None:
        super().__init__(delay_ms)
        self.expiration_ms = expiration_ms
        self.added_ms = expiration_ms - delay_ms
        self.clock = clock
        self.runs: list[int] = []

    def run(self) -> None:
        self.runs.append(self.clock.milliseconds())

    def __repr__(self) -> str:
        return f"ModelTask(expiration_ms={self.expiration_ms}, runs={self.runs})"


@dataclass
class Scenario:
    tick_ms: int
    wheel_size: int
    start_ms: int
    steps: list[tuple[str, int]] = field(default_factory=list)


@st.composite
def scenarios(draw: st.DrawFn, *, max_advance_ms: int | None) -> Scenario:
    """Random timers and steps; ``max_advance_ms=None`` keeps clock steps within one tick."""
    tick_ms = draw(st.sampled_from([1, 1, 2, 5, 10]))
    advance_bound = tick_ms if max_advance_ms is None else max_advance_ms
    step = st.one_of(
        st.tuples(st.just("add"), st.integers(min_value=-3, max_value=700)),
        st.tuples(st.just("cancel"), st.integers(min_value=0, max_value=1_000)),
        st.tuples(st.just("advance"), st.integers(min_value=0, max_value=advance_bound)),
    )
    return Scenario(
        tick_ms=tick_ms,
        wheel_size=draw(st.integers(min_value=2, max_value=8)),
        start_ms=draw(st.integers(min_value=0, max_value=1_000)),
        steps=draw(st.lists(step, max_size=60 if max_advance_ms is not None else 150)),
    )


def tick_start(expiration_ms: int, tick_ms: int) -> int:
    return expiration_ms - expiration_ms % tick_ms


def run_scenario(scenario: Scenario, *, within_one_tick: bool) -> None:
    tick = scenario.tick_ms
    clock = MockTime(current_time_ms=scenario.start_ms)
    timer = SystemTimer("property", tick, scenario.wheel_size, clock=clock, executor=InlineExecutor())
    tasks: list[ModelTask] = []
    cancelled: set[int] = set()  # indexes of tasks cancelled before they ran

    def check(now: int, observed: bool) -> None:
        waiting = 0
        for index, task in enumerate(tasks):
            assert len(task.runs) <= 1, task
            if index in cancelled:
                assert task.runs == [], task
                continue
            if task.runs:
                run_at = task.runs[0]
                assert run_at >= tick_start(task.expiration_ms, tick), task
                if task.expiration_ms % tick == 0:
                    assert run_at >= task.expiration_ms, task
                if within_one_tick:
                    # A task added already overdue (negative delay) is due at add time.
                    assert run_at < max(task.expiration_ms, task.added_ms) + tick, task
            else:
                waiting += 1
                if observed:
                    # After an advance, everything due has run.
                    assert tick_start(task.expiration_ms, tick) > now, (task, now)
        assert timer.size() == waiting

    def observe() -> None:
        timer.advance_clock(0)
        # One call expires every due bucket; nothing is left for a second.
        assert timer.advance_clock(0) is False
        check(clock.milliseconds(), observed=True)

    for action, value in scenario.steps:
        now = clock.milliseconds()
        if action == "add":
            task = ModelTask(value, now + value, clock)
            tasks.append(task)
            timer.add(task)
            check(now, observed=False)
        elif action == "cancel" and tasks:
            index = value % len(tasks)
            if not tasks[index].runs:
                cancelled.add(index)
            tasks[index].cancel()
            check(now, observed=False)
        elif action == "advance":
            clock.sleep(value)
            observe()
            continue
        if within_one_tick:
            # Like a reaper that polls continuously: an add that lands in an
            # already-due bucket (the wheel lags the clock) is seen at once.
            observe()

    # Drain: run the clock past every expiration.
    last = max((task.expiration_ms for task in tasks), default=0)
    drain_step = tick if within_one_tick else max(last - clock.milliseconds(), 0)
    while True:
        timer.advance_clock(0)
        check(clock.milliseconds(), observed=True)
        if clock.milliseconds() >= last:
            break
        clock.set_time_ms(min(clock.milliseconds() + drain_step, last))
    for index, task in enumerate(tasks):
        assert len(task.runs) == (0 if index in cancelled else 1), task
    assert timer.size() == 0


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(scenarios(max_advance_ms=150))
def test_uncancelled_tasks_run_once_at_the_first_advance_reaching_their_tick(scenario: Scenario) -> None:
    run_scenario(scenario, within_one_tick=False)


@SETTINGS
@given(scenarios(max_advance_ms=None))
def test_with_clock_steps_of_one_tick_tasks_run_within_one_tick_of_expiration(scenario: Scenario) -> None:
    run_scenario(scenario, within_one_tick=True)
