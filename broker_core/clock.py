"""Injected time: the ``Clock`` protocol, the real clock and a simulated one.

Everything in the broker that depends on time (the timing wheel, the
purgatory's reaper, retention, the group coordinator) takes a ``clock=`` so
that tests move time by calling ``sleep`` on a ``MockTime`` instead of
sleeping for real. The names follow Kafka's ``org.apache.kafka.common.utils.Time``:
``milliseconds`` is wall-clock time, ``nanoseconds`` and ``hi_res_clock_ms``
are monotonic and are what timers measure delays with.

Blocking goes through the clock too (``wait``), because only the clock knows
whether waiting can make time pass: a simulated clock moves only when someone
calls ``sleep``, so a timer polling it must give up instead of blocking.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock", "SYSTEM_CLOCK", "MockTime", "FakeClock"]

_NANOS_PER_MS = 1_000_000


@runtime_checkable
class Clock(Protocol):
    """A source of time that can also block a thread on a condition."""

    def milliseconds(self) -> int:
        """Wall-clock time in milliseconds since the epoch."""
        ...

    def nanoseconds(self) -> int:
        """Monotonic time in nanoseconds, for measuring intervals."""
        ...

    def hi_res_clock_ms(self) -> int:
        """Monotonic time in milliseconds (``nanoseconds() // 1_000_000``)."""
        ...

    def wait(self, condition: threading.Condition, timeout_ms: int) -> bool:
        """Block on ``condition`` (held by the caller) for up to ``timeout_ms``.

        Returns ``True`` when the caller may have waited (it was notified or
        the timeout passed) and should look again, ``False`` when waiting
        cannot make this clock's time pass, in which case the caller should
        stop waiting rather than spin.
        """
        ...


class SystemClock:
    """The real clock: ``time.time_ns`` and ``time.monotonic_ns``."""

    def milliseconds(self) -> int:
        return time.time_ns() // _NANOS_PER_MS

    def nanoseconds(self) -> int:
        return time.monotonic_ns()

    def hi_res_clock_ms(self) -> int:
        return time.monotonic_ns() // _NANOS_PER_MS

    def wait(self, condition: threading.Condition, timeout_ms: int) -> bool:
        if timeout_ms > 0:
            condition.wait(timeout_ms / 1000.0)
        return True

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class MockTime:
    """A simulated clock that moves only when ``sleep`` is called.

    Like Kafka's ``MockTime``: ``auto_tick_ms`` advances the clock on every
    read of ``milliseconds``/``nanoseconds`` (useful to make code that polls
    time terminate), wall-clock and monotonic time advance together. Safe to
    share between threads.
    """

    def __init__(
        self,
        auto_tick_ms: int = 0,
        current_time_ms: int = 0,
        current_high_res_time_ns: int | None = None,
    ) -> None:
        if auto_tick_ms < 0:
            raise ValueError(f"MockTime: auto_tick_ms must be >= 0, got {auto_tick_ms}")
        self._lock = threading.Lock()
        self._auto_tick_ms = auto_tick_ms
        self._time_ms = current_time_ms
        self._high_res_ns = (
            current_time_ms * _NANOS_PER_MS if current_high_res_time_ns is None else current_high_res_time_ns
        )

    def milliseconds(self) -> int:
        self._auto_tick()
        with self._lock:
            return self._time_ms

    def nanoseconds(self) -> int:
        self._auto_tick()
        with self._lock:
            return self._high_res_ns

    def hi_res_clock_ms(self) -> int:
        return self.nanoseconds() // _NANOS_PER_MS

    def sleep(self, ms: int) -> None:
        """Advance simulated time by ``ms`` milliseconds; never blocks."""
        if ms < 0:
            raise ValueError(f"MockTime: cannot sleep a negative duration, got {ms} ms")
        with self._lock:
            self._time_ms += ms
            self._high_res_ns += ms * _NANOS_PER_MS

    def set_time_ms(self, ms: int) -> None:
        """Move both clocks to ``ms``; time never goes backwards."""
        with self._lock:
            now_ms = self._high_res_ns // _NANOS_PER_MS
            if ms < now_ms:
                raise ValueError(f"MockTime: cannot move time back from {now_ms} ms to {ms} ms")
            self._time_ms += ms - now_ms
            self._high_res_ns = ms * _NANOS_PER_MS

    def wait(self, condition: threading.Condition, timeout_ms: int) -> bool:
        # Simulated time does not pass while a thread blocks, so a poll that
        # waited here could only end when another thread happened to call
        # sleep(); tell the caller to give up instead.
        return False

    def _auto_tick(self) -> None:
        if self._auto_tick_ms:
            self.sleep(self._auto_tick_ms)

    def __repr__(self) -> str:
        return f"MockTime(time_ms={self._time_ms}, hi_res_ns={self._high_res_ns})"


# The name tests in other Python projects reach for.
FakeClock = MockTime
