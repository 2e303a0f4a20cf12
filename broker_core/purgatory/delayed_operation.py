"""``DelayedOperation``: a request that waits for a condition or a timeout.

An operation (a fetch waiting for bytes, a produce waiting for acks) is both
watched by the purgatory under some keys and scheduled on the timer. Whichever
comes first completes it: ``try_complete`` when an event on a key makes the
condition true, or the timer's ``run`` when ``delay_ms`` passes. Either way
``on_complete`` runs exactly once, guarded by an atomic completed flag; on the
timeout path ``on_expiration`` runs after it.
"""

from __future__ import annotations

import abc
import threading
from typing import Any, Callable, Protocol

from ..timer.timer_task import TimerTask

__all__ = ["DelayedOperation", "OperationLock"]


class OperationLock(Protocol):
    """The lock guarding ``try_complete``: a ``threading.Lock``/``RLock`` or alike."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: Any) -> Any: ...


class DelayedOperation(TimerTask, abc.ABC):
    """An operation completed by ``try_complete`` or forced to complete after ``delay_ms``.

    ``lock`` serializes ``try_complete`` calls from different threads. Several
    operations may share one (Kafka passes a group's lock to every delayed join
    of that group); by default each operation gets its own re-entrant lock.
    """

    def __init__(self, delay_ms: int, lock: OperationLock | None = None) -> None:
        super().__init__(delay_ms)
        self.lock: OperationLock = lock if lock is not None else threading.RLock()
        self._completed = False
        self._completed_lock = threading.Lock()

    # -- what subclasses define ----------------------------------------------

    @abc.abstractmethod
    def try_complete(self) -> bool:
        """Complete the operation if its condition holds now.

        Implementations check the condition and, if it holds, return
        ``self.force_complete()``; otherwise they return False.
        """

    @abc.abstractmethod
    def on_complete(self) -> None:
        """The completion logic (e.g. send the response); runs exactly once."""

    @abc.abstractmethod
    def on_expiration(self) -> None:
        """Called after ``on_complete`` when completion was forced by the timeout."""

    # -- completion ----------------------------------------------------------

    def force_complete(self) -> bool:
        """Complete now unless already completed; True only for the caller that completed it."""
        with self._completed_lock:
            if self._completed:
                return False
            self._completed = True
        # The timeout no longer matters once the operation is complete.
        self.cancel()
        self.on_complete()
        return True

    def is_completed(self) -> bool:
        return self._completed

    def safe_try_complete(self) -> bool:
        """``try_complete`` under the operation's lock."""
        with self.lock:
            return self.try_complete()

    def safe_try_complete_or_else(self, otherwise: Callable[[], None]) -> bool:
        """Under the lock: try to complete; if that fails run ``otherwise`` and try once more.

        The purgatory registers the operation's watches in ``otherwise``. The
        second try closes the window in which an event arrived after the first
        check but before the watches were in place.
        """
        with self.lock:
            if self.try_complete():
                return True
            otherwise()
            return self.try_complete()

    def run(self) -> None:
        """The timer's callback on timeout: force completion, then report expiration."""
        if self.force_complete():
            self.on_expiration()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(delay_ms={self.delay_ms}, completed={self._completed})"
