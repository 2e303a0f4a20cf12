"""How a connection's bytes travel: in the clear or through TLS (Kafka's TransportLayer).

The processor's selector loop never blocks, so TLS here is ``ssl.SSLObject``
over two ``MemoryBIO``s: bytes read from the socket go into the incoming BIO,
the TLS engine's output is collected from the outgoing BIO and written to the
socket when it takes it. Both layers offer the same non-blocking calls:

* ``handshake()`` — advance the TLS handshake (nothing to do in the clear);
  ``ready`` once done; raises ``OSError`` (``ssl.SSLError`` included) when the
  peer is not speaking TLS or fails it;
* ``read(n)`` — application bytes; ``b""`` at end of stream;
  ``BlockingIOError`` when nothing is readable yet (a TLS record half arrived);
* ``write(buffers)`` — application bytes taken; ``BlockingIOError`` when the
  socket takes nothing now; ``flush()`` is True once everything taken is on
  the wire, ``pending_writes`` until then;
* ``transfer_from(fd, position, count)`` — like ``write``, of the bytes of an
  open file (Kafka's ``transferFrom``): in the clear the kernel sends them
  from the page cache (``sendfile``), never through the process; TLS must
  encrypt them, so it reads them into memory first. 0 means the file ends
  at ``position``;
* ``close()`` — a TLS connection says ``close_notify`` first (best effort).

``peer_principal()`` is the verified client certificate's subject
(``User:CN=...``), None without one.
"""

from __future__ import annotations

import os
import socket
import ssl
from typing import Callable, Sequence

from .principal import KafkaPrincipal
from .ssl_principal import certificate_principal

# What one read from the socket asks for at least: a whole TLS record (16 KiB and its overhead).
_TLS_RECORD = 16 * 1024 + 512
# Application bytes encrypted per write call, so a 100 MiB response is not encrypted in one go.
_MAX_ENCRYPT = 256 * 1024


class PlaintextTransportLayer:
    """The socket as it is."""

    ready = True
    pending_writes = False

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        # The socket's own calls: a PLAINTEXT request costs no call in between.
        self.read: Callable[[int], bytes] = sock.recv
        self.write: Callable[[Sequence[memoryview]], int] = sock.sendmsg

    def handshake(self) -> None:
        pass

    def transfer_from(self, fd: int, position: int, count: int) -> int:
        return os.sendfile(self.sock.fileno(), fd, position, count)

    def flush(self) -> bool:
        return True

    def peer_principal(self) -> KafkaPrincipal | None:
        return None

    def close(self) -> None:
        self.sock.close()


class SslTransportLayer:
    """TLS, server side, over a non-blocking socket."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, *, server_side: bool = True,
                 server_hostname: str | None = None) -> None:
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side,
                                     server_hostname=server_hostname)
        self._net_out = bytearray()  # TLS bytes the socket has not taken yet
        self._peer_closed = False  # close_notify or end of stream seen
        self._failed = False
        self.ready = False

    # -- handshake --

    def handshake(self) -> None:
        if self.ready:
            return
        try:
            while True:
                try:
                    self._ssl.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    self._collect()
                    if not self.flush():
                        return  # let the peer read our part first
                    if not self._fill():
                        return  # wait for the peer's next message
        except (ssl.SSLError, OSError):
            self._failed = True
            self._collect()
            self.flush()  # the alert, if the socket takes it
            raise
        self._collect()
        self.flush()
        self.ready = True

    def _fill(self) -> bool:
        """Move what the socket has into the TLS engine; False when it had nothing yet."""
        try:
            data = self.sock.recv(_TLS_RECORD * 4)
        except (BlockingIOError, InterruptedError):
            return False
        if not data:
            self._peer_closed = True
            raise ConnectionResetError("the peer closed the connection during the TLS handshake")
        self._incoming.write(data)
        return True

    # -- reading --

    def read(self, max_bytes: int) -> bytes:
        if self._peer_closed:
            return b""
        try:
            data: bytes | None = self.sock.recv(max(max_bytes, _TLS_RECORD))
        except (BlockingIOError, InterruptedError):
            if not self._incoming.pending and not self._ssl.pending():
                raise
            data = None  # records that came with the handshake's last message are still to decrypt
        if data == b"":
            self._peer_closed = True
            self._incoming.write_eof()
        elif data:
            self._incoming.write(data)
        out = bytearray()
        # Decrypt everything that arrived: bytes left inside the TLS engine would wake no selector.
        while True:
            try:
                chunk = self._ssl.read(_MAX_ENCRYPT)
            except ssl.SSLWantReadError:
                break
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                self._peer_closed = True
                break
            if not chunk:  # close_notify (SSLObject answers it with no bytes)
                self._peer_closed = True
                break
            out += chunk
        self._collect()  # TLS 1.3 key updates and the like answer at once
        self.flush()
        if out:
            return bytes(out)
        if self._peer_closed:
            return b""
        raise BlockingIOError("a TLS record is not complete yet")

    # -- writing --

    def write(self, buffers: Sequence[memoryview]) -> int:
        if not self.flush():
            raise BlockingIOError("the socket takes no more")
        taken = 0
        for buffer in buffers:
            view = memoryview(buffer)
            while view and taken < _MAX_ENCRYPT:
                n = self._ssl.write(view[:_MAX_ENCRYPT - taken])
                taken += n
                view = view[n:]
            if taken >= _MAX_ENCRYPT:
                break
        self._collect()
        self.flush()
        return taken

    def transfer_from(self, fd: int, position: int, count: int) -> int:
        if not self.flush():
            raise BlockingIOError("the socket takes no more")
        data = os.pread(fd, min(count, _MAX_ENCRYPT), position)
        return self.write([memoryview(data)]) if data else 0

    def _collect(self) -> None:
        pending = self._outgoing.pending
        if pending:
            self._net_out += self._outgoing.read(pending)

    def flush(self) -> bool:
        while self._net_out:
            try:
                sent = self.sock.send(self._net_out)
            except (BlockingIOError, InterruptedError):
                return False
            del self._net_out[:sent]
        return True

    @property
    def pending_writes(self) -> bool:
        return bool(self._net_out)

    # -- who, and goodbye --

    def peer_principal(self) -> KafkaPrincipal | None:
        return certificate_principal(self._ssl.getpeercert()) if self.ready else None

    def close(self) -> None:
        try:
            if self.ready and not self._failed:
                try:
                    self._ssl.unwrap()
                except ssl.SSLError:
                    pass  # the peer's close_notify has not come (and is not waited for)
                self._collect()
                self.flush()
        except OSError:
            pass
        finally:
            self.sock.close()
