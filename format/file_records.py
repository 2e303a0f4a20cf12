"""A ``.log`` file as a sequence of batches (Kafka's FileRecords).

Reads go through a small reader interface so the same code serves a local
file (``os.pread`` on a descriptor) and an fsspec file on object storage.
Writes — appending batches, truncating, moving a damaged tail aside — are for
the local owner only; a read-only view may be limited to the sound batches it
found (``limit_to``).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Iterator

from . import file_slice
from .errors import CorruptRecordError
from .file_handles import FileHandleCache, default_cache
from .file_slice import FileSlice
from .offset_order import OffsetOrder, OffsetOrderError
from .record_batch import (
    HEADER, LENGTH_OFFSET, LOG_OVERHEAD, CURRENT_MAGIC, MIN_BATCH_LENGTH, BatchHeader, RecordBatch, iter_batches)

# How much to read at a time when walking headers or whole batches.
HEADER_READ_AHEAD = 64 * 1024
BATCH_READ_BLOCK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LogOffsetPosition:
    """Where the batch holding an offset starts, and its size (Kafka's LogOffsetPosition)."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int


@dataclass(frozen=True, slots=True)
class ValidPrefix:
    """How far a file holds sound batches from where a check started (``valid_prefix``).

    ``end`` is the position after the last sound batch, ``next_offset`` the offset
    after it (None when none was found); ``error`` says why the bytes from ``end``
    on are not readable: corruption, or a batch that is not complete (torn, or
    still being written), which ``torn`` tells apart.
    """

    end: int
    next_offset: int | None
    error: CorruptRecordError | None = None
    torn: bool = False


class _LocalReader:
    """A local file read and written through a descriptor the handle cache may close when idle."""

    def __init__(self, path: str, writable: bool, handles: FileHandleCache | None):
        self.path = path
        self.writable = writable
        self.handles = handles or default_cache()
        self._create = writable
        self._closed = False
        with self.handles.use(self):
            pass  # opens (and creates) it now, so a missing file fails here
        self._create = False  # a reopen never brings back a file removed meanwhile

    @property
    def cache_name(self) -> str:
        return self.path

    def open_descriptor(self) -> int:
        if self._closed:
            raise ValueError(f"{self.path}: the file is closed")
        flags = (os.O_RDWR | (os.O_CREAT if self._create else 0)) if self.writable else os.O_RDONLY
        return os.open(self.path, flags, 0o644)

    def size(self) -> int:
        with self.handles.use(self) as fd:
            return os.fstat(fd).st_size

    def read_at(self, position: int, size: int) -> bytes:
        return self.handles.pread(self, size, position)

    def dup_descriptor(self) -> int:
        with self.handles.use(self) as fd:
            return os.dup(fd)

    def close(self) -> None:
        self._closed = True
        self.handles.close(self)


class _FsspecReader:
    def __init__(self, fs, path: str, size: int | None):
        self.fs = fs
        self.path = path
        self._size = size
        self.file = fs.open(path, "rb", block_size=BATCH_READ_BLOCK, cache_type="readahead")
        self.bytes_read = 0

    def size(self) -> int:
        if self._size is None:
            self._size = int(self.fs.size(self.path))
        return self._size

    def read_at(self, position: int, size: int) -> bytes:
        self.file.seek(position)
        data = self.file.read(size)
        self.bytes_read += len(data)
        return data

    def close(self) -> None:
        self.file.close()


class FileRecords:
    """The batches of one ``.log`` file."""

    def __init__(self, path: str, reader, writable: bool):
        self.path = path
        self._reader = reader
        self.writable = writable
        self._size = reader.size()

    @classmethod
    def open(cls, path: str | os.PathLike, writable: bool = True,
             handles: FileHandleCache | None = None) -> "FileRecords":
        """A local file; created when writable and missing. Its descriptor lives in ``handles``
        (the process's cache by default), closed while idle and reopened on use."""
        path = os.fspath(path)
        return cls(path, _LocalReader(path, writable, handles), writable)

    @classmethod
    def open_fs(cls, fs, path: str, size: int | None = None) -> "FileRecords":
        """A read-only file through fsspec (``size`` saves a metadata round trip)."""
        return cls(path, _FsspecReader(fs, path, size), False)

    def __repr__(self) -> str:
        return f"FileRecords({self.path}, size={self._size})"

    @property
    def size_in_bytes(self) -> int:
        return self._size

    @property
    def bytes_read(self) -> int:
        """Bytes of the file read so far through a read-only fsspec view (what a reader of the log dir read)."""
        return getattr(self._reader, "bytes_read", 0)

    def refresh_size(self) -> int:
        """Re-read the size (readers following a file that is still being written)."""
        self._size = self._reader.size()
        return self._size

    def limit_to(self, size: int) -> None:
        """A read-only view reads no further than ``size`` bytes (the end of its sound batches)."""
        if self.writable:
            raise ValueError(f"{self.path}: only a read-only view is limited; the owner truncates")
        self._size = max(0, min(size, self._size))

    def read(self, position: int, size: int) -> bytes:
        size = max(0, min(size, self._size - position))
        return self._reader.read_at(position, size) if size else b""

    def slice(self, position: int, size: int) -> FileSlice | None:
        """``size`` bytes from ``position`` as a ``FileSlice`` with a descriptor of its own; None for a file
        not on local disk, or when open slices hold their share of the descriptors or the process is out of
        them (``file_slice.reserve``: the caller reads the bytes instead)."""
        if not isinstance(self._reader, _LocalReader) or not file_slice.reserve():
            return None
        try:
            fd = self._reader.dup_descriptor()
        except BaseException as exc:
            file_slice.give_back()
            if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
                return None
            raise
        return FileSlice(self.path, fd, position, size, reserved=True)

    # --- walking -----------------------------------------------------------

    def next_offset(self, empty: int, start: int = 0, order: OffsetOrder | None = None) -> int:
        """The offset after the last batch from ``start`` on (``empty`` when there is none)."""
        found = empty
        for _, header in self.batch_headers(start, order=order):
            found = header.next_offset
        return found

    def valid_prefix(self, start: int, order: OffsetOrder, max_batch_size: int | None = None,
                     end: int | None = None) -> ValidPrefix:
        """Walk whole batches from ``start``, checking CRCs and offsets, to the end of the sound ones.
        A batch whose offsets contradict the batch before ends the sound ones before both: either
        may be the one whose ``baseOffset`` (outside the CRC) changed."""
        limit = end
        end = start
        next_offset = None
        before_last = (start, None)  # where the batch before the last sound one ended, and its next offset
        try:
            for batch in self.batches(start, limit, validate=True, stop_at_partial=False,
                                      max_batch_size=max_batch_size):
                h = batch.header
                order.check(batch.position, h.base_offset, h.last_offset)
                before_last = (end, next_offset)
                end = batch.position + h.size_in_bytes
                next_offset = h.next_offset
        except OffsetOrderError as exc:
            return ValidPrefix(*before_last, exc)
        except CorruptRecordError as exc:
            return ValidPrefix(end, next_offset, exc, torn=exc.reason.startswith("truncated batch"))
        return ValidPrefix(end, next_offset)

    def batch_headers(self, start: int = 0, end: int | None = None,
                      stop_at_partial: bool = True, order: OffsetOrder | None = None,
                      read_ahead: int = HEADER_READ_AHEAD) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``start``, reading only headers; with ``order``, each batch's
        offsets are checked against the walk so far. A read takes ``read_ahead`` bytes where batches are small
        enough for it to hold several headers, and one header where they are not (the first, of a size not
        known yet, included)."""
        end = self._size if end is None else min(end, self._size)
        block = b""
        block_start = start
        pos = start
        size = read_ahead
        while pos < end:
            if pos + HEADER.size > block_start + len(block):
                block_start = pos
                want = read_ahead if size * 4 <= read_ahead else HEADER.size
                block = self.read(pos, min(max(want, HEADER.size), end - pos))
            off = pos - block_start
            available = end - pos
            if available < HEADER.size:
                if stop_at_partial:
                    return
                raise CorruptRecordError(f"truncated batch: {available} bytes left, fewer than a batch header",
                                         path=self.path, position=pos)
            header = BatchHeader.parse(block, off)
            self._check_header(header, pos)
            size = header.size_in_bytes
            if size > available:
                if stop_at_partial:
                    return
                raise CorruptRecordError(f"truncated batch: length {header.batch_length} needs {size} bytes, "
                                         f"{available} left", path=self.path, position=pos)
            if order is not None:  # a batch not wholly there is no part of the walk
                order.check(pos, header.base_offset, header.last_offset)
            yield pos, header
            pos += size

    def _check_header(self, header: BatchHeader, position: int) -> None:
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {header.batch_length} is below the minimum {MIN_BATCH_LENGTH}",
                                     path=self.path, position=position)
        if header.magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"unsupported magic {header.magic} (expected {CURRENT_MAGIC})",
                                     path=self.path, position=position)

    def batches(self, start: int = 0, end: int | None = None, *, validate: bool = False,
                stop_at_partial: bool = True, max_batch_size: int | None = None) -> Iterator[RecordBatch]:
        """Whole batches from ``start``, read in large blocks; each knows its file position."""
        end = self._size if end is None else min(end, self._size)
        pos = start
        while pos < end:
            block = self.read(pos, min(max(BATCH_READ_BLOCK, self._next_batch_size(pos, end)), end - pos))
            consumed = 0
            for batch in iter_batches(block, path=self.path, base_position=pos, max_batch_size=max_batch_size,
                                      stop_at_partial=True, validate=validate):
                consumed += batch.size_in_bytes
                yield batch
            if consumed == 0:
                # The next batch does not fit before ``end``: a torn tail.
                if not stop_at_partial:
                    list(iter_batches(block, path=self.path, base_position=pos, stop_at_partial=False))
                return
            pos += consumed

    def _next_batch_size(self, pos: int, end: int) -> int:
        head = self.read(pos, LOG_OVERHEAD)
        if len(head) < LOG_OVERHEAD:
            return 0
        return int.from_bytes(head[LENGTH_OFFSET:LENGTH_OFFSET + 4], "big", signed=True) + LOG_OVERHEAD

    # --- searching -----------------------------------------------------------

    def search_for_offset(self, target_offset: int, start_position: int = 0,
                          order: OffsetOrder | None = None) -> LogOffsetPosition | None:
        """The first batch at or after ``start_position`` whose last offset is >= target; ``order``
        checks the offsets of every batch walked, the one found included."""
        for position, header in self.batch_headers(start_position, order=order):
            if header.last_offset >= target_offset:
                return LogOffsetPosition(header.base_offset, position, header.size_in_bytes)
        return None

    def search_for_timestamp(self, target_timestamp: int, start_position: int,
                             start_offset: int, order: OffsetOrder | None = None) -> TimestampAndOffset | None:
        """The first record at or after ``start_offset`` stamped >= target, as Kafka finds it."""
        for position, header in self.batch_headers(start_position, order=order):
            if header.max_timestamp < target_timestamp or header.is_control:
                continue
            batch = next(self.batches(position, position + header.size_in_bytes))
            for record in batch.records():
                if record.offset >= start_offset and record.timestamp >= target_timestamp:
                    return TimestampAndOffset(record.timestamp, record.offset)
        return None

    def largest_timestamp_after(self, start_position: int, order: OffsetOrder | None = None) -> TimestampAndOffset:
        """The largest batch max timestamp from ``start_position`` and the last offset of its batch."""
        best = TimestampAndOffset(-1, -1)
        for _, header in self.batch_headers(start_position, order=order):
            if header.max_timestamp > best.timestamp:
                best = TimestampAndOffset(header.max_timestamp, header.last_offset)
        return best

    # --- writing (local owner only) -------------------------------------------

    def _check_writable(self, what: str) -> None:
        if not self.writable:
            raise PermissionError(f"{self.path}: cannot {what} a read-only log file")

    def append(self, data) -> int:
        """Write ``data`` at the end; on an error (``ENOSPC``...) nothing of it stays in the file."""
        self._check_writable("append to")
        view = memoryview(data)
        written = 0
        with self._reader.handles.use(self._reader) as fd:
            try:
                while written < len(view):
                    written += os.pwrite(fd, view[written:], self._size + written)
            except OSError:
                if written:
                    os.ftruncate(fd, self._size)  # shrinking needs no free space
                raise
        self._size += written
        return written

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; returns how many were removed."""
        self._check_writable("truncate")
        if size < 0 or size > self._size:
            raise ValueError(f"{self.path}: cannot truncate a {self._size}-byte file to {size} bytes")
        removed = self._size - size
        if removed:
            with self._reader.handles.use(self._reader) as fd:
                os.ftruncate(fd, size)
            self._size = size
        return removed

    def move_tail_aside(self, position: int, target: str) -> int:
        """Copy the bytes from ``position`` on into the new file ``target``, make it durable, then
        cut them from this file; returns how many moved. Nothing is lost if this is interrupted:
        until the cut, the bytes are in both files."""
        self._check_writable("cut")
        if not 0 <= position <= self._size:
            raise ValueError(f"{self.path}: cannot move bytes from position {position} of a {self._size}-byte file")
        moved = self._size - position
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for at in range(position, self._size, BATCH_READ_BLOCK):
                data = self.read(at, BATCH_READ_BLOCK)
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        self.truncate_to(position)
        self.flush()
        return moved

    def flush(self) -> None:
        if self.writable:
            with self._reader.handles.use(self._reader) as fd:
                os.fsync(fd)

    def close(self) -> None:
        self._reader.close()

    def rename_to(self, new_path: str) -> None:
        os.replace(self.path, new_path)
        self.path = new_path
        if isinstance(self._reader, _LocalReader):
            self._reader.path = new_path  # a reopen follows the new name
