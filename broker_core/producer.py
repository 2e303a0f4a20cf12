"""The embedded producer: idempotent by default, transactional with a ``transactional.id``.

``Broker.producer()`` gives what a Kafka client with ``enable.idempotence=true``
(the default since Kafka 3.0) does over the wire, without a server: a producer
id from the broker's transaction coordinator, and per partition consecutive
sequence numbers, so the log answers a batch sent twice with the offsets of
its first write. With a ``transactional_id`` the producer's writes to several
partitions, and offsets of consumer groups, commit or abort together through
the same coordinator the Kafka protocol reaches (``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction``,
``abort_transaction``); ``Broker.transaction(...)`` wraps one transaction in a
``with`` block that commits at its end and aborts on an exception.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterable, Mapping

from format.compression import CompressionType
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch

from .coordinator.transaction import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                      InitProducerIdRequest)
from .coordinator.group.offset_and_metadata import OffsetAndMetadata
from .coordinator.group.requests import OffsetCommitPartition, TxnOffsetCommitRequest
from .coordinator.group.broker_store import BrokerGroupStore
from .errors import NONE, ConcurrentTransactionsError, InvalidTxnStateError, KafkaError, error_for_code
from .partitioner import assign_partitions
from .produced_records import RecordMetadata, as_record

if TYPE_CHECKING:
    from .broker import Broker
    from .broker_api import BrokerApi

__all__ = ["Producer", "ProducerSession", "Transaction", "DEFAULT_TRANSACTION_TIMEOUT_MS"]

log = logging.getLogger(__name__)

#: The Java producer's default ``transaction.timeout.ms``.
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
# InitProducerId answers CONCURRENT_TRANSACTIONS once while it aborts a previous producer's transaction.
_INIT_ATTEMPTS = 5


def _raise_for(code: int, what: str) -> None:
    if code != NONE:
        raise error_for_code(code)(what)


class ProducerSession:
    """What a producer keeps between requests, whatever carries them (Kafka's client-side
    ``TransactionManager``): its producer id and epoch, each partition's next sequence, and the
    open transaction's partitions and groups. Subclasses send the requests: to an embedded
    broker's coordinators (``Producer``) or over the protocol (``RemoteProducer``)."""

    broker: BrokerApi  # set by the subclass: where topics' partition counts and the partitioner come from

    def __init__(self, transactional_id: str | None, transaction_timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._sequences: dict[TopicPartition, int] = {}
        self._in_transaction = False
        self._partitions_in_txn: set[TopicPartition] = set()
        self._offsets_groups: set[str] = set()
        code, self.producer_id, self.producer_epoch = self._init_producer_id()
        _raise_for(code, f"transactional id {transactional_id!r}: no producer id")

    # --- what a subclass sends -------------------------------------------------------

    def _init_producer_id(self) -> tuple[int, int, int]:
        """InitProducerId: (error code, producer id, epoch)."""
        raise NotImplementedError

    def _now_ms(self) -> int:
        raise NotImplementedError

    def _append(self, tp: TopicPartition, batch: bytes) -> tuple[int, int]:
        """Produce one batch: (its base offset, the log append time or -1)."""
        raise NotImplementedError

    def _add_partitions_to_txn(self, partitions: list[TopicPartition]) -> None:
        raise NotImplementedError

    def _add_offsets_to_txn(self, group_id: str) -> None:
        raise NotImplementedError

    def _txn_offset_commit(self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str) -> None:
        raise NotImplementedError

    def _end_txn(self, commit: bool) -> None:
        raise NotImplementedError

    # --- producing ------------------------------------------------------------------

    def produce(self, topic: str, records: Iterable[SimpleRecord | bytes | tuple], partition: int | None = None,
                compression: CompressionType | str = CompressionType.NONE) -> list[RecordMetadata]:
        """Append records as one idempotent batch per partition (in the open transaction, if any);
        partitioned as ``Broker.produce`` partitions. Returns where each landed, in order."""
        if self.transactional_id is not None and not self._in_transaction:
            raise InvalidTxnStateError(f"transactional id {self.transactional_id!r}: produce needs "
                                       f"begin_transaction() first")
        items = [as_record(r) for r in records]
        if not items:
            return []
        codec = CompressionType.from_name(compression) if isinstance(compression, str) else compression
        groups = assign_partitions(topic, ((r.key, len(r.value or b"")) for r in items),
                                   self.broker.partitions_for(topic), partition, self.broker._partitioner)
        if self._in_transaction:
            self._add_partitions([TopicPartition(topic, p) for p in groups])
        now = self._now_ms()
        out: list[RecordMetadata | None] = [None] * len(items)
        for p, indexes in groups.items():
            tp = TopicPartition(topic, p)
            sequence = self._sequences.get(tp, 0)
            base_offset, log_append_time = self._append(tp, build_batch(
                [items[i] for i in indexes], compression=codec, default_timestamp=now,
                producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=sequence,
                is_transactional=self._in_transaction))
            self._sequences[tp] = (sequence + len(indexes)) & 0x7FFFFFFF
            for n, i in enumerate(indexes):
                r = items[i]
                ts = log_append_time if log_append_time >= 0 else (now if r.timestamp is None else r.timestamp)
                out[i] = RecordMetadata(topic, p, base_offset + n, ts)
        return out  # type: ignore[return-value]

    # --- transactions ----------------------------------------------------------------

    def _require_transactional(self, action: str) -> str:
        if self.transactional_id is None:
            raise InvalidTxnStateError(f"cannot {action}: the producer has no transactional id")
        return self.transactional_id

    def _require_open(self, action: str) -> str:
        transactional_id = self._require_transactional(action)
        if not self._in_transaction:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r}: no transaction is open")
        return transactional_id

    def begin_transaction(self) -> None:
        transactional_id = self._require_transactional("begin a transaction")
        if self._in_transaction:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r}: a transaction is open already")
        self._in_transaction = True
        self._partitions_in_txn.clear()
        self._offsets_groups.clear()

    def _add_partitions(self, partitions: list[TopicPartition]) -> None:
        new = sorted(tp for tp in set(partitions) if tp not in self._partitions_in_txn)
        if new:
            self._add_partitions_to_txn(new)
            self._partitions_in_txn.update(new)

    def send_offsets_to_transaction(self, group_id: str, offsets: Mapping[TopicPartition, int],
                                    metadata: str = "") -> None:
        """Commit the group's ``offsets`` in the open transaction: they count once it commits."""
        self._require_open("send offsets to a transaction")
        if group_id not in self._offsets_groups:
            self._add_offsets_to_txn(group_id)
            self._offsets_groups.add(group_id)
        self._txn_offset_commit(group_id, offsets, metadata)

    def commit_transaction(self) -> None:
        self._end_transaction(True)

    def abort_transaction(self) -> None:
        self._end_transaction(False)

    def _end_transaction(self, commit: bool) -> None:
        self._require_open("end a transaction")
        self._in_transaction = False
        if not self._partitions_in_txn and not self._offsets_groups:
            return  # nothing was written: there is nothing to end (as Kafka's clients skip EndTxn)
        self._partitions_in_txn.clear()
        self._offsets_groups.clear()
        self._end_txn(commit)


class Producer(ProducerSession):
    """An idempotent (or, with ``transactional_id``, transactional) producer over an embedded Broker."""

    def __init__(self, broker: Broker, transactional_id: str | None = None,
                 transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> None:
        self.broker = broker
        self._coordinator = broker.transaction_coordinator
        super().__init__(transactional_id, transaction_timeout_ms)

    def _init_producer_id(self) -> tuple[int, int, int]:
        request = InitProducerIdRequest(transactional_id=self.transactional_id,
                                        transaction_timeout_ms=self.transaction_timeout_ms)
        for _ in range(_INIT_ATTEMPTS):
            result = self._coordinator.init_producer_id(request)
            if result.error_code != ConcurrentTransactionsError.code:
                break
        return result.error_code, result.producer_id, result.producer_epoch

    def _now_ms(self) -> int:
        return self.broker.clock.milliseconds()

    def _append(self, tp: TopicPartition, batch: bytes) -> tuple[int, int]:
        info = self.broker.produce_batches(tp.topic, tp.partition, batch)
        return info.first_offset, info.log_append_time

    def _add_partitions_to_txn(self, partitions: list[TopicPartition]) -> None:
        errors = self._coordinator.add_partitions_to_transaction(AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, partitions=tuple(partitions)))
        for tp, code in errors.items():
            _raise_for(code, f"transactional id {self.transactional_id!r}: adding {tp} to the transaction failed")

    def _add_offsets_to_txn(self, group_id: str) -> None:
        code = self._coordinator.add_offsets_to_transaction(AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, group_id=group_id))
        _raise_for(code, f"transactional id {self.transactional_id!r}: adding the offsets of group "
                         f"{group_id!r} failed")

    def _txn_offset_commit(self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str) -> None:
        group_coordinator = self.broker.group_coordinator
        if group_coordinator is not None:
            errors = group_coordinator.commit_transactional_offsets(TxnOffsetCommitRequest(
                transactional_id=self.transactional_id, group_id=group_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                offsets={tp: OffsetCommitPartition(offset, metadata) for tp, offset in offsets.items()}))
            for tp, code in errors.items():
                _raise_for(code, f"group {group_id!r}: committing {tp} in the transaction failed")
            return
        # No coordinator holds groups in memory: the records alone say what the transaction committed.
        now = self.broker.clock.milliseconds()
        BrokerGroupStore(self.broker).append_transactional_offsets(
            group_id, self.producer_id, self.producer_epoch,
            {tp: OffsetAndMetadata(offset, metadata, now) for tp, offset in offsets.items()})

    def _end_txn(self, commit: bool) -> None:
        code = self._coordinator.end_transaction(EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, committed=commit))
        _raise_for(code, f"transactional id {self.transactional_id!r}: "
                         f"{'committing' if commit else 'aborting'} the transaction failed")


class Transaction:
    """One transaction of a transactional producer, as a ``with`` block: committed at its end, aborted
    when it raises (or when ``abort()`` was called in it)."""

    def __init__(self, producer: ProducerSession) -> None:
        self.producer = producer
        self._aborted = False

    def produce(self, topic: str, records: Iterable[SimpleRecord | bytes | tuple], partition: int | None = None,
                compression: CompressionType | str = CompressionType.NONE) -> list[RecordMetadata]:
        return self.producer.produce(topic, records, partition, compression)

    def send_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        self.producer.send_offsets_to_transaction(group_id, offsets, metadata)

    def abort(self) -> None:
        """Abort now; the ``with`` block then ends without committing."""
        self.producer.abort_transaction()
        self._aborted = True

    def __enter__(self) -> Transaction:
        self.producer.begin_transaction()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._aborted:
            return
        if exc_type is None:
            self.producer.commit_transaction()
            return
        try:
            self.producer.abort_transaction()
        except KafkaError as abort_error:
            log.warning("transactional id %r: aborting after %s failed: %s", self.producer.transactional_id,
                        exc_type.__name__, abort_error)
