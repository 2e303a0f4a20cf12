"""A broker's session with the metadata store: one lease, kept alive on a thread.

ZooKeeper gave each Kafka broker a session; its ephemeral nodes
(``/brokers/ids/N``, ``/controller``) lived as long as the session did. Here a
lease plays the session: granted with ``broker.session.timeout.ms`` (rounded up
to etcd's whole seconds), renewed every ``broker.heartbeat.interval.ms``. A
process that dies stops renewing, and after the timeout etcd deletes the keys
under the lease — the controller sees the broker go. ``close`` revokes the
lease at once (a clean stop need not wait for the timeout).

When a renewal answers that the lease is gone (the process was paused past the
timeout, or etcd was down that long), ``expired`` is set and ``on_expired`` is
called on the keep-alive thread; the owner then starts a new session and
registers again. A renewal that cannot reach the store is retried on the next
beat: the lease outlives short outages (etcd extends every lease's TTL when it
restarts).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from .metadata_store import MetadataStore, MetadataStoreError

__all__ = ["SessionLease"]

log = logging.getLogger(__name__)


class SessionLease:
    """A lease granted on ``store`` and renewed every ``heartbeat_interval_ms`` until ``close``."""

    def __init__(self, store: MetadataStore, session_timeout_ms: int, heartbeat_interval_ms: int,
                 on_expired: Callable[[int], None] | None = None, name: str = "session") -> None:
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError(f"{name}: broker.heartbeat.interval.ms ({heartbeat_interval_ms}) must be below "
                             f"broker.session.timeout.ms ({session_timeout_ms})")
        self._store = store
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._on_expired = on_expired
        self.lease = store.grant_lease(session_timeout_ms)
        self.expired = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{name}-keep-alive", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.wait(self._heartbeat_interval_ms / 1000):
            try:
                alive = self._store.keep_alive(self.lease)
            except MetadataStoreError as exc:
                log.warning("lease %x: renewal failed (%s); retrying", self.lease, exc)
                continue
            if not alive:
                log.warning("lease %x has expired: its keys are gone", self.lease)
                self.expired.set()
                if self._on_expired is not None:
                    self._on_expired(self.lease)
                return

    def close(self, revoke: bool = True) -> None:
        """Stop renewing; with ``revoke``, end the lease now (its keys are deleted at once)."""
        self._closed.set()
        self._thread.join(timeout=5)
        if revoke and not self.expired.is_set():
            try:
                self._store.revoke_lease(self.lease)
            except MetadataStoreError as exc:
                log.warning("lease %x: could not revoke it (%s); it expires by itself", self.lease, exc)
