"""What the transaction coordinator is asked and what it answers, whatever the API version.

``wire`` fills the requests from the bodies of each version and shapes the
results back; the coordinator never sees a version number.
"""

from __future__ import annotations

from dataclasses import dataclass

from format.layout import TopicPartition

__all__ = [
    "InitProducerIdRequest",
    "InitProducerIdResult",
    "AddPartitionsToTxnRequest",
    "AddOffsetsToTxnRequest",
    "EndTxnRequest",
    "ListTransactionsRequest",
    "TransactionDescription",
    "TransactionListing",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class InitProducerIdRequest:
    #: None for an idempotent producer, which only needs a fresh producer id.
    transactional_id: str | None
    transaction_timeout_ms: int
    #: v3+: the id and epoch the producer has, to bump rather than fence (KIP-360); -1 when it has none.
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True, kw_only=True)
class AddPartitionsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    #: v4+ (brokers asking each other): only say whether the partitions are in the transaction.
    verify_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AddOffsetsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ListTransactionsRequest:
    #: Only transactions in these states (Kafka's names) / of these producer ids; empty: all.
    state_filters: tuple[str, ...] = ()
    producer_id_filters: tuple[int, ...] = ()
    #: v1+: only transactions running longer than this many ms; negative: all.
    duration_filter_ms: int = -1


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """One transactional id as DescribeTransactions answers it."""

    error_code: int
    transactional_id: str
    state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()

    def checked(self) -> TransactionDescription:
        """This description, or the KafkaError its error code names (TRANSACTIONAL_ID_NOT_FOUND, …)."""
        if self.error_code:
            from ...errors import error_for_code

            raise error_for_code(self.error_code)(f"describing transactional id {self.transactional_id!r} failed")
        return self


@dataclass(frozen=True, slots=True)
class TransactionListing:
    """One transactional id as ListTransactions answers it."""

    transactional_id: str
    producer_id: int
    state: str
