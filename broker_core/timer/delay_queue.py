"""``DelayQueue``: the buckets waiting to expire, earliest first.

Java's ``DelayQueue`` in Python: a heap of buckets ordered by expiration,
guarded by a condition variable. ``poll`` hands out a bucket only once the
clock has reached its expiration. Waiting goes through the injected clock, so
with a simulated clock a poll never blocks for real time.

A bucket sits in the queue at most once per expiration: the wheel offers it
only when ``set_expiration`` reports a change, and a bucket's expiration does
not change while it is queued (its time range is still ahead of the wheel).
That is why the heap can key on the expiration captured at offer time.
"""

from __future__ import annotations

import heapq
import itertools
import threading

from ..clock import Clock
from .timer_task_list import TimerTaskList

__all__ = ["DelayQueue"]


class DelayQueue:
    """Buckets ordered by expiration; ``poll`` returns the first one that is due."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._condition = threading.Condition(threading.Lock())
        # (expiration_ms, sequence, bucket): the sequence keeps equal
        # expirations in offer order and spares comparing buckets.
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._sequence = itertools.count()
        self._wakeups = 0

    def offer(self, bucket: TimerTaskList) -> None:
        with self._condition:
            heapq.heappush(self._heap, (bucket.expiration_ms, next(self._sequence), bucket))
            # A new head may be due sooner than the one a poller waits for.
            self._condition.notify_all()

    def poll(self, timeout_ms: int = 0) -> TimerTaskList | None:
        """The earliest bucket whose expiration has passed, waiting up to ``timeout_ms``.

        Returns None when nothing became due in time, when ``wakeup`` was
        called, or at once when the clock cannot pass time by waiting.
        """
        with self._condition:
            wakeups = self._wakeups
            deadline = self._clock.hi_res_clock_ms() + timeout_ms
            while True:
                now = self._clock.hi_res_clock_ms()
                if self._heap and self._heap[0][0] <= now:
                    return heapq.heappop(self._heap)[2]
                remaining = deadline - now
                if remaining <= 0 or self._wakeups != wakeups:
                    return None
                wait_ms = remaining if not self._heap else min(remaining, self._heap[0][0] - now)
                if not self._clock.wait(self._condition, wait_ms):
                    return None

    def wakeup(self) -> None:
        """Make threads blocked in ``poll`` return None now (used on shutdown)."""
        with self._condition:
            self._wakeups += 1
            self._condition.notify_all()

    def peek_expiration_ms(self) -> int | None:
        """Expiration of the earliest queued bucket, or None when empty."""
        with self._condition:
            return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        with self._condition:
            return len(self._heap)

    def __repr__(self) -> str:
        return f"DelayQueue(buckets={len(self)}, next_expiration_ms={self.peek_expiration_ms()})"
