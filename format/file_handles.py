"""A bounded cache of open file descriptors for segment files (Kafka's LazyIndex idea,
extended to the ``.log`` files).

A partition costs three files (``.log``, ``.index``, ``.timeindex``) per
segment; holding them all open makes the number of partitions a process can
serve a function of its descriptor limit (``RLIMIT_NOFILE``, 1024 by default
on Linux). Instead every segment file asks this cache for a descriptor when it
reads or writes, and the cache keeps at most ``capacity`` of them open,
closing the least recently used idle one to open another. A closed file is
reopened by its owner's path on its next use, so a renamed file follows its
new name and a removed one fails with ``FileNotFoundError``.

A descriptor is pinned while a call uses it (``with cache.use(f) as fd``) and
is never closed under a running ``pread``/``pwrite``; when every descriptor is
pinned the cache grows past its capacity rather than fail. An ``open`` that
still hits ``EMFILE`` closes idle descriptors and tries once more.

The descriptor limit is the process's, so the budget is too: segment files
that are not given a cache share ``default_cache()``, sized from the soft
``RLIMIT_NOFILE`` at its first use (half of it, leaving the rest to sockets,
checkpoints and everything else the process opens, and never more than 512).
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import Iterator, Protocol

# What the process keeps for everything but segment files when the cache is sized from the limit.
_SHARE_OF_LIMIT = 2
_MIN_CAPACITY = 16
# An unlimited RLIMIT_NOFILE still needs a bound for the cache.
_MAX_CAPACITY = 1 << 20
# The default cache stays below this however high the limit: descriptors numbered past 1023
# break every select()-based library sharing the process (py4j's callback server in a Spark
# driver, for one), and reopening an idle segment file costs only an open().
_DEFAULT_CAPACITY_CAP = 512


class CachedFile(Protocol):
    """What the cache needs from a file that uses it."""

    @property
    def cache_name(self) -> str:
        """The file, for error messages."""

    def open_descriptor(self) -> int:
        """Open the file (again) and return its descriptor."""


class _Entry:
    __slots__ = ("fd", "pins", "closing")

    def __init__(self, fd: int):
        self.fd = fd
        self.pins = 0
        self.closing = False


def descriptor_limit() -> int:
    """The process's soft ``RLIMIT_NOFILE`` (capped when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _MAX_CAPACITY if soft == resource.RLIM_INFINITY else soft


def open_descriptors() -> int:
    """How many descriptors the process holds now."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return 0  # no /proc: nothing to compare against


class FileHandleCache:
    """At most ``capacity`` idle descriptors open at once, least recently used closed first."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"file handle cache: capacity {capacity} must be at least 1")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[CachedFile, _Entry] = OrderedDict()
        self.opens = 0  # descriptors opened, reopens included
        self.evictions = 0

    def __repr__(self) -> str:
        return f"FileHandleCache(open={len(self._entries)}, capacity={self.capacity})"

    @property
    def open_count(self) -> int:
        return len(self._entries)

    def is_open(self, owner: CachedFile) -> bool:
        with self._lock:
            return owner in self._entries

    @contextmanager
    def use(self, owner: CachedFile) -> Iterator[int]:
        """The owner's descriptor, opened if need be and pinned for the ``with`` block."""
        entry = self._pin(owner)
        try:
            yield entry.fd
        finally:
            self._unpin(owner, entry)

    def pread(self, owner: CachedFile, size: int, position: int) -> bytes:
        """``os.pread`` on the owner's descriptor: ``use`` without a context manager's cost, for the small reads
        (index probes, batch headers) a fetch makes dozens of."""
        entry = self._pin(owner)
        try:
            return os.pread(entry.fd, size, position)
        finally:
            self._unpin(owner, entry)

    def _pin(self, owner: CachedFile) -> _Entry:
        with self._lock:
            entry = self._entries.get(owner)
            if entry is not None:
                self._entries.move_to_end(owner)
            else:
                self._evict_idle(self.capacity - 1)
                entry = _Entry(self._open(owner))
                self._entries[owner] = entry
            entry.pins += 1
            return entry

    def _unpin(self, owner: CachedFile, entry: _Entry) -> None:
        with self._lock:
            entry.pins -= 1
            if entry.pins == 0 and entry.closing:
                os.close(entry.fd)
            elif len(self._entries) > self.capacity:
                self._evict_idle(self.capacity)

    def _open(self, owner: CachedFile) -> int:
        try:
            fd = owner.open_descriptor()
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            # Something else in the process took descriptors: give ours back and try once more.
            self._evict_idle(len(self._entries) // 2)
            fd = owner.open_descriptor()
        self.opens += 1
        return fd

    def _evict_idle(self, keep: int) -> None:
        """Close least recently used idle descriptors until at most ``keep`` are open."""
        excess = len(self._entries) - keep
        if excess <= 0:
            return
        victims = []
        for owner, entry in self._entries.items():  # least recently used first
            if entry.pins == 0:
                victims.append(owner)
                if len(victims) == excess:
                    break
        for owner in victims:
            os.close(self._entries.pop(owner).fd)
        self.evictions += len(victims)

    def close(self, owner: CachedFile) -> None:
        """Close the owner's descriptor (after the calls using it now); its next use reopens it."""
        with self._lock:
            entry = self._entries.pop(owner, None)
            if entry is None:
                return
            if entry.pins:
                entry.closing = True
            else:
                os.close(entry.fd)

    def close_all(self) -> None:
        """Close every idle descriptor (the pinned ones close when released)."""
        with self._lock:
            for owner in list(self._entries):
                entry = self._entries.pop(owner)
                if entry.pins:
                    entry.closing = True
                else:
                    os.close(entry.fd)


_default: FileHandleCache | None = None
_default_lock = threading.Lock()


def default_cache() -> FileHandleCache:
    """The process's cache, sized from ``RLIMIT_NOFILE`` when first asked for."""
    global _default
    with _default_lock:
        if _default is None:
            _default = FileHandleCache(max(_MIN_CAPACITY, min(_DEFAULT_CAPACITY_CAP,
                                                              descriptor_limit() // _SHARE_OF_LIMIT)))
        return _default
