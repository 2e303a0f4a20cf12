"""Kafka's delayed-operation purgatory.

``DelayedOperation`` is a request waiting for a condition or a timeout;
``DelayedOperationPurgatory`` watches such operations by key, completes them
when a key's state changes and expires them through a ``SystemTimer``.
"""

from .delayed_operation import DelayedOperation, OperationLock
from .delayed_operation_purgatory import (
    DEFAULT_PURGE_INTERVAL,
    REAPER_WORK_TIMEOUT_MS,
    DelayedOperationPurgatory,
)
from .keys import TopicPartitionOperationKey
from .watchers import Watchers

__all__ = [
    "DEFAULT_PURGE_INTERVAL",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "OperationLock",
    "REAPER_WORK_TIMEOUT_MS",
    "TopicPartitionOperationKey",
    "Watchers",
]
