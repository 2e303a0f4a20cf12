"""``TimingWheel``: one level of Kafka's hierarchical timing wheel.

A wheel of ``wheel_size`` buckets, each covering ``tick_ms`` of time, covers
``interval_ms = tick_ms * wheel_size`` from its current time. An entry due
within the current tick is expired (the caller runs it); one due within the
interval goes to bucket ``(expiration // tick_ms) % wheel_size``; one due
later goes to an overflow wheel whose tick is this wheel's interval, created
on first need. When an overflow bucket expires its entries are re-added and
fall into finer wheels, so every entry reaches the lowest wheel before it
runs. Time is quantized to ticks: a bucket expires at the start of its range,
so the timer's precision is one tick of the lowest wheel.

Not thread-safe against itself while ``advance_clock`` runs: the caller
(``SystemTimer``) keeps adds out while it advances the wheels.
"""

from __future__ import annotations

import threading
from typing import Iterator

from .atomic import AtomicInteger
from .delay_queue import DelayQueue
from .timer_task import TimerTask
from .timer_task_entry import TimerTaskEntry
from .timer_task_list import TimerTaskList

__all__ = ["TimingWheel"]


class TimingWheel:
    """A circular array of buckets, with an overflow wheel for later expirations."""

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        task_counter: AtomicInteger,
        queue: DelayQueue,
    ) -> None:
        if tick_ms < 1:
            raise ValueError(f"TimingWheel: tick_ms must be >= 1, got {tick_ms}")
        if wheel_size < 2:
            # With one bucket the overflow wheel's tick equals this wheel's,
            # so far expirations would stack overflow wheels without end.
            raise ValueError(f"TimingWheel: wheel_size must be >= 2, got {wheel_size}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self._task_counter = task_counter
        self._queue = queue
        self._buckets = tuple(TimerTaskList(task_counter) for _ in range(wheel_size))
        # The wheel's time is always a whole number of ticks.
        self.current_time_ms = start_ms - (start_ms % tick_ms)
        self._overflow_wheel: TimingWheel | None = None
        self._overflow_lock = threading.Lock()

    # -- inspection -------------------------------------------------------

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        return self._overflow_wheel

    @property
    def buckets(self) -> tuple[TimerTaskList, ...]:
        return self._buckets

    def bucket_index(self, expiration_ms: int) -> int:
        """The bucket an entry expiring at ``expiration_ms`` belongs to in this wheel."""
        return (expiration_ms // self.tick_ms) % self.wheel_size

    def wheels(self) -> Iterator[TimingWheel]:
        """This wheel and its overflow wheels, finest first."""
        wheel: TimingWheel | None = self
        while wheel is not None:
            yield wheel
            wheel = wheel._overflow_wheel

    def locate(self, task: TimerTask) -> tuple[int, int] | None:
        """``(level, bucket index)`` of the bucket holding ``task``; level 0 is this wheel."""
        for level, wheel in enumerate(self.wheels()):
            for index, bucket in enumerate(wheel._buckets):
                if any(held is task for held in bucket.tasks()):
                    return level, index
        return None

    # -- scheduling -------------------------------------------------------

    def _add_overflow_wheel(self) -> None:
        with self._overflow_lock:
            if self._overflow_wheel is None:
                self._overflow_wheel = TimingWheel(
                    tick_ms=self.interval_ms,
                    wheel_size=self.wheel_size,
                    start_ms=self.current_time_ms,
                    task_counter=self._task_counter,
                    queue=self._queue,
                )

    def add(self, entry: TimerTaskEntry) -> bool:
        """Place ``entry`` in a bucket; False when it is cancelled or already expired."""
        expiration = entry.expiration_ms
        if entry.cancelled():
            return False
        if expiration < self.current_time_ms + self.tick_ms:
            # Due within the current tick: the caller runs it now.
            return False
        if expiration < self.current_time_ms + self.interval_ms:
            virtual_id = expiration // self.tick_ms
            bucket = self._buckets[virtual_id % self.wheel_size]
            bucket.add(entry)
            # A bucket is queued once per time range it covers: set_expiration
            # reports a change only when a flushed bucket is reused for a new
            # range, never for further adds to the same range.
            if bucket.set_expiration(virtual_id * self.tick_ms):
                self._queue.offer(bucket)
            return True
        if self._overflow_wheel is None:
            self._add_overflow_wheel()
        assert self._overflow_wheel is not None
        return self._overflow_wheel.add(entry)

    def advance_clock(self, time_ms: int) -> None:
        """Move the wheel (and its overflow wheels) forward to the tick containing ``time_ms``."""
        if time_ms >= self.current_time_ms + self.tick_ms:
            self.current_time_ms = time_ms - (time_ms % self.tick_ms)
            if self._overflow_wheel is not None:
                self._overflow_wheel.advance_clock(self.current_time_ms)

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, "
            f"current_time_ms={self.current_time_ms}, has_overflow={self._overflow_wheel is not None})"
        )
