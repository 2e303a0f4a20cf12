"""Size-prefixed frames out of a byte stream (Kafka's ``NetworkReceive``), without sockets.

Every Kafka request is an int32 big-endian size followed by that many bytes.
``NetworkReceive`` is fed whatever the socket produced and hands back complete
frames (without the size prefix) one at a time; it keeps any further bytes —
a client that pipelines requests sends the next one before the answer to the
previous — for the next call. A size below zero or above
``socket.request.max.bytes`` is refused before a byte of the body is buffered,
so a hostile length cannot make the broker allocate it.
"""

from __future__ import annotations

import struct

SIZE_LENGTH = 4
_SIZE = struct.Struct(">i")


class InvalidReceiveError(Exception):
    """The stream announced a frame size the broker will not read."""


class NetworkReceive:
    """Frame reassembly for one connection; ``max_size`` is ``socket.request.max.bytes``."""

    def __init__(self, max_size: int, source: str = "") -> None:
        if max_size < 0:
            raise ValueError(f"NetworkReceive({source}): max_size must be >= 0, got {max_size}")
        self.max_size = max_size
        self.source = source
        self._buffer = bytearray()
        self._size: int | None = None

    @property
    def buffered(self) -> int:
        """Bytes held that are not yet part of a returned frame."""
        return len(self._buffer)

    @property
    def bytes_wanted(self) -> int:
        """How many more bytes complete the frame being read (at least 1 when idle)."""
        if self._size is None:
            return max(1, SIZE_LENGTH - len(self._buffer))
        return max(0, SIZE_LENGTH + self._size - len(self._buffer))

    def feed(self, data: bytes) -> None:
        """Add bytes read from the socket; raises InvalidReceiveError on a bad size prefix."""
        self._buffer += data
        self._read_size()

    def _read_size(self) -> None:
        if self._size is not None or len(self._buffer) < SIZE_LENGTH:
            return
        (size,) = _SIZE.unpack_from(self._buffer)
        if size < 0:
            raise InvalidReceiveError(f"Invalid receive from {self.source} (size = {size})")
        if size > self.max_size:
            raise InvalidReceiveError(f"Invalid receive from {self.source} (size = {size} larger than "
                                      f"{self.max_size})")
        self._size = size

    def next_frame(self) -> bytes | None:
        """The next complete frame, without its size prefix, or None until one has arrived; raises
        InvalidReceiveError when the next frame's size prefix is bad."""
        self._read_size()
        if self._size is None or len(self._buffer) < SIZE_LENGTH + self._size:
            return None
        end = SIZE_LENGTH + self._size
        frame = bytes(self._buffer[SIZE_LENGTH:end])
        del self._buffer[:end]
        # The size after it is read when that frame is asked for: a bad one must not cost this frame.
        self._size = None
        return frame
