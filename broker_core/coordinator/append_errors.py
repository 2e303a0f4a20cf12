"""What a client hears when a coordinator's write to its internal topic (``__consumer_offsets``,
``__transaction_state``) fails: Kafka's coordinators map the log's failures the same way."""

from __future__ import annotations

from ..errors import (CoordinatorNotAvailableError, InvalidFetchSizeError, KafkaError, KafkaStorageError,
                      MessageTooLargeError, NotCoordinatorError, NotEnoughReplicasAfterAppendError,
                      NotEnoughReplicasError, NotLeaderOrFollowerError, RecordListTooLargeError, RequestTimedOutError,
                      UnknownServerError, UnknownTopicOrPartitionError)

__all__ = ["append_error_type"]

_COORDINATOR_NOT_AVAILABLE_CAUSES = (UnknownTopicOrPartitionError, NotEnoughReplicasError,
                                     NotEnoughReplicasAfterAppendError, RequestTimedOutError)
_NOT_COORDINATOR_CAUSES = (NotLeaderOrFollowerError, KafkaStorageError)
_TOO_LARGE_CAUSES = (RecordListTooLargeError, MessageTooLargeError, InvalidFetchSizeError)


def append_error_type(exc: BaseException, too_large: type[KafkaError] = UnknownServerError) -> type[KafkaError]:
    """The error for a failed append of ``exc``: the partition's leadership or availability becomes
    NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, a record too large ``too_large``, any other Kafka
    error stays itself, anything else is UNKNOWN_SERVER_ERROR."""
    if isinstance(exc, _COORDINATOR_NOT_AVAILABLE_CAUSES):
        return CoordinatorNotAvailableError
    if isinstance(exc, _NOT_COORDINATOR_CAUSES):
        return NotCoordinatorError
    if isinstance(exc, _TOO_LARGE_CAUSES):
        return too_large
    if isinstance(exc, KafkaError):
        return type(exc)
    return UnknownServerError
