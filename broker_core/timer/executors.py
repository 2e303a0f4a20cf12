"""Executors for expired timer tasks.

The timer hands expired tasks to a ``concurrent.futures.Executor``. Kafka uses
one dedicated thread; ``InlineExecutor`` instead runs each task in the calling
thread, which makes tests deterministic: when ``advance_clock`` returns, every
task it expired has already run.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, Future
from typing import Any, Callable, TypeVar

__all__ = ["InlineExecutor", "run_logging_errors"]

_log = logging.getLogger(__name__)

T = TypeVar("T")


class InlineExecutor(Executor):
    """Runs every submitted callable at once, in the submitting thread."""

    def __init__(self) -> None:
        self._shutdown = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._shutdown:
            raise RuntimeError(f"InlineExecutor: cannot run {fn!r} after shutdown")
        future: Future[T] = Future()
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            # Delivered through the future, as a thread pool would.
            future.set_exception(exc)
        else:
            future.set_result(result)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._shutdown = True


def run_logging_errors(fn: Callable[[], None], owner: str) -> None:
    """Run ``fn``; log what it raises, since nobody reads an expired task's future."""
    try:
        fn()
    except Exception:
        _log.exception("%s: timer task %r failed", owner, fn)
