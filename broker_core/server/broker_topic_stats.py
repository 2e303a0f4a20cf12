"""Records and bytes in and out per topic (Kafka's ``BrokerTopicStats``).

Kafka's ``BrokerTopicMetrics`` meters, kept as plain counts (Prometheus takes
rates itself):

* ``MessagesInPerSec`` — records appended by Produce requests;
* ``BytesInPerSec`` — the bytes of the record batches those requests appended;
* ``BytesOutPerSec`` — the bytes of record batches answered to consumers' fetches;
* ``ReplicationBytesOutPerSec`` — the same to followers' fetches (no topic: Kafka keeps it broker-wide).

Writes by the broker's own coordinators (offsets, transaction state) are not
Produce requests and are not counted, as in Kafka. One lock, taken once per
partition of a request, keeps the counts exact under concurrent handlers.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Container


@dataclass
class TopicStats:
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class BrokerTopicStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: dict[str, TopicStats] = {}
        self.replication_bytes_out = 0

    def _of(self, topic: str) -> TopicStats:
        stats = self._topics.get(topic)
        if stats is None:
            stats = self._topics[topic] = TopicStats()
        return stats

    def record_append(self, topic: str, records: int, size: int) -> None:
        """A Produce request appended ``records`` records in ``size`` bytes of batches to ``topic``."""
        with self._lock:
            stats = self._of(topic)
            stats.messages_in += records
            stats.bytes_in += size

    def record_fetched(self, responses: list[dict], from_follower: bool) -> None:
        """A Fetch response's topics (``responses`` as the response body holds them) are being sent."""
        with self._lock:
            for topic in responses:
                size = sum(len(p["records"] or b"") for p in topic["partitions"])
                if not size:
                    continue
                if from_follower:
                    self.replication_bytes_out += size
                else:
                    self._of(topic["topic"]).bytes_out += size

    def snapshot(self, existing: Container[str]) -> dict[str, TopicStats]:
        """The counts of the topics in ``existing``; a deleted topic's counts go with it, however it was deleted
        (a DeleteTopics request here, the controller in a cluster), as Kafka removes its metrics."""
        with self._lock:
            for topic in [t for t in self._topics if t not in existing]:
                del self._topics[topic]
            return {topic: TopicStats(s.messages_in, s.bytes_in, s.bytes_out) for topic, s in self._topics.items()}
