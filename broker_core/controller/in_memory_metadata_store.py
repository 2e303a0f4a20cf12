"""``InMemoryMetadataStore``: the metadata store contract in one process, with time from a clock.

It behaves as etcd does for everything ``MetadataStore`` offers (the shared
contract tests prove it): one store-wide revision that every write advances,
``mod_revision`` 0 for absent keys, all-or-nothing commits, lease TTLs in whole
seconds, a lease's keys deleted in one revision when it expires, watches that
see those deletes. Leases expire by the injected clock: a test moves a
``MockTime`` past the TTL and the next call on the store sees the keys gone, so
controller tests need neither a server nor a sleep.
"""

from __future__ import annotations

import bisect
import collections
import threading
from dataclasses import dataclass, field
from typing import Sequence

from ..clock import SYSTEM_CLOCK, Clock
from .metadata_store import (NO_LEASE, Compare, Delete, KeyValue, LeaseNotFoundError, Operation, Put,
                             WatchEvent, WatchEventType, lease_ttl_seconds)

__all__ = ["InMemoryMetadataStore"]


@dataclass
class _Lease:
    ttl_ms: int
    deadline_ms: int
    keys: set[str] = field(default_factory=set)


class _InMemoryWatch:
    def __init__(self, store: InMemoryMetadataStore, prefix: str) -> None:
        self._store = store
        self.prefix = prefix
        self.events: collections.deque[WatchEvent] = collections.deque()
        self.cancelled = False

    def poll(self, timeout_s: float = 0.0) -> list[WatchEvent]:
        # Waiting (in real time) only helps when another thread writes; tests on a simulated clock poll with 0.
        self._store.expire_leases()
        with self._store._lock:
            if not self.events and timeout_s > 0 and not self.cancelled:
                self._store._changed.wait(timeout_s)
        self._store.expire_leases()
        with self._store._lock:
            events = list(self.events)
            self.events.clear()
        return events

    def cancel(self) -> None:
        with self._store._lock:
            self.cancelled = True
            self.events.clear()
            self._store._watches.remove(self)
            self._store._changed.notify_all()


class InMemoryMetadataStore:
    """The ``MetadataStore`` contract in memory; leases expire by ``clock``. Thread-safe."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._revision = 1  # etcd starts at 1 too: an empty store has revision 1
        self._keys: dict[str, KeyValue] = {}
        self._sorted_keys: list[str] = []
        self._leases: dict[int, _Lease] = {}
        self._next_lease = 0x694d_0000_0000
        self._watches: list[_InMemoryWatch] = []

    # -- reads --

    def get(self, key: str) -> KeyValue | None:
        self.expire_leases()
        with self._lock:
            return self._keys.get(key)

    def get_prefix(self, prefix: str) -> list[KeyValue]:
        self.expire_leases()
        with self._lock:
            start = bisect.bisect_left(self._sorted_keys, prefix)
            found = []
            for key in self._sorted_keys[start:]:
                if not key.startswith(prefix):
                    break
                found.append(self._keys[key])
            return found

    @property
    def revision(self) -> int:
        return self._revision

    # -- writes --

    def commit(self, compares: Sequence[Compare], operations: Sequence[Operation]) -> int | None:
        self.expire_leases()
        with self._lock:
            for compare in compares:
                current = self._keys.get(compare.key)
                if (current.mod_revision if current else 0) != compare.mod_revision:
                    return None
            for op in operations:
                if isinstance(op, Put) and op.lease != NO_LEASE and op.lease not in self._leases:
                    raise LeaseNotFoundError(op.lease)
            if not operations:
                return self._revision
            self._revision += 1
            for op in operations:
                if isinstance(op, Put):
                    self._put(op)
                else:
                    self._delete(op.key)
            return self._revision

    def create(self, key: str, value: bytes, lease: int = NO_LEASE) -> int | None:
        return self.commit([Compare(key, 0)], [Put(key, value, lease)])

    def compare_and_set(self, key: str, value: bytes, mod_revision: int, lease: int = NO_LEASE) -> int | None:
        return self.commit([Compare(key, mod_revision)], [Put(key, value, lease)])

    def delete(self, key: str, mod_revision: int | None = None) -> bool:
        self.expire_leases()
        with self._lock:
            if key not in self._keys:
                return False
            compares = [] if mod_revision is None else [Compare(key, mod_revision)]
            return self.commit(compares, [Delete(key)]) is not None

    def _put(self, op: Put) -> None:
        previous = self._keys.get(op.key)
        if previous is None:
            bisect.insort(self._sorted_keys, op.key)
        elif previous.lease != NO_LEASE and previous.lease in self._leases:
            self._leases[previous.lease].keys.discard(op.key)
        self._keys[op.key] = KeyValue(op.key, bytes(op.value), previous.create_revision if previous else self._revision,
                                      self._revision, op.lease)
        if op.lease != NO_LEASE:
            self._leases[op.lease].keys.add(op.key)
        self._notify(WatchEvent(WatchEventType.PUT, op.key, bytes(op.value), self._revision))

    def _delete(self, key: str) -> None:
        previous = self._keys.pop(key, None)
        if previous is None:
            return
        del self._sorted_keys[bisect.bisect_left(self._sorted_keys, key)]
        if previous.lease in self._leases:
            self._leases[previous.lease].keys.discard(key)
        self._notify(WatchEvent(WatchEventType.DELETE, key, b"", self._revision))

    # -- leases --

    def grant_lease(self, ttl_ms: int) -> int:
        ttl_ms = lease_ttl_seconds(ttl_ms) * 1000
        with self._lock:
            self._next_lease += 1
            self._leases[self._next_lease] = _Lease(ttl_ms, self._clock.hi_res_clock_ms() + ttl_ms)
            return self._next_lease

    def keep_alive(self, lease: int) -> bool:
        self.expire_leases()
        with self._lock:
            held = self._leases.get(lease)
            if held is None:
                return False
            held.deadline_ms = self._clock.hi_res_clock_ms() + held.ttl_ms
            return True

    def revoke_lease(self, lease: int) -> None:
        self.expire_leases()
        with self._lock:
            self._end_lease(lease)

    def expire_leases(self) -> None:
        """Delete the keys of every lease whose TTL has passed on the clock (each call does this first)."""
        with self._lock:
            now = self._clock.hi_res_clock_ms()
            for lease in [lease for lease, held in self._leases.items() if held.deadline_ms <= now]:
                self._end_lease(lease)

    def _end_lease(self, lease: int) -> None:
        held = self._leases.pop(lease, None)
        if held is None or not held.keys:
            return
        # etcd revokes a lease in one transaction: its keys go in one revision.
        self._revision += 1
        for key in sorted(held.keys):
            self._delete(key)

    # -- watches --

    def watch_prefix(self, prefix: str) -> _InMemoryWatch:
        with self._lock:
            watch = _InMemoryWatch(self, prefix)
            self._watches.append(watch)
            return watch

    def _notify(self, event: WatchEvent) -> None:
        for watch in self._watches:
            if event.key.startswith(watch.prefix):
                watch.events.append(event)
        self._changed.notify_all()

    def close(self) -> None:
        with self._lock:
            for watch in list(self._watches):
                watch.cancel()

    def __repr__(self) -> str:
        return f"InMemoryMetadataStore(revision={self._revision}, keys={len(self._keys)}, leases={len(self._leases)})"
