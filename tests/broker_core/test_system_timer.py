"""SystemTimer: when tasks run, driven by a MockTime (and a few real-clock checks)."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter

import pytest

from broker_core.clock import SYSTEM_CLOCK, MockTime
from broker_core.timer import CallbackTimerTask, InlineExecutor, SystemTimer, TimerTask
from wait_kit import wait_until

pytestmark = pytest.mark.timeout(30)


class RecordingTask(TimerTask):
    """Records the clock time of every run."""

    def __init__(self, delay_ms: int, clock: MockTime, name: str = "") -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.name = name
        self.runs: list[int] = []

    def run(self) -> None:
        self.runs.append(self.clock.milliseconds())

    def __repr__(self) -> str:
        return f"RecordingTask({self.name or self.delay_ms})"


def mock_timer(tick_ms: int = 1, wheel_size: int = 20, start_ms: int = 0) -> tuple[SystemTimer, MockTime]:
    clock = MockTime(current_time_ms=start_ms)
    timer = SystemTimer("test", tick_ms, wheel_size, clock=clock, executor=InlineExecutor())
    return timer, clock


def advance_to(timer: SystemTimer, clock: MockTime, time_ms: int) -> None:
    clock.set_time_ms(time_ms)
    timer.advance_clock(0)


# -- Kafka's worked example: tick 1 s, 8 buckets ------------------------------


def test_worked_example_tasks_run_at_0s_1s_1s_and_3s():
    timer, clock = mock_timer(tick_ms=1000, wheel_size=8)
    at_0, at_1a, at_1b, at_3 = (RecordingTask(d, clock) for d in (0, 1000, 1000, 3000))
    for task in (at_0, at_1a, at_1b, at_3):
        timer.add(task)

    assert at_0.runs == [0], "a task due now runs when added"
    assert timer.size() == 3
    assert timer.timing_wheel.locate(at_1a) == (0, 1)
    assert timer.timing_wheel.locate(at_1b) == (0, 1)
    assert timer.timing_wheel.locate(at_3) == (0, 3)

    advance_to(timer, clock, 999)
    assert (at_1a.runs, at_1b.runs) == ([], [])
    advance_to(timer, clock, 1000)
    assert (at_1a.runs, at_1b.runs, at_3.runs) == ([1000], [1000], [])
    assert timer.size() == 1

    advance_to(timer, clock, 2999)
    assert at_3.runs == []
    advance_to(timer, clock, 3000)
    assert at_3.runs == [3000]
    assert timer.size() == 0
    assert timer.advance_clock(0) is False


def test_tasks_beyond_the_interval_move_down_through_overflow_wheels():
    timer, clock = mock_timer(tick_ms=1000, wheel_size=8)
    wheel = timer.timing_wheel
    at_20 = RecordingTask(20_000, clock, "20s")
    at_100 = RecordingTask(100_000, clock, "100s")
    timer.add(at_20)
    timer.add(at_100)

    overflow = wheel.overflow_wheel
    assert overflow is not None and overflow.tick_ms == wheel.interval_ms == 8000
    assert overflow.overflow_wheel is not None and overflow.overflow_wheel.tick_ms == 64000
    assert wheel.locate(at_20) == (1, 2)  # 20000 // 8000 == 2
    assert wheel.locate(at_100) == (2, 1)  # 100000 // 64000 == 1

    advance_to(timer, clock, 15_999)
    assert wheel.locate(at_20) == (1, 2)
    advance_to(timer, clock, 16_000)
    assert wheel.locate(at_20) == (0, 4)  # 20 % 8
    assert wheel.locate(at_100) == (2, 1)

    advance_to(timer, clock, 19_999)
    assert at_20.runs == []
    advance_to(timer, clock, 20_000)
    assert at_20.runs == [20_000]

    advance_to(timer, clock, 64_000)
    assert wheel.locate(at_100) == (1, 4)  # 100000 // 8000 == 12, 12 % 8
    advance_to(timer, clock, 96_000)
    assert wheel.locate(at_100) == (0, 4)  # 100 % 8
    advance_to(timer, clock, 99_999)
    assert at_100.runs == []
    advance_to(timer, clock, 100_000)
    assert at_100.runs == [100_000]
    assert timer.size() == 0


def test_one_advance_cascades_through_every_level_when_time_jumps():
    timer, clock = mock_timer(tick_ms=1000, wheel_size=8)
    task = RecordingTask(100_000, clock)
    timer.add(task)
    advance_to(timer, clock, 250_000)
    assert task.runs == [250_000]
    assert timer.size() == 0


def test_task_due_at_t_runs_exactly_when_the_clock_reaches_t():
    timer, clock = mock_timer()  # Kafka defaults: 1 ms tick, 20 buckets
    delays = [1, 7, 19, 20, 21, 399, 400, 401, 1234, 8000, 8001]
    tasks = [RecordingTask(delay, clock) for delay in delays]
    for task in tasks:
        timer.add(task)
    for now in range(1, max(delays) + 1):
        advance_to(timer, clock, now)
        for task in tasks:
            assert task.runs == ([task.delay_ms] if task.delay_ms <= now else []), (task, now)
    assert timer.size() == 0


def test_task_added_at_unaligned_time_runs_at_its_expiration_with_coarse_tick():
    timer, clock = mock_timer(tick_ms=10, wheel_size=4)
    advance_to(timer, clock, 30)
    task = RecordingTask(50, clock)  # due at 80, a tick boundary
    timer.add(task)
    for now in range(31, 80):
        advance_to(timer, clock, now)
    assert task.runs == []
    advance_to(timer, clock, 80)
    assert task.runs == [80]


def test_expiration_inside_a_tick_runs_at_the_start_of_that_tick():
    # Kafka's wheel quantizes time to ticks: a bucket expires at the start of
    # the range it covers, so a task due mid-tick runs at the tick boundary.
    timer, clock = mock_timer(tick_ms=1000, wheel_size=8)
    task = RecordingTask(1500, clock)
    timer.add(task)
    advance_to(timer, clock, 999)
    assert task.runs == []
    advance_to(timer, clock, 1000)
    assert task.runs == [1000]


def test_cancelled_tasks_never_run():
    timer, clock = mock_timer(tick_ms=1, wheel_size=4)
    kept = RecordingTask(50, clock)
    cancelled_early = RecordingTask(50, clock)
    cancelled_in_overflow = RecordingTask(500, clock)
    for task in (kept, cancelled_early, cancelled_in_overflow):
        timer.add(task)
    assert timer.size() == 3
    cancelled_early.cancel()
    assert timer.size() == 2
    advance_to(timer, clock, 50)
    assert kept.runs == [50]
    advance_to(timer, clock, 100)
    cancelled_in_overflow.cancel()
    assert timer.size() == 0
    advance_to(timer, clock, 1000)
    assert (kept.runs, cancelled_early.runs, cancelled_in_overflow.runs) == ([50], [], [])


def test_task_cancelled_by_an_earlier_task_of_the_same_bucket_does_not_run():
    timer, clock = mock_timer(tick_ms=10, wheel_size=8)
    second = RecordingTask(20, clock)
    timer.add(CallbackTimerTask(20, second.cancel))
    timer.add(second)
    advance_to(timer, clock, 20)
    assert second.runs == []
    assert second.is_cancelled()


def test_cancelling_before_add_keeps_the_task_out():
    timer, clock = mock_timer()
    task = RecordingTask(10, clock)
    timer.add(task)
    task.cancel()
    advance_to(timer, clock, 10)
    assert task.runs == []


def test_already_expired_tasks_run_when_added():
    timer, clock = mock_timer()
    tasks = [RecordingTask(delay, clock) for delay in range(-5, 1)]
    for task in tasks:
        timer.add(task)
    assert [task.runs for task in tasks] == [[0]] * 6
    assert timer.size() == 0


def test_adding_a_task_again_reschedules_it_and_it_runs_once():
    timer, clock = mock_timer()
    task = RecordingTask(100, clock)
    timer.add(task)
    advance_to(timer, clock, 60)
    timer.add(task)  # now due at 160
    assert timer.size() == 1
    advance_to(timer, clock, 100)
    assert task.runs == []
    advance_to(timer, clock, 160)
    assert task.runs == [160]


def test_many_tasks_all_run_once_in_expiration_order():
    timer, clock = mock_timer(tick_ms=1, wheel_size=3)
    order: list[int] = []
    delays = list(range(0, 5)) + [d for d in range(10, 100) for _ in range(2)] + list(range(100, 500))
    for delay in reversed(delays):
        timer.add(CallbackTimerTask(delay, lambda d=delay: order.append(d)))
    for now in range(0, 500, 7):
        advance_to(timer, clock, now)
    advance_to(timer, clock, 500)
    assert sorted(order) == sorted(delays)
    assert order == sorted(order)
    assert timer.size() == 0


def test_task_may_add_another_task_from_an_inline_executor():
    timer, clock = mock_timer()
    follow_up = RecordingTask(5, clock)
    timer.add(CallbackTimerTask(10, lambda: timer.add(follow_up)))
    advance_to(timer, clock, 10)
    assert follow_up.runs == []
    advance_to(timer, clock, 15)
    assert follow_up.runs == [15]


def test_failing_task_is_logged_and_does_not_stop_the_timer(caplog):
    timer, clock = mock_timer()
    after = RecordingTask(2, clock)

    def fail() -> None:
        raise RuntimeError("boom at 1 ms")

    timer.add(CallbackTimerTask(1, fail))
    timer.add(after)
    with caplog.at_level(logging.ERROR):
        advance_to(timer, clock, 2)
    assert after.runs == [2]
    assert "boom at 1 ms" in caplog.text


def test_advance_clock_with_mock_time_returns_at_once_when_nothing_is_due():
    timer, clock = mock_timer()
    timer.add(RecordingTask(50, clock))
    started = time.monotonic()
    assert timer.advance_clock(10_000) is False
    assert time.monotonic() - started < 0.5


def test_add_after_shutdown_names_the_timer_and_task():
    timer, clock = mock_timer()
    timer.shutdown()
    with pytest.raises(RuntimeError, match=r"SystemTimer\(test\).*RecordingTask\(10\)"):
        timer.add(RecordingTask(10, clock))


# -- the real clock and a thread pool -----------------------------------------


def test_real_clock_tasks_run_on_executor_no_earlier_than_their_delay():
    done = threading.Event()
    lateness: dict[int, float] = {}
    lock = threading.Lock()
    delays = list(range(0, 60, 3))

    with SystemTimer("real", clock=SYSTEM_CLOCK) as timer:
        started = time.monotonic()

        def make(delay: int):
            def run() -> None:
                with lock:
                    lateness[delay] = (time.monotonic() - started) * 1000 - delay
                    if len(lateness) == len(delays):
                        done.set()

            return run

        for delay in delays:
            timer.add(CallbackTimerTask(delay, make(delay)))
        deadline = time.monotonic() + 5
        while not done.is_set() and time.monotonic() < deadline:
            timer.advance_clock(20)
        assert done.wait(5)
    assert sorted(lateness) == delays
    # One tick of quantization (1 ms) is the only way to run early.
    assert min(lateness.values()) >= -1.0


def test_real_clock_advance_clock_waits_for_the_next_bucket():
    with SystemTimer("real", clock=SYSTEM_CLOCK, executor=InlineExecutor()) as timer:
        ran = threading.Event()
        timer.add(CallbackTimerTask(30, ran.set))
        started = time.monotonic()
        rounds = 0
        # Due in 30 ms, beyond the 20 ms first wheel: one round flushes the
        # overflow bucket into the first wheel, the next one runs the task.
        while not ran.is_set() and time.monotonic() - started < 5:
            assert timer.advance_clock(2000) is True
            rounds += 1
        assert ran.is_set()
        assert rounds <= 2
        assert 0.02 <= time.monotonic() - started < 1.5


def test_wakeup_releases_a_blocked_advance_clock():
    with SystemTimer("real", clock=SYSTEM_CLOCK, executor=InlineExecutor()) as timer:
        result: list[bool] = []
        poller = threading.Thread(target=lambda: result.append(timer.advance_clock(10_000)))
        started = time.monotonic()
        poller.start()
        time.sleep(0.05)
        timer.wakeup()
        poller.join(5)
        assert result == [False]
        assert time.monotonic() - started < 2


def test_concurrent_adds_and_cancels_run_each_kept_task_once():
    runs: Counter[int] = Counter()
    runs_lock = threading.Lock()
    # kept: never cancelled; cancelled: cancelled long before due; racy:
    # cancelled while possibly being flushed or run, so at most once.
    groups: dict[str, list[int]] = {"kept": [], "cancelled": [], "racy": []}
    groups_lock = threading.Lock()

    def record(task_id: int) -> None:
        with runs_lock:
            runs[task_id] += 1

    with SystemTimer("concurrent", clock=SYSTEM_CLOCK) as timer:
        stop = threading.Event()

        def reap() -> None:
            while not stop.is_set():
                timer.advance_clock(10)

        reaper = threading.Thread(target=reap)
        reaper.start()

        def worker(seed: int) -> None:
            rng = random.Random(seed)
            for n in range(500):
                task_id = seed * 1000 + n
                group = rng.choice(["kept", "kept", "cancelled", "racy"])
                delay = 60_000 if group == "cancelled" else rng.randint(0, 60)
                task = CallbackTimerTask(delay, lambda t=task_id: record(t))
                timer.add(task)
                if group != "kept":
                    task.cancel()
                with groups_lock:
                    groups[group].append(task_id)

        workers = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(10)
        try:
            assert wait_until(lambda: timer.size() == 0 and all(runs[t] for t in groups["kept"]))
            time.sleep(0.1)  # room for a wrong second run to show up
        finally:
            stop.set()
            timer.wakeup()
            reaper.join(5)
    assert sum(len(ids) for ids in groups.values()) == 4000
    assert all(runs[task_id] == 1 for task_id in groups["kept"])
    assert all(runs[task_id] == 0 for task_id in groups["cancelled"])
    assert all(runs[task_id] <= 1 for task_id in groups["racy"])
