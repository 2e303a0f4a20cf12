"""A run of whole batches of a ``.log`` file, held to be sent as it lies (Kafka's ``FileRecords.slice``).

A ``FileSlice`` is ``size`` bytes of ``path`` from ``position``, read through a
descriptor of its own (a ``dup`` of the segment file's). Owning its descriptor
is what makes it safe to plan a send now and do it later: the handle cache
closing the segment's idle descriptor, retention deleting the segment or the
cleaner swapping it out all leave the slice's bytes readable, since a removed
or renamed file stays readable through a descriptor open on it. Only a
truncation of the same file changes them; whoever sends a slice checks the
file still reaches its end (``ensure_whole``) and gives up on the send if not,
since the size was already promised to the reader.

It is a value of the format layer: no sockets. ``len()`` is its size, so code
that only counts bytes (the fetch's limits) takes it as it takes ``bytes``;
``read()`` copies it into memory. Its owner ``close``s it once it is sent or
dropped; ``release`` does that for any records object, a slice or not.
"""

from __future__ import annotations

import os
import threading

from .errors import CorruptRecordError


class FileSliceTruncatedError(CorruptRecordError):
    """The file no longer holds the whole slice (it was truncated after the slice was planned)."""


class FileSlice:
    """``size`` bytes of ``path`` from ``position``, through descriptor ``fd``, which the slice owns."""

    __slots__ = ("path", "fd", "position", "size", "_lock")

    def __init__(self, path: str, fd: int, position: int, size: int) -> None:
        if position < 0 or size < 0:
            raise ValueError(f"{path}: invalid slice of {size} bytes at position {position}")
        self.path = path
        self.fd = fd
        self.position = position
        self.size = size
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileSlice({self.path}, position={self.position}, size={self.size})"

    def __len__(self) -> int:
        return self.size

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def ensure_whole(self) -> None:
        """Raise ``FileSliceTruncatedError`` if the file now ends before the slice does."""
        size = os.fstat(self.fd).st_size
        if size < self.position + self.size:
            raise FileSliceTruncatedError(f"the file was truncated to {size} bytes under a planned send of "
                                          f"{self.size} bytes", path=self.path, position=self.position)

    def read(self) -> bytes:
        """The slice's bytes, copied into memory (``FileSliceTruncatedError`` if the file lost some)."""
        data = os.pread(self.fd, self.size, self.position) if self.size else b""
        if len(data) < self.size:
            raise FileSliceTruncatedError(f"the file ends {self.size - len(data)} bytes before the end of a "
                                          f"{self.size}-byte slice", path=self.path, position=self.position)
        return data

    def close(self) -> None:
        """Close the slice's descriptor; closing again does nothing."""
        with self._lock:
            fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def release(records: object) -> None:
    """Close ``records`` if it is a ``FileSlice`` (bytes need nothing)."""
    if isinstance(records, FileSlice):
        records.close()
