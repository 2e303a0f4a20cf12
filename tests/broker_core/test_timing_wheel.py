"""TimingWheel, TimerTaskList and TimerTask on their own, without the SystemTimer."""

from __future__ import annotations

import pytest

from broker_core.clock import MockTime
from broker_core.timer import (
    NO_EXPIRATION,
    AtomicInteger,
    CallbackTimerTask,
    DelayQueue,
    TimerTaskEntry,
    TimerTaskList,
    TimingWheel,
)


def noop_task(delay_ms: int = 0) -> CallbackTimerTask:
    return CallbackTimerTask(delay_ms, lambda: None)


def make_wheel(tick_ms: int = 1000, wheel_size: int = 8, start_ms: int = 0):
    counter = AtomicInteger(0)
    queue = DelayQueue(MockTime(current_time_ms=start_ms))
    return TimingWheel(tick_ms, wheel_size, start_ms, counter, queue), counter, queue


def entry_at(expiration_ms: int) -> TimerTaskEntry:
    return TimerTaskEntry(noop_task(), expiration_ms)


# -- TimerTaskList -------------------------------------------------------------


def test_task_list_add_counts_entries_in_shared_counter():
    counter = AtomicInteger(0)
    first, second = TimerTaskList(counter), TimerTaskList(counter)
    for _ in range(3):
        first.add(entry_at(10))
    second.add(entry_at(20))
    assert (len(first), len(second), counter.get()) == (3, 1, 4)


def test_task_list_readding_a_task_replaces_its_old_entry():
    counter = AtomicInteger(0)
    first, second = TimerTaskList(counter), TimerTaskList(counter)
    tasks = [noop_task() for _ in range(5)]
    for task in tasks:
        first.add(TimerTaskEntry(task, 10))
    # A new entry for the same task takes it out of the first list.
    for task in tasks[:3]:
        second.add(TimerTaskEntry(task, 20))
    assert (len(first), len(second), counter.get()) == (2, 3, 5)
    assert first.tasks() == tasks[3:]
    assert second.tasks() == tasks[:3]


def test_task_list_cancel_unlinks_and_decrements_counter():
    counter = AtomicInteger(0)
    bucket = TimerTaskList(counter)
    tasks = [noop_task() for _ in range(4)]
    for task in tasks:
        bucket.add(TimerTaskEntry(task, 10))
    tasks[1].cancel()
    tasks[1].cancel()  # a second cancel is a no-op
    assert counter.get() == 3
    assert bucket.tasks() == [tasks[0], tasks[2], tasks[3]]
    assert tasks[1].is_cancelled()


def test_task_list_set_expiration_reports_only_changes():
    bucket = TimerTaskList(AtomicInteger(0))
    assert bucket.expiration_ms == NO_EXPIRATION
    assert bucket.set_expiration(3000) is True
    assert bucket.set_expiration(3000) is False
    assert bucket.set_expiration(11000) is True
    assert bucket.expiration_ms == 11000


def test_task_list_flush_hands_over_entries_in_order_and_resets_expiration():
    counter = AtomicInteger(0)
    bucket = TimerTaskList(counter)
    entries = [entry_at(5) for _ in range(3)]
    for entry in entries:
        bucket.add(entry)
    bucket.set_expiration(5)
    flushed: list[TimerTaskEntry] = []
    bucket.flush(flushed.append)
    assert flushed == entries
    assert all(entry.list is None for entry in flushed)
    assert (len(bucket), counter.get(), bucket.expiration_ms) == (0, 0, NO_EXPIRATION)


def test_timer_task_rejects_non_integer_delay():
    with pytest.raises(TypeError, match="delay_ms must be an int, got 1.5"):
        CallbackTimerTask(1.5, lambda: None)  # type: ignore[arg-type]


# -- TimingWheel ---------------------------------------------------------------


def test_wheel_start_time_rounds_down_to_tick():
    wheel, _, _ = make_wheel(tick_ms=1000, start_ms=2750)
    assert wheel.current_time_ms == 2000
    assert wheel.interval_ms == 8000


@pytest.mark.parametrize(
    ("tick_ms", "wheel_size", "message"),
    [(0, 8, "tick_ms must be >= 1, got 0"), (1000, 1, "wheel_size must be >= 2, got 1")],
)
def test_wheel_rejects_degenerate_shapes(tick_ms, wheel_size, message):
    with pytest.raises(ValueError, match=message):
        TimingWheel(tick_ms, wheel_size, 0, AtomicInteger(0), DelayQueue(MockTime()))


def test_wheel_refuses_entry_due_within_current_tick():
    wheel, counter, queue = make_wheel(start_ms=0)
    assert wheel.add(entry_at(0)) is False
    assert wheel.add(entry_at(999)) is False
    assert wheel.add(entry_at(-50)) is False
    assert (counter.get(), len(queue)) == (0, 0)


def test_wheel_refuses_cancelled_entry():
    wheel, counter, _ = make_wheel()
    task = noop_task()
    entry = TimerTaskEntry(task, 5000)
    task.cancel()
    assert wheel.add(entry) is False
    assert counter.get() == 0


def test_wheel_places_entry_in_bucket_expiration_div_tick_mod_size():
    wheel, counter, _ = make_wheel(tick_ms=1000, wheel_size=8, start_ms=0)
    task = noop_task()
    assert wheel.add(TimerTaskEntry(task, 3500)) is True
    assert wheel.buckets[3].tasks() == [task]
    assert wheel.buckets[3].expiration_ms == 3000
    assert wheel.locate(task) == (0, 3)
    assert counter.get() == 1


def test_wheel_queues_a_bucket_once_per_time_range():
    wheel, _, queue = make_wheel(tick_ms=1000, wheel_size=8, start_ms=0)
    for expiration in (2000, 2100, 2999):
        wheel.add(entry_at(expiration))
    wheel.add(entry_at(5000))
    assert len(queue) == 2
    assert queue.peek_expiration_ms() == 2000


def test_wheel_creates_overflow_wheel_on_demand_with_lower_interval_as_tick():
    wheel, _, _ = make_wheel(tick_ms=1000, wheel_size=8, start_ms=0)
    assert wheel.overflow_wheel is None
    wheel.add(entry_at(7999))
    assert wheel.overflow_wheel is None
    task = noop_task()
    wheel.add(TimerTaskEntry(task, 8000))
    overflow = wheel.overflow_wheel
    assert overflow is not None
    assert (overflow.tick_ms, overflow.wheel_size, overflow.interval_ms) == (8000, 8, 64000)
    assert wheel.locate(task) == (1, 1)
    assert overflow.buckets[1].expiration_ms == 8000


def test_wheel_stacks_overflow_wheels_for_far_expirations():
    wheel, counter, _ = make_wheel(tick_ms=1000, wheel_size=8, start_ms=0)
    task = noop_task()
    wheel.add(TimerTaskEntry(task, 600_000))
    ticks = [level.tick_ms for level in wheel.wheels()]
    assert ticks == [1000, 8000, 64000, 512000]
    # 600000 // 512000 == 1 in the fourth wheel.
    assert wheel.locate(task) == (3, 1)
    assert counter.get() == 1


def test_wheel_advance_clock_rounds_down_and_moves_overflow_wheels():
    wheel, _, _ = make_wheel(tick_ms=1000, wheel_size=8, start_ms=0)
    wheel.add(entry_at(100_000))  # creates two overflow wheels
    overflow = wheel.overflow_wheel
    assert overflow is not None and overflow.overflow_wheel is not None
    wheel.advance_clock(999)
    assert wheel.current_time_ms == 0
    wheel.advance_clock(16_500)
    assert (wheel.current_time_ms, overflow.current_time_ms, overflow.overflow_wheel.current_time_ms) == (
        16_000,
        16_000,
        0,
    )
    wheel.advance_clock(64_000)
    assert overflow.overflow_wheel.current_time_ms == 64_000


def test_wheel_reuses_a_flushed_bucket_for_the_next_round():
    clock = MockTime(current_time_ms=0)
    queue = DelayQueue(clock)
    wheel = TimingWheel(1000, 8, 0, AtomicInteger(0), queue)
    wheel.add(entry_at(1000))
    assert queue.poll(0) is None  # not due before 1000
    clock.sleep(2000)
    bucket = queue.poll(0)
    assert bucket is wheel.buckets[1]
    wheel.advance_clock(bucket.expiration_ms)
    bucket.flush(lambda entry: None)
    wheel.advance_clock(2000)
    # The wheel now spans 2000..9999, so bucket 1 covers 9000..9999 and is queued again.
    wheel.add(entry_at(9500))
    assert wheel.buckets[1].expiration_ms == 9000
    assert (len(queue), queue.peek_expiration_ms()) == (1, 9000)
