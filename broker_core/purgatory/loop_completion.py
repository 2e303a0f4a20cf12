"""``LoopCompletion``: hand an operation's outcome to an asyncio event loop.

Delayed operations complete on whatever thread triggers them: the producer
calling ``check_and_complete`` or the timer's executor on expiration. A
coroutine waiting for the outcome lives on an event loop, and asyncio futures
may only be resolved from their loop's thread, so the result travels through
``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Generator, Generic, TypeVar

__all__ = ["LoopCompletion"]

R = TypeVar("R")


class LoopCompletion(Generic[R]):
    """A future on ``loop`` that any thread can resolve; await it from the loop.

    Create it on the loop's thread (by default it takes the running loop).
    The first ``set_result``/``set_exception`` wins; later ones are ignored,
    matching a delayed operation's exactly-once completion.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.future: asyncio.Future[R] = self.loop.create_future()

    def set_result(self, value: R) -> None:
        """Resolve the future with ``value``; safe from any thread."""
        self._hand_over(self._deliver_result, value)

    def set_exception(self, exc: BaseException) -> None:
        """Fail the future with ``exc``; safe from any thread."""
        self._hand_over(self._deliver_exception, exc)

    def _hand_over(self, deliver: Callable[[Any], None], outcome: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(deliver, outcome)
        except RuntimeError:
            # The loop has closed, so nobody awaits the outcome any more; the
            # completing thread (a producer, the timer) must not fail for it.
            if not self.loop.is_closed():
                raise

    def _deliver_result(self, value: R) -> None:
        # The awaiting coroutine may have been cancelled meanwhile.
        if not self.future.done():
            self.future.set_result(value)

    def _deliver_exception(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)

    def __await__(self) -> Generator[Any, None, R]:
        return self.future.__await__()

    def __repr__(self) -> str:
        return f"LoopCompletion(future={self.future!r})"
