"""Consumer groups: finding the coordinator, the join/sync/heartbeat/leave protocol,
committing and fetching offsets, and describing, listing and deleting groups."""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = [
    "FIND_COORDINATOR",
    "JOIN_GROUP",
    "SYNC_GROUP",
    "HEARTBEAT",
    "LEAVE_GROUP",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "DESCRIBE_GROUPS",
    "LIST_GROUPS",
    "DELETE_GROUPS",
    "OFFSET_DELETE",
]

FIND_COORDINATOR = api(
    ApiKey.FIND_COORDINATOR, "0-6", flexible="3+",
    request=(
        F("Key", "string", "0-3"),
        F("KeyType", "int8", "1+", default=0),
        # v4+ batches keys; the answer comes back per key in Coordinators.
        F("CoordinatorKeys", "[]string", "4+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0-3"),
        F("ErrorMessage", "string", "1-3", nullable="1-3"),
        F("NodeId", "int32", "0-3"),
        F("Host", "string", "0-3"),
        F("Port", "int32", "0-3"),
        F("Coordinators", "[]Coordinator", "4+", fields=(
            F("Key", "string", "4+"),
            F("NodeId", "int32", "4+"),
            F("Host", "string", "4+"),
            F("Port", "int32", "4+"),
            F("ErrorCode", "int16", "4+"),
            F("ErrorMessage", "string", "4+", nullable="4+"),
        )),
    ),
)

JOIN_GROUP = api(
    ApiKey.JOIN_GROUP, "0-9", flexible="6+",
    request=(
        F("GroupId", "string", "0+"),
        F("SessionTimeoutMs", "int32", "0+"),
        F("RebalanceTimeoutMs", "int32", "1+", default=-1),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
        F("ProtocolType", "string", "0+"),
        F("Protocols", "[]JoinGroupRequestProtocol", "0+", fields=(
            F("Name", "string", "0+"),
            F("Metadata", "bytes", "0+"),
        )),
        F("Reason", "string", "8+", nullable="8+", default=None),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "2+"),
        F("ErrorCode", "int16", "0+"),
        F("GenerationId", "int32", "0+", default=-1),
        F("ProtocolType", "string", "7+", nullable="7+", default=None),
        F("ProtocolName", "string", "0+", nullable="7+"),
        F("Leader", "string", "0+"),
        F("SkipAssignment", "bool", "9+", default=False),
        F("MemberId", "string", "0+"),
        F("Members", "[]JoinGroupResponseMember", "0+", fields=(
            F("MemberId", "string", "0+"),
            F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
            F("Metadata", "bytes", "0+"),
        )),
    ),
)

SYNC_GROUP = api(
    ApiKey.SYNC_GROUP, "0-5", flexible="4+",
    request=(
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F("ProtocolType", "string", "5+", nullable="5+", default=None),
        F("ProtocolName", "string", "5+", nullable="5+", default=None),
        F("Assignments", "[]SyncGroupRequestAssignment", "0+", fields=(
            F("MemberId", "string", "0+"),
            F("Assignment", "bytes", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
        F("ProtocolType", "string", "5+", nullable="5+", default=None),
        F("ProtocolName", "string", "5+", nullable="5+", default=None),
        F("Assignment", "bytes", "0+"),
    ),
)

HEARTBEAT = api(
    ApiKey.HEARTBEAT, "0-4", flexible="4+",
    request=(
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
    ),
)

LEAVE_GROUP = api(
    ApiKey.LEAVE_GROUP, "0-5", flexible="4+",
    request=(
        F("GroupId", "string", "0+"),
        F("MemberId", "string", "0-2"),
        # v3+ leaves several members at once (static membership, KIP-345).
        F("Members", "[]MemberIdentity", "3+", fields=(
            F("MemberId", "string", "3+"),
            F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
            F("Reason", "string", "5+", nullable="5+", default=None),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
        F("Members", "[]MemberResponse", "3+", fields=(
            F("MemberId", "string", "3+"),
            F("GroupInstanceId", "string", "3+", nullable="3+"),
            F("ErrorCode", "int16", "3+"),
        )),
    ),
)

OFFSET_COMMIT = api(
    ApiKey.OFFSET_COMMIT, "2-9", flexible="8+",
    request=(
        F("GroupId", "string", "0+"),
        F("GenerationIdOrMemberEpoch", "int32", "1+", default=-1),
        F("MemberId", "string", "1+"),
        F("GroupInstanceId", "string", "7+", nullable="7+", default=None),
        F("RetentionTimeMs", "int64", "2-4", default=-1),
        F("Topics", "[]OffsetCommitRequestTopic", "0+", fields=(
            F("Name", "string", "0-9"),
            F("Partitions", "[]OffsetCommitRequestPartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("CommittedOffset", "int64", "0+"),
                F("CommittedLeaderEpoch", "int32", "6+", default=-1),
                F("CommittedMetadata", "string", "0+", nullable="0+"),
            )),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F("Topics", "[]OffsetCommitResponseTopic", "0+", fields=(
            F("Name", "string", "0-9"),
            F("Partitions", "[]OffsetCommitResponsePartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            )),
        )),
    ),
)

OFFSET_FETCH = api(
    ApiKey.OFFSET_FETCH, "1-9", flexible="6+",
    request=(
        # v0-7 name one group; v8+ batch several in Groups.
        F("GroupId", "string", "0-7"),
        F("Topics", "[]OffsetFetchRequestTopic", "0-7", nullable="2-7", fields=(
            F("Name", "string", "0-7"),
            F("PartitionIndexes", "[]int32", "0-7"),
        )),
        F("Groups", "[]OffsetFetchRequestGroup", "8+", fields=(
            F("GroupId", "string", "8+"),
            F("MemberId", "string", "9+", nullable="9+", default=None),
            F("MemberEpoch", "int32", "9+", default=-1),
            F("Topics", "[]OffsetFetchRequestTopics", "8+", nullable="8+", fields=(
                F("Name", "string", "8-9"),
                F("PartitionIndexes", "[]int32", "8+"),
            )),
        )),
        F("RequireStable", "bool", "7+", default=False),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "3+"),
        F("Topics", "[]OffsetFetchResponseTopic", "0-7", fields=(
            F("Name", "string", "0-7"),
            F("Partitions", "[]OffsetFetchResponsePartition", "0-7", fields=(
                F("PartitionIndex", "int32", "0-7"),
                F("CommittedOffset", "int64", "0-7"),
                F("CommittedLeaderEpoch", "int32", "5-7", default=-1),
                F("Metadata", "string", "0-7", nullable="0-7"),
                F("ErrorCode", "int16", "0-7"),
            )),
        )),
        F("ErrorCode", "int16", "2-7", default=0),
        F("Groups", "[]OffsetFetchResponseGroup", "8+", fields=(
            F("GroupId", "string", "8+"),
            F("Topics", "[]OffsetFetchResponseTopics", "8+", fields=(
                F("Name", "string", "8-9"),
                F("Partitions", "[]OffsetFetchResponsePartitions", "8+", fields=(
                    F("PartitionIndex", "int32", "8+"),
                    F("CommittedOffset", "int64", "8+"),
                    F("CommittedLeaderEpoch", "int32", "8+", default=-1),
                    F("Metadata", "string", "8+", nullable="8+"),
                    F("ErrorCode", "int16", "8+"),
                )),
            )),
            F("ErrorCode", "int16", "8+", default=0),
        )),
    ),
)

DESCRIBE_GROUPS = api(
    ApiKey.DESCRIBE_GROUPS, "0-5", flexible="5+",
    request=(
        F("Groups", "[]string", "0+"),
        F("IncludeAuthorizedOperations", "bool", "3+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("Groups", "[]DescribedGroup", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("GroupId", "string", "0+"),
            F("GroupState", "string", "0+"),
            F("ProtocolType", "string", "0+"),
            F("ProtocolData", "string", "0+"),
            F("Members", "[]DescribedGroupMember", "0+", fields=(
                F("MemberId", "string", "0+"),
                F("GroupInstanceId", "string", "4+", nullable="4+", default=None),
                F("ClientId", "string", "0+"),
                F("ClientHost", "string", "0+"),
                F("MemberMetadata", "bytes", "0+"),
                F("MemberAssignment", "bytes", "0+"),
            )),
            F("AuthorizedOperations", "int32", "3+", default=-2147483648),
        )),
    ),
)

LIST_GROUPS = api(
    ApiKey.LIST_GROUPS, "0-5", flexible="3+",
    request=(
        F("StatesFilter", "[]string", "4+"),
        F("TypesFilter", "[]string", "5+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "1+"),
        F("ErrorCode", "int16", "0+"),
        F("Groups", "[]ListedGroup", "0+", fields=(
            F("GroupId", "string", "0+"),
            F("ProtocolType", "string", "0+"),
            F("GroupState", "string", "4+"),
            F("GroupType", "string", "5+"),
        )),
    ),
)

DELETE_GROUPS = api(
    ApiKey.DELETE_GROUPS, "0-2", flexible="2+",
    request=(
        F("GroupsNames", "[]string", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Results", "[]DeletableGroupResult", "0+", fields=(
            F("GroupId", "string", "0+"),
            F("ErrorCode", "int16", "0+"),
        )),
    ),
)

OFFSET_DELETE = api(
    ApiKey.OFFSET_DELETE, "0", flexible="none",
    request=(
        F("GroupId", "string", "0+"),
        F("Topics", "[]OffsetDeleteRequestTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]OffsetDeleteRequestPartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
            )),
        )),
    ),
    response=(
        F("ErrorCode", "int16", "0+"),
        F("ThrottleTimeMs", "int32", "0+"),
        F("Topics", "[]OffsetDeleteResponseTopic", "0+", fields=(
            F("Name", "string", "0+"),
            F("Partitions", "[]OffsetDeleteResponsePartition", "0+", fields=(
                F("PartitionIndex", "int32", "0+"),
                F("ErrorCode", "int16", "0+"),
            )),
        )),
    ),
)
