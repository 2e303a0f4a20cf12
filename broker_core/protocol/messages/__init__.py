"""Every API seglog declares, by key; adding an API is adding its module's declaration here.

``KAFKA_APIS`` holds Kafka's APIs, ``SEGLOG_APIS`` seglog's own admin APIs
(never advertised to Kafka clients), ``APIS`` both: what the codec and the
request parser serve.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from ..api_keys import ApiKey, SeglogApiKey
from ..schema import Api
from .acls import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS
from .cluster import API_VERSIONS, DESCRIBE_CLUSTER, DESCRIBE_LOG_DIRS, DESCRIBE_TOPIC_PARTITIONS, METADATA
from .compaction import COMPACTION_LEASE, REPLACE_SEGMENTS
from .groups import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from .producers import DESCRIBE_PRODUCERS, INIT_PRODUCER_ID
from .records import FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, PRODUCE
from .sasl import (ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS, SASL_AUTHENTICATE,
                   SASL_HANDSHAKE)
from .transactions import (ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, DESCRIBE_TRANSACTIONS, END_TXN,
                           LIST_TRANSACTIONS, TXN_OFFSET_COMMIT, WRITE_TXN_MARKERS)
from .topics import (ALTER_CONFIGS, CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS,
                     INCREMENTAL_ALTER_CONFIGS)

__all__ = ["APIS", "KAFKA_APIS", "SEGLOG_APIS"]

_KAFKA = (
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP,
    HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, CREATE_TOPICS,
    DELETE_TOPICS, INIT_PRODUCER_ID, DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE_LOG_DIRS, CREATE_PARTITIONS,
    DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE, DESCRIBE_CLUSTER, DESCRIBE_TOPIC_PARTITIONS,
    ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT, DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS, DESCRIBE_PRODUCERS, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS,
    SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS,
)

_SEGLOG = (COMPACTION_LEASE, REPLACE_SEGMENTS)

#: Kafka's APIs seglog declares, by key, in key order.
KAFKA_APIS: Mapping[ApiKey, Api] = MappingProxyType({a.key: a for a in sorted(_KAFKA, key=lambda a: a.key)})
#: seglog's own admin APIs, by key, in key order.
SEGLOG_APIS: Mapping[SeglogApiKey, Api] = MappingProxyType({a.key: a for a in sorted(_SEGLOG, key=lambda a: a.key)})
#: Every declared API by key, in key order.
APIS: Mapping[ApiKey | SeglogApiKey, Api] = MappingProxyType({**KAFKA_APIS, **SEGLOG_APIS})
