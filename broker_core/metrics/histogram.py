"""A latency histogram cheap enough for every request: fixed bucket bounds, plain counts, no lock of its own.

Its owner (``RequestMetrics``) updates it under the one lock it takes per
request, and a scrape copies it under the same lock; the Prometheus
collector turns the copy into a histogram family. ``prometheus_client``'s own
``Histogram`` takes a lock per bucket and per observation, which would cost
each request several times what this does.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bucket upper bounds in milliseconds (Kafka's request times are in ms): from 50 µs to 10 s.
LATENCY_BUCKETS_MS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0,
                                         500.0, 1000.0, 2500.0, 5000.0, 10000.0)


@dataclass(frozen=True)
class HistogramSnapshot:
    """Cumulative counts per upper bound (the last one +Inf), their sum, in Prometheus's shape."""

    buckets: tuple[tuple[float, int], ...]
    total: float


class Histogram:
    """Counts of observations per bucket and their sum (``RequestMetrics`` adds to them on the request path)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_MS) -> None:
        assert list(bounds) == sorted(bounds), f"Histogram: bucket bounds must increase, got {bounds}"
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one counts what lies above every bound
        self.total = 0.0

    def snapshot(self) -> HistogramSnapshot:
        cumulative = []
        running = 0
        for bound, count in zip(self.bounds + (float("inf"),), self.counts):
            running += count
            cumulative.append((bound, running))
        return HistogramSnapshot(tuple(cumulative), self.total)
