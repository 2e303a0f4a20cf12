"""``TimerTaskList``: one bucket of a timing wheel.

A bucket is a circular doubly linked list of ``TimerTaskEntry`` around a
sentinel root, so adding and removing an entry is O(1). All buckets of all
wheels of one timer share a task counter (the timer's ``size``). A bucket's
expiration is the start of the time range it covers; it is set with
get-and-set so that the wheel can tell when a recycled bucket starts a new
range and must be queued again.
"""

from __future__ import annotations

import threading
from typing import Callable

from .atomic import AtomicInteger
from .timer_task import TimerTask
from .timer_task_entry import TimerTaskEntry

__all__ = ["TimerTaskList", "NO_EXPIRATION"]

# The expiration of a bucket that is not in the delay queue.
NO_EXPIRATION = -1


class TimerTaskList:
    """A bucket of timer task entries that expire together."""

    def __init__(self, task_counter: AtomicInteger) -> None:
        self._task_counter = task_counter
        self._expiration = AtomicInteger(NO_EXPIRATION)
        # Re-entrant because flush() removes entries while holding the lock.
        self._lock = threading.RLock()
        self._root = TimerTaskEntry(None, NO_EXPIRATION)
        self._root.next = self._root
        self._root.prev = self._root

    # -- expiration -------------------------------------------------------

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True when it changed (the bucket must be queued)."""
        return self._expiration.get_and_set(expiration_ms) != expiration_ms

    @property
    def expiration_ms(self) -> int:
        return self._expiration.get()

    # -- entries ----------------------------------------------------------

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry`` at the tail, first taking it out of any other bucket."""
        done = False
        while not done:
            # Removal from the old bucket happens outside this bucket's lock:
            # holding two bucket locks in arbitrary order could deadlock.
            entry.remove()
            with self._lock:
                with entry.lock:
                    if entry.list is None:
                        tail = self._root.prev
                        assert tail is not None
                        entry.next = self._root
                        entry.prev = tail
                        entry.list = self
                        tail.next = entry
                        self._root.prev = entry
                        self._task_counter.increment_and_get()
                        done = True

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink ``entry`` if this bucket holds it."""
        with self._lock:
            with entry.lock:
                if entry.list is self:
                    assert entry.next is not None and entry.prev is not None
                    entry.next.prev = entry.prev
                    entry.prev.next = entry.next
                    entry.next = None
                    entry.prev = None
                    entry.list = None
                    self._task_counter.decrement_and_get()

    def flush(self, reinsert: Callable[[TimerTaskEntry], None]) -> None:
        """Remove every entry, handing each to ``reinsert``, and mark the bucket unqueued."""
        with self._lock:
            head = self._root.next
            while head is not self._root:
                assert head is not None
                self.remove(head)
                reinsert(head)
                head = self._root.next
            self._expiration.set(NO_EXPIRATION)

    def tasks(self) -> list[TimerTask]:
        """The live (not cancelled) tasks in this bucket, head first."""
        found: list[TimerTask] = []
        with self._lock:
            entry = self._root.next
            while entry is not self._root:
                assert entry is not None
                if not entry.cancelled() and entry.timer_task is not None:
                    found.append(entry.timer_task)
                entry = entry.next
        return found

    def __len__(self) -> int:
        with self._lock:
            count = 0
            entry = self._root.next
            while entry is not self._root:
                assert entry is not None
                count += 1
                entry = entry.next
            return count

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration_ms={self.expiration_ms}, entries={len(self)})"
