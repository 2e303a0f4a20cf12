"""The metadata store under test, either implementation, with time that passes the way each needs.

``InMemoryMetadataStore`` runs on a ``MockTime`` that ``pass_time`` moves; an
``EtcdMetadataStore`` on a real etcd, where ``pass_time`` sleeps. ``eventually``
asks a question until it holds: at once for the fake (its clock is exact), within
a bounded wait for etcd (it expires leases on its own schedule).
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from broker_core.clock import MockTime
from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.in_memory_metadata_store import InMemoryMetadataStore
from broker_core.controller.metadata_store import MetadataStore, Watch, WatchEvent

T = TypeVar("T")

# Start the fake's clock away from zero, as real clocks are.
START_MS = 1_700_000_000_000


class StoreCase:
    name: str
    store: MetadataStore

    def pass_time(self, ms: int) -> None:
        raise NotImplementedError

    def eventually(self, probe: Callable[[], T], timeout_s: float = 10.0) -> T:
        raise NotImplementedError

    def events(self, watch: Watch, count: int, timeout_s: float = 10.0) -> list[WatchEvent]:
        """At least ``count`` events of ``watch`` (fewer if they do not come in time)."""
        raise NotImplementedError


class InMemoryCase(StoreCase):
    name = "in-memory"

    def __init__(self) -> None:
        self.clock = MockTime(current_time_ms=START_MS)
        self.store = InMemoryMetadataStore(self.clock)

    def pass_time(self, ms: int) -> None:
        self.clock.sleep(ms)

    def eventually(self, probe: Callable[[], T], timeout_s: float = 10.0) -> T:
        return probe()

    def events(self, watch: Watch, count: int, timeout_s: float = 10.0) -> list[WatchEvent]:
        return watch.poll()


class EtcdCase(StoreCase):
    name = "etcd"

    def __init__(self, connect: str) -> None:
        from broker_core.controller.etcd_metadata_store import EtcdMetadataStore

        self.store = EtcdMetadataStore(parse_etcd_connect(connect), request_timeout_ms=5000)

    def pass_time(self, ms: int) -> None:
        time.sleep(ms / 1000)

    def eventually(self, probe: Callable[[], T], timeout_s: float = 10.0) -> T:
        deadline = time.monotonic() + timeout_s
        while True:
            value = probe()
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.05)

    def events(self, watch: Watch, count: int, timeout_s: float = 10.0) -> list[WatchEvent]:
        found: list[WatchEvent] = []
        deadline = time.monotonic() + timeout_s
        while len(found) < count and time.monotonic() < deadline:
            found += watch.poll(timeout_s=0.1)
        # Anything more that is already on its way.
        found += watch.poll(timeout_s=0.2)
        return found
