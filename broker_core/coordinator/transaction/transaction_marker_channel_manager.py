"""Writing the COMMIT or ABORT marker of a transaction into each of its partitions (Kafka's
TransactionMarkerChannelManager).

A marker is written by the leader of its partition, with the producer's epoch
and the coordinator epoch (that of the transactional id's
``__transaction_state`` partition). On a single broker every partition is
local: the marker is appended through ``Broker.append_control_marker``. In a
cluster the ``MarkerDestinations`` say who leads each partition: the
partitions this broker leads are appended here, the others go to their
leaders in one WriteTxnMarkers request per broker and round.

A partition that no longer exists (its topic was deleted) needs no marker,
and neither does one where a newer producer epoch or coordinator has written
since (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED): the marker is
obsolete, as in Kafka. Any other failure (no leader, NOT_LEADER_OR_FOLLOWER,
a broker that cannot be reached, a log dir offline) leaves the partition
pending; the coordinator tries it again later. Listeners hear of every marker
appended here — whether this broker's coordinator or another broker's
WriteTxnMarkers asked for it (``append_marker``): the server wakes fetches
waiting on the partition's last stable offset, and the group coordinator
completes offsets committed in the transaction when the partition is one of
``__consumer_offsets``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from format.layout import TopicPartition

from ...errors import (InvalidProducerEpochError, KafkaError, LeaderNotAvailableError,
                       TransactionCoordinatorFencedError, UnknownServerError, UnknownTopicOrPartitionError)

if TYPE_CHECKING:
    from ...broker import Broker

__all__ = ["TransactionMarkerChannelManager", "TxnMarker", "MarkerListener", "MarkerDestinations"]

log = logging.getLogger(__name__)

#: Errors that make a marker unneeded: a newer producer epoch or coordinator epoch already wrote there.
_OBSOLETE = (InvalidProducerEpochError, TransactionCoordinatorFencedError)


@dataclass(frozen=True)
class TxnMarker:
    """The marker written into ``topic_partition`` for one producer's transaction."""

    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


MarkerListener = Callable[[TxnMarker], None]


class MarkerDestinations(Protocol):
    """Where the markers of partitions go in a cluster: the leaders, and the way to reach them."""

    def leader_of(self, tp: TopicPartition) -> int | None:
        """The broker leading ``tp``; None while it has no leader. Raises UnknownTopicOrPartitionError
        for a partition the cluster does not have (its topic was deleted): it needs no marker."""

    def write_remote(self, node_id: int, markers: list[TxnMarker]) -> dict[TopicPartition, KafkaError]:
        """Have broker ``node_id`` write ``markers`` (WriteTxnMarkers); the partitions that failed, with why."""


class TransactionMarkerChannelManager:
    """Appends markers to the partitions this broker leads, sends the others to their leaders, and
    tells the listeners of the markers appended here."""

    def __init__(self, broker: Broker, destinations: MarkerDestinations | None = None) -> None:
        """Without ``destinations`` (a single broker) every partition is local."""
        self.broker = broker
        self.destinations = destinations
        self._listeners: list[MarkerListener] = []

    def add_listener(self, listener: MarkerListener) -> None:
        self._listeners.append(listener)

    def append_marker(self, marker: TxnMarker) -> None:
        """Append ``marker`` to its partition of this broker, then tell the listeners; raises the
        KafkaError the append failed with (what WriteTxnMarkers answers for the partition)."""
        tp = marker.topic_partition
        self.broker.append_control_marker(tp.topic, tp.partition, marker.producer_id, marker.producer_epoch,
                                          marker.coordinator_epoch, marker.commit)
        for listener in self._listeners:
            try:
                listener(marker)
            except Exception:
                log.exception("a listener of the marker in %s failed", tp)

    def write_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                      commit: bool, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, KafkaError]:
        """Write the marker into every partition; the partitions that failed, with why (to retry)."""
        failed: dict[TopicPartition, KafkaError] = {}
        remote: dict[int, list[TxnMarker]] = {}
        for tp in sorted(partitions):
            marker = TxnMarker(tp, producer_id, producer_epoch, coordinator_epoch, commit)
            try:
                leader = self._leader_of(tp)
                if leader is None:
                    raise LeaderNotAvailableError(f"{tp} has no leader")
                if leader != self.broker.node_id:
                    remote.setdefault(leader, []).append(marker)
                    continue
                self.append_marker(marker)
            except KafkaError as exc:
                self._note_failure(transactional_id, marker, exc, failed)
        for node_id, markers in sorted(remote.items()):
            try:
                errors = self.destinations.write_remote(node_id, markers)
            except Exception as exc:  # noqa: BLE001 - the partitions stay pending whatever went wrong
                log.exception("sending markers to broker %d failed", node_id)
                errors = {m.topic_partition: UnknownServerError(f"sending to broker {node_id} failed: {exc}")
                          for m in markers}
            for marker in markers:
                error = errors.get(marker.topic_partition)
                if error is not None:
                    self._note_failure(transactional_id, marker, error, failed, node_id)
        return failed

    def _leader_of(self, tp: TopicPartition) -> int | None:
        return self.broker.node_id if self.destinations is None else self.destinations.leader_of(tp)

    def _note_failure(self, transactional_id: str, marker: TxnMarker, exc: KafkaError,
                      failed: dict[TopicPartition, KafkaError], node_id: int | None = None) -> None:
        """Record a partition to retry, unless its marker is not needed any more."""
        tp = marker.topic_partition
        kind = "COMMIT" if marker.commit else "ABORT"
        if isinstance(exc, UnknownTopicOrPartitionError) and node_id is None:
            log.info("transactional id %r: %s is gone, it needs no %s marker", transactional_id, tp, kind)
        elif isinstance(exc, _OBSOLETE):
            log.warning("transactional id %r: the marker for %s is obsolete: %s", transactional_id, tp, exc)
        else:
            where = "" if node_id is None else f" on broker {node_id}"
            log.warning("transactional id %r: writing the %s marker of producer %d epoch %d to %s%s failed: %s",
                        transactional_id, kind, marker.producer_id, marker.producer_epoch, tp, where, exc)
            failed[tp] = exc
