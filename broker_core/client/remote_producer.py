"""The embedded ``Producer``'s methods over the protocol: an idempotent or transactional producer of a
``RemoteBroker``.

What a Kafka client with ``transactional.id`` sends, one request at a time:
InitProducerId (a producer id and epoch; for a transactional id the
coordinator fences the previous producer and aborts its open transaction),
AddPartitionsToTxn before a partition's first batch in a transaction,
Produce with the producer id, epoch and per-partition sequence numbers,
AddOffsetsToTxn and TxnOffsetCommit for a group's offsets, and EndTxn. The
broker is a single node, so it is the coordinator of every transactional id
and group (no FindCoordinator). Retriable coordinator answers
(CONCURRENT_TRANSACTIONS while a previous transaction completes,
COORDINATOR_LOAD_IN_PROGRESS) are retried for up to 30 s, as clients do.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from format.compression import CompressionType
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch

from ..errors import (ConcurrentTransactionsError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                      InvalidTxnStateError, error_for_code)
from ..partitioner import assign_partitions
from ..produced_records import RecordMetadata, as_record
from ..producer import DEFAULT_TRANSACTION_TIMEOUT_MS
from ..protocol import ApiKey

if TYPE_CHECKING:
    from .remote_broker import RemoteBroker

__all__ = ["RemoteProducer"]

_TIMEOUT_MS = 30_000
_RETRY_FOR_S = 30.0
_RETRY_BACKOFF_S = 0.1
_RETRIABLE = frozenset({ConcurrentTransactionsError.code, CoordinatorLoadInProgressError.code,
                        CoordinatorNotAvailableError.code})
# AddPartitionsToTxn v4+ batch transactions for brokers; clients speak v3 and below.
_CLIENT_ADD_PARTITIONS_MAX_VERSION = 3


def _raise_for(code: int, what: str) -> None:
    if code != 0:
        raise error_for_code(code)(f"{what}: {error_for_code(code).kafka_error_name}")


class RemoteProducer:
    """``Producer``'s methods (``produce``, ``begin_transaction``, ``send_offsets_to_transaction``,
    ``commit_transaction``, ``abort_transaction``) spoken to a running broker."""

    def __init__(self, broker: RemoteBroker, transactional_id: str | None = None,
                 transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> None:
        self.broker = broker
        self.client = broker.client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._sequences: dict[TopicPartition, int] = {}
        self._in_transaction = False
        self._partitions_in_txn: set[TopicPartition] = set()
        self._offsets_groups: set[str] = set()
        response = self._retrying(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": transactional_id, "transaction_timeout_ms": transaction_timeout_ms,
            "producer_id": -1, "producer_epoch": -1}, lambda r: r["error_code"])
        _raise_for(response["error_code"], f"transactional id {transactional_id!r}: no producer id")
        self.producer_id, self.producer_epoch = response["producer_id"], response["producer_epoch"]

    def _retrying(self, api_key: ApiKey, body: Mapping, error_of: Callable[[dict], int],
                  version: int | None = None) -> dict:
        deadline = time.monotonic() + _RETRY_FOR_S
        while True:
            response = self.client.send(api_key, body, version)
            if error_of(response) not in _RETRIABLE or time.monotonic() >= deadline:
                return response
            time.sleep(_RETRY_BACKOFF_S)

    # --- producing ------------------------------------------------------------------

    def produce(self, topic: str, records: Iterable[SimpleRecord | bytes | tuple], partition: int | None = None,
                compression: CompressionType | str = CompressionType.NONE) -> list[RecordMetadata]:
        """Append records as one idempotent batch per partition (in the open transaction, if any)."""
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
        now = int(time.time() * 1000)
        out: list[RecordMetadata | None] = [None] * len(items)
        for p, indexes in groups.items():
            tp = TopicPartition(topic, p)
            sequence = self._sequences.get(tp, 0)
            batch = build_batch([items[i] for i in indexes], compression=codec, default_timestamp=now,
                                producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                base_sequence=sequence, is_transactional=self._in_transaction)
            response = self.client.send(ApiKey.PRODUCE, {
                "transactional_id": self.transactional_id if self._in_transaction else None, "acks": -1,
                "timeout_ms": _TIMEOUT_MS,
                "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}]})
            (result,) = response["responses"][0]["partition_responses"]
            _raise_for(result["error_code"], f"producer {self.producer_id}: producing to {tp}")
            self._sequences[tp] = (sequence + len(indexes)) & 0x7FFFFFFF
            for n, i in enumerate(indexes):
                r = items[i]
                ts = result["log_append_time_ms"] if result["log_append_time_ms"] >= 0 else (
                    now if r.timestamp is None else r.timestamp)
                out[i] = RecordMetadata(topic, p, result["base_offset"] + n, ts)
        return out  # type: ignore[return-value]

    # --- transactions ----------------------------------------------------------------

    def _transactional_id(self, action: str) -> str:
        if self.transactional_id is None:
            raise InvalidTxnStateError(f"cannot {action}: the producer has no transactional id")
        return self.transactional_id

    def begin_transaction(self) -> None:
        transactional_id = self._transactional_id("begin a transaction")
        if self._in_transaction:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r}: a transaction is open already")
        self._in_transaction = True
        self._partitions_in_txn.clear()
        self._offsets_groups.clear()

    def _add_partitions(self, partitions: list[TopicPartition]) -> None:
        new = sorted(tp for tp in set(partitions) if tp not in self._partitions_in_txn)
        if not new:
            return
        topics: dict[str, list[int]] = {}
        for tp in new:
            topics.setdefault(tp.topic, []).append(tp.partition)
        version = min(self.client.version_for(ApiKey.ADD_PARTITIONS_TO_TXN), _CLIENT_ADD_PARTITIONS_MAX_VERSION)

        def first_error(r: dict) -> int:
            return next((p["partition_error_code"] for t in r["results_by_topic_v3_and_below"]
                         for p in t["results_by_partition"] if p["partition_error_code"]), 0)

        response = self._retrying(ApiKey.ADD_PARTITIONS_TO_TXN, {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id, "v3_and_below_producer_epoch": self.producer_epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
            first_error, version)
        _raise_for(first_error(response), f"transactional id {self.transactional_id!r}: adding "
                                          f"{', '.join(map(str, new))} to the transaction")
        self._partitions_in_txn.update(new)

    def send_offsets_to_transaction(self, group_id: str, offsets: Mapping[TopicPartition, int],
                                    metadata: str = "") -> None:
        """Commit the group's ``offsets`` in the open transaction: they count once it commits."""
        transactional_id = self._transactional_id("send offsets to a transaction")
        if not self._in_transaction:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r}: no transaction is open")
        if group_id not in self._offsets_groups:
            response = self._retrying(ApiKey.ADD_OFFSETS_TO_TXN, {
                "transactional_id": transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "group_id": group_id}, lambda r: r["error_code"])
            _raise_for(response["error_code"], f"transactional id {transactional_id!r}: adding the offsets of "
                                               f"group {group_id!r}")
            self._offsets_groups.add(group_id)
        topics: dict[str, list[dict]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": offset,
                                                    "committed_leader_epoch": -1, "committed_metadata": metadata})

        def first_error(r: dict) -> int:
            return next((p["error_code"] for t in r["topics"] for p in t["partitions"] if p["error_code"]), 0)

        response = self._retrying(ApiKey.TXN_OFFSET_COMMIT, {
            "transactional_id": transactional_id, "group_id": group_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, first_error)
        _raise_for(first_error(response), f"group {group_id!r}: committing offsets in the transaction of "
                                          f"transactional id {transactional_id!r}")

    def commit_transaction(self) -> None:
        self._end_transaction(True)

    def abort_transaction(self) -> None:
        self._end_transaction(False)

    def _end_transaction(self, commit: bool) -> None:
        transactional_id = self._transactional_id("end a transaction")
        if not self._in_transaction:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r}: no transaction is open")
        self._in_transaction = False
        if not self._partitions_in_txn and not self._offsets_groups:
            return  # nothing was written: there is nothing to end (as Kafka's clients skip EndTxn)
        self._partitions_in_txn.clear()
        self._offsets_groups.clear()
        response = self._retrying(ApiKey.END_TXN, {
            "transactional_id": transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "committed": commit}, lambda r: r["error_code"])
        _raise_for(response["error_code"], f"transactional id {transactional_id!r}: "
                                           f"{'committing' if commit else 'aborting'} the transaction")
