"""ApiVersions, Metadata, DescribeCluster, DescribeTopicPartitions and DescribeLogDirs: how a client
learns what the broker speaks, which brokers make the cluster and where partitions live, on which
broker and in which log directory."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = ["API_VERSIONS", "METADATA", "DESCRIBE_CLUSTER", "DESCRIBE_TOPIC_PARTITIONS", "DESCRIBE_LOG_DIRS"]

API_VERSIONS = api(
    ApiKey.API_VERSIONS, "0-4", flexible="3+",
    request=(
        F("ClientSoftwareName", "string", "3+"),
        F("ClientSoftwareVersion", "string", "3+"),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F("ApiKeys", "[]ApiVersion", "0+", fields=(
            F("ApiKey", "int16", "0+"),
            F("MinVersion", "int16", "0+"),
            F("MaxVersion", "int16", "0+"),
        )),
        F("ThrottleTimeMs", "int32", "1+"),
        F("SupportedFeatures", "[]SupportedFeatureKey", "3+", tag=0, fields=(
            F("Name", "string", "3+"),
            F("MinVersion", "int16", "3+"),
            F("MaxVersion", "int16", "3+"),
        )),
        F("FinalizedFeaturesEpoch", "int64", "3+", tag=1, default=-1),
        F("FinalizedFeatures", "[]FinalizedFeatureKey", "3+", tag=2, fields=(
            F("Name", "string", "3+"),
            F("MaxVersionLevel", "int16", "3+"),
            F("MinVersionLevel", "int16", "3+"),
        )),
        F("ZkMigrationReady", "bool", "3+", tag=3, default=False),
    ),
)

METADATA = api(
    ApiKey.METADATA, "0-12", flexible="9+",
    request=(
        # Null (v1+) asks for every topic; in v0 an empty list does.
        F("Topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=(
            F("TopicId", "uuid", "10+"),
            F("Name", "string", "0+", nullable="10+"),
        )),
        F("AllowAutoTopicCreation", "bool", "4+", default=True),
        F("IncludeClusterAuthorizedOperations", "bool", "8-10"),
        F("IncludeTopicAuthorizedOperations", "bool", "8+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F("Brokers", "[]MetadataResponseBroker", "0+", fields=(
            F("NodeId", "int32", "0+"),
            F("Host", "string", "0+"),
            F("Port", "int32", "0+"),
            F("Rack", "string", "1+", nullable="1+", default=None),
        )),
        F("ClusterId", "string", "2+", nullable="2+", default=None),
        F("ControllerId", "int32", "1+", default=-1),
        F("Topics", "[]MetadataResponseTopic", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("Name", "string", "0+", nullable="12+"),
            F("TopicId", "uuid", "10+"),
            F("IsInternal", "bool", "1+", default=False),
            F("Partitions", "[]MetadataResponsePartition", "0+", fields=(
                F("ErrorCode", "int16", "0+"),
                F("PartitionIndex", "int32", "0+"),
                F("LeaderId", "int32", "0+"),
                F("LeaderEpoch", "int32", "7+", default=-1),
                F("ReplicaNodes", "[]int32", "0+"),
                F("IsrNodes", "[]int32", "0+"),
                F("OfflineReplicas", "[]int32", "5+"),
            )),
            F("TopicAuthorizedOperations", "int32", "8+", default=-2147483648),
        )),
        F("ClusterAuthorizedOperations", "int32", "8-10", default=-2147483648),
    ),
)

# v0 is gone from Kafka 4.0; v5 (cordoned log dirs) is left out: seglog cordons none.
DESCRIBE_LOG_DIRS = api(
    ApiKey.DESCRIBE_LOG_DIRS, "1-4", flexible="2+",
    request=(
        # Null asks for every partition.
        F("Topics", "[]DescribableLogDirTopic", "0+", nullable="0+", fields=(
            F("Topic", "string", "0+"),
            F("Partitions", "[]int32", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "3+"),
        F("Results", "[]DescribeLogDirsResult", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("LogDir", "string", "0+"),
            F("Topics", "[]DescribeLogDirsTopic", "0+", fields=(
                F("Name", "string", "0+"),
                F("Partitions", "[]DescribeLogDirsPartition", "0+", fields=(
                    F("PartitionIndex", "int32", "0+"),
                    F("PartitionSize", "int64", "0+"),
                    F("OffsetLag", "int64", "0+"),
                    F("IsFutureKey", "bool", "0+"),
                )),
            )),
            # Of the volume the log dir is on.
            F("TotalBytes", "int64", "4+", default=-1),
            F("UsableBytes", "int64", "4+", default=-1),
        )),
    ),
)

DESCRIBE_CLUSTER = api(
    ApiKey.DESCRIBE_CLUSTER, "0-2", flexible="0+",
    request=(
        F("IncludeClusterAuthorizedOperations", "bool", "0+"),
        # 1 asks for the brokers, 2 for the controllers (KIP-919).
        F("EndpointType", "int8", "1+", default=1),
        F("IncludeFencedBrokers", "bool", "2+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F("EndpointType", "int8", "1+", default=1),
        F("ClusterId", "string", "0+"),
        F("ControllerId", "int32", "0+", default=-1),
        F("Brokers", "[]DescribeClusterBroker", "0+", fields=(
            F("BrokerId", "int32", "0+"),
            F("Host", "string", "0+"),
            F("Port", "int32", "0+"),
            F("Rack", "string", "0+", nullable="0+", default=None),
            F("IsFenced", "bool", "2+"),
        )),
        F("ClusterAuthorizedOperations", "int32", "0+", default=-2147483648),
    ),
)

# The topics' partitions a page at a time (KIP-966): what Kafka's admin client asks for
# describeTopics when the broker serves it, Metadata otherwise.
DESCRIBE_TOPIC_PARTITIONS = api(
    ApiKey.DESCRIBE_TOPIC_PARTITIONS, "0", flexible="0+",
    request=(
        # Empty asks for every topic.
        F("Topics", "[]TopicRequest", "0+", fields=(
            F("Name", "string", "0+"),
        )),
        F("ResponsePartitionLimit", "int32", "0+", default=2000),
        F("Cursor", "Cursor", "0+", nullable="0+", fields=(
            F("TopicName", "string", "0+"),
            F("PartitionIndex", "int32", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Topics", "[]DescribeTopicPartitionsResponseTopic", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("Name", "string", "0+", nullable="0+"),
            F("TopicId", "uuid", "0+"),
            F("IsInternal", "bool", "0+", default=False),
            F("Partitions", "[]DescribeTopicPartitionsResponsePartition", "0+", fields=(
                F("ErrorCode", "int16", "0+"),
                F("PartitionIndex", "int32", "0+"),
                F("LeaderId", "int32", "0+"),
                F("LeaderEpoch", "int32", "0+", default=-1),
                F("ReplicaNodes", "[]int32", "0+"),
                F("IsrNodes", "[]int32", "0+"),
                F("EligibleLeaderReplicas", "[]int32", "0+", nullable="0+", default=None),
                F("LastKnownElr", "[]int32", "0+", nullable="0+", default=None),
                F("OfflineReplicas", "[]int32", "0+"),
            )),
            F("TopicAuthorizedOperations", "int32", "0+", default=-2147483648),
        )),
        F("NextCursor", "Cursor", "0+", nullable="0+", fields=(
            F("TopicName", "string", "0+"),
            F("PartitionIndex", "int32", "0+"),
        )),
    ),
)
