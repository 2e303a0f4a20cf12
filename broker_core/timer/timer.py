"""``Timer``: what the purgatory needs from a timer (Kafka's ``Timer`` interface)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .timer_task import TimerTask

__all__ = ["Timer"]


@runtime_checkable
class Timer(Protocol):
    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` to run ``task.delay_ms`` from now."""
        ...

    def advance_clock(self, timeout_ms: int) -> bool:
        """Expire due tasks, waiting up to ``timeout_ms`` for one; True if any bucket expired."""
        ...

    def size(self) -> int:
        """Number of tasks waiting to expire."""
        ...

    def wakeup(self) -> None:
        """Make a blocked ``advance_clock`` return early."""
        ...

    def shutdown(self) -> None:
        """Stop running tasks and release the executor."""
        ...
