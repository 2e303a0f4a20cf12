"""Kafka's sparse segment indexes: ``.index`` (offset -> position) and ``.timeindex``.

This module owns the two fixed-width index files that sit beside each
``.log`` segment, byte for byte as Kafka writes them (big-endian):

* ``.index`` (OffsetIndex): 8-byte entries, int32 offset relative to the
  segment's base offset, then int32 byte position of the batch in the
  ``.log`` file;
* ``.timeindex`` (TimeIndex): 12-byte entries, int64 timestamp, then int32
  relative offset; an entry (T, O) says T was the largest timestamp in the
  segment when offset O was written, so any record stamped after T lies at or
  beyond O.

A writable index is preallocated to ``max_index_size`` (rounded down to whole
entries) as a sparse file, as Kafka does; appends write each entry with
``pwrite`` and ``close()`` trims the file to its valid entries, so a closed
index file is exactly its entries. Kafka maps index files into memory; here
nothing is mapped, for two reasons: a store into a mapped hole of a full
filesystem kills the process with SIGBUS where ``pwrite`` raises ``ENOSPC``
(allocating the blocks up front instead would cost every partition 20 MiB of
real disk), and a mapping holds a descriptor for as long as it lives. What a
mapping gives lookups instead — entries read from memory — a writable index
gets from a copy of its entries, read with one ``pread`` on its first lookup
and kept up to date by its appends and truncations; the copies of all
indexes together stay within ``ENTRY_COPY_BUDGET_BYTES`` (the oldest are
dropped, and read again when next looked up). Other reads are ``pread``s of
the probed entries; the descriptor comes from a ``FileHandleCache``
(``format.file_handles``), which closes it while the index is idle, so an
index costs no descriptor between uses. On reopening, every whole entry in the file counts, as in Kafka.
After an unclean shutdown the file may still be preallocated with trailing
zeros: the index does not guess; ``sanity_check()`` reports it and the owner
rebuilds the indexes of unflushed segments from the log, as Kafka does when
``.kafka_cleanshutdown`` is missing. Nothing here is checksummed.

Read-only indexes (``writable=False``, or ``from_bytes`` for a buffer read
through fsspec from object storage) never change the file. A reader may open
the live, preallocated index of the active segment while the writer appends,
so a read-only index counts entries up to the first all-zero one after the
first (valid entries after the first are never all zero), and when it found
such padding it also leaves out the last written entry, which the writer may
have been halfway through. Lookups then answer from finished entries only;
the cost is at most one index interval more to scan. A trimmed file (every
closed segment, and every file in object storage) has no padding and is used
whole.

Lookups are binary searches over the file, reading only the probed
entries. Like Kafka, a search first tries the last 8 KiB of entries (the
"warm" section, where followers and tailing consumers look), so the pages a
lookup touches stay in the page cache as the index grows.

The owner serialises calls; there is no locking here.
"""

from __future__ import annotations

import bisect
import io
import os
import struct
import threading
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ClassVar, TypeVar

from format.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from format.file_handles import FileHandleCache, default_cache

if TYPE_CHECKING:
    import numpy as np

# Kafka's segment.index.bytes default.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024

# Kafka's RecordBatch.NO_TIMESTAMP: what an empty time index reports.
NO_TIMESTAMP = -1

_INT32_MAX = 2**31 - 1

# How many bytes at the end of the index a search tries first (Kafka's value:
# three probes touch every page of an 8 KiB section on 4 KiB pages).
_WARM_SECTION_BYTES = 8192

# What the in-memory copies of writable indexes' entries may hold together: the entries of some
# 3,000 GiB of log at one entry per index.interval.bytes (4 KiB).
ENTRY_COPY_BUDGET_BYTES = 64 * 1024 * 1024

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

_IndexT = TypeVar("_IndexT", bound="AbstractIndex")


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    """An offset and the byte position of its batch in the segment's ``.log``."""

    offset: int
    position: int


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """A timestamp and the offset up to which it is the largest timestamp seen."""

    timestamp: int
    offset: int


class _EntryCopies:
    """The writable indexes holding a copy of their entries, oldest first, and the bytes they held when
    made; making one past the budget drops the oldest. Safe from any thread: an index reads its copy
    once per lookup step, so a copy dropped meanwhile is only read from the file again. An index closed
    gives its share back; one collected without being closed is dropped when it comes up as the oldest."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._held: dict[weakref.ref, int] = {}  # insertion order: oldest first
        self._total = 0
        self._lock = threading.Lock()

    def add(self, index: AbstractIndex, size: int) -> None:
        ref = weakref.ref(index)
        with self._lock:
            self._total += size - self._held.pop(ref, 0)
            self._held[ref] = size
            while self._total > self.budget and len(self._held) > 1:
                oldest = next(iter(self._held))
                self._total -= self._held.pop(oldest)
                dropped = oldest()
                if dropped is not None:
                    dropped._entry_copy = None

    def remove(self, index: AbstractIndex) -> None:
        with self._lock:
            self._total -= self._held.pop(weakref.ref(index), 0)


_ENTRY_COPIES = _EntryCopies(ENTRY_COPY_BUDGET_BYTES)


class AbstractIndex(ABC):
    """File, mapping and search machinery shared by the two index kinds.

    Subclasses define the entry layout (``entry_size``), how to read an
    entry's search key and value, and the append rule.
    """

    entry_size: ClassVar[int]

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
        handles: FileHandleCache | None = None,
    ) -> None:
        self._init_state(os.fspath(path), base_offset, max_index_size, writable)
        self._handles = handles or default_cache()
        if writable and max_index_size < self.entry_size:
            raise ValueError(
                f"{self._path}: invalid max index size {max_index_size}, below one entry of {self.entry_size} bytes"
            )
        newly_created = False
        if writable:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                newly_created = True
            except FileExistsError:
                pass
            else:
                try:
                    # Sparse: the blocks are allocated as entries are written.
                    os.ftruncate(fd, self._round_down(max_index_size))
                finally:
                    os.close(fd)
        with self._handles.use(self) as fd:
            self._set_length(os.fstat(fd).st_size)
        if writable:
            # A new file has nothing in it yet; an existing one is trusted whole.
            self._entries = 0 if newly_created else self._max_entries
        else:
            self._entries = self._count_written_entries(self._max_entries)
        self._load_last_entry()

    @classmethod
    def from_bytes(
        cls: type[_IndexT], base_offset: int, data: bytes | bytearray | memoryview, *, path: str | None = None
    ) -> _IndexT:
        """A read-only index over a buffer, e.g. an index file read through fsspec.

        ``path`` only names the source in error messages. The buffer is not copied.
        """
        index = cls.__new__(cls)
        index._init_state(path, base_offset, len(data), False)
        index._buf = data
        index._set_length(len(data))
        index._entries = index._count_written_entries(index._max_entries)
        index._load_last_entry()
        return index

    def _init_state(self, path: str | None, base_offset: int, max_index_size: int, writable: bool) -> None:
        if base_offset < 0:
            raise ValueError(f"{path}: base offset {base_offset} is negative")
        self._path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._writable = writable
        self._handles: FileHandleCache | None = None
        # An index built from bytes reads this buffer; a file-backed one reads the file.
        self._buf: bytes | bytearray | memoryview | None = None
        # A writable index's entries as written, once a lookup read them (``_EntryCopies``).
        self._entry_copy: bytearray | None = None
        self._length = 0
        self._dirty = False  # written since the last flush
        self._max_entries = 0
        self._entries = 0
        self._closed = False
        self._warm_entries = _WARM_SECTION_BYTES // self.entry_size

    # --- file access ----------------------------------------------------

    @property
    def cache_name(self) -> str:
        return self._where()

    def open_descriptor(self) -> int:
        """Open the index file (again), for the handle cache."""
        if self._closed:
            raise ValueError(f"{self._where()}: index is closed")
        return os.open(self._path, os.O_RDWR if self._writable else os.O_RDONLY)  # type: ignore[arg-type]

    def _set_length(self, length: int) -> None:
        self._length = length
        self._max_entries = length // self.entry_size

    def _read(self, position: int, size: int) -> bytes:
        """``size`` bytes at ``position``; zeros where the file has been cut shorter meanwhile."""
        if self._buf is not None:
            return bytes(self._buf[position : position + size])
        data = self._handles.pread(self, size, position)  # type: ignore[union-attr]
        # A writer may have trimmed the file under a reader: zeros read as padding, never as an
        # entry past the ones counted, and a lower position only makes a lookup scan further.
        return data if len(data) == size else data.ljust(size, b"\0")

    def _unpack(self, entry: struct.Struct, position: int) -> tuple:
        """``entry`` unpacked at ``position``: from the copy of the entries where there is one."""
        copy = self._entry_copy
        if copy is not None and position + entry.size <= len(copy):
            return entry.unpack_from(copy, position)
        return entry.unpack(self._read(position, entry.size))

    def _copy_entries(self) -> None:
        """Before a lookup: a writable index without a copy of its entries makes one."""
        if self._entry_copy is None and self._writable and self._buf is None:
            copy = bytearray(self._read(0, self._entries * self.entry_size))
            self._entry_copy = copy
            _ENTRY_COPIES.add(self, len(copy))

    def _drop_entry_copy(self) -> None:
        if self._entry_copy is not None:
            self._entry_copy = None
            _ENTRY_COPIES.remove(self)

    def _write(self, position: int, data: bytes) -> None:
        """Write at ``position``; a full filesystem raises OSError(ENOSPC) and leaves the entry count alone."""
        with self._handles.use(self) as fd:  # type: ignore[union-attr]
            written = os.pwrite(fd, data, position)
        self._dirty = True
        if written != len(data):
            self._drop_entry_copy()
            raise OSError(f"{self._where()}: short write of {written} of {len(data)} bytes at position {position}")
        copy = self._entry_copy
        if copy is not None:
            if position == len(copy):
                copy += data
            elif position + len(data) <= len(copy):
                copy[position:position + len(data)] = data
            else:
                self._drop_entry_copy()

    def _release(self) -> None:
        if self._handles is not None:
            self._handles.close(self)

    def _round_down(self, size: int) -> int:
        return size - size % self.entry_size

    def _count_written_entries(self, limit: int) -> int:
        """Entries a reader can trust in a file that may still be written to."""
        if limit == 0:
            return 0
        zero = bytes(self.entry_size)
        size = self.entry_size
        # Entries after the first are never all zero, so "is padding" is
        # False then True along the file and a bisection finds the boundary.
        written = bisect.bisect_left(range(limit), True, lo=1, key=lambda n: self._read(n * size, size) == zero)
        if written == limit:
            return written  # trimmed (or full): nothing is being written
        # Padding means a live (or crashed) writer: its last entry may be torn.
        return written - 1

    # --- subclass hooks -------------------------------------------------

    @abstractmethod
    def _key_at(self, n: int) -> int:
        """The search key of entry n (relative offset or timestamp)."""

    @abstractmethod
    def _value_at(self, n: int) -> int:
        """The secondary, also non-decreasing, field of entry n (position or relative offset)."""

    @abstractmethod
    def _load_last_entry(self) -> None:
        """Refresh the cached last entry after the entry count changed."""

    @abstractmethod
    def sanity_check(self) -> None:
        """Raise CorruptIndexError if the index is obviously damaged."""

    @abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""

    # --- properties -----------------------------------------------------

    @property
    def path(self) -> str | None:
        """The index file, or None for an index built from bytes."""
        return self._path

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def length(self) -> int:
        """Current length of the file (or buffer) in bytes, padding included."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes used by valid entries."""
        return self._entries * self.entry_size

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    def _where(self) -> str:
        return self._path if self._path is not None else "<in-memory index>"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._where()}, base_offset={self.base_offset}, "
            f"entries={self._entries}, max_entries={self._max_entries})"
        )

    # --- offsets --------------------------------------------------------

    def can_append_offset(self, offset: int) -> bool:
        """True if ``offset`` fits in this index's 32-bit relative offsets."""
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise InvalidOffsetError(
                f"{self._where()}: offset {offset} does not fit a 32-bit offset "
                f"relative to base offset {self.base_offset}"
            )
        return relative

    # --- search ---------------------------------------------------------

    def _search_range(self, read: Callable[[int], int], target: int) -> tuple[int, int]:
        # Try the warm tail first: if its first entry is below the target the
        # answer lies in the tail and the rest of the file is not touched.
        first_hot = max(0, self._entries - 1 - self._warm_entries)
        if read(first_hot) < target:
            return first_hot, self._entries
        return 0, first_hot + 1

    def _largest_lower_bound_slot(self, read: Callable[[int], int], target: int) -> int:
        """The last slot whose field is <= target, or -1."""
        if self._entries == 0:
            return -1
        self._copy_entries()
        lo, hi = self._search_range(read, target)
        return bisect.bisect_right(range(self._entries), target, lo, hi, key=read) - 1

    def _smallest_upper_bound_slot(self, read: Callable[[int], int], target: int) -> int:
        """The first slot whose field is >= target, or -1."""
        if self._entries == 0:
            return -1
        self._copy_entries()
        lo, hi = self._search_range(read, target)
        slot = bisect.bisect_left(range(self._entries), target, lo, hi, key=read)
        return slot if slot < self._entries else -1

    def _check_slot(self, n: int) -> None:
        self._check_open()
        if not 0 <= n < self._entries:
            raise IndexError(f"{self._where()}: no entry {n}, the index has {self._entries} entries")

    # --- mutation -------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self._where()}: index is closed")

    def _check_writable(self, operation: str) -> None:
        self._check_open()
        if not self._writable:
            raise io.UnsupportedOperation(f"{self._where()}: cannot {operation} a read-only index")

    def _truncate_to_entries(self, entries: int) -> None:
        if entries < self._entries:
            # Zero what is cut off so the file again looks like a preallocated
            # index: a read-only reader stops at the first zero entry, and a
            # later crash leaves no stale entries past the valid ones.
            start, end = entries * self.entry_size, self._entries * self.entry_size
            self._write(start, bytes(end - start))
            copy = self._entry_copy
            if copy is not None:
                del copy[start:]
        self._entries = entries
        self._load_last_entry()

    def truncate(self) -> None:
        """Remove every entry (the file keeps its size)."""
        self._check_writable("truncate")
        self._truncate_to_entries(0)

    def reset(self) -> None:
        """Remove every entry and grow the file back to ``max_index_size``."""
        self.truncate()
        self.resize(self.max_index_size)

    def resize(self, new_size: int) -> bool:
        """Set the file length to ``new_size`` rounded down to whole entries.

        Used to trim on close or roll, and to give a reopened active segment's
        index room again. Returns False if the length was already right.
        """
        self._check_writable("resize")
        rounded = self._round_down(new_size)
        if rounded == self._length:
            return False
        if rounded < self._entries * self.entry_size:
            raise ValueError(
                f"{self._where()}: cannot resize to {new_size} bytes, below the {self._entries} valid entries"
            )
        with self._handles.use(self) as fd:  # type: ignore[union-attr]
            os.ftruncate(fd, rounded)  # growing makes a sparse tail: no blocks are needed
        self._set_length(rounded)
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the file to its valid entries, dropping the preallocated tail."""
        self.resize(self.size_in_bytes)

    def flush(self) -> None:
        """Make the written entries durable."""
        self._check_open()
        if self._writable and self._dirty:
            with self._handles.use(self) as fd:  # type: ignore[union-attr]
                os.fsync(fd)
            self._dirty = False

    def close(self) -> None:
        """Trim a writable index to its valid size, then close the file."""
        if self._closed:
            return
        if self._writable:
            self.trim_to_valid_size()
        self._close_handler()

    def _close_handler(self) -> None:
        self._closed = True
        self._drop_entry_copy()
        self._release()

    def delete(self) -> bool:
        """Close the file and delete it; False if it did not exist."""
        if self._path is None:
            raise io.UnsupportedOperation("cannot delete an in-memory index")
        self._close_handler()
        try:
            os.remove(self._path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        """Rename the file; an open descriptor stays valid, a reopen uses the new name."""
        if self._path is None:
            raise io.UnsupportedOperation("cannot rename an in-memory index")
        new_path = os.fspath(new_path)
        try:
            os.replace(self._path, new_path)
        finally:
            # As Kafka: the index follows the new name even if the move failed,
            # so a retry or a delete acts on the name the owner expects.
            self._path = new_path

    def __enter__(self: _IndexT) -> _IndexT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _columns(self, fields: list[tuple[str, str]]) -> np.ndarray:
        """The entries as a numpy array of ``fields`` (name, big-endian type), for the checks of the whole
        file: numpy is imported here, by the owner checking its indexes, not by every reader of an offset."""
        import numpy as np

        return np.frombuffer(self._read(0, self._entries * self.entry_size), dtype=np.dtype(fields),
                             count=self._entries)

    def _check_length(self) -> None:
        if self._length % self.entry_size != 0:
            raise CorruptIndexError(
                f"found {self._length} bytes, which is not a multiple of the entry size {self.entry_size}",
                path=self._path,
            )


class OffsetIndex(AbstractIndex):
    """The ``.index`` file: sparse map from offset to position in the ``.log``."""

    entry_size: ClassVar[int] = _OFFSET_ENTRY.size
    _FIELDS: ClassVar[list[tuple[str, str]]] = [("relative_offset", ">i4"), ("position", ">i4")]

    def _key_at(self, n: int) -> int:
        return self._unpack(_INT32, n * 8)[0]

    def _value_at(self, n: int) -> int:
        return self._unpack(_INT32, n * 8 + 4)[0]

    def _parse_entry(self, n: int) -> OffsetPosition:
        relative, position = self._unpack(_OFFSET_ENTRY, n * 8)
        return OffsetPosition(self.base_offset + relative, position)

    def _load_last_entry(self) -> None:
        self._last_offset = self.base_offset if self._entries == 0 else self._parse_entry(self._entries - 1).offset

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self._last_offset

    def entry(self, n: int) -> OffsetPosition:
        self._check_slot(n)
        return self._parse_entry(n)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base_offset, 0) if none."""
        self._check_open()
        slot = self._largest_lower_bound_slot(self._key_at, target_offset - self.base_offset)
        if slot == -1:
            return OffsetPosition(self.base_offset, 0)
        return self._parse_entry(slot)

    def lookup_position(self, position: int, back: int = 0) -> OffsetPosition | None:
        """The entry ``back`` entries before the last one whose position is below ``position``; None if none."""
        self._check_open()
        slot = self._largest_lower_bound_slot(self._value_at, position - 1) - back
        return None if slot < 0 else self._parse_entry(slot)

    def fetch_upper_bound_offset(self, fetch_offset: OffsetPosition, fetch_size: int) -> OffsetPosition | None:
        """An entry at or past ``fetch_offset.position + fetch_size``, or None.

        Its offset is certainly outside the fetched byte range, though not
        necessarily the smallest such offset.
        """
        self._check_open()
        slot = self._smallest_upper_bound_slot(self._value_at, fetch_offset.position + fetch_size)
        return None if slot == -1 else self._parse_entry(slot)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; ``offset`` must be above the last offset unless the index is empty."""
        self._check_writable("append to")
        if self.is_full:
            raise IndexFullError(f"{self._where()}: attempt to append to a full index ({self._entries} entries)")
        if self._entries != 0 and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"{self._where()}: attempt to append offset {offset} at slot {self._entries}, "
                f"no larger than the last offset appended ({self._last_offset})"
            )
        relative = self.relative_offset(offset)
        if not 0 <= position <= _INT32_MAX:
            raise ValueError(f"{self._where()}: position {position} of offset {offset} does not fit an int32")
        self._write(self._entries * 8, _OFFSET_ENTRY.pack(relative, position))
        self._entries += 1
        self._last_offset = offset

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``; a larger offset changes nothing."""
        self._check_writable("truncate")
        # Offsets strictly increase, so the entries to keep are those below it.
        keep = bisect.bisect_left(range(self._entries), offset - self.base_offset, key=self._key_at)
        self._truncate_to_entries(keep)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError on a bad length, a disorder, or offsets below base.

        Stricter than Kafka, which checks only the last offset and the length:
        zero padding left by a crash shows up here as offsets not increasing.
        """
        self._check_open()
        self._check_length()
        if self._entries == 0:
            return
        columns = self._columns(self._FIELDS)
        relative = columns["relative_offset"].astype("int64")
        positions = columns["position"].astype("int64")
        if relative[0] < 0:
            raise CorruptIndexError(
                f"first offset {self.base_offset + int(relative[0])} is below the base offset {self.base_offset}",
                path=self._path,
            )
        bad = (relative[1:] <= relative[:-1]).nonzero()[0]
        if bad.size:
            slot = int(bad[0]) + 1
            raise CorruptIndexError(
                f"offsets not strictly increasing at entry {slot}: {self.base_offset + int(relative[slot])} "
                f"follows {self.base_offset + int(relative[slot - 1])}",
                path=self._path,
            )
        if positions[0] < 0:
            raise CorruptIndexError(f"negative position {int(positions[0])} at entry 0", path=self._path)
        bad = (positions[1:] <= positions[:-1]).nonzero()[0]
        if bad.size:
            slot = int(bad[0]) + 1
            raise CorruptIndexError(
                f"positions not strictly increasing at entry {slot}: {int(positions[slot])} "
                f"follows {int(positions[slot - 1])}",
                path=self._path,
            )


class TimeIndex(AbstractIndex):
    """The ``.timeindex`` file: sparse map from timestamp to offset."""

    entry_size: ClassVar[int] = _TIME_ENTRY.size
    _FIELDS: ClassVar[list[tuple[str, str]]] = [("timestamp", ">i8"), ("relative_offset", ">i4")]

    def _key_at(self, n: int) -> int:
        return self._unpack(_INT64, n * 12)[0]

    def _value_at(self, n: int) -> int:
        return self._unpack(_INT32, n * 12 + 8)[0]

    def _parse_entry(self, n: int) -> TimestampOffset:
        timestamp, relative = self._unpack(_TIME_ENTRY, n * 12)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def _load_last_entry(self) -> None:
        if self._entries == 0:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        else:
            self._last_entry = self._parse_entry(self._entries - 1)

    @property
    def is_full(self) -> bool:
        # One slot stays free so the segment can always record its largest
        # timestamp when it is rolled (maybe_append with skip_full_check).
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base_offset) when empty."""
        return self._last_entry

    def entry(self, n: int) -> TimestampOffset:
        self._check_slot(n)
        return self._parse_entry(n)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, base_offset) if none."""
        self._check_open()
        slot = self._largest_lower_bound_slot(self._key_at, target_timestamp)
        if slot == -1:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self._parse_entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Record that ``timestamp`` is the largest timestamp seen up to ``offset``.

        Only a timestamp above the last entry's is written; an equal one is
        ignored, which lets the segment repeat its last entry on roll and
        close. ``skip_full_check`` lets that final call use the reserved slot.
        """
        self._check_writable("append to")
        if not skip_full_check and self.is_full:
            raise IndexFullError(f"{self._where()}: attempt to append to a full time index ({self._entries} entries)")
        last = self._last_entry
        if self._entries != 0 and offset < last.offset:
            raise InvalidOffsetError(
                f"{self._where()}: attempt to append offset {offset} at slot {self._entries}, "
                f"smaller than the last offset appended ({last.offset})"
            )
        if self._entries != 0 and timestamp < last.timestamp:
            raise ValueError(
                f"{self._where()}: attempt to append timestamp {timestamp} at slot {self._entries}, "
                f"smaller than the last timestamp appended ({last.timestamp})"
            )
        if timestamp <= last.timestamp:
            return
        if self._entries >= self._max_entries:
            raise IndexFullError(f"{self._where()}: no room left in the time index ({self._entries} entries)")
        relative = self.relative_offset(offset)
        self._write(self._entries * 12, _TIME_ENTRY.pack(timestamp, relative))
        self._entries += 1
        self._last_entry = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``; a larger offset changes nothing."""
        self._check_writable("truncate")
        # Offsets never decrease along the time index, so a bisection finds
        # the first entry at or above the offset even when offsets repeat.
        keep = bisect.bisect_left(range(self._entries), offset - self.base_offset, key=self._value_at)
        self._truncate_to_entries(keep)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError on a bad length, a disorder, or offsets below base.

        Stricter than Kafka (first vs last timestamp, last offset, length):
        every step is checked, which also catches zero padding left by a crash.
        """
        self._check_open()
        self._check_length()
        if self._entries == 0:
            return
        columns = self._columns(self._FIELDS)
        timestamps = columns["timestamp"].astype("int64")
        relative = columns["relative_offset"].astype("int64")
        bad = (timestamps[1:] <= timestamps[:-1]).nonzero()[0]
        if bad.size:
            slot = int(bad[0]) + 1
            raise CorruptIndexError(
                f"timestamps not strictly increasing at entry {slot}: {int(timestamps[slot])} "
                f"follows {int(timestamps[slot - 1])}",
                path=self._path,
            )
        if relative[0] < 0:
            raise CorruptIndexError(
                f"first offset {self.base_offset + int(relative[0])} is below the base offset {self.base_offset}",
                path=self._path,
            )
        bad = (relative[1:] < relative[:-1]).nonzero()[0]
        if bad.size:
            slot = int(bad[0]) + 1
            raise CorruptIndexError(
                f"offsets decreasing at entry {slot}: {self.base_offset + int(relative[slot])} "
                f"follows {self.base_offset + int(relative[slot - 1])}",
                path=self._path,
            )
