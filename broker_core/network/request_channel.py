"""The request channel: requests from the network threads to the handlers, responses back.

Kafka's ``RequestChannel``. Processors put each complete frame as a
``Request`` on one shared, bounded queue (``queued.max.requests``); a full
queue blocks the processor, which is the broker's back-pressure. Handlers
answer through ``send_response`` with one of three ``Response`` kinds, which
goes to the queue of the processor that owns the connection:

* ``SendResponse`` — bytes to write; the connection reads its next request
  once they are written;
* ``NoOpResponse`` — nothing to write (a produce with acks=0), read on;
* ``CloseConnectionResponse`` — the request was not acceptable; close.

Every request gets exactly one response: that is what keeps the connection's
one-request-in-flight discipline from stalling.

The channel also keeps the broker's ``RequestMetrics`` (as Kafka's channel
keeps its ``Metrics``): each request carries its ``RequestTimes``, which
``send_response`` stamps, and the processor records them once the response
is out.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Protocol, Sequence

from format.file_slice import FileSlice
from format.file_slice import release as release_records

from ..security.principal import ANONYMOUS, KafkaPrincipal
from .request_metrics import RequestMetrics, RequestTimes, now_ns

DEFAULT_QUEUED_MAX_REQUESTS = 500


@dataclass(frozen=True, eq=False)
class Request:
    """A frame read from a connection, with where it came from."""

    processor_id: int
    connection_id: str
    listener_name: str
    client_address: tuple[str, int]
    frame: bytes  # without the size prefix
    principal: KafkaPrincipal = ANONYMOUS  # who the connection authenticated as
    security_protocol: str = "PLAINTEXT"  # of the listener the request came in on
    # Stamped at each stage, for the request metrics; made (and its start stamped) when the frame was complete.
    times: RequestTimes = field(default_factory=RequestTimes)


@dataclass(frozen=True, eq=False)
class SendResponse:
    request: Request
    # The complete frame, size prefix included: one buffer, or several written in order (a fetch's
    # records go out from the buffers the log read them into, or from the segment file: a FileSlice,
    # which the processor closes once sent or dropped).
    payload: bytes | Sequence[bytes | FileSlice]


def release(response: Response) -> None:
    """Close the file slices of a response that will not be written (its connection is gone)."""
    if isinstance(response, SendResponse) and not isinstance(response.payload, (bytes, bytearray, memoryview)):
        for buffer in response.payload:
            release_records(buffer)


@dataclass(frozen=True, eq=False)
class NoOpResponse:
    request: Request


@dataclass(frozen=True, eq=False)
class CloseConnectionResponse:
    request: Request
    reason: str = ""


Response = SendResponse | NoOpResponse | CloseConnectionResponse


class ResponseSink(Protocol):
    """A processor, as the channel sees it: something that takes responses for its connections."""

    def enqueue_response(self, response: Response) -> None: ...


class _Shutdown:
    """The pill a handler thread takes to stop."""


SHUTDOWN = _Shutdown()


class RequestChannel:
    """One request queue shared by all processors; responses routed back by processor id."""

    def __init__(self, queue_size: int = DEFAULT_QUEUED_MAX_REQUESTS, metrics: RequestMetrics | None = None) -> None:
        if queue_size < 1:
            raise ValueError(f"RequestChannel: queue_size must be >= 1, got {queue_size}")
        self.metrics = metrics if metrics is not None else RequestMetrics()
        self._requests: queue.Queue[Request | _Shutdown] = queue.Queue(queue_size)
        self._processors: dict[int, ResponseSink] = {}
        self._lock = threading.Lock()
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)

    # -- processors ------------------------------------------------------

    def add_processor(self, processor_id: int, sink: ResponseSink) -> None:
        with self._lock:
            if processor_id in self._processors:
                raise ValueError(f"RequestChannel: processor {processor_id} is already registered")
            self._processors[processor_id] = sink

    def remove_processor(self, processor_id: int) -> None:
        with self._lock:
            self._processors.pop(processor_id, None)

    def send_request(self, request: Request, timeout_s: float | None = None) -> bool:
        """Queue ``request`` for the handlers; blocks while the queue is full (up to ``timeout_s``).

        Returns False when the queue stayed full for ``timeout_s``.
        """
        with self._lock:
            self._in_flight += 1
        try:
            self._requests.put(request, timeout=timeout_s)
        except queue.Full:
            self._done()
            return False
        return True

    # -- handlers --------------------------------------------------------

    def receive_request(self, timeout_s: float) -> Request | _Shutdown | None:
        """The next request, SHUTDOWN, or None if nothing came within ``timeout_s``."""
        try:
            return self._requests.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def send_shutdown_request(self) -> None:
        """Wake one handler thread and make it stop (after the requests already queued)."""
        self._requests.put(SHUTDOWN)

    def send_response(self, response: Response) -> None:
        """Hand ``response`` to the processor owning its connection; safe from any thread."""
        times = response.request.times
        times.response_complete_ns = now_ns()
        times.local_complete(times.response_complete_ns)
        with self._lock:
            sink = self._processors.get(response.request.processor_id)
        if sink is not None:
            sink.enqueue_response(response)
        else:
            release(response)  # its processor is gone, and the connection with it
        self._done()

    # -- in-flight accounting (graceful shutdown waits on it) ---------------

    @property
    def in_flight(self) -> int:
        """Requests received from processors and not yet answered."""
        with self._lock:
            return self._in_flight

    def wait_until_idle(self, timeout_s: float) -> bool:
        """Block until every request taken has been answered; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout_s)

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.notify_all()

    @property
    def queue_size(self) -> int:
        """Requests waiting for a handler (Kafka's RequestQueueSize)."""
        return self._requests.qsize()
