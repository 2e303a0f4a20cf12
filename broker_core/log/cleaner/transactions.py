"""What the cleaner must know about producers and transactions (Kafka's
CleanedTransactionMetadata and the producer state the cleaner consults).

* Aborted transactions come from the segments' ``.txnindex`` files, as in
  Kafka. While the cleaner walks the log it tracks which transactions are
  open: data of an aborted transaction is dropped, an ABORT marker is kept
  while any batch of its transaction was still seen (and then re-indexed in
  the cleaned segment), a COMMIT marker is kept while any batch of its
  transaction was seen.
* The last batch of every producer is kept, emptied if need be, because it
  carries the producer's last sequence number and epoch. seglog keeps no
  producer-state snapshots yet, so that state is rebuilt from the batch
  headers (``ProducerStateBuilder``); a producer counts as active until
  ``producer.id.expiration.ms`` after its last batch's timestamp, unless it has
  a transaction open, as Kafka expires producer ids.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Iterable

from format.control import ControlRecordType
from format.errors import CorruptRecordError
from format.record_batch import BatchHeader, RecordBatch
from format.txn_index import AbortedTxn, collect_aborted_txns


@dataclass(frozen=True, slots=True)
class LastRecord:
    """A producer's last data offset (None when it has only markers left) and epoch (Kafka's LastRecord)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class ProducerEvent:
    """A batch written by a producer with a producer id, as the producer state sees it."""

    last_offset: int
    producer_id: int
    producer_epoch: int
    is_control: bool
    is_transactional: bool
    max_timestamp: int = -1

    @classmethod
    def of(cls, h: BatchHeader) -> "ProducerEvent":
        return cls(h.last_offset, h.producer_id, h.producer_epoch, h.is_control, h.is_transactional,
                   h.max_timestamp)


@dataclass(slots=True)
class _ProducerState:
    last_data_offset: int | None
    epoch: int
    last_timestamp: int
    in_transaction: bool


class ProducerStateBuilder:
    """Replays producer batches in offset order into each producer's last data offset and epoch,
    following Kafka's ProducerStateEntry: a new epoch forgets the older epoch's batches, a marker
    moves the epoch and ends the producer's transaction without adding a data batch. Each
    producer's last timestamp (its last batch's max timestamp) says when it expires."""

    def __init__(self) -> None:
        self._state: dict[int, _ProducerState] = {}
        self.has_transactions = False

    def add(self, event: ProducerEvent) -> None:
        if event.is_transactional or event.is_control:
            self.has_transactions = True
        state = self._state.get(event.producer_id)
        if state is None or event.producer_epoch != state.epoch:
            state = self._state[event.producer_id] = _ProducerState(None, event.producer_epoch, -1, False)
        if event.is_control:
            state.in_transaction = False
        else:
            state.last_data_offset = event.last_offset
            state.in_transaction = event.is_transactional
        state.last_timestamp = max(state.last_timestamp, event.max_timestamp)

    def add_all(self, events: Iterable[ProducerEvent]) -> "ProducerStateBuilder":
        for event in sorted(events, key=lambda e: e.last_offset):
            self.add(event)
        return self

    def last_records(self, now_ms: int | None = None, producer_id_expiration_ms: int | None = None
                     ) -> dict[int, LastRecord]:
        """Each live producer's last record. With ``now_ms``, producers expire as in Kafka's
        ProducerStateManager: no transaction open and ``producer.id.expiration.ms`` passed since
        their last batch's timestamp; an expired producer's last batch need not be kept."""
        def expired(state: _ProducerState) -> bool:
            return (now_ms is not None and producer_id_expiration_ms is not None and not state.in_transaction
                    and now_ms - state.last_timestamp >= producer_id_expiration_ms)

        return {pid: LastRecord(state.last_data_offset, state.epoch) for pid, state in self._state.items()
                if not expired(state)}


def is_last_batch_of_producer(h: BatchHeader, producers: dict[int, LastRecord]) -> bool:
    """Whether the batch holds its producer's last sequence (or its last epoch, for a marker)."""
    last = producers.get(h.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return h.last_offset == last.last_data_offset
    return h.is_control and h.producer_epoch == last.producer_epoch


def control_type(batch: RecordBatch) -> ControlRecordType | None:
    """The type of a control batch's record, or None when the batch is empty (already cleaned)."""
    records = batch.records()
    if not records:
        return None
    try:
        return ControlRecordType.parse_key(records[0].key)
    except CorruptRecordError as exc:
        raise CorruptRecordError(exc.reason, path=batch.path, position=batch.position) from None


def collect_aborted_transactions(indexes: list[tuple[int, list[AbortedTxn]]], start_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start, upper) from ``(segment base offset, index entries)``
    in segment order: from the segment holding ``start`` on, until an index says nothing later matters
    (Kafka's collectAbortedTransactions)."""
    floor = 0
    for i, (base, _) in enumerate(indexes):
        if base <= start_offset:
            floor = i
    found: list[AbortedTxn] = []
    for _, entries in indexes[floor:]:
        result = collect_aborted_txns(entries, start_offset, upper_bound_offset)
        found.extend(result.aborted_txns)
        if result.is_complete:
            break
    return found


@dataclass
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int | None = None


@dataclass
class CleanedTransactionMetadata:
    """Open transactions while the cleaner walks the log, and the cleaned segment's transaction index."""

    ongoing_committed: set[int] = field(default_factory=set)
    ongoing_aborted: dict[int, _AbortedTxnState] = field(default_factory=dict)
    _aborted: list[tuple[int, int, AbortedTxn]] = field(default_factory=list)  # heap by first offset
    _seq: int = 0
    cleaned_index: object | None = None  # a TransactionIndex, or None while building the offset map

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            heapq.heappush(self._aborted, (txn.first_offset, self._seq, txn))
            self._seq += 1

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            txn = heapq.heappop(self._aborted)[2]
            self.ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnState(txn))

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """Track a marker; True when the marker may be discarded."""
        h = batch.header
        self._consume_aborted_up_to(h.last_offset)
        kind = control_type(batch)
        if kind is None:
            return True  # an empty control batch was cleaned already
        if kind == ControlRecordType.ABORT:
            state = self.ongoing_aborted.pop(h.producer_id, None)
            # Keep the marker while any batch of its transaction is still in the log.
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if kind == ControlRecordType.COMMIT:
            # Removable once no batch of its transaction was seen.
            if h.producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(h.producer_id)
                return False
            return True
        return False

    def on_batch_read(self, h: BatchHeader) -> bool:
        """Track a data batch; True when it belongs to an aborted transaction (and may be discarded)."""
        self._consume_aborted_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        state = self.ongoing_aborted.get(h.producer_id)
        if state is not None:
            state.last_observed_batch_offset = h.last_offset
            return True
        self.ongoing_committed.add(h.producer_id)
        return False
