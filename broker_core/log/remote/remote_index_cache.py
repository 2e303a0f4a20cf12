"""The remote segments' offset indexes cached on local disk (Kafka's RemoteIndexCache).

A fetch below the local log start offset finds its batch in a remote segment through that segment's
``.index``; fetching the index from object storage for every read would cost a round trip each, so each
index is fetched once and kept as a file in ``<log dir>/remote-log-index-cache``. The files together stay
within ``remote.log.index.file.cache.total.size.bytes``: the least recently used go first (their order of use
survives a restart as the files' modification times). A segment id
names a copy for good (a copy made again gets a new one), so a cached index never goes stale.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from typing import Callable

log = logging.getLogger(__name__)

#: The directory of the cache inside a log dir (Kafka's name).
DIR_NAME = "remote-log-index-cache"


class RemoteIndexCache:
    """Index files under ``directory``, at most ``max_bytes`` of them, evicted least recently used first."""

    def __init__(self, directory: str, max_bytes: int):
        if max_bytes < 1:
            raise ValueError(f"remote index cache {directory}: size bound {max_bytes} must be at least 1 byte")
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, int] = OrderedDict()  # file name -> size, least recently used first
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):  # what an earlier run left, oldest use first
            path = os.path.join(directory, name)
            if name.endswith(".tmp"):
                os.remove(path)
        kept = sorted(os.listdir(directory), key=lambda n: os.stat(os.path.join(directory, n)).st_mtime)
        for name in kept:
            self._entries[name] = os.path.getsize(os.path.join(directory, name))
        with self._lock:
            self._evict(0)

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(self._entries.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, name: str, load: Callable[[], bytes]) -> bytes:
        """The cached file ``name``; on a miss ``load()`` fetches it, and it is kept if it fits the bound."""
        path = os.path.join(self.directory, name)
        with self._lock:
            if name in self._entries:
                self._entries.move_to_end(name)
                try:
                    os.utime(path)  # the order of use, for the next start
                    with open(path, "rb") as f:
                        return f.read()
                except FileNotFoundError:
                    del self._entries[name]  # removed under us: fetch it again
        data = load()
        if len(data) > self.max_bytes:
            return data  # larger than the whole cache: served, not kept
        with self._lock:
            if name not in self._entries:
                self._evict(len(data))
                tmp = path + ".tmp"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
                self._entries[name] = len(data)
        return data

    def _evict(self, incoming: int) -> None:
        total = sum(self._entries.values())
        while self._entries and total + incoming > self.max_bytes:
            name, size = self._entries.popitem(last=False)
            total -= size
            try:
                os.remove(os.path.join(self.directory, name))
            except FileNotFoundError:
                pass
            log.debug("remote index cache %s: evicted %s (%d bytes)", self.directory, name, size)
