"""The embedded ``Producer``'s methods over the protocol: an idempotent or transactional producer of a
``RemoteBroker``.

What a Kafka client with ``transactional.id`` sends, one request at a time:
InitProducerId (a producer id and epoch; for a transactional id the
coordinator fences the previous producer and aborts its open transaction),
AddPartitionsToTxn before a partition's first batch in a transaction,
Produce with the producer id, epoch and per-partition sequence numbers,
AddOffsetsToTxn and TxnOffsetCommit for a group's offsets, and EndTxn. The
transaction's requests go to the transactional id's coordinator and
TxnOffsetCommit to the group's (FindCoordinator; found again when one
moves), Produce to each partition's leader. Retriable coordinator answers
(CONCURRENT_TRANSACTIONS while a previous transaction completes,
COORDINATOR_LOAD_IN_PROGRESS) are retried for up to 30 s, as clients do.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Mapping

from format.layout import TopicPartition

from ..errors import (ConcurrentTransactionsError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                      error_for_code)
from ..coordinator.group.requests import COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION
from ..producer import DEFAULT_TRANSACTION_TIMEOUT_MS, ProducerSession
from ..protocol import ApiKey

if TYPE_CHECKING:
    from .remote_broker import RemoteBroker

__all__ = ["RemoteProducer"]

_TIMEOUT_MS = 30_000
_RETRIABLE = frozenset({ConcurrentTransactionsError.code, CoordinatorLoadInProgressError.code,
                        CoordinatorNotAvailableError.code})
# AddPartitionsToTxn v4+ batch transactions for brokers; clients speak v3 and below.
_CLIENT_ADD_PARTITIONS_MAX_VERSION = 3


def _raise_for(code: int, what: str) -> None:
    if code != 0:
        raise error_for_code(code)(f"{what}: {error_for_code(code).kafka_error_name}")


class RemoteProducer(ProducerSession):
    """``Producer``'s methods (``produce``, ``begin_transaction``, ``send_offsets_to_transaction``,
    ``commit_transaction``, ``abort_transaction``) spoken to a running broker."""

    def __init__(self, broker: RemoteBroker, transactional_id: str | None = None,
                 transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> None:
        self.broker = broker
        self.client = broker.client
        super().__init__(transactional_id, transaction_timeout_ms)

    def _retrying(self, api_key: ApiKey, body: Mapping, error_of: Callable[[dict], int],
                  version: int | None = None, *, group_id: str | None = None) -> dict:
        """A request to the coordinator of the transactional id (of ``group_id`` for TxnOffsetCommit), again
        while it answers a retriable error or moves."""
        if group_id is not None:
            key, key_type = group_id, COORDINATOR_TYPE_GROUP
        else:
            key, key_type = self.transactional_id, COORDINATOR_TYPE_TRANSACTION
        return self.broker._group_request(api_key, body, error_of, _RETRIABLE, key=key, key_type=key_type,
                                          version=version)

    def _init_producer_id(self) -> tuple[int, int, int]:
        response = self._retrying(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": self.transactional_id, "transaction_timeout_ms": self.transaction_timeout_ms,
            "producer_id": -1, "producer_epoch": -1}, lambda r: r["error_code"])
        return response["error_code"], response["producer_id"], response["producer_epoch"]

    def _now_ms(self) -> int:
        return int(time.time() * 1000)

    def _append(self, tp: TopicPartition, batch: bytes) -> tuple[int, int]:
        response = self.broker._to_leader(tp.topic, tp.partition, ApiKey.PRODUCE, {
            "transactional_id": self.transactional_id if self._in_transaction else None, "acks": -1,
            "timeout_ms": _TIMEOUT_MS,
            "topic_data": [{"name": tp.topic, "partition_data": [{"index": tp.partition, "records": batch}]}]},
            lambda r: r["responses"][0]["partition_responses"][0]["error_code"])
        (result,) = response["responses"][0]["partition_responses"]
        _raise_for(result["error_code"], f"producer {self.producer_id}: producing to {tp}")
        return result["base_offset"], result["log_append_time_ms"]

    def _add_partitions_to_txn(self, partitions: list[TopicPartition]) -> None:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
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
                                          f"{', '.join(map(str, partitions))} to the transaction")

    def _add_offsets_to_txn(self, group_id: str) -> None:
        response = self._retrying(ApiKey.ADD_OFFSETS_TO_TXN, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "group_id": group_id}, lambda r: r["error_code"])
        _raise_for(response["error_code"], f"transactional id {self.transactional_id!r}: adding the offsets of "
                                           f"group {group_id!r}")

    def _txn_offset_commit(self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str) -> None:
        topics: dict[str, list[dict]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": offset,
                                                    "committed_leader_epoch": -1, "committed_metadata": metadata})

        def first_error(r: dict) -> int:
            return next((p["error_code"] for t in r["topics"] for p in t["partitions"] if p["error_code"]), 0)

        response = self._retrying(ApiKey.TXN_OFFSET_COMMIT, {
            "transactional_id": self.transactional_id, "group_id": group_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, first_error, group_id=group_id)
        _raise_for(first_error(response), f"group {group_id!r}: committing offsets in the transaction of "
                                          f"transactional id {self.transactional_id!r}")

    def _end_txn(self, commit: bool) -> None:
        response = self._retrying(ApiKey.END_TXN, {
            "transactional_id": self.transactional_id, "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch, "committed": commit}, lambda r: r["error_code"])
        _raise_for(response["error_code"], f"transactional id {self.transactional_id!r}: "
                                           f"{'committing' if commit else 'aborting'} the transaction")
