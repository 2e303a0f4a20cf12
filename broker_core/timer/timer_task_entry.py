"""``TimerTaskEntry``: a task's place in a bucket, with its absolute expiration.

Entries are the nodes of a bucket's doubly linked list. An entry can move
between buckets (when an overflow wheel's bucket is flushed, its entries are
re-added lower down), so removing one has to cope with a concurrent move.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .timer_task import TimerTask
    from .timer_task_list import TimerTaskList

__all__ = ["TimerTaskEntry"]


class TimerTaskEntry:
    """One scheduling of ``timer_task`` to expire at ``expiration_ms``."""

    __slots__ = ("timer_task", "expiration_ms", "list", "next", "prev", "lock")

    def __init__(self, timer_task: TimerTask | None, expiration_ms: int) -> None:
        self.timer_task = timer_task
        self.expiration_ms = expiration_ms
        # The bucket holding this entry, or None. Written only under both the
        # bucket's and the entry's lock; read without a lock by remove().
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry | None = None
        self.prev: TimerTaskEntry | None = None
        self.lock = threading.Lock()
        # Only a bucket's sentinel root has no task.
        if timer_task is not None:
            timer_task.set_timer_task_entry(self)

    def cancelled(self) -> bool:
        """True when the task was cancelled or handed to a newer entry."""
        return self.timer_task is None or self.timer_task.timer_task_entry is not self

    def remove(self) -> None:
        """Take the entry out of whatever bucket holds it."""
        current = self.list
        # Another thread may be moving the entry to a different bucket while
        # we remove it from this one; keep going until it rests in none.
        while current is not None:
            current.remove(self)
            current = self.list

    def __repr__(self) -> str:
        return f"TimerTaskEntry(task={self.timer_task!r}, expiration_ms={self.expiration_ms})"
