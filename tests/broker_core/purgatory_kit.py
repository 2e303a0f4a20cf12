"""A minimal delayed operation and its asyncio form, to exercise the purgatory with.

``DelayedWaitForBytes`` is the shape of a delayed fetch without a log: it waits
for at least ``min_bytes`` on a key, or for ``delay_ms``. The bytes available
per key live in a ``ByteCounters``; producers call ``ByteCounters.add`` and then
``purgatory.check_and_complete(key)``. ``wait_for_bytes`` awaits one on an
asyncio loop, through ``LoopCompletion``: delayed operations complete on
whatever thread triggers them (a producer, the timer's executor), and asyncio
futures may only be resolved from their loop's thread, so the outcome travels
through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Callable, Generator, Generic, Hashable, TypeVar

from broker_core.purgatory import DelayedOperation, DelayedOperationPurgatory, OperationLock

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


class ByteCounters:
    """Bytes available per key, shared by producers and waiting operations."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bytes: dict[Hashable, int] = {}

    def add(self, key: Hashable, num_bytes: int) -> int:
        """Record ``num_bytes`` more on ``key``; returns the new total."""
        if num_bytes < 0:
            raise ValueError(f"ByteCounters: cannot add {num_bytes} bytes to key {key!r}")
        with self._lock:
            total = self._bytes.get(key, 0) + num_bytes
            self._bytes[key] = total
            return total

    def get(self, key: Hashable) -> int:
        with self._lock:
            return self._bytes.get(key, 0)


@dataclass(frozen=True, slots=True)
class WaitForBytesResult:
    """What a ``DelayedWaitForBytes`` saw when it completed."""

    key: Hashable
    min_bytes: int
    bytes_available: int

    @property
    def satisfied(self) -> bool:
        """True when enough bytes had arrived (even if the timeout fired at the same moment)."""
        return self.bytes_available >= self.min_bytes


class DelayedWaitForBytes(DelayedOperation):
    """Wait for at least ``min_bytes`` on ``key`` in ``counters``, or for ``delay_ms``.

    Completes (once) as soon as a ``try_complete`` finds the counter at or
    above ``min_bytes``, or when the timer expires it; either way ``result``
    is set and ``on_result`` (if given) is called with it, from the thread
    that completed the operation. ``expired`` tells the two paths apart after
    the fact.
    """

    def __init__(
        self,
        delay_ms: int,
        key: Hashable,
        min_bytes: int,
        counters: ByteCounters,
        on_result: Callable[[WaitForBytesResult], None] | None = None,
        *,
        lock: OperationLock | None = None,
    ) -> None:
        if min_bytes < 0:
            raise ValueError(f"DelayedWaitForBytes({key!r}): min_bytes must be >= 0, got {min_bytes}")
        super().__init__(delay_ms, lock)
        self.key = key
        self.min_bytes = min_bytes
        self.counters = counters
        self.on_result = on_result
        self.result: WaitForBytesResult | None = None
        self.expired = False

    def try_complete(self) -> bool:
        if self.counters.get(self.key) >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.result = WaitForBytesResult(self.key, self.min_bytes, self.counters.get(self.key))
        if self.on_result is not None:
            self.on_result(self.result)

    def on_expiration(self) -> None:
        self.expired = True

    def __repr__(self) -> str:
        return (
            f"DelayedWaitForBytes(key={self.key!r}, min_bytes={self.min_bytes}, "
            f"delay_ms={self.delay_ms}, completed={self.is_completed()})"
        )


async def wait_for_bytes(
    purgatory: DelayedOperationPurgatory[DelayedWaitForBytes],
    counters: ByteCounters,
    key: Hashable,
    min_bytes: int,
    delay_ms: int,
) -> WaitForBytesResult:
    """Wait on the running loop until ``min_bytes`` are on ``key`` or ``delay_ms`` passes."""
    completion: LoopCompletion[WaitForBytesResult] = LoopCompletion()
    operation = DelayedWaitForBytes(delay_ms, key, min_bytes, counters, on_result=completion.set_result)
    purgatory.try_complete_else_watch(operation, [key])
    try:
        return await completion
    finally:
        # A cancelled waiter must not leave its operation watched forever:
        # completing it takes it off the timer and lets the purge drop it.
        if not operation.is_completed():
            operation.force_complete()
