"""The acceptor: one thread per listener that accepts connections and deals them to processors.

Kafka's Acceptor. It binds at construction (so the bound port, possibly an
ephemeral one, is known before any thread starts), takes a slot from the
connection quotas before each accept — at ``max.connections`` it stops
accepting until a connection closes — and hands each new socket to the next
processor, round robin.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from typing import Sequence

from .connection_quotas import ConnectionQuotas
from .endpoint import EndPoint
from .processor import Processor

log = logging.getLogger(__name__)

DEFAULT_BACKLOG = 50  # Kafka's listen backlog
_POLL_S = 0.5
# While at max.connections, how often to look whether the acceptor is being closed.
_SLOT_WAIT_S = 0.1


class Acceptor(threading.Thread):
    """Accepts on ``endpoint`` and assigns connections to ``processors``."""

    def __init__(self, endpoint: EndPoint, processors: Sequence[Processor], connection_quotas: ConnectionQuotas,
                 backlog: int = DEFAULT_BACKLOG) -> None:
        super().__init__(name=f"data-plane-kafka-socket-acceptor-{endpoint.listener_name}-{endpoint.port}",
                         daemon=True)
        if not processors:
            raise ValueError(f"Acceptor({endpoint.connection_string}): no processors to hand connections to")
        self.endpoint = endpoint
        self.processors = list(processors)
        self.connection_quotas = connection_quotas
        self._server = self._open_server_socket(endpoint, backlog)
        self.bound_endpoint = endpoint.with_port(self._server.getsockname()[1])
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._server, selectors.EVENT_READ)
        self._wakeup_r, self._wakeup_w = socket.socketpair()
        self._selector.register(self._wakeup_r, selectors.EVENT_READ)
        self._running = True
        self._next_processor = 0

    @staticmethod
    def _open_server_socket(endpoint: EndPoint, backlog: int) -> socket.socket:
        host = endpoint.host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        if host == "":
            host = "0.0.0.0"
        server = socket.socket(family, socket.SOCK_STREAM)
        try:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((host, endpoint.port))
            server.listen(backlog)
            server.setblocking(False)
        except OSError as exc:
            server.close()
            raise OSError(exc.errno, f"Socket server failed to bind to {endpoint.host}:{endpoint.port}: "
                                     f"{exc.strerror}") from exc
        return server

    def run(self) -> None:
        try:
            while self._running:
                # At the limit, accept nothing: the next client waits in the backlog.
                if not self.connection_quotas.wait_for_slot(_SLOT_WAIT_S):
                    continue
                ready = self._selector.select(_POLL_S)
                if any(key.fileobj is self._server for key, _ in ready):
                    self._accept()
        finally:
            self._close_sockets()

    def _close_sockets(self) -> None:
        self._selector.close()
        self._server.close()
        self._wakeup_r.close()
        self._wakeup_w.close()

    def _accept(self) -> None:
        try:
            sock, address = self._server.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            # Out of file descriptors and the like: log and keep serving the others.
            log.error("Acceptor %s: accept failed: %s", self.endpoint.connection_string, exc)
            return
        if not self.connection_quotas.inc():
            # Another listener took the last slot since we looked.
            sock.close()
            return
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        processor = self.processors[self._next_processor % len(self.processors)]
        self._next_processor += 1
        processor.accept(sock, address[:2], self.endpoint.listener_name)

    def close(self) -> None:
        """Stop accepting and close the listening socket."""
        self._running = False
        if self.is_alive():
            try:
                self._wakeup_w.send(b"\0")
            except OSError:
                pass
            self.join()
        else:
            self._close_sockets()
