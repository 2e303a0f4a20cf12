"""Producers: InitProducerId (producer ids and epochs for idempotent and transactional producers) and
DescribeProducers (the producer state of partitions)."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = ["INIT_PRODUCER_ID", "DESCRIBE_PRODUCERS"]

INIT_PRODUCER_ID = api(
    ApiKey.INIT_PRODUCER_ID, "0-5", flexible="2+",
    request=(
        F("TransactionalId", "string", "0+", nullable="0+"),
        F("TransactionTimeoutMs", "int32", "0+"),
        # v3+ lets a producer bump its epoch instead of getting a new id (KIP-360).
        F("ProducerId", "int64", "3+", default=-1),
        F("ProducerEpoch", "int16", "3+", default=-1),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ProducerId", "int64", "0+", default=-1),
        F("ProducerEpoch", "int16", "0+"),
    ),
)

DESCRIBE_PRODUCERS = api(
    ApiKey.DESCRIBE_PRODUCERS, "0", flexible="0+",
    request=(
        F("Topics", "[]TopicRequest", "0+", fields=(
            F("Name", "string", "0+"),
            F("PartitionIndexes", "[]int32", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Topics", "[]TopicResponse", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]PartitionResponse", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F("ActiveProducers", "[]ProducerState", "0+", fields=(
                    F("ProducerId", "int64", "0+"),
                    F("ProducerEpoch", "int32", "0+"),
                    F("LastSequence", "int32", "0+", default=-1),
                    F("LastTimestamp", "int64", "0+", default=-1),
                    F("CoordinatorEpoch", "int32", "0+"),
                    F("CurrentTxnStartOffset", "int64", "0+", default=-1),
                )),
            )),
        )),
    ),
)
