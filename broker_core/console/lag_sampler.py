"""Consumer lag over the last hour: a sampler that reads every group's total lag each ``interval_ms`` on its
own thread and keeps the samples of one window (an hour by default) in a ring, which the lag chart
reads. Time comes from the injected clock, so a test drives it with ``sample()`` and ``MockTime``."""

from __future__ import annotations

import collections
import logging
import threading
from dataclasses import dataclass
from typing import Callable, Mapping

from ..clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 10_000
WINDOW_MS = 60 * 60 * 1000


@dataclass(frozen=True)
class LagSample:
    timestamp_ms: int
    lag: Mapping[str, int]  # group id -> lag summed over its partitions


class LagSampler:
    """Samples ``read_lag()`` (group id -> total lag) every ``interval_ms`` once started; ``close`` stops it."""

    def __init__(self, read_lag: Callable[[], Mapping[str, int]], *, interval_ms: int = DEFAULT_INTERVAL_MS,
                 window_ms: int = WINDOW_MS, clock: Clock = SYSTEM_CLOCK) -> None:
        if interval_ms <= 0:
            raise ValueError(f"lag sampling interval must be positive, got {interval_ms} ms")
        if window_ms < interval_ms:
            raise ValueError(f"lag window of {window_ms} ms is shorter than the sampling interval of "
                             f"{interval_ms} ms")
        self.read_lag = read_lag
        self.interval_ms = interval_ms
        self.window_ms = window_ms
        self.clock = clock
        self._samples: collections.deque[LagSample] = collections.deque(maxlen=window_ms // interval_ms + 1)
        self._lock = threading.Lock()
        self._wakeup = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def sample(self) -> LagSample:
        """Read the lag now and keep it (the oldest sample drops out once the ring is full)."""
        taken = LagSample(self.clock.milliseconds(), dict(self.read_lag()))
        with self._lock:
            self._samples.append(taken)
        return taken

    def samples(self) -> list[LagSample]:
        """The samples of the last window, oldest first."""
        since = self.clock.milliseconds() - self.window_ms
        with self._lock:
            return [s for s in self._samples if s.timestamp_ms >= since]

    def history(self, group_id: str) -> list[tuple[int, int]]:
        """(timestamp ms, lag) of one group over the last window; samples taken before it existed are left out."""
        return [(s.timestamp_ms, s.lag[group_id]) for s in self.samples() if group_id in s.lag]

    def start(self) -> LagSampler:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="console-lag-sampler", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        with self._wakeup:
            self._stopped = True
            self._wakeup.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:
                log.exception("sampling consumer lag failed; trying again in %d ms", self.interval_ms)
            with self._wakeup:
                # A simulated clock cannot pass time by waiting: then the caller samples.
                if self._stopped or not self.clock.wait(self._wakeup, self.interval_ms) or self._stopped:
                    return
