"""``Watchers``: the operations watching one key, in watch order.

An operation watched under several keys sits in several ``Watchers``; when it
completes through one key it stays in the others until they are next checked
or purged, which is why the purgatory counts completed-but-watched operations
and purges them in bulk.
"""

from __future__ import annotations

import threading
from typing import Generic, Hashable, TypeVar

from .delayed_operation import DelayedOperation

__all__ = ["Watchers"]

T = TypeVar("T", bound=DelayedOperation)


class Watchers(Generic[T]):
    """The list of operations watching ``key``."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self._lock = threading.Lock()
        self._operations: list[T] = []

    def count_watched(self) -> int:
        with self._lock:
            return len(self._operations)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._operations

    def watch(self, operation: T) -> None:
        with self._lock:
            self._operations.append(operation)

    def try_complete_watched(self) -> int:
        """Try to complete every watched operation; drop completed ones. Returns how many this call completed."""
        # try_complete runs user code that may watch or check keys, so it runs
        # on a snapshot, outside this list's lock.
        with self._lock:
            snapshot = list(self._operations)
        completed = 0
        for operation in snapshot:
            if not operation.is_completed() and operation.safe_try_complete():
                completed += 1
        self._drop_completed()
        return completed

    def purge_completed(self) -> int:
        """Drop operations completed elsewhere; returns how many were dropped."""
        return self._drop_completed()

    def cancel(self) -> list[T]:
        """Stop watching everything: cancel each operation's timeout and return them."""
        with self._lock:
            operations, self._operations = self._operations, []
        for operation in operations:
            operation.cancel()
        return operations

    def _drop_completed(self) -> int:
        with self._lock:
            before = len(self._operations)
            self._operations = [op for op in self._operations if not op.is_completed()]
            return before - len(self._operations)

    def __repr__(self) -> str:
        return f"Watchers(key={self.key!r}, watched={self.count_watched()})"
