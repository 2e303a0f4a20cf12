"""``SystemTimer``: the hierarchical timing wheel driven by a delay queue.

Adding a task places it in the wheels (O(number of levels)); cancelling
unlinks it from its bucket (O(1)). Only buckets, not tasks, go through the
delay queue, so ``advance_clock`` wakes up once per non-empty tick at most:
it takes the due buckets off the queue, moves the wheels' time forward to
each bucket's expiration and re-adds the bucket's entries, which either land
in a finer wheel or, being due, are handed to the executor.

Kafka's defaults: a 1 ms tick and 20 buckets per wheel. The clock is
injected; delays are measured with ``clock.hi_res_clock_ms()``.
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from types import TracebackType

from ..clock import SYSTEM_CLOCK, Clock
from .atomic import AtomicInteger
from .delay_queue import DelayQueue
from .executors import run_logging_errors
from .timer_task import TimerTask
from .timer_task_entry import TimerTaskEntry
from .timing_wheel import TimingWheel

__all__ = ["SystemTimer", "DEFAULT_TICK_MS", "DEFAULT_WHEEL_SIZE"]

DEFAULT_TICK_MS = 1
DEFAULT_WHEEL_SIZE = 20


class SystemTimer:
    """A ``Timer`` on hierarchical timing wheels; expired tasks run on an executor."""

    def __init__(
        self,
        executor_name: str = "system-timer",
        tick_ms: int = DEFAULT_TICK_MS,
        wheel_size: int = DEFAULT_WHEEL_SIZE,
        start_ms: int | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        executor: Executor | None = None,
    ) -> None:
        self.name = executor_name
        self._clock = clock
        self._owns_executor = executor is None
        self._executor: Executor = (
            executor
            if executor is not None
            else ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"executor-{executor_name}")
        )
        self._delay_queue = DelayQueue(clock)
        self._task_counter = AtomicInteger(0)
        self._timing_wheel = TimingWheel(
            tick_ms=tick_ms,
            wheel_size=wheel_size,
            start_ms=clock.hi_res_clock_ms() if start_ms is None else start_ms,
            task_counter=self._task_counter,
            queue=self._delay_queue,
        )
        # Kafka guards the wheels with a read-write lock (adds share it, the
        # clock advance takes it exclusively). Under the GIL concurrent adds
        # gain nothing, so one mutex gives the same exclusion more simply.
        self._lock = threading.Lock()
        self._shut_down = False

    # -- inspection -------------------------------------------------------

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def timing_wheel(self) -> TimingWheel:
        """The lowest wheel; for inspection only."""
        return self._timing_wheel

    def size(self) -> int:
        """Number of tasks waiting in the wheels (cancelled ones leave at once)."""
        return self._task_counter.get()

    # -- scheduling -------------------------------------------------------

    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now; a due task runs at once."""
        if self._shut_down:
            raise RuntimeError(f"SystemTimer({self.name}): cannot add {task!r} after shutdown")
        expired: list[TimerTaskEntry] = []
        with self._lock:
            entry = TimerTaskEntry(task, task.delay_ms + self._clock.hi_res_clock_ms())
            self._add_timer_task_entry(entry, expired)
        self._run(expired)

    def _add_timer_task_entry(self, entry: TimerTaskEntry, expired: list[TimerTaskEntry]) -> None:
        if not self._timing_wheel.add(entry):
            # Refused: either cancelled (drop it) or already due (run it).
            if not entry.cancelled():
                expired.append(entry)

    def advance_clock(self, timeout_ms: int) -> bool:
        """Expire every due bucket, first waiting up to ``timeout_ms`` for one to be due.

        Returns True if at least one bucket expired. With a simulated clock it
        never blocks: if nothing is due it returns False at once.
        """
        bucket = self._delay_queue.poll(timeout_ms)
        if bucket is None:
            return False
        expired: list[TimerTaskEntry] = []
        with self._lock:
            while bucket is not None:
                self._timing_wheel.advance_clock(bucket.expiration_ms)
                bucket.flush(lambda entry: self._add_timer_task_entry(entry, expired))
                bucket = self._delay_queue.poll(0)
        # Tasks run outside the lock: an inline executor runs them right here,
        # and a task may add to this timer (a delayed operation's completion
        # can schedule another).
        self._run(expired)
        return True

    def _run(self, expired: list[TimerTaskEntry]) -> None:
        for entry in expired:
            self._executor.submit(self._run_entry, entry)

    def _run_entry(self, entry: TimerTaskEntry) -> None:
        # Cancelled (or added again) between expiring and reaching the
        # executor, e.g. by a task that ran just before it: skip it.
        if entry.cancelled() or entry.timer_task is None:
            return
        run_logging_errors(entry.timer_task.run, f"SystemTimer({self.name})")

    # -- lifecycle --------------------------------------------------------

    def wakeup(self) -> None:
        """Make a thread blocked in ``advance_clock`` return now."""
        self._delay_queue.wakeup()

    def shutdown(self) -> None:
        """Refuse new tasks and stop the executor (if the timer created it)."""
        self._shut_down = True
        self._delay_queue.wakeup()
        if self._owns_executor:
            self._executor.shutdown(wait=True)

    close = shutdown

    def __enter__(self) -> SystemTimer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"SystemTimer(name={self.name!r}, size={self.size()}, wheel={self._timing_wheel!r})"
