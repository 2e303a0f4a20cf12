"""CreateTopics, DeleteTopics, CreatePartitions, and DescribeConfigs, AlterConfigs and
IncrementalAlterConfigs: administering topics and their configs."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = ["CREATE_TOPICS", "DELETE_TOPICS", "CREATE_PARTITIONS", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
           "INCREMENTAL_ALTER_CONFIGS"]

CREATE_TOPICS = api(
    ApiKey.CREATE_TOPICS, "2-7", flexible="5+",
    request=(
        F("Topics", "[]CreatableTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("NumPartitions", "int32", "0+"),
            F("ReplicationFactor", "int16", "0+"),
            F("Assignments", "[]CreatableReplicaAssignment", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("BrokerIds", "[]int32", "0+"),
            )),
            F("Configs", "[]CreatableTopicConfig", "0+", fields=(
                F("Name", "string", "0+"),
                F("Value", "string", "0+", nullable="0+"),
            )),
        )),
        # Kafka spells these two in lower camel case; the keys are timeout_ms and validate_only.
        F("timeoutMs", "int32", "0+", default=60000),
        F("validateOnly", "bool", "1+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F("Topics", "[]CreatableTopicResult", "0+", fields=(
            F("Name", "string", "0+"),
            F("TopicId", "uuid", "7+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "1+", nullable="0+"),
            F("TopicConfigErrorCode", "int16", "5+", tag=0),
            F("NumPartitions", "int32", "5+", default=-1),
            F("ReplicationFactor", "int16", "5+", default=-1),
            F("Configs", "[]CreatableTopicConfigs", "5+", nullable="5+", fields=(
                F("Name", "string", "5+"),
                F("Value", "string", "5+", nullable="5+"),
                F("ReadOnly", "bool", "5+"),
                F("ConfigSource", "int8", "5+", default=-1),
                F("IsSensitive", "bool", "5+"),
            )),
        )),
    ),
)

DELETE_TOPICS = api(
    ApiKey.DELETE_TOPICS, "1-6", flexible="4+",
    request=(
        F("Topics", "[]DeleteTopicState", "6+", fields=(
            F("Name", "string", "6+", nullable="6+", default=None),
            F("TopicId", "uuid", "6+"),
        )),
        F("TopicNames", "[]string", "0-5"),
        F("TimeoutMs", "int32", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("Responses", "[]DeletableTopicResult", "0+", fields=(
            F("Name", "string", "0+", nullable="6+"),
            F("TopicId", "uuid", "6+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "5+", nullable="5+", default=None),
        )),
    ),
)

CREATE_PARTITIONS = api(
    ApiKey.CREATE_PARTITIONS, "0-3", flexible="2+",
    request=(
        F("Topics", "[]CreatePartitionsTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Count", "int32", "0+"),
            F("Assignments", "[]CreatePartitionsAssignment", "0+", nullable="0+", fields=(
                F("BrokerIds", "[]int32", "0+"),
            )),
        )),
        F("TimeoutMs", "int32", "0+"),
        F("ValidateOnly", "bool", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Results", "[]CreatePartitionsTopicResult", "0+", fields=(
            F("Name", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        )),
    ),
)

DESCRIBE_CONFIGS = api(
    ApiKey.DESCRIBE_CONFIGS, "1-4", flexible="4+",
    request=(
        F("Resources", "[]DescribeConfigsResource", "0+", fields=(
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            # Null asks for every config of the resource.
            F("ConfigurationKeys", "[]string", "0+", nullable="0+"),
        )),
        F("IncludeSynonyms", "bool", "1+", default=False),
        F("IncludeDocumentation", "bool", "3+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Results", "[]DescribeConfigsResult", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+"),
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("Configs", "[]DescribeConfigsResourceResult", "0+", fields=(
                F("Name", "string", "0+"),
                F("Value", "string", "0+", nullable="0+"),
                F("ReadOnly", "bool", "0+"),
                F("ConfigSource", "int8", "1+", default=-1),
                F("IsSensitive", "bool", "0+"),
                F("Synonyms", "[]DescribeConfigsSynonym", "1+", fields=(
                    F("Name", "string", "1+"),
                    F("Value", "string", "1+", nullable="0+"),
                    F("Source", "int8", "1+"),
                )),
                F("ConfigType", "int8", "3+", default=0),
                F("Documentation", "string", "3+", nullable="0+"),
            )),
        )),
    ),
)

# Both alter APIs answer one result per resource, in the same layout.
_ALTER_CONFIGS_RESPONSE = (
    F("ThrottleTimeMs", "int32", "0+"),
    F("Responses", "[]AlterConfigsResourceResponse", "0+", fields=(
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+"),
        F("ResourceType", "int8", "0+"),
        F("ResourceName", "string", "0+"),
    )),
)

ALTER_CONFIGS = api(
    ApiKey.ALTER_CONFIGS, "0-2", flexible="2+",
    request=(
        # Each resource's configs replace all of its current ones.
        F("Resources", "[]AlterConfigsResource", "0+", fields=(
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("Configs", "[]AlterableConfig", "0+", fields=(
                F("Name", "string", "0+"),
                F("Value", "string", "0+", nullable="0+"),
            )),
        )),
        F("ValidateOnly", "bool", "0+"),
    ),
    response=_ALTER_CONFIGS_RESPONSE,
)

INCREMENTAL_ALTER_CONFIGS = api(
    ApiKey.INCREMENTAL_ALTER_CONFIGS, "0-1", flexible="1+",
    request=(
        F("Resources", "[]AlterConfigsResource", "0+", fields=(
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("Configs", "[]AlterableConfig", "0+", fields=(
                F("Name", "string", "0+"),
                # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT (the last two for list configs).
                F("ConfigOperation", "int8", "0+"),
                F("Value", "string", "0+", nullable="0+"),
            )),
        )),
        F("ValidateOnly", "bool", "0+"),
    ),
    response=_ALTER_CONFIGS_RESPONSE,
)
