"""The socket server: acceptors, processors and the request channel, started and stopped together.

Kafka's SocketServer. ``num.network.threads`` processors are shared by the
listeners; each listener has one acceptor. The server only moves frames —
what a frame means is the request handler's business — so it is tested with
an echo handler as well as with the broker.

Each listener's connections are built by its ``ChannelBuilder`` (transport:
the socket or TLS; SASL listeners: the authenticator ``sasl_authenticators``
gives per listener).

Stopping is in two steps so that a broker can finish what it started:
``stop_processing_requests`` closes the listening sockets and stops reading
new requests (in-flight ones are still answered); ``shutdown`` then writes
the responses still queued, closes every connection and joins the threads.
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from ..clock import SYSTEM_CLOCK, Clock
from ..config import BrokerConfig
from .acceptor import Acceptor
from .channel_builder import AuthenticatorFactory, ChannelBuilder
from .connection_quotas import ConnectionQuotas
from .endpoint import EndPoint, parse_listeners
from .processor import Processor
from .request_channel import RequestChannel

log = logging.getLogger(__name__)


class SocketServer:
    """Binds every listener of ``config`` at construction; ``startup`` starts the threads."""

    def __init__(self, config: BrokerConfig, request_channel: RequestChannel, *, clock: Clock = SYSTEM_CLOCK,
                 endpoints: Sequence[EndPoint] | None = None,
                 sasl_authenticators: Callable[[EndPoint], AuthenticatorFactory] | None = None) -> None:
        self.config = config
        self.request_channel = request_channel
        self.clock = clock
        self.connection_quotas = ConnectionQuotas(config.max_connections)
        if endpoints is None:
            endpoints = parse_listeners(config.listeners, "listeners",
                                        config.extra.get("listener.security.protocol.map"))
        # Built before anything binds: a TLS listener whose keystore cannot be read stops the start-up here.
        channel_builders = {e.listener_name: ChannelBuilder.for_listener(
            config, e, sasl_authenticators(e) if sasl_authenticators is not None else None) for e in endpoints}
        self.processors = [
            Processor(i, request_channel, self.connection_quotas, max_request_size=config.socket_request_max_bytes,
                      connections_max_idle_ms=config.connections_max_idle_ms, clock=clock,
                      channel_builders=channel_builders, send_buffer_bytes=config.socket_send_buffer_bytes)
            for i in range(config.num_network_threads)
        ]
        self.acceptors: list[Acceptor] = []
        try:
            for endpoint in endpoints:
                self.acceptors.append(Acceptor(endpoint, self.processors, self.connection_quotas))
        except BaseException:
            for acceptor in self.acceptors:
                acceptor.close()
            for processor in self.processors:
                processor.shutdown()
            raise
        self._started = False

    @property
    def bound_endpoints(self) -> list[EndPoint]:
        """The listeners with the ports they really bound (port 0 resolved)."""
        return [acceptor.bound_endpoint for acceptor in self.acceptors]

    def bound_port(self, listener_name: str | None = None) -> int:
        for endpoint in self.bound_endpoints:
            if listener_name is None or endpoint.listener_name == listener_name.upper():
                return endpoint.port
        raise KeyError(f"SocketServer: no listener named {listener_name}")

    def startup(self) -> None:
        if self._started:
            return
        self._started = True
        for processor in self.processors:
            processor.start()
        for acceptor in self.acceptors:
            acceptor.start()
            log.info("Awaiting socket connections on %s", acceptor.bound_endpoint.connection_string)

    def stop_processing_requests(self) -> None:
        """Close the listeners and read no more requests; answers to in-flight ones still go out."""
        for acceptor in self.acceptors:
            acceptor.close()
        for processor in self.processors:
            processor.stop_reading()

    def shutdown(self, drain_timeout_ms: int = 5000) -> None:
        """Write queued responses (up to ``drain_timeout_ms``), close all connections, stop the threads."""
        self.stop_processing_requests()
        for processor in self.processors:
            processor.shutdown(drain_timeout_ms)

    @property
    def bytes_sent_from_files(self) -> int:
        """Bytes the network threads sent from files (``FileSlice``s: zero copy in the clear, read on TLS)."""
        return sum(p.bytes_sent_from_files for p in self.processors)

    @property
    def connection_count(self) -> int:
        return self.connection_quotas.count
