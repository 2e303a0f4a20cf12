"""A loopback proxy in front of a broker that records the request frames clients send through it, and
replaying recorded frames on a raw socket: how the fetch tests see exactly what each real client asks for
and compare the broker's answers to the same requests byte for byte."""

from __future__ import annotations

import socket
import struct
import threading

from broker_core.protocol import ApiKey, encode_request, parse_request
from server_kit import read_exactly, read_frame

TIMEOUT_S = 20
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")


class RecordingProxy:
    """Forwards every connection to the broker at ``start(port)``; ``frames(api_key)`` are the request frames
    (without size prefix) of that API the clients sent, in the order they were sent."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._frames: list[bytes] = []
        self._sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._target = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, target_port: int) -> "RecordingProxy":
        self._target = target_port
        self._acceptor.start()
        return self

    def frames(self, api_key: ApiKey) -> list[bytes]:
        with self._lock:
            return [f for f in self._frames if _API_KEY.unpack_from(f)[0] == api_key]

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            broker = socket.create_connection(("127.0.0.1", self._target), timeout=TIMEOUT_S)
            client.settimeout(None)
            broker.settimeout(None)
            with self._lock:
                self._sockets += [client, broker]
            threading.Thread(target=self._requests, args=(client, broker), daemon=True).start()
            threading.Thread(target=self._responses, args=(broker, client), daemon=True).start()

    def _requests(self, client: socket.socket, broker: socket.socket) -> None:
        try:
            while True:
                frame = read_exactly(client, _SIZE.unpack(read_exactly(client, 4))[0])
                with self._lock:
                    self._frames.append(frame)
                broker.sendall(_SIZE.pack(len(frame)) + frame)
        except OSError:
            _close(client, broker)

    @staticmethod
    def _responses(broker: socket.socket, client: socket.socket) -> None:
        try:
            while True:
                data = broker.recv(1 << 20)
                if not data:
                    break
                client.sendall(data)
        except OSError:
            pass
        _close(client, broker)

    def stop(self) -> None:
        self._stop.set()
        self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            _close(*self._sockets)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


def without_session(frame: bytes) -> bytes:
    """A recorded Fetch request frame made a full fetch outside any session that answers at once
    (``session_id`` 0, ``session_epoch`` -1, ``max_wait_ms`` 0), size prefix added: the same answer whichever
    broker gets it, whatever sessions the client had."""
    request = parse_request(frame)
    body = dict(request.body)
    body.update(max_wait_ms=0)
    if "session_id" in body:
        body.update(session_id=0, session_epoch=-1)
    header = request.header
    return encode_request(ApiKey.FETCH, header.api_version, header.correlation_id, header.client_id, body)


def replay(port: int, frames: list[bytes]) -> list[bytes]:
    """Send each (size-prefixed) request frame on one connection, in order; the response frames."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        answers = []
        for frame in frames:
            sock.sendall(frame)
            answers.append(read_frame(sock))
        return answers
