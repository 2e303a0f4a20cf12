"""The socket server with a stand-in handler: framing, ordering, limits, idleness, shutdown."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from broker_core.clock import MockTime
from broker_core.config import BrokerConfig
from broker_core.network.network_receive import InvalidReceiveError, NetworkReceive
from broker_core.network.request_channel import (CloseConnectionResponse, NoOpResponse, Request, RequestChannel,
                                                 SendResponse)
from broker_core.network.socket_server import SocketServer
from broker_core.server.handler_pool import KafkaRequestHandlerPool

from server_kit import read_frame

TIMEOUT_S = 5


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class EchoHandler:
    """Answers each frame with itself; b"noop", b"close", b"boom" and b"slow:<s>" do what they say."""

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
        elif request.frame == b"noop":
            self.channel.send_response(NoOpResponse(request))
        elif request.frame == b"close":
            self.channel.send_response(CloseConnectionResponse(request, "asked to"))
        else:
            self.channel.send_response(SendResponse(request, frame(request.frame)))


class Server:
    def __init__(self, clock=None, **props):
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2, "num.io.threads": 4,
                    "log.dirs": "/unused"}
        settings.update(props)
        config = BrokerConfig.from_props(settings)
        self.channel = RequestChannel()
        self.handler = EchoHandler(self.channel)
        kwargs = {"clock": clock} if clock is not None else {}
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

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=TIMEOUT_S)
        return sock




def is_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.fixture()
def server():
    s = Server().start()
    yield s
    s.stop()


# --- NetworkReceive, without sockets ---------------------------------------------


def test_network_receive_returns_frames_split_across_feeds_and_keeps_the_rest():
    receive = NetworkReceive(100)
    data = frame(b"first") + frame(b"second")
    for i in range(len(data)):
        receive.feed(data[i:i + 1])
    assert receive.next_frame() == b"first"
    assert receive.next_frame() == b"second"
    assert receive.next_frame() is None and receive.buffered == 0


def test_network_receive_refuses_a_size_above_the_limit_before_buffering_it():
    receive = NetworkReceive(10)
    with pytest.raises(InvalidReceiveError, match="larger than 10"):
        receive.feed(struct.pack(">i", 11))


def test_network_receive_refuses_a_negative_size():
    with pytest.raises(InvalidReceiveError, match="size = -1"):
        NetworkReceive(10).feed(struct.pack(">i", -1))


def test_network_receive_accepts_a_frame_of_exactly_the_limit():
    receive = NetworkReceive(3)
    receive.feed(frame(b"abc"))
    assert receive.next_frame() == b"abc"


# --- the server -------------------------------------------------------------------


def test_a_request_is_answered(server):
    with server.connect() as sock:
        sock.sendall(frame(b"hello"))
        assert read_frame(sock) == b"hello"


def test_pipelined_requests_are_answered_in_order_one_at_a_time(server):
    payloads = [f"slow:0.0{i % 3}".encode() for i in range(20)]
    with server.connect() as sock:
        sock.sendall(b"".join(frame(p) for p in payloads))
        assert [read_frame(sock) for _ in payloads] == payloads
    assert server.handler.max_in_flight == 1


def test_a_no_op_response_lets_the_connection_read_its_next_request(server):
    with server.connect() as sock:
        sock.sendall(frame(b"noop") + frame(b"after"))
        assert read_frame(sock) == b"after"


def test_a_close_response_closes_only_that_connection(server):
    with server.connect() as other, server.connect() as sock:
        sock.sendall(frame(b"close"))
        assert is_closed(sock)
        other.sendall(frame(b"still here"))
        assert read_frame(other) == b"still here"


def test_a_handler_error_closes_the_connection_and_the_server_keeps_serving(server):
    with server.connect() as sock:
        sock.sendall(frame(b"boom"))
        assert is_closed(sock)
    with server.connect() as sock:
        sock.sendall(frame(b"ok"))
        assert read_frame(sock) == b"ok"


def test_a_frame_above_socket_request_max_bytes_closes_the_connection():
    s = Server(**{"socket.request.max.bytes": 1000}).start()
    try:
        with s.connect() as other, s.connect() as sock:
            sock.sendall(struct.pack(">i", 1001))
            assert is_closed(sock)
            other.sendall(frame(b"x" * 1000))
            assert read_frame(other) == b"x" * 1000
    finally:
        s.stop()


def test_a_negative_frame_size_closes_the_connection(server):
    with server.connect() as sock:
        sock.sendall(struct.pack(">i", -1))
        assert is_closed(sock)


def test_a_large_response_is_written_whole(server):
    payload = bytes(range(256)) * 40_000  # 10 MB: many partial writes
    with server.connect() as sock:
        sock.sendall(frame(payload))
        assert read_frame(sock) == payload


def test_a_response_in_several_buffers_is_written_whole_and_in_order(server):
    request = b"parts:400000"
    with server.connect() as sock:
        sock.sendall(frame(request) + frame(b"after"))
        assert read_frame(sock) == request * 400_000  # 4.8 MB
        assert read_frame(sock) == b"after"


def test_connections_beyond_max_connections_wait_until_one_closes():
    s = Server(**{"max.connections": 1}).start()
    try:
        first = s.connect()
        first.sendall(frame(b"one"))
        assert read_frame(first) == b"one"
        with s.connect() as second:  # the kernel completes the handshake; the broker does not accept
            second.sendall(frame(b"two"))
            second.settimeout(0.5)
            with pytest.raises(socket.timeout):
                second.recv(1)
            first.close()
            second.settimeout(TIMEOUT_S)
            assert read_frame(second) == b"two"
    finally:
        s.stop()


def test_idle_connections_are_closed_after_connections_max_idle_ms():
    clock = MockTime(current_time_ms=1_000)
    s = Server(clock=clock, **{"connections.max.idle.ms": 1000}).start()

    def advance(ms: int) -> None:
        clock.sleep(ms)
        for p in s.socket_server.processors:
            p.wakeup()

    try:
        with s.connect() as sock:
            sock.sendall(frame(b"hi"))
            assert read_frame(sock) == b"hi"
            advance(500)
            sock.sendall(frame(b"still"))
            assert read_frame(sock) == b"still"
            # The processor may still be finishing that write (which counts as
            # activity), so keep moving time until it notices the idleness.
            sock.settimeout(0.2)
            deadline = time.monotonic() + TIMEOUT_S
            closed = False
            while not closed and time.monotonic() < deadline:
                advance(1001)
                try:
                    closed = sock.recv(1) == b""
                except socket.timeout:
                    pass
            assert closed
    finally:
        s.stop()


def test_graceful_shutdown_answers_the_request_in_flight():
    s = Server().start()
    with s.connect() as sock:
        sock.sendall(frame(b"slow:0.5"))
        deadline = time.monotonic() + TIMEOUT_S
        while not s.handler.seen and time.monotonic() < deadline:
            time.sleep(0.01)
        s.stop()
        assert read_frame(sock) == b"slow:0.5"
        assert is_closed(sock)
    assert s.socket_server.connection_count == 0


def test_the_listener_binds_an_ephemeral_port_and_reports_it(server):
    assert server.port > 0
    assert server.socket_server.bound_endpoints[0].port == server.port
