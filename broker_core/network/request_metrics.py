"""What requests cost and how they ended, per API (Kafka's ``RequestChannel.Metrics`` and ``RequestMetrics``).

Each ``Request`` carries its ``RequestTimes``: when its frame was complete
(the processor), when a handler took it, when the handler was done with it
locally, when its response was handed back, when the processor took the
response, and — at ``record`` — when the response was written. From these
come Kafka's six request times, recorded as histograms in milliseconds when
the response is written (or, for acks=0 produces and refused requests, when
the processor takes it), with the error codes the handler noted in them:

* ``RequestQueueTimeMs`` — waiting in the request queue for a handler;
* ``LocalTimeMs`` — the handler at work;
* ``RemoteTimeMs`` — parked in a purgatory (a long-polling fetch, ``acks=all``);
* ``ResponseQueueTimeMs`` — the response waiting for its network thread;
* ``ResponseSendTimeMs`` — the response being written;
* ``TotalTimeMs`` — from the complete frame to the last byte written.

A Fetch is counted under ``Fetch`` and, as Kafka splits it, under
``FetchConsumer`` or ``FetchFollower`` too. Along with the times: requests
per API and version, and errors per API and error code (the codes of every
``error_code`` field of the response, ``NONE`` included, as Kafka counts them).

The times are real elapsed time (``time.monotonic_ns``), not the broker's
injected clock: a simulated clock would make every request take no time.

The hot path pays a few clock reads, a small object and a walk over the
response's error codes per request, and one uncontended lock at its end:
about 4.4 µs of CPU a request (BENCHMARKS.md, *Metrics*).
"""

from __future__ import annotations

import struct
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import Mapping

from ..metrics.histogram import Histogram, HistogramSnapshot
from ..protocol import ApiKey, SeglogApiKey

now_ns = time.monotonic_ns

_HEADER = struct.Struct(">hh")  # api key, api version: the first fields of every request header
_NS_PER_MS = 1_000_000

#: Kafka's request names (its ``ApiKeys`` enum's names): ``LIST_OFFSETS`` is ``ListOffsets``.
REQUEST_NAMES: Mapping[int, str] = {int(key): "".join(part.capitalize() for part in key.name.split("_"))
                                    for enum in (ApiKey, SeglogApiKey) for key in enum}
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"

#: The request times, by Kafka's metric names, in the order ``RequestStats.times`` holds them.
TIME_METRICS: tuple[str, ...] = ("RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseQueueTimeMs",
                                 "ResponseSendTimeMs", "TotalTimeMs")


class RequestTimes:
    """When a request passed each stage, in ``time.monotonic_ns``; 0 for a stage not reached (yet)."""

    __slots__ = ("start_ns", "dequeue_ns", "local_complete_ns", "response_complete_ns", "response_dequeue_ns",
                 "from_follower", "error_codes")

    def __init__(self) -> None:
        self.start_ns = now_ns()
        self.dequeue_ns = 0
        self.local_complete_ns = 0
        self.response_complete_ns = 0
        self.response_dequeue_ns = 0
        self.from_follower = False  # a Fetch from a replica (FetchFollower) rather than a consumer
        self.error_codes: list[int] | None = None  # of the response, counted with the times

    def local_complete(self, at_ns: int) -> None:
        """The handler is done with the request (the first of: its response was sent, the handler returned)."""
        if not self.local_complete_ns:
            self.local_complete_ns = at_ns


@dataclass
class RequestStats:
    """One request name's counts: requests per version, errors per code, the six time histograms."""

    requests: dict[int, int]
    errors: dict[int, int]
    times: tuple[Histogram, ...]

    @classmethod
    def empty(cls) -> RequestStats:
        return cls({}, {}, tuple(Histogram() for _ in TIME_METRICS))


@dataclass(frozen=True)
class RequestStatsSnapshot:
    """A copy of one request name's counts, taken at a scrape."""

    request: str
    requests: Mapping[int, int]
    errors: Mapping[int, int]
    times: Mapping[str, HistogramSnapshot]


class RequestMetrics:
    """The request counts, errors and times of one broker: the processors ``record`` each answered request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats: dict[str, RequestStats] = {}

    def _of(self, name: str) -> RequestStats:
        stats = self._stats.get(name)
        if stats is None:
            stats = self._stats[name] = RequestStats.empty()
        return stats

    def record(self, frame: bytes, times: RequestTimes) -> None:
        """The request of ``frame`` has been answered (its response written, or nothing to write)."""
        if len(frame) < _HEADER.size:
            return  # not a request the broker could read: nothing to file it under
        end = now_ns()
        api_key, version = _HEADER.unpack_from(frame)
        name = REQUEST_NAMES.get(api_key) or str(api_key)
        start = times.start_ns
        response_complete = times.response_complete_ns or end
        local_complete = times.local_complete_ns or response_complete
        dequeue = times.dequeue_ns or local_complete
        response_dequeue = times.response_dequeue_ns or end
        phases = ((dequeue - start) / _NS_PER_MS, (local_complete - dequeue) / _NS_PER_MS,
                  (response_complete - local_complete) / _NS_PER_MS, (response_dequeue - response_complete) / _NS_PER_MS,
                  (end - response_dequeue) / _NS_PER_MS, (end - start) / _NS_PER_MS)
        codes = times.error_codes
        with self._lock:
            stats = self._record(name, version, phases)
            if codes:
                errors = stats.errors
                for code in codes:
                    errors[code] = errors.get(code, 0) + 1
            if api_key == ApiKey.FETCH:
                self._record(FETCH_FOLLOWER if times.from_follower else FETCH_CONSUMER, version, phases)

    def _record(self, name: str, version: int, phases: tuple[float, ...]) -> RequestStats:
        stats = self._of(name)
        requests = stats.requests
        requests[version] = requests.get(version, 0) + 1
        for histogram, value in zip(stats.times, phases):
            # The bucket whose bound is the first >= value (Prometheus's "le"); inline: six a request.
            histogram.counts[bisect_left(histogram.bounds, value)] += 1
            histogram.total += value
        return stats

    def snapshot(self) -> list[RequestStatsSnapshot]:
        with self._lock:
            return [RequestStatsSnapshot(name, dict(stats.requests), dict(stats.errors),
                                         {metric: h.snapshot() for metric, h in zip(TIME_METRICS, stats.times)})
                    for name, stats in sorted(self._stats.items())]


_CONTAINERS = (dict, list)


def error_codes(body: dict) -> list[int]:
    """Every ``error_code`` of a response body (nested topics and partitions included), as Kafka's
    ``errorCounts`` counts them. A loop over a stack rather than recursion: this runs for every response."""
    codes: list[int] = []
    stack: list[dict | list] = [body]
    pop, push = stack.pop, stack.append
    while stack:
        node = pop()
        if type(node) is dict:
            for key, value in node.items():
                if key == "error_code":
                    codes.append(value)
                elif type(value) in _CONTAINERS:
                    push(value)
        else:
            for item in node:
                if type(item) in _CONTAINERS:
                    push(item)
    return codes
