"""``TimerTask``: something to run once its delay has passed, and can be cancelled.

A task is held by at most one ``TimerTaskEntry`` at a time: the entry that
places it in a bucket of the timing wheel. Handing the task to a new entry
takes it out of the old entry's bucket, and cancelling drops the entry, which
is how the wheel tells a live entry from a stale one (``TimerTaskEntry.cancelled``).
"""

from __future__ import annotations

import abc
import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from .timer_task_entry import TimerTaskEntry

__all__ = ["TimerTask", "CallbackTimerTask"]


class TimerTask(abc.ABC):
    """A unit of work the timer runs ``delay_ms`` after it is added.

    A negative delay means the task is already due when added (as in Kafka).
    """

    def __init__(self, delay_ms: int) -> None:
        if isinstance(delay_ms, bool) or not isinstance(delay_ms, int):
            raise TypeError(f"{type(self).__name__}: delay_ms must be an int, got {delay_ms!r}")
        self.delay_ms = delay_ms
        self._entry_lock = threading.Lock()
        self._timer_task_entry: TimerTaskEntry | None = None

    @abc.abstractmethod
    def run(self) -> None:
        """The work to do on expiration; runs on the timer's executor."""

    def cancel(self) -> None:
        """Take the task out of the timer; it will not run unless added again."""
        with self._entry_lock:
            entry = self._timer_task_entry
            if entry is not None:
                entry.remove()
            self._timer_task_entry = None

    def is_cancelled(self) -> bool:
        """True when no entry holds the task (never added, cancelled, or run)."""
        return self._timer_task_entry is None

    @property
    def timer_task_entry(self) -> TimerTaskEntry | None:
        return self._timer_task_entry

    def set_timer_task_entry(self, entry: TimerTaskEntry) -> None:
        """Make ``entry`` the one live entry of this task (called by the entry)."""
        with self._entry_lock:
            previous = self._timer_task_entry
            # A task added twice must not run twice: the older entry leaves
            # its bucket before the new one takes over.
            if previous is not None and previous is not entry:
                previous.remove()
            self._timer_task_entry = entry


class CallbackTimerTask(TimerTask):
    """A ``TimerTask`` that calls a function; handy for tests and no-op wake-ups."""

    def __init__(self, delay_ms: int, callback: Callable[[], None]) -> None:
        super().__init__(delay_ms)
        self._callback = callback

    def run(self) -> None:
        self._callback()

    def __repr__(self) -> str:
        return f"CallbackTimerTask(delay_ms={self.delay_ms}, callback={self._callback!r})"
