"""The metadata store boundary: what the controller and the brokers need from etcd.

Kafka 0.11 kept its cluster state in ZooKeeper; seglog keeps the same state in
etcd, and this module says which of etcd's features it leans on, so the same
contract has two implementations: ``EtcdMetadataStore`` (the real one) and
``InMemoryMetadataStore`` (driven by an injected clock, for unit tests). The
contract tests in ``tests/broker_core/controller/test_metadata_store.py`` run
against both, which is what keeps the fake honest.

What maps to what:

* a ZooKeeper znode's version → the key's ``mod_revision`` (the store-wide
  revision of the key's last write; ``0`` for a key that does not exist);
* a versioned ``setData`` / ``create`` / a ZooKeeper ``multi`` → ``commit``:
  every ``Compare`` must hold, then every operation is applied, atomically;
* an ephemeral znode → a key ``Put`` under a lease: when the lease is revoked
  or not kept alive for its TTL, its keys are deleted;
* a children or data watch → ``watch_prefix``: the puts and deletes under a
  prefix, in order, including the deletes of an expired lease.

Keys are ``str`` paths (``/brokers/ids/1``), values ``bytes``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, Sequence, Union

__all__ = [
    "NO_LEASE",
    "KeyValue",
    "Compare",
    "Put",
    "Delete",
    "Operation",
    "WatchEventType",
    "WatchEvent",
    "Watch",
    "MetadataStore",
    "MetadataStoreError",
    "LeaseNotFoundError",
    "MetadataStoreUnavailableError",
    "lease_ttl_seconds",
]

#: The lease id of a key that has none (etcd's ``0``).
NO_LEASE = 0


class MetadataStoreError(Exception):
    """The metadata store refused or could not carry out a request."""


class LeaseNotFoundError(MetadataStoreError):
    """A write named a lease that has expired or was revoked (etcd's ``requested lease not found``)."""

    def __init__(self, lease: int) -> None:
        super().__init__(f"lease {lease:x} not found: it expired or was revoked")
        self.lease = lease


class MetadataStoreUnavailableError(MetadataStoreError):
    """No endpoint of the store answered."""


@dataclass(frozen=True)
class KeyValue:
    """One key as read: its value, the revisions of its creation and last write, its lease."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int = NO_LEASE


@dataclass(frozen=True)
class Compare:
    """A condition of a ``commit``: ``key``'s ``mod_revision`` equals this (``0``: the key is absent)."""

    key: str
    mod_revision: int


@dataclass(frozen=True)
class Put:
    """Write ``value`` at ``key``, attached to ``lease`` (or to none)."""

    key: str
    value: bytes
    lease: int = NO_LEASE


@dataclass(frozen=True)
class Delete:
    """Delete ``key`` (nothing happens if it is absent)."""

    key: str


Operation = Union[Put, Delete]


class WatchEventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"
    # The watch was interrupted and events may be missing (etcd compacted the
    # history it would have resumed from): read the state again.
    RESYNC = "RESYNC"


@dataclass(frozen=True)
class WatchEvent:
    """One change under a watched prefix; ``value`` is empty for a delete."""

    type: WatchEventType
    key: str
    value: bytes = b""
    mod_revision: int = 0


class Watch(Protocol):
    """The changes under one prefix from the moment the watch was created, in revision order."""

    def poll(self, timeout_s: float = 0.0) -> list[WatchEvent]:
        """The events that arrived, waiting up to ``timeout_s`` for the first one."""
        ...

    def cancel(self) -> None:
        """Stop watching; ``poll`` answers ``[]`` from then on."""
        ...


class MetadataStore(Protocol):
    """A small key-value store with revisions, transactions, leases and watches (etcd's v3 model)."""

    def get(self, key: str) -> KeyValue | None:
        """The key, or ``None`` if it is absent."""
        ...

    def get_prefix(self, prefix: str) -> list[KeyValue]:
        """Every key starting with ``prefix``, sorted by key."""
        ...

    def commit(self, compares: Sequence[Compare], operations: Sequence[Operation]) -> int | None:
        """Apply ``operations`` atomically if every compare holds.

        Returns the store's revision after the write (the ``mod_revision`` every
        put now has), or ``None`` when a compare failed and nothing was written.
        Raises ``LeaseNotFoundError`` when a put names a lease that is gone.
        """
        ...

    def create(self, key: str, value: bytes, lease: int = NO_LEASE) -> int | None:
        """Create ``key`` if it is absent; the new ``mod_revision``, or ``None`` if it exists."""
        ...

    def compare_and_set(self, key: str, value: bytes, mod_revision: int, lease: int = NO_LEASE) -> int | None:
        """Write ``key`` if its ``mod_revision`` is still ``mod_revision``; the new one, or ``None``."""
        ...

    def delete(self, key: str, mod_revision: int | None = None) -> bool:
        """Delete ``key`` (only at ``mod_revision`` when given); whether a key was deleted."""
        ...

    def grant_lease(self, ttl_ms: int) -> int:
        """A new lease that expires unless kept alive within ``ttl_ms`` (whole seconds for etcd)."""
        ...

    def keep_alive(self, lease: int) -> bool:
        """Restart the lease's TTL; ``False`` if it has already expired or was revoked."""
        ...

    def revoke_lease(self, lease: int) -> None:
        """End the lease now and delete its keys; a lease already gone is no error."""
        ...

    def watch_prefix(self, prefix: str) -> Watch:
        """Watch the puts and deletes of every key starting with ``prefix``."""
        ...

    def close(self) -> None:
        """Release connections and stop the watches."""
        ...


def lease_ttl_seconds(ttl_ms: int) -> int:
    """etcd's lease TTL (whole seconds, at least 1) for a timeout in milliseconds, rounded up."""
    if ttl_ms <= 0:
        raise ValueError(f"a lease TTL must be positive, got {ttl_ms} ms")
    return max(1, -(-ttl_ms // 1000))
