"""Progress of long-running commands, on standard error: a line every few seconds.

A command that takes a few seconds says nothing until it is done; one that
runs longer prints a line every ``interval_ms`` (the first once that much time
has passed), so a user piping a million lines into ``seglog produce`` sees it
moving and a log file collecting standard error gets a line now and then
rather than a line per record. The interval is the option Kafka's
performance tools call ``--reporting-interval``; 0 turns the lines off.
"""

from __future__ import annotations

import sys
from typing import Callable, TextIO

from ..clock import SYSTEM_CLOCK, Clock

DEFAULT_REPORTING_INTERVAL_MS = 5000


def rate_text(done: int, elapsed_ms: int, unit: str) -> str:
    """``1,200 records (400/s)``: a count and its rate since the start."""
    rate = done * 1000 / elapsed_ms if elapsed_ms > 0 else 0.0
    return f"{done:,} {unit} ({rate:,.0f}/s)"


class ProgressLine:
    """Prints ``describe(done, elapsed_ms)`` on ``stream`` at most once per ``interval_ms``."""

    def __init__(self, describe: Callable[[int, int], str], *, interval_ms: int = DEFAULT_REPORTING_INTERVAL_MS,
                 stream: TextIO | None = None, clock: Clock = SYSTEM_CLOCK):
        if interval_ms < 0:
            raise ValueError(f"the reporting interval must be 0 (no progress lines) or more ms, got {interval_ms}")
        self.describe = describe
        self.interval_ms = interval_ms
        self.stream = stream
        self.clock = clock
        self.started_ms = clock.hi_res_clock_ms()
        self._last_ms = self.started_ms
        self.lines = 0

    def update(self, done: int) -> None:
        if not self.interval_ms:
            return
        now = self.clock.hi_res_clock_ms()
        if now - self._last_ms < self.interval_ms:
            return
        self._last_ms = now
        stream = self.stream if self.stream is not None else sys.stderr
        stream.write(self.describe(done, now - self.started_ms) + "\n")
        stream.flush()
        self.lines += 1
