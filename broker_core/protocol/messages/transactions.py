"""Transactions: adding partitions and offsets to a transaction, committing offsets in it, ending it,
writing its markers (the coordinator to the partitions' leaders), and describing and listing the
transactions a coordinator holds."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = [
    "ADD_PARTITIONS_TO_TXN",
    "ADD_OFFSETS_TO_TXN",
    "END_TXN",
    "WRITE_TXN_MARKERS",
    "TXN_OFFSET_COMMIT",
    "DESCRIBE_TRANSACTIONS",
    "LIST_TRANSACTIONS",
]


def _add_partitions_topic(versions: str) -> tuple:
    return (F("Name", "string", versions), F("Partitions", "[]int32", versions))


def _add_partitions_topic_result(versions: str) -> tuple:
    return (
        F("Name", "string", versions),
        F("ResultsByPartition", "[]AddPartitionsToTxnPartitionResult", versions, fields=(
            F("PartitionIndex", "int32", versions),
            F("PartitionErrorCode", "int16", versions),
        )),
    )


ADD_PARTITIONS_TO_TXN = api(
    # Versions 0-3 are the clients'; 4+ batch several transactions (what brokers send each other).
    ApiKey.ADD_PARTITIONS_TO_TXN, "0-5", flexible="3+",
    request=(
        F("Transactions", "[]AddPartitionsToTxnTransaction", "4+", fields=(
            F("TransactionalId", "string", "4+"),
            F("ProducerId", "int64", "4+"),
            F("ProducerEpoch", "int16", "4+"),
            F("VerifyOnly", "bool", "4+", default=False),
            F("Topics", "[]AddPartitionsToTxnTopic", "4+", fields=_add_partitions_topic("4+")),
        )),
        F("V3AndBelowTransactionalId", "string", "0-3"),
        F("V3AndBelowProducerId", "int64", "0-3"),
        F("V3AndBelowProducerEpoch", "int16", "0-3"),
        F("V3AndBelowTopics", "[]AddPartitionsToTxnTopic", "0-3", fields=_add_partitions_topic("0-3")),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "4+"),
        F("ResultsByTransaction", "[]AddPartitionsToTxnResult", "4+", fields=(
            F("TransactionalId", "string", "4+"),
            F("TopicResults", "[]AddPartitionsToTxnTopicResult", "4+", fields=_add_partitions_topic_result("4+")),
        )),
        F("ResultsByTopicV3AndBelow", "[]AddPartitionsToTxnTopicResult", "0-3",
          fields=_add_partitions_topic_result("0-3")),
    ),
)

ADD_OFFSETS_TO_TXN = api(
    ApiKey.ADD_OFFSETS_TO_TXN, "0-4", flexible="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GroupId", "string", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
    ),
)

END_TXN = api(
    # Version 5 (KIP-890 part 2: an epoch bump with every transaction) needs transaction.version 2,
    # which this broker does not offer.
    ApiKey.END_TXN, "0-4", flexible="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("Committed", "bool", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
    ),
)

WRITE_TXN_MARKERS = api(
    # What a transaction coordinator sends the leaders of a transaction's partitions. Kafka 4.0 removed
    # version 0 (version 1, the first flexible one, is its baseline) and added 2 (TransactionVersion,
    # KIP-890 part 2, which this broker does not offer).
    ApiKey.WRITE_TXN_MARKERS, "1", flexible="1+",
    request=(
        F("Markers", "[]WritableTxnMarker", "0+", fields=(
            F("ProducerId", "int64", "0+"),
            F("ProducerEpoch", "int16", "0+"),
            F("TransactionResult", "bool", "0+"),
            F("Topics", "[]WritableTxnMarkerTopic", "0+", fields=(
                F("Name", "string", "0+"),
                F("PartitionIndexes", "[]int32", "0+"),
            )),
            F("CoordinatorEpoch", "int32", "0+"),
        )),
    ),
    response=(
        F("Markers", "[]WritableTxnMarkerResult", "0+", fields=(
            F("ProducerId", "int64", "0+"),
            F("Topics", "[]WritableTxnMarkerTopicResult", "0+", fields=(
                F("Name", "string", "0+"),
                F("Partitions", "[]WritableTxnMarkerPartitionResult", "0+", fields=(
                    F("PartitionIndex", "int32", "0+"),
                    F("ErrorCode", "int16", "0+"),
                )),
            )),
        )),
    ),
)

TXN_OFFSET_COMMIT = api(
    ApiKey.TXN_OFFSET_COMMIT, "0-4", flexible="3+",
    request=(
        F("TransactionalId", "string", "0+"),
        F("GroupId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GenerationId", "int32", "3+", default=-1),
        F("MemberId", "string", "3+", default=""),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F("Topics", "[]TxnOffsetCommitRequestTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]TxnOffsetCommitRequestPartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("CommittedOffset", "int64", "0+"),
                F("CommittedLeaderEpoch", "int32", "2+", default=-1),
                F("CommittedMetadata", "string", "0+", nullable="0+"),
            )),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Topics", "[]TxnOffsetCommitResponseTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]TxnOffsetCommitResponsePartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            )),
        )),
    ),
)

DESCRIBE_TRANSACTIONS = api(
    ApiKey.DESCRIBE_TRANSACTIONS, "0", flexible="0+",
    request=(
        F("TransactionalIds", "[]string", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("TransactionStates", "[]TransactionState", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("TransactionalId", "string", "0+"),
            F("TransactionState", "string", "0+"),
            F("TransactionTimeoutMs", "int32", "0+"),
            F("TransactionStartTimeMs", "int64", "0+"),
            F("ProducerId", "int64", "0+"),
            F("ProducerEpoch", "int16", "0+"),
            F("Topics", "[]TopicData", "0+", fields=(
                F("Topic", "string", "0+"),
                F("Partitions", "[]int32", "0+"),
            )),
        )),
    ),
)

LIST_TRANSACTIONS = api(
    ApiKey.LIST_TRANSACTIONS, "0-1", flexible="0+",
    request=(
        F("StateFilters", "[]string", "0+"),
        F("ProducerIdFilters", "[]int64", "0+"),
        F("DurationFilter", "int64", "1+", default=-1),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("UnknownStateFilters", "[]string", "0+"),
        F("TransactionStates", "[]TransactionState", "0+", fields=(
            F("TransactionalId", "string", "0+"),
            F("ProducerId", "int64", "0+"),
            F("TransactionState", "string", "0+"),
        )),
    ),
)
