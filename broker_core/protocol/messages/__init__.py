"""Every API seglog declares, by key; adding an API is adding its module's declaration here."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from ..api_keys import ApiKey
from ..schema import Api
from .cluster import API_VERSIONS, METADATA
from .groups import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    SYNC_GROUP,
)
from .producers import INIT_PRODUCER_ID
from .records import FETCH, LIST_OFFSETS, PRODUCE
from .topics import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS

__all__ = ["APIS"]

_ALL = (
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP,
    HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, CREATE_TOPICS,
    DELETE_TOPICS, INIT_PRODUCER_ID, DESCRIBE_CONFIGS, CREATE_PARTITIONS, DELETE_GROUPS,
)

#: The declared APIs by key, in key order.
APIS: Mapping[ApiKey, Api] = MappingProxyType({a.key: a for a in sorted(_ALL, key=lambda a: a.key)})
