"""``TransactionCoordinator``: Kafka's transaction protocol as a state machine fed with requests and a clock.

It answers InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions and ListTransactions from the typed requests of
``requests`` (``wire`` builds them from each version's body), keeps every
transactional id's ``TransactionMetadata`` through the
``TransactionStateManager`` (records of ``__transaction_state``), and writes
the COMMIT or ABORT markers of a transaction into each of its partitions
through the ``TransactionMarkerChannelManager``.

Ownership follows the partitions of ``__transaction_state``: a single
broker owns them all once ``load`` has replayed the topic; in a cluster
(``startup(elected_partitions_only=True)``) it owns none until
``on_election`` loads one, and ``on_resignation`` drops one again (Kafka's
onElection and onResignation). Ids of a partition not owned get
NOT_COORDINATOR, of one being loaded COORDINATOR_LOAD_IN_PROGRESS. Markers
carry the coordinator epoch of the id's partition.

The markers of a transaction are written before EndTxn is answered — local
appends, or WriteTxnMarkers to the partitions' leaders on other brokers: a
client sees PrepareCommit and PrepareAbort only if a marker could not be
written (no leader, a broker unreachable, a log dir offline), and then gets
CONCURRENT_TRANSACTIONS until a retry has written it. Retries run on the
coordinator's timer after ``retry.backoff.ms`` (100 ms), doubling up to
``retry.backoff.max.ms`` (1 s), so a leader failover delays a commit by about
the election, not by the periodic task's interval.

Time comes in through the injected clock and the timer of the coordinator's
purgatory, on which two periodic tasks run: every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` the
transactions open longer than their ``transaction.timeout.ms`` are aborted
(their producer's epoch bumped, so it is fenced) and pending markers are
written again; every ``transaction.remove.expired.transaction.cleanup.interval.ms``
transactional ids idle for ``transactional.id.expiration.ms`` are removed (a
tombstone). A test builds the coordinator over a ``MockTime`` with an
``InlineExecutor``, moves the clock and calls ``advance_clock``.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Callable, Sequence

from format.layout import TopicPartition

from ...clock import SYSTEM_CLOCK, Clock
from ...errors import (NONE, ConcurrentTransactionsError, CoordinatorNotAvailableError, InvalidProducerIdMappingError,
                       InvalidRequestError, InvalidTransactionTimeoutError, InvalidTxnStateError, KafkaError,
                       ProducerFencedError, TransactionalIdNotFoundError)
from ...offsets_topic import OFFSETS_TOPIC, partition_for_group
from ...purgatory import DelayedOperationPurgatory
from ...timer import SystemTimer
from ...timer.timer_task import CallbackTimerTask, TimerTask
from .config import TransactionConfig
from .requests import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                       InitProducerIdResult, ListTransactionsRequest, TransactionDescription, TransactionListing)
from .transaction_marker_channel_manager import MarkerDestinations, TransactionMarkerChannelManager
from .transaction_metadata import TransactionMetadata, is_epoch_exhausted
from .transaction_state import TransactionState
from .transaction_log import TRANSACTION_STATE_TOPIC
from .transaction_state_manager import COORDINATOR_EPOCH, TransactionStateManager

if TYPE_CHECKING:
    from ...broker import Broker

__all__ = ["TransactionCoordinator", "COORDINATOR_EPOCH"]

log = logging.getLogger(__name__)

_S = TransactionState

#: Kafka's ``retry.backoff.ms`` and ``retry.backoff.max.ms``: the first and the longest wait before
#: markers that failed are sent again.
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 1_000


class _PeriodicTask(TimerTask):
    """Runs ``action`` every ``interval_ms`` on the coordinator's timer, until it shuts down."""

    def __init__(self, coordinator: TransactionCoordinator, interval_ms: int, action: Callable[[], object]) -> None:
        super().__init__(interval_ms)
        self.coordinator = coordinator
        self.interval_ms = interval_ms
        self.action = action

    def run(self) -> None:
        try:
            self.action()
        except Exception:
            log.exception("transaction coordinator: a periodic task failed")
        finally:
            self.coordinator._schedule(self.interval_ms, self.action)


class TransactionCoordinator:
    """The transaction coordinator of one broker (which, with one broker, coordinates every transactional id)."""

    def __init__(self, broker_id: int, config: TransactionConfig, state_manager: TransactionStateManager,
                 markers: TransactionMarkerChannelManager, generate_producer_id: Callable[[], int],
                 offsets_partition_for: Callable[[str], TopicPartition], *, clock: Clock = SYSTEM_CLOCK,
                 executor: Executor | None = None, reaper_enabled: bool = True) -> None:
        """``offsets_partition_for`` names the ``__consumer_offsets`` partition of a group (AddOffsetsToTxn);
        ``executor`` runs expired timer tasks (an ``InlineExecutor`` makes tests deterministic);
        ``reaper_enabled=False`` leaves advancing the timer to ``advance_clock``."""
        self.broker_id = broker_id
        self.config = config
        self.state = state_manager
        self.markers = markers
        self.generate_producer_id = generate_producer_id
        self.offsets_partition_for = offsets_partition_for
        self.clock = clock
        timer = SystemTimer("TransactionCoordinator", clock=clock, executor=executor)
        self.purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory(
            "TransactionCoordinator", timer, clock, reaper_enabled=reaper_enabled, broker_id=broker_id)
        self._tasks: list[_PeriodicTask] = []
        self._retry_lock = threading.Lock()
        #: Transactional id -> the scheduled retry of its pending markers and the wait before it.
        self._marker_retries: dict[str, tuple[CallbackTimerTask | None, int]] = {}

    @classmethod
    def for_broker(cls, broker: Broker, *, executor: Executor | None = None, reaper_enabled: bool = True,
                   destinations: MarkerDestinations | None = None) -> TransactionCoordinator:
        """The coordinator of an embedded or served ``Broker``: its settings, clock, producer ids and topics;
        in a cluster, ``destinations`` send the markers of partitions led elsewhere (also settable later
        as ``coordinator.markers.destinations``, before the first election)."""
        from ..group.broker_store import ensure_offsets_topic

        def offsets_partition_for(group_id: str) -> TopicPartition:
            return TopicPartition(OFFSETS_TOPIC, partition_for_group(group_id, ensure_offsets_topic(broker)))

        config = TransactionConfig.from_broker_config(broker.config)
        return cls(broker.node_id, config, TransactionStateManager(broker, config, broker.clock),
                   TransactionMarkerChannelManager(broker, destinations), broker.producer_ids.generate_producer_id,
                   offsets_partition_for, clock=broker.clock, executor=executor, reaper_enabled=reaper_enabled)

    @classmethod
    def reading(cls, broker: Broker) -> TransactionCoordinator:
        """The coordinator of a read-only ``Broker`` (``seglog transactions --log-dir``): loaded from
        ``__transaction_state`` by the same replay as at start-up, it answers DescribeTransactions and
        ListTransactions; it schedules nothing and writes nothing (a transaction left preparing stays
        so: its markers are the owner's to write)."""
        def no_producer_ids() -> int:
            broker._check_writable("hand out producer ids")
            raise AssertionError("a read-only coordinator over a writable broker")

        config = TransactionConfig.from_broker_config(broker.config)
        coordinator = cls(broker.node_id, config, TransactionStateManager(broker, config, broker.clock),
                          TransactionMarkerChannelManager(broker), no_producer_ids,
                          lambda group_id: TopicPartition(OFFSETS_TOPIC, 0), clock=broker.clock,
                          reaper_enabled=False)
        coordinator.state.startup()
        coordinator.state.load()
        return coordinator

    # ==================================================================================
    # lifecycle
    # ==================================================================================

    def startup(self, *, load: bool = True, elected_partitions_only: bool = False) -> None:
        """Start answering. A single broker owns every partition: until ``load`` has run (now, or
        later when ``load=False``), requests get COORDINATOR_LOAD_IN_PROGRESS. With
        ``elected_partitions_only`` (a cluster) it owns none until ``on_election`` and ``load`` is
        not used."""
        self.state.startup(elected_partitions_only=elected_partitions_only)
        if not self._tasks:
            self._schedule(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                           self.abort_timed_out_transactions)
            self._schedule(self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                           self.remove_expired_transactional_ids)
        if load and not elected_partitions_only:
            self.load()

    def load(self) -> None:
        """Replay ``__transaction_state`` (single broker); transactions that were preparing get their
        markers now. A cluster's coordinator loads its partitions as it is elected: this does nothing."""
        self._complete_preparing(self.state.load())

    def on_election(self, partition: int, coordinator_epoch: int) -> None:
        """This broker became the leader of ``__transaction_state`` partition ``partition`` at
        ``coordinator_epoch``: load its transactional ids and write the markers of those found preparing
        (in the caller's thread; requests for its ids get COORDINATOR_LOAD_IN_PROGRESS meanwhile). An
        election older than one already seen, or repeating the ownership held, is ignored."""
        log.info("transaction coordinator: elected for %s-%d at coordinator epoch %d", TRANSACTION_STATE_TOPIC,
                 partition, coordinator_epoch)
        preparing = self.state.load_partition(partition, coordinator_epoch)
        if preparing:
            self._complete_preparing(preparing)

    def on_resignation(self, partition: int, coordinator_epoch: int | None = None) -> None:
        """This broker stopped leading ``__transaction_state`` partition ``partition`` (at
        ``coordinator_epoch``, when known): drop its transactional ids; requests and operations
        still on them end with NOT_COORDINATOR. A resignation older than the newest election seen is
        ignored."""
        log.info("transaction coordinator: resigned from %s-%d", TRANSACTION_STATE_TOPIC, partition)
        self.state.remove_partition(partition, coordinator_epoch)

    def _complete_preparing(self, preparing: list[TransactionMetadata]) -> None:
        for metadata in preparing:
            with metadata.lock:
                if metadata.state.is_preparing and metadata.pending_state is None:
                    self._write_markers_and_complete(metadata)

    def shutdown(self) -> None:
        """Stop answering (COORDINATOR_NOT_AVAILABLE) and stop the timer."""
        self.state.shutdown()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        with self._retry_lock:
            retries, self._marker_retries = self._marker_retries, {}
        for retry, _ in retries.values():
            retry.cancel()
        self.purgatory.shutdown()

    close = shutdown

    def advance_clock(self, timeout_ms: int = 0) -> None:
        """Run the periodic tasks that are due (what the reaper thread does when enabled)."""
        self.purgatory.advance_clock(timeout_ms)

    def _schedule(self, interval_ms: int, action: Callable[[], object]) -> None:
        if not self.state.is_active:
            return  # shut down: the chain of tasks ends here
        task = _PeriodicTask(self, interval_ms, action)
        self._tasks = [t for t in self._tasks if t.action != action] + [task]
        try:
            self.purgatory.timer.add(task)
        except RuntimeError:
            pass  # the timer shut down with the coordinator

    @property
    def is_loading(self) -> bool:
        return self.state.is_loading

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition holding the transactional id."""
        return self.state.partition_for(transactional_id)

    def transaction(self, transactional_id: str) -> TransactionMetadata | None:
        """The live metadata, for inspection (hold ``metadata.lock`` to read it consistently)."""
        return self.state.get(transactional_id)

    # ==================================================================================
    # FindCoordinator
    # ==================================================================================

    def find_coordinator(self, transactional_ids: Sequence[str]) -> list[tuple[str, int]]:
        """Each transactional id with the error answering it: none when this broker coordinates it."""
        answers = []
        for transactional_id in transactional_ids:
            if not transactional_id:
                answers.append((transactional_id, InvalidRequestError.code))
            elif not self.state.is_active:
                answers.append((transactional_id, CoordinatorNotAvailableError.code))
            else:
                answers.append((transactional_id, NONE))
        return answers

    # ==================================================================================
    # InitProducerId
    # ==================================================================================

    def init_producer_id(self, request: InitProducerIdRequest) -> InitProducerIdResult:
        """A producer id and epoch; for a transactional id the next epoch, fencing older producers."""
        transactional_id = request.transactional_id
        if transactional_id is None:
            # An idempotent producer: a fresh id, epoch 0.
            return InitProducerIdResult(NONE, self.generate_producer_id(), 0)
        if transactional_id == "":
            return InitProducerIdResult(InvalidRequestError.code)
        timeout_ms = request.transaction_timeout_ms
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return InitProducerIdResult(InvalidTransactionTimeoutError.code)
        try:
            metadata = self.state.get(transactional_id)
            if metadata is None:
                metadata = self.state.put_if_absent(TransactionMetadata(
                    transactional_id, self.generate_producer_id(), txn_timeout_ms=timeout_ms,
                    txn_last_update_timestamp=self.clock.milliseconds()))
            with metadata.lock:
                return self._init_producer_id(metadata, request)
        except KafkaError as exc:
            return InitProducerIdResult(exc.code)

    def _init_producer_id(self, metadata: TransactionMetadata, request: InitProducerIdRequest) -> InitProducerIdResult:
        expected_epoch = request.producer_epoch if request.producer_id != -1 else None
        if metadata.pending_transition_in_progress:
            return InitProducerIdResult(ConcurrentTransactionsError.code)
        if request.producer_id != -1 and not self._is_valid_producer_id(metadata, request.producer_id,
                                                                        request.producer_epoch):
            return InitProducerIdResult(ProducerFencedError.code)
        state = metadata.state
        if state is _S.ONGOING:
            # Abort the open transaction of the previous epoch, fencing its producer; this producer
            # retries on CONCURRENT_TRANSACTIONS and gets the epoch after (as Kafka answers).
            self._fence_and_abort(metadata, "a new producer initialized the transactional id")
            return InitProducerIdResult(ConcurrentTransactionsError.code)
        if not state.is_complete:
            return InitProducerIdResult(ConcurrentTransactionsError.code)
        now = self.clock.milliseconds()
        if metadata.is_producer_epoch_exhausted and expected_epoch in (None, metadata.producer_epoch):
            transit = metadata.prepare_producer_id_rotation(self.generate_producer_id(),
                                                            request.transaction_timeout_ms, now,
                                                            expected_epoch is not None)
        else:
            transit = metadata.prepare_increment_producer_epoch(request.transaction_timeout_ms, expected_epoch,
                                                                now)
        self.state.append(metadata, transit)
        log.info("transactional id %r: producer id %d epoch %d", metadata.transactional_id, metadata.producer_id,
                 metadata.producer_epoch)
        return InitProducerIdResult(NONE, metadata.producer_id, metadata.producer_epoch)

    @staticmethod
    def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
        """Kafka's rule for a producer that names its id and epoch: the current id (the epoch is checked
        when it is bumped), a fresh metadata, or the previous id whose epochs ran out."""
        return (metadata.producer_epoch == -1 or producer_id == metadata.producer_id
                or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(producer_epoch)))

    # ==================================================================================
    # AddPartitionsToTxn and AddOffsetsToTxn
    # ==================================================================================

    def add_partitions_to_transaction(self, request: AddPartitionsToTxnRequest) -> dict[TopicPartition, int]:
        """Add partitions to the open transaction (opening one); the error code of each partition."""
        partitions = request.partitions
        if not request.transactional_id:
            return {tp: InvalidRequestError.code for tp in partitions}
        try:
            metadata = self.state.get(request.transactional_id)
            if metadata is None:
                return {tp: InvalidProducerIdMappingError.code for tp in partitions}
            with metadata.lock:
                error = self._check_producer(metadata, request.producer_id, request.producer_epoch)
                if error == NONE and request.verify_only:
                    return {tp: NONE if metadata.state is _S.ONGOING and tp in metadata.topic_partitions
                            else InvalidTxnStateError.code for tp in partitions}
                if error == NONE and not (metadata.state is _S.ONGOING
                                          and set(partitions) <= metadata.topic_partitions):
                    transit = metadata.prepare_add_partitions(frozenset(partitions), self.clock.milliseconds())
                    self.state.append(metadata, transit)
                return {tp: error for tp in partitions}
        except KafkaError as exc:
            return {tp: exc.code for tp in partitions}

    def add_offsets_to_transaction(self, request: AddOffsetsToTxnRequest) -> int:
        """Add the group's ``__consumer_offsets`` partition to the transaction; the error code."""
        try:
            offsets_partition = self.offsets_partition_for(request.group_id)
        except KafkaError as exc:
            return exc.code
        result = self.add_partitions_to_transaction(AddPartitionsToTxnRequest(
            transactional_id=request.transactional_id, producer_id=request.producer_id,
            producer_epoch=request.producer_epoch, partitions=(offsets_partition,)))
        return result[offsets_partition]

    @staticmethod
    def _check_producer(metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> int:
        if producer_id != metadata.producer_id:
            return InvalidProducerIdMappingError.code
        if producer_epoch != metadata.producer_epoch:
            return ProducerFencedError.code
        if metadata.pending_transition_in_progress or not (metadata.state.is_complete
                                                           or metadata.state is _S.ONGOING):
            return ConcurrentTransactionsError.code
        return NONE

    # ==================================================================================
    # EndTxn
    # ==================================================================================

    def end_transaction(self, request: EndTxnRequest) -> int:
        """Commit or abort the open transaction: the decision, every marker, the completion; the error code."""
        if not request.transactional_id:
            return InvalidRequestError.code
        try:
            metadata = self.state.get(request.transactional_id)
            if metadata is None:
                return InvalidProducerIdMappingError.code
            with metadata.lock:
                return self._end_transaction(metadata, request.producer_id, request.producer_epoch,
                                             request.committed, from_client=True)
        except KafkaError as exc:
            return exc.code

    def _end_transaction(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                         *, from_client: bool) -> int:
        if producer_id != metadata.producer_id:
            return InvalidProducerIdMappingError.code
        # A client must name the current epoch; the coordinator itself aborts with a newer one (a fence).
        if (from_client and producer_epoch != metadata.producer_epoch) or producer_epoch < metadata.producer_epoch:
            return ProducerFencedError.code
        fencing = metadata.pending_state is _S.PREPARE_EPOCH_FENCE
        if metadata.pending_transition_in_progress and not fencing:
            return ConcurrentTransactionsError.code
        state = metadata.state
        if state is _S.ONGOING:
            if fencing:
                # The abort is written with the bumped epoch, which fences the old producer's writes.
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = -1
            transit = metadata.prepare_abort_or_commit(_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT,
                                                       self.clock.milliseconds())
            self.state.append(metadata, transit)
            self._write_markers_and_complete(metadata)
            return NONE
        if state is _S.COMPLETE_COMMIT:
            return NONE if commit else InvalidTxnStateError.code  # a retry of a commit that succeeded
        if state is _S.COMPLETE_ABORT:
            return InvalidTxnStateError.code if commit else NONE
        if state is _S.PREPARE_COMMIT:
            return ConcurrentTransactionsError.code if commit else InvalidTxnStateError.code
        if state is _S.PREPARE_ABORT:
            return InvalidTxnStateError.code if commit else ConcurrentTransactionsError.code
        return InvalidTxnStateError.code  # Empty: no transaction to end

    def _fence_and_abort(self, metadata: TransactionMetadata, why: str) -> None:
        """Bump the epoch of the Ongoing transaction and abort it with that epoch (the caller holds the lock)."""
        transit = metadata.prepare_fence_producer_epoch()
        old_epoch = metadata.producer_epoch
        log.info("transactional id %r: aborting the transaction of producer %d epoch %d (%s)",
                 metadata.transactional_id, metadata.producer_id, old_epoch, why)
        try:
            self._end_transaction(metadata, metadata.producer_id, transit.value.producer_epoch, False,
                                  from_client=False)
        except KafkaError:
            # The abort was not written: the transaction stays open at its epoch, to be fenced again later.
            metadata.abort_pending_transition()
            metadata.producer_epoch = old_epoch
            raise

    def _write_markers_and_complete(self, metadata: TransactionMetadata) -> None:
        """Write the markers of a preparing transaction, then its completion (the caller holds the lock).

        Partitions whose marker failed stay in the metadata; a retry is scheduled after a backoff. A
        transaction whose partition moved away is left to its new coordinator.
        """
        transactional_id = metadata.transactional_id
        try:
            coordinator_epoch = self.state.coordinator_epoch(transactional_id)
        except KafkaError:
            return
        if not self.state.owns(metadata):
            return
        commit = metadata.state is _S.PREPARE_COMMIT
        pending = set(metadata.topic_partitions)
        failed = self.markers.write_markers(transactional_id, metadata.producer_id, metadata.producer_epoch,
                                            coordinator_epoch, commit, pending)
        for tp in pending - set(failed):
            metadata.remove_partition(tp)
        if failed or not self._complete(metadata):
            self._schedule_marker_retry(transactional_id)
            return
        with self._retry_lock:
            self._marker_retries.pop(transactional_id, None)
        log.debug("transactional id %r: %s", transactional_id, metadata.state)

    def _complete(self, metadata: TransactionMetadata) -> bool:
        """Write CompleteCommit or CompleteAbort; whether it was written."""
        try:
            self.state.append(metadata, metadata.prepare_complete(self.clock.milliseconds()))
        except KafkaError:
            return False
        return True

    def _schedule_marker_retry(self, transactional_id: str) -> None:
        """Try the transaction's pending markers again after a backoff that doubles with each failed
        round, unless a retry is already waiting."""
        with self._retry_lock:
            if not self.state.is_active:
                return
            scheduled, last_backoff_ms = self._marker_retries.get(transactional_id, (None, 0))
            if scheduled is not None:
                return
            backoff_ms = min(last_backoff_ms * 2, RETRY_BACKOFF_MAX_MS) if last_backoff_ms else RETRY_BACKOFF_MS
            task = CallbackTimerTask(backoff_ms, lambda: self._retry_markers(transactional_id))
            self._marker_retries[transactional_id] = (task, backoff_ms)
        try:
            self.purgatory.timer.add(task)
        except RuntimeError:
            pass  # the timer shut down with the coordinator

    def _retry_waiting(self, transactional_id: str) -> bool:
        with self._retry_lock:
            return self._marker_retries.get(transactional_id, (None, 0))[0] is not None

    def _retry_markers(self, transactional_id: str) -> None:
        with self._retry_lock:
            _, backoff_ms = self._marker_retries.get(transactional_id, (None, 0))
            self._marker_retries[transactional_id] = (None, backoff_ms)
        try:
            metadata = self.state.get(transactional_id)
        except KafkaError:
            metadata = None  # not running, or the partition moved away: nothing of it is ours to write
        if metadata is not None:
            with metadata.lock:
                if metadata.state.is_preparing and not metadata.pending_transition_in_progress:
                    self._write_markers_and_complete(metadata)
                    return
        with self._retry_lock:
            self._marker_retries.pop(transactional_id, None)

    # ==================================================================================
    # timeouts and expiry
    # ==================================================================================

    def abort_timed_out_transactions(self) -> int:
        """Abort every transaction open longer than its timeout, and write markers still pending;
        returns how many transactions were aborted."""
        if not self.state.is_active:
            return 0
        now = self.clock.milliseconds()
        aborted = 0
        for metadata in self.state.matching(lambda m: m.state is _S.ONGOING or m.state.is_preparing):
            with metadata.lock:
                if metadata.pending_transition_in_progress:
                    continue
                if metadata.state.is_preparing:
                    if not self._retry_waiting(metadata.transactional_id):
                        self._write_markers_and_complete(metadata)
                elif (metadata.state is _S.ONGOING
                      and metadata.txn_start_timestamp + metadata.txn_timeout_ms < now):
                    try:
                        self._fence_and_abort(metadata, f"it timed out after {metadata.txn_timeout_ms} ms")
                        aborted += 1
                    except KafkaError as exc:
                        log.warning("transactional id %r: aborting the timed-out transaction failed: %s",
                                    metadata.transactional_id, exc)
        return aborted

    def remove_expired_transactional_ids(self) -> int:
        """Remove transactional ids idle for ``transactional.id.expiration.ms`` (a tombstone each)."""
        if not self.state.is_active:
            return 0
        now = self.clock.milliseconds()
        expiration = self.config.transactional_id_expiration_ms
        removed = 0
        for metadata in self.state.matching(lambda m: m.state.is_complete):
            with metadata.lock:
                if (metadata.pending_transition_in_progress or not metadata.state.is_complete
                        or metadata.txn_last_update_timestamp + expiration > now):
                    continue
                try:
                    self.state.append(metadata, metadata.prepare_dead())
                except KafkaError:
                    continue
                self.state.remove(metadata)
                removed += 1
        if removed:
            log.info("transaction coordinator: removed %d expired transactional ids", removed)
        return removed

    # ==================================================================================
    # DescribeTransactions and ListTransactions
    # ==================================================================================

    def describe_transactions(self, transactional_ids: Sequence[str]) -> list[TransactionDescription]:
        return [self._describe(t) for t in transactional_ids]

    def _describe(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(InvalidRequestError.code, transactional_id)
        try:
            metadata = self.state.get(transactional_id)
        except KafkaError as exc:
            return TransactionDescription(exc.code, transactional_id)
        if metadata is None:
            return TransactionDescription(TransactionalIdNotFoundError.code, transactional_id)
        with metadata.lock:
            return TransactionDescription(NONE, transactional_id, metadata.state.state_name,
                                          metadata.txn_timeout_ms, metadata.txn_start_timestamp,
                                          metadata.producer_id, metadata.producer_epoch,
                                          tuple(sorted(metadata.topic_partitions)))

    def list_transactions(self, request: ListTransactionsRequest) -> tuple[int, list[TransactionListing]]:
        """The transactional ids in the request's states, of its producer ids, running longer than its
        duration filter; unknown state names match nothing (as in Kafka)."""
        try:
            everything = self.state.all()
        except KafkaError as exc:
            return exc.code, []
        states = {s.lower() for s in request.state_filters}
        producer_ids = set(request.producer_id_filters)
        now = self.clock.milliseconds()
        listings = []
        for metadata in everything:
            with metadata.lock:
                if states and metadata.state.state_name.lower() not in states:
                    continue
                if producer_ids and metadata.producer_id not in producer_ids:
                    continue
                if request.duration_filter_ms >= 0 and (metadata.state is not _S.ONGOING or now -
                                                        metadata.txn_start_timestamp <= request.duration_filter_ms):
                    continue
                listings.append(TransactionListing(metadata.transactional_id, metadata.producer_id,
                                                   metadata.state.state_name))
        return NONE, listings

    def __repr__(self) -> str:
        return f"TransactionCoordinator(broker_id={self.broker_id}, loading={self.state.is_loading})"
