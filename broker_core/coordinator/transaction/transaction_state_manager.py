"""``TransactionStateManager``: every transactional id's metadata, kept in ``__transaction_state``.

It owns the cache of ``TransactionMetadata`` and its persistence: a prepared
change is written as one record to the id's partition
(``partition_for_transactional_id``) of the broker's ``__transaction_state``
topic (compacted, uncompressed, created with Kafka's settings on first use)
before it is applied, and ``load`` replays the topic at start-up — until it
has, the manager raises COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Iterable

from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

from ...clock import Clock
from ...errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, KafkaError,
                       TopicAlreadyExistsError)
from ..append_errors import append_error_type
from .config import TransactionConfig
from .transaction_log import (TRANSACTION_STATE_TOPIC, InvalidTransactionLogRecordError, decode_key, decode_value,
                              encode_key, encode_value, partition_for_transactional_id)
from .transaction_metadata import TransactionMetadata, TxnTransitMetadata
from .transaction_state import TransactionState

if TYPE_CHECKING:
    from ...broker import Broker

__all__ = ["TransactionStateManager", "ensure_transaction_state_topic", "transaction_state_topic_config",
           "append_error"]

log = logging.getLogger(__name__)

_S = TransactionState

def append_error(exc: BaseException) -> KafkaError:
    """The error a client gets when writing ``__transaction_state`` failed with ``exc``."""
    error = append_error_type(exc)
    return exc if isinstance(exc, error) else error(str(exc))


def transaction_state_topic_config(config: TransactionConfig) -> dict[str, object]:
    """The settings ``__transaction_state`` is created with (Kafka's ``transactionTopicConfigs``; a cluster
    adds ``min.insync.replicas``)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": config.transaction_state_log_segment_bytes,
        "compression.type": "uncompressed",  # Kafka's TransactionLog.ENFORCED_COMPRESSION
        "unclean.leader.election.enable": False,
    }


def ensure_transaction_state_topic(broker: Broker, config: TransactionConfig) -> int:
    """Create ``__transaction_state`` with Kafka's settings unless it exists; returns its partition count."""
    if broker.topics.get(TRANSACTION_STATE_TOPIC) is None:
        try:
            broker.create_topic(TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions,
                                transaction_state_topic_config(config))
        except TopicAlreadyExistsError:
            pass  # created by a concurrent request
    # An existing topic keeps its partition count whatever the configuration says now.
    return broker.partitions_for(TRANSACTION_STATE_TOPIC)


class TransactionStateManager:
    """The transactional ids of one broker (which, with one broker, coordinates them all)."""

    def __init__(self, broker: Broker, config: TransactionConfig, clock: Clock) -> None:
        self.broker = broker
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()
        self._metadata: dict[str, TransactionMetadata] = {}
        self._num_partitions: int | None = None
        self._active = False
        self._loading = False

    # --- lifecycle ---------------------------------------------------------------------

    def startup(self) -> None:
        with self._lock:
            self._active = True
            self._loading = True

    def shutdown(self) -> None:
        with self._lock:
            self._active = False
            self._metadata.clear()

    @property
    def is_loading(self) -> bool:
        return self._loading

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def num_partitions(self) -> int:
        """``transaction.state.log.num.partitions`` as the topic really has it (ids hash over it)."""
        if self._num_partitions is None:
            if self.broker.topics.get(TRANSACTION_STATE_TOPIC) is None:
                return self.config.transaction_state_log_num_partitions  # what it is created with
            self._num_partitions = self.broker.partitions_for(TRANSACTION_STATE_TOPIC)
        return self._num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_transactional_id(transactional_id, self.num_partitions)

    def check_available(self) -> None:
        """Raise what a request gets from a coordinator not running or still loading."""
        if not self._active:
            raise CoordinatorNotAvailableError("the transaction coordinator is not running")
        if self._loading:
            raise CoordinatorLoadInProgressError(f"the transaction coordinator is loading "
                                                 f"{TRANSACTION_STATE_TOPIC}")

    # --- the cache ------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        self.check_available()
        with self._lock:
            return self._metadata.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """``metadata``, or the one another request put first."""
        with self._lock:
            return self._metadata.setdefault(metadata.transactional_id, metadata)

    def all(self) -> list[TransactionMetadata]:
        self.check_available()
        with self._lock:
            return sorted(self._metadata.values(), key=lambda m: m.transactional_id)

    def remove(self, metadata: TransactionMetadata) -> None:
        with self._lock:
            if self._metadata.get(metadata.transactional_id) is metadata:
                del self._metadata[metadata.transactional_id]

    # --- writing ---------------------------------------------------------------------------

    def append(self, metadata: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        """Write the prepared change to the log, then apply it; on failure drop it and raise the
        KafkaError the client gets (``append_error``). The caller holds ``metadata.lock``."""
        key = encode_key(metadata.transactional_id)
        value = None if transit.state is _S.DEAD else encode_value(transit.value)
        try:
            self._append_record(metadata.transactional_id, key, value)
        except Exception as exc:
            metadata.abort_pending_transition()
            error = append_error(exc)
            log.warning("transactional id %r: writing %s to %s failed (%s): %s", metadata.transactional_id,
                        transit.state, TRANSACTION_STATE_TOPIC, error.name, exc)
            raise error from exc
        metadata.complete_transition_to(transit)

    def _append_record(self, transactional_id: str, key: bytes, value: bytes | None) -> None:
        if self._num_partitions is None or self.broker.topics.get(TRANSACTION_STATE_TOPIC) is None:
            self._num_partitions = ensure_transaction_state_topic(self.broker, self.config)
        now = self.clock.milliseconds()
        batch = build_batch([SimpleRecord(value, key, now)], default_timestamp=now)
        self.broker.produce_batches(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id), batch)

    # --- loading ---------------------------------------------------------------------------

    def load(self) -> list[TransactionMetadata]:
        """Replay ``__transaction_state``: every transactional id becomes live and loading ends.

        Returns the transactions that were preparing (PrepareCommit or PrepareAbort), whose markers
        the coordinator must write again. If the topic cannot be read this raises and the manager
        keeps answering COORDINATOR_LOAD_IN_PROGRESS.
        """
        loaded: dict[str, TransactionMetadata] = {}
        if self.broker.topics.get(TRANSACTION_STATE_TOPIC) is not None:
            for partition in range(self.num_partitions):
                self._replay_partition(partition, loaded)
        with self._lock:
            self._metadata.update(loaded)
            self._loading = False
        preparing = [m for m in loaded.values() if m.state.is_preparing]
        log.info("transaction coordinator: loaded %d transactional ids from %s (%d preparing)", len(loaded),
                 TRANSACTION_STATE_TOPIC, len(preparing))
        return preparing

    def _replay_partition(self, partition: int, loaded: dict[str, TransactionMetadata]) -> None:
        lg = self.broker.log_manager.log_or_raise(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        offset, end = lg.log_start_offset, lg.high_watermark
        while offset < end:
            fetched = self.broker.fetch(TRANSACTION_STATE_TOPIC, partition, offset,
                                        self.config.transaction_state_log_load_buffer_size)
            next_offset = offset
            for batch in iter_batches(fetched.records):
                next_offset = batch.header.next_offset
                if batch.header.is_control:
                    continue
                for record in batch.records():
                    if record.offset >= offset and record.key is not None:
                        self._replay_record(partition, record.offset, record.key, record.value, loaded)
            if next_offset <= offset:
                break
            offset = next_offset

    @staticmethod
    def _replay_record(partition: int, log_offset: int, key: bytes, value: bytes | None,
                       loaded: dict[str, TransactionMetadata]) -> None:
        try:
            transactional_id = decode_key(key)
            if value is None:
                loaded.pop(transactional_id, None)
                return
            loaded[transactional_id] = TransactionMetadata.loaded(transactional_id, decode_value(value))
        except InvalidTransactionLogRecordError as exc:
            log.warning("%s-%d offset %d: skipping a record that cannot be decoded: %s", TRANSACTION_STATE_TOPIC,
                        partition, log_offset, exc)

    def matching(self, predicate: Callable[[TransactionMetadata], bool]) -> Iterable[TransactionMetadata]:
        """The loaded transactional ids ``predicate`` holds for (read without their locks)."""
        with self._lock:
            candidates = list(self._metadata.values())
        return [m for m in candidates if predicate(m)]
