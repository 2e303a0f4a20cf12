"""Small lock-backed atomics standing in for Java's ``AtomicInteger``/``AtomicLong``.

The timer shares one task counter between all buckets of all wheels and
updates each bucket's expiration with get-and-set; both are read and written
from the threads that add and cancel tasks and from the reaper, so the
read-modify-write must not interleave.
"""

from __future__ import annotations

import threading

__all__ = ["AtomicInteger"]


class AtomicInteger:
    """An integer whose read-modify-write operations are atomic."""

    __slots__ = ("_lock", "_value")

    def __init__(self, value: int = 0) -> None:
        self._lock = threading.Lock()
        self._value = value

    def get(self) -> int:
        return self._value

    def set(self, value: int) -> None:
        with self._lock:
            self._value = value

    def get_and_set(self, value: int) -> int:
        with self._lock:
            previous = self._value
            self._value = value
            return previous

    def add_and_get(self, delta: int) -> int:
        with self._lock:
            self._value += delta
            return self._value

    def increment_and_get(self) -> int:
        return self.add_and_get(1)

    def decrement_and_get(self) -> int:
        return self.add_and_get(-1)

    def compare_and_set(self, expected: int, value: int) -> bool:
        with self._lock:
            if self._value != expected:
                return False
            self._value = value
            return True

    def __repr__(self) -> str:
        return f"AtomicInteger({self._value})"
