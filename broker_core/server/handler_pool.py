"""The request handler pool: ``num.io.threads`` threads that run the APIs (Kafka's KafkaRequestHandlerPool).

Each thread takes the next request off the request channel and gives it to
the ``RequestHandler`` (``KafkaApis`` in the broker, anything with a
``handle`` method in tests). The handler answers through the channel — now,
or later from another thread for a request parked in a purgatory. If it
raises instead, the thread closes that connection: the client reconnects and
retries, and no request is left without an answer.

Each thread counts the time it spends waiting for a request (``idle_ns``):
Kafka's ``RequestHandlerAvgIdlePercent`` is that time over all the threads'.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from ..network.request_channel import SHUTDOWN, CloseConnectionResponse, Request, RequestChannel
from ..network.request_metrics import now_ns

log = logging.getLogger(__name__)

_POLL_S = 0.3


class RequestHandler(Protocol):
    """What the pool runs: it must answer every request exactly once, unless it raises."""

    def handle(self, request: Request) -> None: ...


class KafkaRequestHandler(threading.Thread):
    """One I/O thread."""

    def __init__(self, handler_id: int, request_channel: RequestChannel, apis: RequestHandler) -> None:
        super().__init__(name=f"data-plane-kafka-request-handler-{handler_id}", daemon=True)
        self.request_channel = request_channel
        self.apis = apis
        self.idle_ns = 0  # time spent waiting for a request (written by this thread only)

    def run(self) -> None:
        while True:
            waiting_since = now_ns()
            request = self.request_channel.receive_request(_POLL_S)
            dequeued = now_ns()
            self.idle_ns += dequeued - waiting_since
            if request is None:
                continue
            if request is SHUTDOWN:
                return
            request.times.dequeue_ns = dequeued
            try:
                self.apis.handle(request)
            except Exception as exc:  # a bug in one API must not kill the thread
                log.exception("%s: request from %s failed; closing the connection", self.name,
                              request.connection_id)
                self.request_channel.send_response(CloseConnectionResponse(request, f"handler error: {exc!r}"))
            request.times.local_complete(now_ns())


class KafkaRequestHandlerPool:
    """``num_threads`` handler threads over one request channel."""

    def __init__(self, request_channel: RequestChannel, apis: RequestHandler, num_threads: int) -> None:
        if num_threads < 1:
            raise ValueError(f"KafkaRequestHandlerPool: num_threads must be >= 1, got {num_threads}")
        self.request_channel = request_channel
        self.threads = [KafkaRequestHandler(i, request_channel, apis) for i in range(num_threads)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def shutdown(self) -> None:
        """Stop every thread once the requests already queued are handled."""
        for _ in self.threads:
            self.request_channel.send_shutdown_request()
        for thread in self.threads:
            if thread.is_alive():
                thread.join()
