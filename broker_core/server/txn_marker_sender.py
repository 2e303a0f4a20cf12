"""``WriteTxnMarkersSender``: the transaction coordinator's markers to the leaders on other brokers
(the network side of Kafka's TransactionMarkerChannelManager).

It is the coordinator's ``MarkerDestinations`` in a cluster: who leads a
partition comes from ``leader_of`` (the broker's metadata cache, with
``for_metadata``), and the markers
of one round for one broker go in one WriteTxnMarkers request over a
``ProtocolClient`` kept per destination broker, found through ``endpoint_of``.
Each request waits at most ``request_timeout_ms``; a connection that fails
or times out is dropped and opened again on the next round, and every marker
it carried fails with NETWORK_EXCEPTION, to be retried by the coordinator.
One request at a time goes to each broker.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from format.layout import TopicPartition

from ..client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from ..client.protocol_client import ProtocolClient
from ..coordinator.transaction import TxnMarker
from ..coordinator.transaction import wire as txn_wire
from ..controller.partition_state import NO_LEADER
from ..errors import (NONE, BrokerNotAvailableError, KafkaError, NetworkExceptionError, SaslAuthenticationFailedError,
                      UnknownServerError, UnknownTopicOrPartitionError, error_for_code)
from ..protocol import ApiKey, ProtocolError
from .metadata_cache import MetadataCache

__all__ = ["WriteTxnMarkersSender"]

log = logging.getLogger(__name__)

#: Kafka's ``request.timeout.ms`` default.
DEFAULT_REQUEST_TIMEOUT_MS = 30_000


class _Destination:
    """The connection to one broker, opened on demand; one request at a time."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address = address
        self.lock = threading.Lock()
        self.client: ProtocolClient | None = None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class WriteTxnMarkersSender:
    """Sends markers to partition leaders with WriteTxnMarkers; a ``MarkerDestinations``."""

    def __init__(self, broker_id: int, leader_of: Callable[[TopicPartition], int | None],
                 endpoint_of: Callable[[int], tuple[str, int] | None], *,
                 request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        """``leader_of`` answers the ``MarkerDestinations`` question (None: no leader now; raises
        UnknownTopicOrPartitionError for a partition the cluster does not have); ``endpoint_of`` the
        host and port of a broker on the inter-broker listener (None: not registered)."""
        self.broker_id = broker_id
        self._leader_of = leader_of
        self.endpoint_of = endpoint_of
        self.request_timeout_ms = request_timeout_ms
        #: How brokers are reached (the inter-broker listener's security protocol).
        self.security = security
        self._lock = threading.Lock()
        self._destinations: dict[int, _Destination] = {}
        self._closed = False

    @classmethod
    def for_metadata(cls, broker_id: int, metadata_cache: MetadataCache, listener_name: str, *,
                     request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                     security: ClientSecurity = PLAINTEXT_CLIENT) -> WriteTxnMarkersSender:
        """The sender of a cluster's broker: leaders from its metadata cache (a partition of no topic
        there was deleted), brokers reached on ``listener_name`` (the inter-broker listener)."""
        def leader_of(tp: TopicPartition) -> int | None:
            partition = metadata_cache.partition(tp)
            if partition is None:
                raise UnknownTopicOrPartitionError(f"{tp} is not in the cluster's metadata")
            return None if partition.leader == NO_LEADER else partition.leader

        def endpoint_of(node_id: int) -> tuple[str, int] | None:
            endpoint = metadata_cache.endpoint(node_id, listener_name)
            return None if endpoint is None else (endpoint.host or "127.0.0.1", endpoint.port)

        return cls(broker_id, leader_of, endpoint_of, request_timeout_ms=request_timeout_ms, security=security)

    def leader_of(self, tp: TopicPartition) -> int | None:
        return self._leader_of(tp)

    def write_remote(self, node_id: int, markers: list[TxnMarker]) -> dict[TopicPartition, KafkaError]:
        """One WriteTxnMarkers to broker ``node_id``; the partitions that failed, with the error answered
        (or NETWORK_EXCEPTION / BROKER_NOT_AVAILABLE when it could not be asked)."""
        address = self.endpoint_of(node_id)
        if address is None:
            return _all_failed(markers, BrokerNotAvailableError(f"broker {node_id} is not registered"))
        destination = self._destination(node_id, address)
        if destination is None:
            return _all_failed(markers, BrokerNotAvailableError("the marker sender is closed"))
        with destination.lock:
            try:
                if destination.client is None:
                    destination.client = ProtocolClient(f"{address[0]}:{address[1]}",
                                                        client_id=f"broker-{self.broker_id}-txn-marker-sender",
                                                        timeout_s=self.request_timeout_ms / 1000,
                                                        security=self.security)
                response = destination.client.send(ApiKey.WRITE_TXN_MARKERS,
                                                   txn_wire.write_txn_markers_request(markers))
            except (OSError, ProtocolError, SaslAuthenticationFailedError) as exc:
                destination.close()
                log.warning("sending %d transaction markers to broker %d at %s:%d failed: %s", len(markers), node_id,
                            address[0], address[1], exc)
                return _all_failed(markers, NetworkExceptionError(
                    f"broker {node_id} at {address[0]}:{address[1]}: {exc or type(exc).__name__}"))
        answered = txn_wire.parse_write_txn_markers_response(response)
        failed: dict[TopicPartition, KafkaError] = {}
        for marker in markers:
            tp = marker.topic_partition
            code = answered.get((marker.producer_id, tp))
            if code is None:
                failed[tp] = UnknownServerError(f"broker {node_id} did not answer for {tp}")
            elif code != NONE:
                error = error_for_code(code)
                failed[tp] = error(f"broker {node_id} answered {error.kafka_error_name} for {tp}")
        return failed

    def _destination(self, node_id: int, address: tuple[str, int]) -> _Destination | None:
        """The connection state of ``node_id``, a new one when the broker moved to another address."""
        with self._lock:
            if self._closed:
                return None
            moved = destination = self._destinations.get(node_id)
            if destination is None or destination.address != address:
                destination = self._destinations[node_id] = _Destination(address)
            else:
                moved = None
        if moved is not None:
            with moved.lock:
                moved.close()
        return destination

    def close(self) -> None:
        with self._lock:
            self._closed = True
            destinations, self._destinations = self._destinations, {}
        for destination in destinations.values():
            with destination.lock:
                destination.close()

    def __repr__(self) -> str:
        return f"WriteTxnMarkersSender(broker_id={self.broker_id}, destinations={sorted(self._destinations)})"


def _all_failed(markers: list[TxnMarker], error: KafkaError) -> dict[TopicPartition, KafkaError]:
    return {m.topic_partition: error for m in markers}
