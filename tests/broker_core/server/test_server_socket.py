"""The socket server with a stand-in handler: framing, ordering, limits, idleness, shutdown."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from broker_core.clock import MockTime
from broker_core.network.network_receive import InvalidReceiveError, NetworkReceive

from server_kit import read_frame
from socket_server_kit import TIMEOUT_S, Server, closed_by_server, frame



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
        assert closed_by_server(sock)
        other.sendall(frame(b"still here"))
        assert read_frame(other) == b"still here"


def test_a_handler_error_closes_the_connection_and_the_server_keeps_serving(server):
    with server.connect() as sock:
        sock.sendall(frame(b"boom"))
        assert closed_by_server(sock)
    with server.connect() as sock:
        sock.sendall(frame(b"ok"))
        assert read_frame(sock) == b"ok"


def test_a_frame_above_socket_request_max_bytes_closes_the_connection():
    s = Server(**{"socket.request.max.bytes": 1000}).start()
    try:
        with s.connect() as other, s.connect() as sock:
            sock.sendall(struct.pack(">i", 1001))
            assert closed_by_server(sock)
            other.sendall(frame(b"x" * 1000))
            assert read_frame(other) == b"x" * 1000
    finally:
        s.stop()


def test_a_negative_frame_size_closes_the_connection(server):
    with server.connect() as sock:
        sock.sendall(struct.pack(">i", -1))
        assert closed_by_server(sock)


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
        assert closed_by_server(sock)
    assert s.socket_server.connection_count == 0


def test_the_listener_binds_an_ephemeral_port_and_reports_it(server):
    assert server.port > 0
    assert server.socket_server.bound_endpoints[0].port == server.port


def test_a_frame_followed_by_a_bad_size_in_the_same_write_closes_only_that_connection(server):
    with server.connect() as witness, server.connect() as sock:
        sock.sendall(frame(b"fine") + struct.pack(">i", -7))
        assert read_frame(sock) == b"fine"
        assert closed_by_server(sock)
        witness.sendall(frame(b"still here"))
        assert read_frame(witness) == b"still here"
