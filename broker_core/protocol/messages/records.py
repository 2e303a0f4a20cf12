"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch: the APIs that write, read and locate records.

``records`` fields hold RecordBatch bytes exactly as they travel; the codec
neither parses nor copies them beyond the one slice out of the frame (decode)
or the one join into it (encode). Produce stops at v11 and Fetch at v12:
the next versions name topics by id (KIP-516). OffsetForLeaderEpoch serves
v2-v4, Kafka 4's range (v0 and v1 were removed in Kafka 4.0).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = ["PRODUCE", "FETCH", "LIST_OFFSETS", "OFFSET_FOR_LEADER_EPOCH"]


def _leader_id_and_epoch(versions: str) -> tuple:
    return (
        F("LeaderId", "int32", versions, default=-1),
        F("LeaderEpoch", "int32", versions, default=-1),
    )


PRODUCE = api(
    ApiKey.PRODUCE, "3-11", flexible="9+",
    request=(
        F("TransactionalId", "string", "3+", nullable="3+", default=None),
        F("Acks", "int16", "0+"),
        F("TimeoutMs", "int32", "0+"),
        F("TopicData", "[]TopicProduceData", "0+", fields=(
            F("Name", "string", "0-12"),
            F("PartitionData", "[]PartitionProduceData", "0+", fields=(
                F("Index", "int32", "0+"),
                F("Records", "records", "0+", nullable="0+"),
            )),
        )),
    ),
    response=(
        F("Responses", "[]TopicProduceResponse", "0+", fields=(
            F("Name", "string", "0-12"),
            F("PartitionResponses", "[]PartitionProduceResponse", "0+", fields=(
                F("Index", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("BaseOffset", "int64", "0+"),
                F("LogAppendTimeMs", "int64", "2+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F("RecordErrors", "[]BatchIndexAndErrorMessage", "8+", fields=(
                    F("BatchIndex", "int32", "8+"),
                    F("BatchIndexErrorMessage", "string", "8+", nullable="8+", default=None),
                )),
                F("ErrorMessage", "string", "8+", nullable="8+", default=None),
                F("CurrentLeader", "LeaderIdAndEpoch", "10+", tag=0, fields=_leader_id_and_epoch("10+")),
            )),
        )),
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("NodeEndpoints", "[]NodeEndpoint", "10+", tag=0, fields=(
            F("NodeId", "int32", "10+"),
            F("Host", "string", "10+"),
            F("Port", "int32", "10+"),
            F("Rack", "string", "10+", nullable="10+", default=None),
        )),
    ),
)

FETCH = api(
    ApiKey.FETCH, "4-12", flexible="12+",
    request=(
        F("ClusterId", "string", "12+", nullable="12+", tag=0, default=None),
        F("ReplicaId", "int32", "0-14", default=-1),
        F("MaxWaitMs", "int32", "0+"),
        F("MinBytes", "int32", "0+"),
        F("MaxBytes", "int32", "3+", default=0x7FFFFFFF),
        F("IsolationLevel", "int8", "4+", default=0),
        F("SessionId", "int32", "7+", default=0),
        F("SessionEpoch", "int32", "7+", default=-1),
        F("Topics", "[]FetchTopic", "0+", fields=(
            F("Topic", "string", "0-12"),
            F("Partitions", "[]FetchPartition", "0+", fields=(
                F("Partition", "int32", "0+"),
                F("CurrentLeaderEpoch", "int32", "9+", default=-1),
                F("FetchOffset", "int64", "0+"),
                F("LastFetchedEpoch", "int32", "12+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F("PartitionMaxBytes", "int32", "0+"),
            )),
        )),
        F("ForgottenTopicsData", "[]ForgottenTopic", "7+", fields=(
            F("Topic", "string", "7-12"),
            F("Partitions", "[]int32", "7+"),
        )),
        F("RackId", "string", "11+", default=""),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "7+"),
        F("SessionId", "int32", "7+", default=0),
        F("Responses", "[]FetchableTopicResponse", "0+", fields=(
            F("Topic", "string", "0-12"),
            F("Partitions", "[]PartitionData", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("HighWatermark", "int64", "0+"),
                F("LastStableOffset", "int64", "4+", default=-1),
                F("LogStartOffset", "int64", "5+", default=-1),
                F("DivergingEpoch", "EpochEndOffset", "12+", tag=0, fields=(
                    F("Epoch", "int32", "12+", default=-1),
                    F("EndOffset", "int64", "12+", default=-1),
                )),
                F("CurrentLeader", "LeaderIdAndEpoch", "12+", tag=1, fields=_leader_id_and_epoch("12+")),
                F("SnapshotId", "SnapshotId", "12+", tag=2, fields=(
                    F("EndOffset", "int64", "0+", default=-1),
                    F("Epoch", "int32", "0+", default=-1),
                )),
                F("AbortedTransactions", "[]AbortedTransaction", "4+", nullable="4+", fields=(
                    F("ProducerId", "int64", "4+"),
                    F("FirstOffset", "int64", "4+"),
                )),
                F("PreferredReadReplica", "int32", "11+", default=-1),
                F("Records", "records", "0+", nullable="0+"),
            )),
        )),
    ),
)

LIST_OFFSETS = api(
    ApiKey.LIST_OFFSETS, "1-9", flexible="6+",
    request=(
        F("ReplicaId", "int32", "0+"),
        F("IsolationLevel", "int8", "2+"),
        F("Topics", "[]ListOffsetsTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]ListOffsetsPartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("CurrentLeaderEpoch", "int32", "4+", default=-1),
                F("Timestamp", "int64", "0+"),
            )),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F("Topics", "[]ListOffsetsTopicResponse", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]ListOffsetsPartitionResponse", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("Timestamp", "int64", "1+", default=-1),
                F("Offset", "int64", "1+", default=-1),
                F("LeaderEpoch", "int32", "4+", default=-1),
            )),
        )),
    ),
)

OFFSET_FOR_LEADER_EPOCH = api(
    ApiKey.OFFSET_FOR_LEADER_EPOCH, "2-4", flexible="4+",
    request=(
        # -2 is a debug consumer, -1 a consumer, a broker id a follower.
        F("ReplicaId", "int32", "3+", default=-2),
        F("Topics", "[]OffsetForLeaderTopic", "0+", fields=(
            F("Topic", "string", "0+"),
            F("Partitions", "[]OffsetForLeaderPartition", "0+", fields=(
                F("Partition", "int32", "0+"),
                F("CurrentLeaderEpoch", "int32", "2+", default=-1),
                F("LeaderEpoch", "int32", "0+"),
            )),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+", default=0),
        F("Topics", "[]OffsetForLeaderTopicResult", "0+", fields=(
            F("Topic", "string", "0+"),
            F("Partitions", "[]EpochEndOffset", "0+", fields=(
                F("ErrorCode", "int16", "0+"),
                F("Partition", "int32", "0+"),
                F("LeaderEpoch", "int32", "1+", default=-1),
                F("EndOffset", "int64", "0+", default=-1),
            )),
        )),
    ),
)
