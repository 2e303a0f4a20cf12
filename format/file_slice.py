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

Slices waiting to be sent hold descriptors, and a fetch of many partitions
makes many: ``reserve`` keeps them under a share of the process's descriptor
limit (``RLIMIT_NOFILE``), past which readers copy the bytes instead.
"""

from __future__ import annotations

import os
import threading

from .errors import CorruptRecordError
from .file_handles import descriptor_limit

# Open slices may hold at most this share of the process's descriptor limit.
_SHARE_OF_LIMIT = 4
_MIN_SLICES = 16


class FileSliceTruncatedError(CorruptRecordError):
    """The file no longer holds the whole slice (it was truncated after the slice was planned)."""


class FileSlice:
    """``size`` bytes of ``path`` from ``position``, through descriptor ``fd``, which the slice owns."""

    __slots__ = ("path", "fd", "position", "size", "_lock", "_reserved")

    def __init__(self, path: str, fd: int, position: int, size: int, *, reserved: bool = False) -> None:
        """``reserved``: the slice holds one of ``reserve``'s places, given back when it closes."""
        if position < 0 or size < 0:
            raise ValueError(f"{path}: invalid slice of {size} bytes at position {position}")
        self.path = path
        self.fd = fd
        self.position = position
        self.size = size
        self._lock = threading.Lock()
        self._reserved = reserved

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
            if self._reserved:
                _budget.give_back()


class _Budget:
    """How many slices may be open at once, counted across the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open = 0
        self.limit: int | None = None

    def take(self) -> bool:
        with self._lock:
            if self.limit is None:
                self.limit = max(_MIN_SLICES, descriptor_limit() // _SHARE_OF_LIMIT)
            if self.open >= self.limit:
                return False
            self.open += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.open -= 1


_budget = _Budget()


def reserve() -> bool:
    """Take a place for one more open slice; False when slices hold their share of the descriptor limit
    already (the caller copies instead). A slice made with ``reserved=True`` gives it back when it closes."""
    return _budget.take()


def give_back() -> None:
    """Give back a place ``reserve`` took for a slice that was not made after all."""
    _budget.give_back()


def release(records: object) -> None:
    """Close ``records`` if it is a ``FileSlice`` (bytes need nothing)."""
    if isinstance(records, FileSlice):
        records.close()
