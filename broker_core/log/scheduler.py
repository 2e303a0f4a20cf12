"""Delayed background tasks run against an injected clock (the broker's KafkaScheduler).

Tasks are kept in a heap by due time and run by whoever calls ``run_due``:
the log manager's background thread with the real clock, or a test that has
just advanced a simulated one. Nothing here sleeps.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable

from ..clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Task:
    due_ms: int
    seq: int
    name: str = field(compare=False)
    fn: Callable[[], None] = field(compare=False)


class Scheduler:
    def __init__(self, clock: Clock = SYSTEM_CLOCK):
        self.clock = clock
        self._tasks: list[_Task] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def schedule(self, name: str, fn: Callable[[], None], delay_ms: int = 0) -> None:
        with self._lock:
            heapq.heappush(self._tasks, _Task(self.clock.milliseconds() + max(0, delay_ms), next(self._seq), name, fn))

    def pending(self) -> int:
        with self._lock:
            return len(self._tasks)

    def run_due(self) -> int:
        """Run every task whose time has come; returns how many ran."""
        ran = 0
        while True:
            with self._lock:
                if not self._tasks or self._tasks[0].due_ms > self.clock.milliseconds():
                    return ran
                task = heapq.heappop(self._tasks)
            try:
                task.fn()
            except Exception:  # one failing task must not stop the others
                log.exception("scheduled task %s failed", task.name)
            ran += 1

    def run_all(self) -> int:
        """Run every pending task now, due or not (shutdown)."""
        with self._lock:
            tasks = sorted(self._tasks)
            self._tasks.clear()
        for task in tasks:
            try:
                task.fn()
            except Exception:
                log.exception("scheduled task %s failed", task.name)
        return len(tasks)
