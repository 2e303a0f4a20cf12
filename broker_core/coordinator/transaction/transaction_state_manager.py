"""``TransactionStateManager``: every transactional id's metadata, kept in ``__transaction_state``.

It owns the cache of ``TransactionMetadata`` and its persistence: a prepared
change is written as one record to the id's partition
(``partition_for_transactional_id``) of the broker's ``__transaction_state``
topic (compacted, uncompressed, created with Kafka's settings on first use)
before it is applied.

It answers only for the partitions of the topic it owns, each at its
coordinator epoch (the epoch markers carry). A single broker owns every
partition at epoch ``COORDINATOR_EPOCH`` once ``load`` has replayed the whole
topic; until then every request gets COORDINATOR_LOAD_IN_PROGRESS, which
clients retry. In a cluster it owns the partitions this broker leads:
``load_partition`` (on election) replays one partition up to its log end
— COORDINATOR_LOAD_IN_PROGRESS for its ids meanwhile — and
``remove_partition`` (on resignation) drops its ids; an id of a partition not
owned gets NOT_COORDINATOR. A change written while its partition moved away
is not applied (NOT_COORDINATOR): the new owner replays it from the log.
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
                       NotCoordinatorError, TopicAlreadyExistsError)
from ..append_errors import append_error_type
from .config import TransactionConfig
from .transaction_log import (TRANSACTION_STATE_TOPIC, InvalidTransactionLogRecordError, decode_key, decode_value,
                              encode_key, encode_value, partition_for_transactional_id)
from .transaction_metadata import TransactionMetadata, TxnTransitMetadata
from .transaction_state import TransactionState

if TYPE_CHECKING:
    from ...broker import Broker

__all__ = ["TransactionStateManager", "ensure_transaction_state_topic", "transaction_state_topic_config",
           "append_error", "COORDINATOR_EPOCH"]

log = logging.getLogger(__name__)

_S = TransactionState

#: The coordinator epoch of every partition on a single broker, which leads them all at leader epoch 0.
COORDINATOR_EPOCH = 0

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
    """The transactional ids of the ``__transaction_state`` partitions this broker owns."""

    def __init__(self, broker: Broker, config: TransactionConfig, clock: Clock) -> None:
        self.broker = broker
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()
        self._metadata: dict[str, TransactionMetadata] = {}
        self._num_partitions: int | None = None
        self._active = False
        #: Single broker: every partition is loading until ``load`` has run.
        self._loading_all = False
        #: A cluster's coordinator: it owns only the partitions it is elected for.
        self._elected_partitions_only = False
        #: Partition -> coordinator epoch: the partitions owned and loaded.
        self._owned: dict[int, int] = {}
        #: Partition -> coordinator epoch: the partitions being loaded.
        self._loading: dict[int, int] = {}
        #: Partition -> the newest coordinator epoch an election or resignation named.
        self._latest_epoch: dict[int, int] = {}
        #: Partition -> how many writes to it are under way; a load waits for none.
        self._appending: dict[int, int] = {}
        self._appends_done = threading.Condition(self._lock)

    # --- lifecycle ---------------------------------------------------------------------

    def startup(self, *, elected_partitions_only: bool = False) -> None:
        """Start answering: for every partition once ``load`` has run, or (``elected_partitions_only``)
        for the partitions ``load_partition`` loads."""
        with self._lock:
            self._active = True
            self._elected_partitions_only = elected_partitions_only
            self._loading_all = not elected_partitions_only

    def shutdown(self) -> None:
        with self._lock:
            self._active = False
            self._metadata.clear()
            self._owned.clear()
            self._loading.clear()

    @property
    def is_loading(self) -> bool:
        """Whether any partition is being loaded."""
        return self._loading_all or bool(self._loading)

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

    def check_available(self, transactional_id: str | None = None) -> None:
        """Raise what a request gets from a coordinator not running or still loading, and (for
        ``transactional_id``) from one that does not own the id's partition."""
        self._check_active()
        if transactional_id is None:
            if self.is_loading:
                raise CoordinatorLoadInProgressError(f"the transaction coordinator is loading "
                                                     f"{TRANSACTION_STATE_TOPIC}")
            return
        with self._lock:
            self._check_owned(transactional_id)

    def _check_active(self) -> None:
        if not self._active:
            raise CoordinatorNotAvailableError("the transaction coordinator is not running")

    def _check_owned(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's partition, or the error saying why there is none (under the lock)."""
        partition = self.partition_for(transactional_id)
        if self._loading_all or partition in self._loading:
            raise CoordinatorLoadInProgressError(f"the transaction coordinator is loading "
                                                 f"{TRANSACTION_STATE_TOPIC}-{partition}")
        epoch = self._owned.get(partition)
        if epoch is None:
            raise NotCoordinatorError(f"this broker is not the coordinator of transactional id "
                                      f"{transactional_id!r} ({TRANSACTION_STATE_TOPIC}-{partition})")
        return epoch

    def coordinator_epoch(self, transactional_id: str) -> int:
        """The coordinator epoch of the id's partition, which its markers carry (NOT_COORDINATOR, … if
        this broker does not own it)."""
        self._check_active()
        with self._lock:
            return self._check_owned(transactional_id)

    def owns(self, metadata: TransactionMetadata) -> bool:
        """Whether ``metadata`` is still the live metadata of its id (its partition not moved away)."""
        with self._lock:
            return self._metadata.get(metadata.transactional_id) is metadata

    # --- the cache ------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        self._check_active()
        with self._lock:
            self._check_owned(transactional_id)
            return self._metadata.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """``metadata``, or the one another request put first."""
        with self._lock:
            self._check_owned(metadata.transactional_id)
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
        KafkaError the client gets (``append_error``; NOT_COORDINATOR when the id's partition moved
        away meanwhile, as Kafka answers). The caller holds ``metadata.lock``.

        A load of the partition waits for the writes under way (as Kafka's appends hold its state
        lock for reading), so a new owner's replay never misses a record an old ownership wrote."""
        transactional_id = metadata.transactional_id
        key = encode_key(transactional_id)
        value = None if transit.state is _S.DEAD else encode_value(transit.value)
        try:
            self._check_active()
            with self._lock:
                epoch = self._check_owned(transactional_id)
                partition = self.partition_for(transactional_id)
                self._appending[partition] = self._appending.get(partition, 0) + 1
            try:
                self._append_record(transactional_id, key, value)
            finally:
                with self._lock:
                    self._appending[partition] -= 1
                    if not self._appending[partition]:
                        del self._appending[partition]
                        self._appends_done.notify_all()
                    current = self._metadata.get(transactional_id) is metadata and self._owned.get(partition) == epoch
            if not current:
                raise NotCoordinatorError(f"{TRANSACTION_STATE_TOPIC}-{partition} moved away from coordinator "
                                          f"epoch {epoch} while writing transactional id {transactional_id!r}")
        except Exception as exc:
            metadata.abort_pending_transition()
            error = append_error(exc)
            log.warning("transactional id %r: writing %s to %s failed (%s): %s", transactional_id,
                        transit.state, TRANSACTION_STATE_TOPIC, error.kafka_error_name, exc)
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
        """Replay ``__transaction_state`` (single broker): every transactional id becomes live, every
        partition owned at ``COORDINATOR_EPOCH``, and loading ends.

        Returns the transactions that were preparing (PrepareCommit or PrepareAbort), whose markers
        the coordinator must write again. If the topic cannot be read this raises and the manager
        keeps answering COORDINATOR_LOAD_IN_PROGRESS. A cluster's coordinator loads nothing here: its
        partitions are loaded as it is elected for them (``load_partition``).
        """
        if self._elected_partitions_only:
            log.info("transaction coordinator: not loading every partition of %s: it loads those it is elected "
                     "for", TRANSACTION_STATE_TOPIC)
            return []
        loaded: dict[str, TransactionMetadata] = {}
        partitions = range(self.num_partitions)
        if self.broker.topics.get(TRANSACTION_STATE_TOPIC) is not None:
            for partition in partitions:
                self._replay_partition(partition, loaded)
        with self._lock:
            self._metadata.update(loaded)
            self._owned = {partition: COORDINATOR_EPOCH for partition in partitions}
            self._loading_all = False
        preparing = [m for m in loaded.values() if m.state.is_preparing]
        log.info("transaction coordinator: loaded %d transactional ids from %s (%d preparing)", len(loaded),
                 TRANSACTION_STATE_TOPIC, len(preparing))
        return preparing

    def load_partition(self, partition: int, coordinator_epoch: int) -> list[TransactionMetadata] | None:
        """Own ``partition`` at ``coordinator_epoch`` (this broker became its leader): replay it up to
        its log end offset, as Kafka does (the records past a new leader's high watermark are its own to
        commit), meanwhile answering COORDINATOR_LOAD_IN_PROGRESS for its ids. Returns the transactions
        found preparing; None when the election was ignored — an epoch older than one already seen, the
        ownership it names already held, or a resignation (or newer election) while loading. If the
        partition cannot be read this raises and its ids get NOT_COORDINATOR."""
        with self._lock:
            if not self._active:
                return None
            latest = self._latest_epoch.get(partition, -1)
            if coordinator_epoch < latest or (coordinator_epoch == latest and coordinator_epoch in (
                    self._owned.get(partition), self._loading.get(partition))):
                log.info("transaction coordinator: ignoring the election for %s-%d at coordinator epoch %d "
                         "(epoch %d seen)", TRANSACTION_STATE_TOPIC, partition, coordinator_epoch, latest)
                return None
            self._latest_epoch[partition] = coordinator_epoch
            self._remove_partition_locked(partition)
            self._loading[partition] = coordinator_epoch
            while self._appending.get(partition):
                self._appends_done.wait()
        loaded: dict[str, TransactionMetadata] = {}
        try:
            if self.broker.topics.get(TRANSACTION_STATE_TOPIC) is not None:
                self._replay_partition(partition, loaded, to_log_end=True)
        finally:
            with self._lock:
                current = self._loading.get(partition) == coordinator_epoch
                if current:
                    del self._loading[partition]
        with self._lock:
            if not current or not self._active:
                return None
            self._metadata.update(loaded)
            self._owned[partition] = coordinator_epoch
        preparing = [m for m in loaded.values() if m.state.is_preparing]
        log.info("transaction coordinator: loaded %d transactional ids from %s-%d at coordinator epoch %d "
                 "(%d preparing)", len(loaded), TRANSACTION_STATE_TOPIC, partition, coordinator_epoch,
                 len(preparing))
        return preparing

    def remove_partition(self, partition: int, coordinator_epoch: int | None = None) -> int:
        """Stop owning ``partition`` (another broker leads it now): its ids are dropped and get
        NOT_COORDINATOR. A resignation naming an epoch older than the newest election seen is ignored.
        Returns how many ids were dropped."""
        with self._lock:
            if coordinator_epoch is not None:
                if coordinator_epoch < self._latest_epoch.get(partition, -1):
                    return 0
                self._latest_epoch[partition] = coordinator_epoch
            self._loading.pop(partition, None)
            self._owned.pop(partition, None)
            removed = self._remove_partition_locked(partition)
        log.info("transaction coordinator: unloaded %d transactional ids of %s-%d", removed, TRANSACTION_STATE_TOPIC,
                 partition)
        return removed

    def _remove_partition_locked(self, partition: int) -> int:
        gone = [t for t in self._metadata if self.partition_for(t) == partition]
        for transactional_id in gone:
            del self._metadata[transactional_id]
        return len(gone)

    def _replay_partition(self, partition: int, loaded: dict[str, TransactionMetadata], *,
                          to_log_end: bool = False) -> None:
        lg = self.broker.log_manager.log_or_raise(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        offset, end = lg.log_start_offset, lg.log_end_offset if to_log_end else lg.high_watermark
        buffer_size = self.config.transaction_state_log_load_buffer_size
        while offset < end:
            if to_log_end:
                records = lg.read(offset, buffer_size, max_offset=end).records
            else:
                records = self.broker.fetch(TRANSACTION_STATE_TOPIC, partition, offset, buffer_size).records
            next_offset = offset
            for batch in iter_batches(records):
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
