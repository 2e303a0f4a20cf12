"""The controller's own thread: Kafka's ``ControllerEventManager``.

``KafkaController`` is a single-threaded state machine; this runs it. One
thread stands for election, then polls the store's watch and lets the clock's
due work run, and every request from another thread (a ControlledShutdown, a
preferred-leader election) runs under the same lock, so decisions are made one
at a time. Each batch of state changes goes to ``on_changes`` — whatever
carries them to the brokers. While the store cannot be reached the thread logs
and keeps trying: the controller carries on when etcd is back.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable

from format.layout import TopicPartition

from .kafka_controller import ControlledShutdownResult, KafkaController
from .metadata_store import MetadataStoreError
from .partition_state import PartitionStateChange

__all__ = ["ControllerEventManager"]

log = logging.getLogger(__name__)

ChangeListener = Callable[[list[PartitionStateChange]], None]


class ControllerEventManager:
    """Runs ``controller`` on a daemon thread from ``start`` to ``close``."""

    def __init__(self, controller: KafkaController, on_changes: ChangeListener | None = None,
                 poll_interval_ms: int = 100) -> None:
        self.controller = controller
        self._on_changes = on_changes
        self._poll_interval_s = poll_interval_ms / 1000
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"controller-event-thread-{controller.broker_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _deliver(self, changes: list[PartitionStateChange]) -> None:
        if changes and self._on_changes is not None:
            self._on_changes(changes)

    def _run(self) -> None:
        started = False
        while not self._closed.is_set():
            try:
                with self._lock:
                    changes = self.controller.poll(self._poll_interval_s) if started else self.controller.startup()
                started = True
                self._deliver(changes)
            except MetadataStoreError as exc:
                log.warning("controller %d: the metadata store did not answer (%s); trying again",
                            self.controller.broker_id, exc)
                self._closed.wait(self._poll_interval_s)
            except Exception:  # noqa: BLE001 - the controller's thread must not die of one bad event
                log.exception("controller %d: handling an event failed; carrying on", self.controller.broker_id)
                self._closed.wait(self._poll_interval_s)

    def controlled_shutdown(self, broker_id: int) -> ControlledShutdownResult:
        """``KafkaController.controlled_shutdown`` on the controller's turn; its changes are delivered."""
        with self._lock:
            result = self.controller.controlled_shutdown(broker_id)
        self._deliver(list(result.changes))
        return result

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition] | None = None
                                ) -> list[PartitionStateChange]:
        with self._lock:
            changes = self.controller.elect_preferred_leaders(partitions)
        self._deliver(changes)
        return changes

    def on_session_renewed(self, lease: int) -> None:
        with self._lock:
            changes = self.controller.on_session_renewed(lease)
        self._deliver(changes)

    def close(self) -> None:
        """Stop the thread and resign (another broker's controller takes over at once)."""
        self._closed.set()
        if self._thread.ident is not None:  # a broker whose start failed never started it
            self._thread.join(timeout=10)
        with self._lock:
            self.controller.shutdown()
