"""A network thread: reads requests from its connections and writes their responses (Kafka's Processor).

Each processor owns a set of non-blocking client sockets and one selector.
Its loop, like Kafka's, takes on connections the acceptor handed over, takes
the responses the handlers produced, polls, reads and writes, and closes
connections idle longer than ``connections.max.idle.ms``.

One request per connection is in flight at a time: once a complete frame is
read the connection is *muted* (no more reads) until its response has been
written, so responses leave in request order and a client cannot make the
broker buffer its whole pipeline. Bytes of the next request that arrived with
the previous one stay in the connection's ``NetworkReceive`` and are
dispatched as soon as the connection is unmuted.

A frame whose size prefix is negative or above ``socket.request.max.bytes``
closes the connection; so do read and write errors. None of that touches
other connections.

A response may hold records as ``FileSlice``s of segment files (a fetch on a
plaintext listener, Kafka's zero copy): the framing bytes go out with
``sendmsg``, each slice with the transport's ``transfer_from`` (``sendfile``
in the clear), from the slice's own descriptor, resuming where a partial send
stopped. A slice whose file was truncated after the response was planned
cannot be sent as promised (its size is in the frame already): that
connection is closed, with a log line naming the file and position. Every
slice's descriptor is closed once it is sent, or when its connection closes
first, its response finds the connection gone, or the processor shuts down.

Bytes move through the connection's transport layer, built by its listener's
``ChannelBuilder``: the socket itself, or TLS — whose handshake completes
before any frame is read, and whose failure (a plaintext client on a TLS
port, garbage) closes that connection only. Every request carries the
connection's principal (its client certificate's subject, else
``User:ANONYMOUS``) and its listener's security protocol.

For the metrics, a processor counts the time it spends waiting in its
selector (``idle_ns``: Kafka's ``NetworkProcessorAvgIdlePercent`` comes from
it), stamps when it takes each response and records the request's times
with the channel's ``RequestMetrics`` once the response is written.

On SASL listeners the connection's ``SaslServerAuthenticator`` answers
every frame, in this thread, until authentication completes: ApiVersions,
SaslHandshake and SaslAuthenticate; anything else closes the connection
before a handler sees it, and so does a failed exchange (after its error
response). Authenticated, the principal is the SASL user's; a SaslHandshake
on the connection starts re-authentication (KIP-368), and any other request
after the session expired (``connections.max.reauth.ms``) closes it.
"""

from __future__ import annotations

import logging
import queue
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping

from format.file_slice import FileSlice, FileSliceTruncatedError

from ..clock import SYSTEM_CLOCK, Clock
from ..protocol import ApiKey
from ..security.principal import ANONYMOUS, KafkaPrincipal
from ..security.sasl_authenticator import SaslAuthenticationFailed, SaslServerAuthenticator
from ..security.transport_layer import PlaintextTransportLayer, SslTransportLayer
from .channel_builder import ChannelBuilder
from .connection_quotas import ConnectionQuotas
from .network_receive import InvalidReceiveError, NetworkReceive
from .request_channel import (CloseConnectionResponse, NoOpResponse, Request, RequestChannel, Response, SendResponse,
                              release)
from .request_metrics import now_ns

log = logging.getLogger(__name__)

# Kafka's processor polls for 300 ms at most, so it looks at new connections
# and responses at least that often even when no socket is ready.
POLL_TIMEOUT_S = 0.3
_MIN_RECV = 64 * 1024
# One recv never asks for more: a 100 MiB request arrives in slices rather
# than as one 100 MiB allocation per call.
_MAX_RECV = 1024 * 1024
# Buffers handed to one sendmsg, well below the system's IOV_MAX (1024 on Linux).
_MAX_BUFFERS_PER_WRITE = 64
# How long a processor blocked on a full request queue waits before looking
# whether it is being shut down.
_QUEUE_RETRY_S = 0.3
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")


@dataclass(eq=False)
class _FileSend:
    """A file slice of the response being written, and how much of it the socket took."""

    records: FileSlice
    sent: int = 0


def _send_buffers(payload) -> list[memoryview | _FileSend]:
    """A response's payload as what ``_write`` writes: memoryviews and file sends, empty ones left out."""
    buffers = [payload] if isinstance(payload, (bytes, bytearray, memoryview)) else payload
    out: list[memoryview | _FileSend] = []
    for buffer in buffers:
        if isinstance(buffer, FileSlice):
            if len(buffer):
                out.append(_FileSend(buffer))
            else:
                buffer.close()
        elif len(buffer):
            out.append(memoryview(buffer))
    return out


def _release_sends(buffers: list[memoryview | _FileSend] | None) -> None:
    for buffer in buffers or ():
        if isinstance(buffer, _FileSend):
            buffer.records.close()


def _advance(buffers: list[memoryview], sent: int) -> None:
    """Drop the ``sent`` bytes written from the front of ``buffers``."""
    while sent and buffers:
        first = buffers[0]
        if sent >= len(first):
            sent -= len(first)
            del buffers[0]
        else:
            buffers[0] = first[sent:]
            sent = 0


@dataclass(eq=False)
class _Connection:
    """A client connection and its read/write state."""

    connection_id: str
    sock: socket.socket
    address: tuple[str, int]
    listener_name: str
    receive: NetworkReceive
    last_active_ms: int
    transport: PlaintextTransportLayer | SslTransportLayer
    security_protocol: str
    principal: KafkaPrincipal = ANONYMOUS
    authenticator_factory: object = None  # SASL listeners: builds ``authenticator`` once the transport is ready
    authenticator: SaslServerAuthenticator | None = None
    close_after_send: bool = False  # a SASL failure's response is being written
    muted: bool = False  # a request is with the handlers
    # The rest of the response being written, buffer by buffer (file slices as _FileSend).
    send: list[memoryview | _FileSend] | None = None
    answering: Request | None = None  # the request whose response is being written (its metrics follow)
    events: int = 0  # what the selector watches for
    closed: bool = field(default=False)


class Processor(threading.Thread):
    """One network thread; ``accept`` hands it sockets, ``enqueue_response`` answers."""

    def __init__(self, processor_id: int, request_channel: RequestChannel, connection_quotas: ConnectionQuotas,
                 *, max_request_size: int, connections_max_idle_ms: int, clock: Clock = SYSTEM_CLOCK,
                 channel_builders: Mapping[str, ChannelBuilder] | None = None, send_buffer_bytes: int = -1) -> None:
        super().__init__(name=f"data-plane-network-thread-{processor_id}", daemon=True)
        self.processor_id = processor_id
        self.request_channel = request_channel
        self.connection_quotas = connection_quotas
        self.max_request_size = max_request_size
        self.connections_max_idle_ms = connections_max_idle_ms
        self.send_buffer_bytes = send_buffer_bytes  # SO_SNDBUF of each connection; -1: the OS's (autotuned)
        self.clock = clock
        # Per listener name; a listener without one is PLAINTEXT.
        self.channel_builders = dict(channel_builders or {})
        self._selector = selectors.DefaultSelector()
        self._wakeup_r, self._wakeup_w = socket.socketpair()
        self._wakeup_r.setblocking(False)
        self._wakeup_w.setblocking(False)
        self._selector.register(self._wakeup_r, selectors.EVENT_READ, None)
        self._new_connections: queue.SimpleQueue[tuple[socket.socket, tuple[str, int], str]] = queue.SimpleQueue()
        self._responses: queue.SimpleQueue[Response] = queue.SimpleQueue()
        self._connections: dict[str, _Connection] = {}
        self._next_index = 0
        self._reading = True
        self._running = True
        self._drain_deadline: float | None = None
        self._stopped = threading.Event()
        self.bytes_sent_from_files = 0  # records sent with transfer_from (zero copy in the clear)
        self.idle_ns = 0  # time spent waiting in the selector (written by this thread only)
        self._request_metrics = request_channel.metrics
        request_channel.add_processor(processor_id, self)

    # -- called from other threads ------------------------------------------

    def accept(self, sock: socket.socket, address: tuple[str, int], listener_name: str) -> None:
        """Take over an accepted socket (from the acceptor thread)."""
        self._new_connections.put((sock, address, listener_name))
        self.wakeup()

    def enqueue_response(self, response: Response) -> None:
        """Queue a handler's response for this processor's connection (from any thread)."""
        self._responses.put(response)
        if self._stopped.is_set():
            self._drop_responses()  # no loop will take it: its file slices are closed here
        self.wakeup()

    def wakeup(self) -> None:
        """Cut the current poll short."""
        try:
            self._wakeup_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (a wake-up is pending anyway) or closed (shut down)

    def stop_reading(self) -> None:
        """Dispatch no more requests; responses to those in flight are still written."""
        self._reading = False
        self.wakeup()

    def shutdown(self, drain_timeout_ms: int = 0) -> None:
        """Write what is queued (for up to ``drain_timeout_ms``), close every connection and stop."""
        # Real time, not the injected clock: a simulated clock would never let the drain end.
        self._drain_deadline = time.monotonic() + drain_timeout_ms / 1000
        self._running = False
        self.wakeup()
        if self.is_alive():
            self.join()
        else:
            self._close_all()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def connection_counts(self) -> dict[str, int]:
        """Open connections by listener name (from any thread)."""
        counts: dict[str, int] = {}
        for conn in list(self._connections.values()):  # list() copies in one step: the loop may change the dict
            counts[conn.listener_name] = counts.get(conn.listener_name, 0) + 1
        return counts

    @property
    def response_queue_size(self) -> int:
        """Responses handed to this processor and not yet taken (Kafka's ResponseQueueSize)."""
        return self._responses.qsize()

    # -- the loop --------------------------------------------------------------

    def run(self) -> None:
        try:
            while self._running or self._draining():
                try:
                    self._configure_new_connections()
                    self._process_new_responses()
                    self._poll(POLL_TIMEOUT_S)
                    self._close_idle_connections()
                except Exception:
                    # A bug here must not take every connection of the thread down with it.
                    log.exception("Processor %d: unexpected error in the network loop", self.processor_id)
        finally:
            self._close_all()

    def _draining(self) -> bool:
        """While shutting down: keep going as long as responses remain to be written, up to the deadline."""
        if self._drain_deadline is None or time.monotonic() >= self._drain_deadline:
            return False
        return not self._responses.empty() or any(c.send is not None for c in self._connections.values())

    def _configure_new_connections(self) -> None:
        while True:
            try:
                sock, address, listener_name = self._new_connections.get_nowait()
            except queue.Empty:
                return
            if not self._running:
                self._release(sock)
                continue
            try:
                sock.setblocking(False)
                if self.send_buffer_bytes != -1:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
                local = sock.getsockname()
                connection_id = f"{local[0]}:{local[1]}-{address[0]}:{address[1]}-{self._next_index}"
            except OSError as exc:
                log.debug("Processor %d: connection from %s failed before setup: %s", self.processor_id,
                          address, exc)
                self._release(sock)
                continue
            self._next_index += 1
            builder = self.channel_builders.get(listener_name) or ChannelBuilder.plaintext(listener_name)
            conn = _Connection(connection_id, sock, address, listener_name,
                               NetworkReceive(self.max_request_size, connection_id),
                               self.clock.hi_res_clock_ms(), builder.transport_layer(sock),
                               builder.security_protocol, authenticator_factory=builder.authenticator_factory)
            self._connections[connection_id] = conn
            if conn.transport.ready:
                self._transport_ready(conn)
            self._update_interest(conn)

    def _process_new_responses(self) -> None:
        while True:
            try:
                response = self._responses.get_nowait()
            except queue.Empty:
                return
            request = response.request
            request.times.response_dequeue_ns = now_ns()
            conn = self._connections.get(request.connection_id)
            if conn is None or conn.closed:
                release(response)  # the client went away while its request was handled
                continue
            if isinstance(response, SendResponse):
                conn.send = _send_buffers(response.payload)
                conn.answering = request
                self._write(conn)
            elif isinstance(response, NoOpResponse):
                self._request_metrics.record(request.frame, request.times)
                self._unmute(conn)
            elif isinstance(response, CloseConnectionResponse):
                log.debug("Processor %d: closing %s: %s", self.processor_id, conn.connection_id, response.reason)
                self._request_metrics.record(request.frame, request.times)
                self._close(conn)

    def _poll(self, timeout_s: float) -> None:
        waiting_since = now_ns()
        ready = self._selector.select(timeout_s)
        self.idle_ns += now_ns() - waiting_since
        for key, mask in ready:
            conn = key.data
            if conn is None:
                self._drain_wakeups()
                continue
            if conn.closed:
                continue
            if not conn.transport.ready:
                self._handshake(conn)
                continue
            if mask & selectors.EVENT_WRITE:
                self._write(conn)
            if mask & selectors.EVENT_READ and not conn.closed:
                self._read(conn)

    def _drain_wakeups(self) -> None:
        try:
            while self._wakeup_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    # -- the TLS handshake ---------------------------------------------------

    def _handshake(self, conn: _Connection) -> None:
        try:
            conn.transport.handshake()
        except OSError as exc:
            log.info("Processor %d: closing %s from %s: failed authentication (TLS handshake: %s)",
                     self.processor_id, conn.connection_id, conn.address[0], exc)
            self._close(conn)
            return
        conn.last_active_ms = self.clock.hi_res_clock_ms()
        if not conn.transport.ready:
            self._update_interest(conn)
            return
        self._transport_ready(conn)
        self._update_interest(conn)
        self._read(conn)  # requests may have come with the handshake's last message

    def _transport_ready(self, conn: _Connection) -> None:
        transport_principal = conn.transport.peer_principal()
        conn.principal = transport_principal or ANONYMOUS
        if conn.authenticator_factory is not None:
            conn.authenticator = conn.authenticator_factory(transport_principal)

    # -- reading -------------------------------------------------------------

    def _read(self, conn: _Connection) -> None:
        want = min(max(conn.receive.bytes_wanted, _MIN_RECV), _MAX_RECV)
        try:
            data = conn.transport.read(want)
        except (BlockingIOError, InterruptedError):
            self._update_interest(conn)  # TLS may have an answer of its own to write
            return
        except OSError as exc:
            log.debug("Processor %d: read from %s failed: %s", self.processor_id, conn.connection_id, exc)
            self._close(conn)
            return
        if not data:
            self._close(conn)  # the client closed its side
            return
        conn.last_active_ms = self.clock.hi_res_clock_ms()
        if conn.transport.pending_writes:
            self._update_interest(conn)
        try:
            conn.receive.feed(data)
        except InvalidReceiveError as exc:
            log.warning("Processor %d: closing %s: %s", self.processor_id, conn.connection_id, exc)
            self._close(conn)
            return
        self._maybe_dispatch(conn)

    def _maybe_dispatch(self, conn: _Connection) -> None:
        """Hand the next complete frame to the handlers, unless one is in flight already."""
        if conn.muted or conn.closed or not self._reading:
            return
        try:
            frame = conn.receive.next_frame()
        except InvalidReceiveError as exc:  # the size of the frame after the one just taken
            log.warning("Processor %d: closing %s: %s", self.processor_id, conn.connection_id, exc)
            self._close(conn)
            return
        if frame is None:
            return
        if conn.authenticator is not None and not self._authenticated(conn, frame):
            return
        conn.muted = True
        self._update_interest(conn)
        request = Request(self.processor_id, conn.connection_id, conn.listener_name, conn.address, frame,
                          conn.principal, conn.security_protocol)
        while not self.request_channel.send_request(request, timeout_s=_QUEUE_RETRY_S):
            if not self._running:
                self._close(conn)
                return

    # -- SASL --------------------------------------------------------------------

    def _authenticated(self, conn: _Connection, frame: bytes) -> bool:
        """Whether ``frame`` goes on to the handlers; if not, the authenticator took it (or it closed ``conn``)."""
        authenticator = conn.authenticator
        if authenticator.complete:
            if len(frame) >= _API_KEY.size and _API_KEY.unpack_from(frame)[0] == ApiKey.SASL_HANDSHAKE:
                authenticator.begin_reauthentication()
            else:
                expiration = authenticator.session_expiration_ms
                if expiration is not None and self.clock.hi_res_clock_ms() > expiration:
                    log.info("Processor %d: closing %s from %s (%s): its session expired and it did not "
                             "re-authenticate", self.processor_id, conn.connection_id, conn.address[0],
                             conn.principal)
                    self._close(conn)
                    return False
                return True
        conn.muted = True
        try:
            response = authenticator.receive(frame)
        except SaslAuthenticationFailed as exc:
            log.info("Processor %d: closing %s from %s: failed authentication (%s)", self.processor_id,
                     conn.connection_id, conn.address[0], exc.reason)
            if exc.response is None:
                self._close(conn)
            else:
                conn.close_after_send = True
                self._send_frame(conn, exc.response)
            return False
        if authenticator.complete:
            conn.principal = authenticator.principal
        if response is None:
            self._unmute(conn)
        else:
            self._send_frame(conn, response)
        return False

    def _send_frame(self, conn: _Connection, payload: bytes) -> None:
        """Write one frame the processor answers itself (the authenticator's), size prefix added."""
        # An empty frame (PLAIN's empty challenge after a v0 handshake) is its size prefix alone: an empty
        # buffer would never be "written".
        conn.send = [memoryview(_SIZE.pack(len(payload)))] + ([memoryview(payload)] if payload else [])
        self._write(conn)

    def _unmute(self, conn: _Connection) -> None:
        conn.muted = False
        conn.last_active_ms = self.clock.hi_res_clock_ms()
        self._update_interest(conn)
        self._maybe_dispatch(conn)

    # -- writing -------------------------------------------------------------

    def _write(self, conn: _Connection) -> None:
        if conn.send is None:
            try:
                conn.transport.flush()  # TLS's own messages (a key update's answer)
            except OSError as exc:
                log.debug("Processor %d: write to %s failed: %s", self.processor_id, conn.connection_id, exc)
                self._close(conn)
                return
            self._update_interest(conn)
            return
        try:
            while conn.send:
                head = conn.send[0]
                if isinstance(head, _FileSend):
                    self._transfer(conn, head)
                else:
                    buffers = []
                    for buffer in conn.send:
                        if isinstance(buffer, _FileSend) or len(buffers) == _MAX_BUFFERS_PER_WRITE:
                            break
                        buffers.append(buffer)
                    _advance(conn.send, conn.transport.write(buffers))
                conn.last_active_ms = self.clock.hi_res_clock_ms()  # a slow reader is still active
            if conn.transport.pending_writes and not conn.transport.flush():  # TLS bytes the socket has not taken
                raise BlockingIOError
        except (BlockingIOError, InterruptedError):
            self._update_interest(conn)  # wait until the socket takes more
            return
        except FileSliceTruncatedError as exc:
            log.error("Processor %d: closing %s: a fetch response cannot be completed: %s", self.processor_id,
                      conn.connection_id, exc)
            self._close(conn)
            return
        except OSError as exc:
            log.debug("Processor %d: write to %s failed: %s", self.processor_id, conn.connection_id, exc)
            self._close(conn)
            return
        conn.send = None
        answered = conn.answering
        if answered is not None:
            conn.answering = None
            self._request_metrics.record(answered.frame, answered.times)
        if conn.close_after_send:
            self._close(conn)
            return
        self._unmute(conn)

    def _transfer(self, conn: _Connection, send: _FileSend) -> None:
        """Send what the socket takes of a file slice; drop it from ``conn.send`` once all of it went."""
        records = send.records
        count = records.size - send.sent
        sent = conn.transport.transfer_from(records.fd, records.position + send.sent, count)
        if sent == 0:  # sendfile met the end of the file before the slice's: truncated after the plan
            records.ensure_whole()  # raises, saying how short the file is now
            raise FileSliceTruncatedError(f"the file ended under a planned send of {records.size} bytes",
                                          path=records.path, position=records.position)
        send.sent += sent
        self.bytes_sent_from_files += sent
        if sent == count:
            records.close()
            del conn.send[0]

    # -- selector interest, idleness and closing --------------------------------

    def _update_interest(self, conn: _Connection) -> None:
        if conn.closed:
            return
        wanted = 0
        if conn.send is not None or conn.transport.pending_writes:
            wanted |= selectors.EVENT_WRITE
        if not conn.muted or not conn.transport.ready:
            # Idle connections stay readable even while not dispatching, so a
            # client hanging up is still noticed.
            wanted |= selectors.EVENT_READ
        if wanted == conn.events:
            return
        if conn.events == 0:
            self._selector.register(conn.sock, wanted, conn)
        elif wanted == 0:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, wanted, conn)
        conn.events = wanted

    def _close_idle_connections(self) -> None:
        if self.connections_max_idle_ms < 0:
            return
        now = self.clock.hi_res_clock_ms()
        for conn in list(self._connections.values()):
            # A connection whose request is with the handlers is busy, not idle;
            # one whose response the client has stopped reading is idle (else a
            # client that never reads would hold its slot and response forever).
            waiting_for_handlers = conn.muted and conn.send is None
            if not waiting_for_handlers and now - conn.last_active_ms > self.connections_max_idle_ms:
                log.debug("Processor %d: closing %s, idle for more than %d ms", self.processor_id,
                          conn.connection_id, self.connections_max_idle_ms)
                self._close(conn)

    def _close(self, conn: _Connection) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.events:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
            conn.events = 0
        self._connections.pop(conn.connection_id, None)
        _release_sends(conn.send)
        conn.send = None
        self._release(conn.transport)

    def _drop_responses(self) -> None:
        """Release the responses no loop will write (shut down)."""
        while True:
            try:
                release(self._responses.get_nowait())
            except queue.Empty:
                return

    def _release(self, sock: socket.socket | PlaintextTransportLayer | SslTransportLayer) -> None:
        try:
            sock.close()
        finally:
            self.connection_quotas.dec()

    def _close_all(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        for conn in list(self._connections.values()):
            self._close(conn)
        while True:
            try:
                sock, _, _ = self._new_connections.get_nowait()
            except queue.Empty:
                break
            self._release(sock)
        self.request_channel.remove_processor(self.processor_id)
        self._drop_responses()
        try:
            self._selector.close()
        finally:
            self._wakeup_r.close()
            self._wakeup_w.close()
