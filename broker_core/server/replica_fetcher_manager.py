"""The follower side of this broker: one ``ReplicaFetcherThread`` per leader it follows (Kafka's
``ReplicaFetcherManager``).

A partition handed over for another leader leaves its old leader's thread; a
thread left with no partitions is stopped.
"""

from __future__ import annotations

import threading
from typing import Callable, Iterable

from format.layout import TopicPartition

from ..client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from ..cluster.partition import Partition
from ..network.endpoint import EndPoint
from ..log.remote.remote_log_reader import RemoteLogReader
from .replica_fetcher_thread import ReplicaFetcherThread

__all__ = ["ReplicaFetcherManager"]


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, leader_endpoint: Callable[[int], EndPoint | None],
                 on_appended: Callable[[TopicPartition], None] = lambda tp: None,
                 remote_log_reader: RemoteLogReader | None = None,
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        """``security``: how the fetchers connect to leaders (the inter-broker listener's protocol)."""
        self.broker_id = broker_id
        self._security = security
        self._remote_log_reader = remote_log_reader
        self._leader_endpoint = leader_endpoint
        self._on_appended = on_appended
        self._threads: dict[int, ReplicaFetcherThread] = {}
        self._lock = threading.Lock()

    def add_partition(self, leader_id: int, partition: Partition) -> None:
        """Fetch ``partition`` from ``leader_id`` (after truncating by leader epoch)."""
        tp = partition.topic_partition
        with self._lock:
            for other, thread in self._threads.items():
                if other != leader_id:
                    thread.remove_partitions([tp])
            thread = self._threads.get(leader_id)
            if thread is None:
                thread = ReplicaFetcherThread(self.broker_id, leader_id, self._leader_endpoint, self._on_appended,
                                              self._remote_log_reader, self._security)
                self._threads[leader_id] = thread
            thread.add_partition(partition)
            self._stop_idle_threads()

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        tps = list(tps)
        with self._lock:
            for thread in self._threads.values():
                thread.remove_partitions(tps)
            self._stop_idle_threads()

    def _stop_idle_threads(self) -> None:
        for leader_id in [b for b, t in self._threads.items() if t.partition_count == 0]:
            self._threads.pop(leader_id).shutdown()

    def shutdown(self) -> None:
        with self._lock:
            threads, self._threads = list(self._threads.values()), {}
        for thread in threads:
            thread.shutdown()
