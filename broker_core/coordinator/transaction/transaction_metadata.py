"""``TransactionMetadata``: one transactional id's producer id, epoch, state and partitions (Kafka's).

Changes are two-phase, as in Kafka: a ``prepare_*`` method checks the change
against the transition table, marks the metadata with its pending state and
returns the ``TxnTransitMetadata`` to write to ``__transaction_state``; once
the record is in the log, ``complete_transition_to`` applies it (or, when the
write failed, ``abort_pending_transition`` drops it). While a change is
pending the transactional id answers CONCURRENT_TRANSACTIONS.
``check_invariants`` runs after every completed change. Callers hold
``lock``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from format.layout import TopicPartition

from ...errors import ProducerFencedError
from .transaction_log import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionLogValue
from .transaction_state import TransactionState, check_transition

__all__ = ["TransactionMetadata", "TxnTransitMetadata", "is_epoch_exhausted"]

_S = TransactionState
_SHORT_MAX = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    """No epoch bump is left (Kafka keeps the last one for fencing): a new producer id is due."""
    return epoch >= _SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransitMetadata:
    """A prepared change: the record to write, and the last epoch kept in memory beside it."""

    value: TransactionLogValue
    last_producer_epoch: int

    @property
    def state(self) -> TransactionState:
        return self.value.state


class TransactionMetadata:
    """The coordinator's view of one transactional id."""

    def __init__(self, transactional_id: str, producer_id: int, *, previous_producer_id: int = NO_PRODUCER_ID,
                 next_producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, txn_timeout_ms: int,
                 state: TransactionState = _S.EMPTY, topic_partitions: frozenset[TopicPartition] = frozenset(),
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.topic_partitions: set[TopicPartition] = set(topic_partitions)
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.pending_state: TransactionState | None = None
        self.lock = threading.RLock()

    @classmethod
    def loaded(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """The metadata a record of ``__transaction_state`` describes."""
        return cls(transactional_id, value.producer_id, previous_producer_id=value.previous_producer_id,
                   next_producer_id=value.next_producer_id, producer_epoch=value.producer_epoch,
                   txn_timeout_ms=value.transaction_timeout_ms, state=value.state,
                   topic_partitions=value.partitions, txn_start_timestamp=value.start_timestamp_ms,
                   txn_last_update_timestamp=value.last_update_timestamp_ms)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # --- preparing changes ---------------------------------------------------------------

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The metadata as it is (a request that changes nothing, answered as if it did)."""
        return self._transit(self.state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch of an Ongoing transaction so its producer is fenced, before aborting it."""
        if self.producer_epoch == _SHORT_MAX:
            raise RuntimeError(f"transactional id {self.transactional_id!r}: cannot fence producer "
                               f"{self.producer_id} at epoch {self.producer_epoch}, the largest there is")
        return self._prepare(_S.PREPARE_EPOCH_FENCE, self.producer_id, self.producer_epoch + 1, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata:
        """InitProducerId of a completed transactional id: the next epoch (Kafka's rules of KIP-360).

        Raises ProducerFencedError when ``expected_epoch`` is neither the current nor the last epoch.
        """
        if self.is_producer_epoch_exhausted:
            raise RuntimeError(f"transactional id {self.transactional_id!r}: epoch {self.producer_epoch} of "
                               f"producer {self.producer_id} cannot be bumped")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            # A fresh producer (or a zombie restarting): fence whoever had the id.
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # The producer goes on after an error, and nobody initialized the id since.
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: answer the current epoch again.
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(f"transactional id {self.transactional_id!r}: producer {self.producer_id} "
                                      f"expected epoch {expected_epoch}, but the current epoch is "
                                      f"{self.producer_epoch}")
        return self._prepare(_S.EMPTY, self.producer_id, epoch, last_epoch, txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, producer_id: int, txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """A new producer id at epoch 0, once the epochs of the current one are used up."""
        if self.pending_transition_in_progress:
            raise RuntimeError(f"transactional id {self.transactional_id!r}: cannot rotate producer id while "
                               f"moving to {self.pending_state}")
        return self._prepare(_S.EMPTY, producer_id, 0, self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, partitions: frozenset[TopicPartition], now_ms: int) -> TxnTransitMetadata:
        """Add partitions: a completed transactional id starts a transaction (Ongoing) now."""
        start = now_ms if self.state.is_complete else self.txn_start_timestamp
        return self._prepare(_S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions | partitions), start, now_ms)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        """PrepareCommit or PrepareAbort: the decision, written before any marker."""
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions), self.txn_start_timestamp, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """CompleteCommit or CompleteAbort: every marker is written."""
        state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """The transactional id expired: a tombstone removes it."""
        return self._prepare(_S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start_ms: int, update_ms: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise RuntimeError(f"transactional id {self.transactional_id!r}: cannot move to {state} while moving "
                               f"to {self.pending_state}")
        check_transition(self.transactional_id, self.state, state)
        self.pending_state = state
        return self._transit(state, producer_id, epoch, last_epoch, timeout_ms, partitions, start_ms, update_ms)

    def _transit(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start_ms: int, update_ms: int) -> TxnTransitMetadata:
        # As Kafka's: the previous producer id is the one before this change (the same when it keeps it).
        return TxnTransitMetadata(TransactionLogValue(producer_id, epoch, timeout_ms, state, partitions, update_ms,
                                                      start_ms, self.producer_id, self.next_producer_id), last_epoch)

    # --- completing changes ------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply a prepared change whose record is in the log."""
        if self.pending_state is not transit.state:
            raise RuntimeError(f"transactional id {self.transactional_id!r}: completing a move to {transit.state}, "
                               f"but the pending move is to {self.pending_state}")
        value = transit.value
        check_transition(self.transactional_id, self.state, value.state)
        self.producer_id = value.producer_id
        self.previous_producer_id = value.previous_producer_id
        self.producer_epoch = value.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = value.transaction_timeout_ms
        self.state = value.state
        self.topic_partitions = set(value.partitions)
        self.txn_start_timestamp = value.start_timestamp_ms
        self.txn_last_update_timestamp = value.last_update_timestamp_ms
        self.pending_state = None
        self.check_invariants()

    def abort_pending_transition(self) -> None:
        """The record of the pending change could not be written: nothing changes."""
        self.pending_state = None

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker landed in ``tp``: the preparing transaction no longer waits for it."""
        self.topic_partitions.discard(tp)

    def check_invariants(self) -> None:
        assert 0 <= self.producer_epoch <= _SHORT_MAX or self.producer_epoch == NO_PRODUCER_EPOCH, self
        if self.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT, _S.DEAD):
            assert not self.topic_partitions, self
        if self.state is _S.ONGOING:
            assert self.topic_partitions and self.txn_start_timestamp >= 0, self

    def __repr__(self) -> str:
        return (f"TransactionMetadata({self.transactional_id!r}, producer_id={self.producer_id}, "
                f"epoch={self.producer_epoch}, last_epoch={self.last_producer_epoch}, state={self.state}, "
                f"pending={self.pending_state}, partitions={sorted(self.topic_partitions)}, "
                f"timeout_ms={self.txn_timeout_ms}, start={self.txn_start_timestamp})")
