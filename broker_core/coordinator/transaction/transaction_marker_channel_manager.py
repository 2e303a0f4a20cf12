"""Writing the COMMIT or ABORT marker of a transaction into each of its partitions (Kafka's
TransactionMarkerChannelManager and WriteTxnMarkers, on one broker: local appends).

A marker is appended as the coordinator, with the producer's epoch and the
coordinator epoch, through ``Broker.append_control_marker``. A partition that
no longer exists (its topic was deleted) needs no marker, as in Kafka. A
partition whose append fails otherwise (its log dir offline) stays pending;
the coordinator tries it again later. Listeners hear of every marker written
— the server wakes fetches waiting on the partition's last stable offset,
and the group coordinator completes offsets committed in the transaction when
the partition is one of ``__consumer_offsets``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from format.layout import TopicPartition

from ...errors import (InvalidProducerEpochError, KafkaError, TransactionCoordinatorFencedError,
                       UnknownTopicOrPartitionError)

if TYPE_CHECKING:
    from ...broker import Broker

__all__ = ["TransactionMarkerChannelManager", "TxnMarker", "MarkerListener"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TxnMarker:
    """The marker written into ``topic_partition`` for one producer's transaction."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


MarkerListener = Callable[[TxnMarker], None]


class TransactionMarkerChannelManager:
    """Appends markers to the broker's own partitions and tells the listeners."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._listeners: list[MarkerListener] = []

    def add_listener(self, listener: MarkerListener) -> None:
        self._listeners.append(listener)

    def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KafkaError]:
        """Write the marker into every partition; the partitions that failed, with why (to retry)."""
        failed: dict[TopicPartition, KafkaError] = {}
        for tp in sorted(partitions):
            marker = TxnMarker(tp, producer_id, producer_epoch, coordinator_epoch, commit)
            try:
                self.broker.append_control_marker(tp.topic, tp.partition, producer_id, producer_epoch,
                                                  coordinator_epoch, commit)
            except UnknownTopicOrPartitionError:
                log.info("transactional id %r: %s is gone, it needs no %s marker", transactional_id, tp,
                         "COMMIT" if commit else "ABORT")
                continue
            except (InvalidProducerEpochError, TransactionCoordinatorFencedError) as exc:
                # A newer epoch or coordinator has written there since: this marker is obsolete.
                log.warning("transactional id %r: the marker for %s is obsolete: %s", transactional_id, tp, exc)
                continue
            except KafkaError as exc:
                log.warning("transactional id %r: writing the %s marker of producer %d epoch %d to %s failed: %s",
                            transactional_id, "COMMIT" if commit else "ABORT", producer_id, producer_epoch, tp, exc)
                failed[tp] = exc
                continue
            for listener in self._listeners:
                try:
                    listener(marker)
                except Exception:
                    log.exception("a listener of the marker in %s failed", tp)
        return failed
