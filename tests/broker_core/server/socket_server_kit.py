"""The socket server with a stand-in handler (``EchoHandler``): what the network layer's tests run against.

``Server`` binds the listeners of its settings on 127.0.0.1 and answers every frame with itself; a few
frames are commands (``EchoHandler``), ``b"whoami"`` among them: the answer is the request's principal and
its listener's security protocol, which is how tests see what the processor decided a connection is.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

from broker_core.config import BrokerConfig
from broker_core.network.channel_builder import sasl_authenticator_factory
from broker_core.network.request_channel import (CloseConnectionResponse, NoOpResponse, Request, RequestChannel,
                                                 SendResponse)
from broker_core.network.socket_server import SocketServer
from broker_core.server.handler_pool import KafkaRequestHandlerPool
from format.file_slice import FileSlice

TIMEOUT_S = 5


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock``: end of stream, a reset or a TLS alert. A connection still open when the
    socket's timeout passes is not closed: a server that only stops answering must not pass for one that closed."""
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:  # ssl.SSLError and ConnectionResetError among them
        return True


class EchoHandler:
    """Answers each frame with itself; b"noop", b"close", b"boom" and b"slow:<s>" do what they say;
    b"whoami" is answered ``<principal> <security protocol>``; b"file:<path>" with the file's bytes, sent from
    the file (a ``FileSlice``, as a zero-copy fetch sends records)."""

    def __init__(self, channel: RequestChannel) -> None:
        self.channel = channel
        self.lock = threading.Lock()
        self.in_flight: dict[str, int] = {}
        self.max_in_flight = 0
        self.seen: list[bytes] = []

    def handle(self, request: Request) -> None:
        with self.lock:
            n = self.in_flight.get(request.connection_id, 0) + 1
            self.in_flight[request.connection_id] = n
            self.max_in_flight = max(self.max_in_flight, n)
            self.seen.append(request.frame)
        try:
            if request.frame.startswith(b"slow:"):
                time.sleep(float(request.frame[5:]))
            if request.frame == b"boom":
                raise RuntimeError("the handler failed")
        finally:
            with self.lock:
                self.in_flight[request.connection_id] -= 1
        if request.frame.startswith(b"parts:"):
            # Answered in buffers of 1, 2, ... 4 MiB-ish sizes: a gathering write across many partial sends.
            payload = request.frame * int(request.frame[6:])
            buffers = [payload[:1], payload[1:70_000], b"", payload[70_000:]]
            self.channel.send_response(SendResponse(request, [struct.pack(">i", len(payload)), *buffers]))
        elif request.frame.startswith(b"file:"):
            path = request.frame[5:].decode()
            size = os.path.getsize(path)
            records = FileSlice(path, os.open(path, os.O_RDONLY), 0, size)
            self.channel.send_response(SendResponse(request, [struct.pack(">i", size), records]))
        elif request.frame == b"whoami":
            answer = f"{request.principal} {request.security_protocol}".encode()
            self.channel.send_response(SendResponse(request, frame(answer)))
        elif request.frame == b"noop":
            self.channel.send_response(NoOpResponse(request))
        elif request.frame == b"close":
            self.channel.send_response(CloseConnectionResponse(request, "asked to"))
        else:
            self.channel.send_response(SendResponse(request, frame(request.frame)))


class Server:
    def __init__(self, clock=None, credentials=None, **props):
        """``credentials``: the users SASL listeners authenticate (their ApiVersions answer is a stand-in)."""
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2, "num.io.threads": 4,
                    "log.dirs": "/unused"}
        settings.update(props)
        config = BrokerConfig.from_props(settings)
        self.channel = RequestChannel()
        self.handler = EchoHandler(self.channel)
        kwargs = {"clock": clock} if clock is not None else {}
        if credentials is not None:
            kwargs["sasl_authenticators"] = lambda endpoint: sasl_authenticator_factory(
                config, endpoint, credentials, lambda frame: b"api-versions", **({"clock": clock} if clock else {}))
        self.socket_server = SocketServer(config, self.channel, **kwargs)
        self.pool = KafkaRequestHandlerPool(self.channel, self.handler, config.num_io_threads)
        self.port = self.socket_server.bound_port()

    def start(self):
        self.pool.start()
        self.socket_server.startup()
        return self

    def stop(self):
        self.socket_server.stop_processing_requests()
        self.channel.wait_until_idle(TIMEOUT_S)
        self.pool.shutdown()
        self.socket_server.shutdown()

    def connect(self, listener_name: str | None = None) -> socket.socket:
        port = self.port if listener_name is None else self.socket_server.bound_port(listener_name)
        return socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
