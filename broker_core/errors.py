"""Kafka's protocol error codes, as the exceptions the broker raises.

Every class here stands for one entry of Kafka's error table: it carries the
numeric ``code`` the wire protocol sends, Kafka's upper-case
``kafka_error_name`` (``OFFSET_OUT_OF_RANGE``) and ``retriable``, whether
Kafka's clients try the request again by themselves. The broker raises these;
the protocol layer turns them into ``error_code`` / ``error_message`` fields
with ``code_for`` and back into exceptions with ``error_for_code``.

Names follow Kafka's error enum (``CORRUPT_MESSAGE`` -> ``CorruptMessageError``),
which also keeps them apart from the storage errors in ``format.errors``
(``CorruptRecordError`` there is about bytes on disk; ``CorruptMessageError``
here is the answer a producer gets).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, ClassVar, Mapping

__all__ = [
    "NONE",
    "KafkaError",
    "error_for_code",
    "code_for",
    "ERRORS_BY_CODE",
    "UnknownServerError",
    "OffsetOutOfRangeError",
    "OffsetMovedToTieredStorageError",
    "CorruptMessageError",
    "UnknownTopicOrPartitionError",
    "InvalidFetchSizeError",
    "LeaderNotAvailableError",
    "NotLeaderOrFollowerError",
    "RequestTimedOutError",
    "BrokerNotAvailableError",
    "ReplicaNotAvailableError",
    "MessageTooLargeError",
    "OffsetMetadataTooLargeError",
    "NetworkExceptionError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "NotCoordinatorError",
    "InvalidTopicError",
    "RecordListTooLargeError",
    "NotEnoughReplicasError",
    "NotEnoughReplicasAfterAppendError",
    "InvalidRequiredAcksError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InvalidGroupIdError",
    "UnknownMemberIdError",
    "InvalidSessionTimeoutError",
    "RebalanceInProgressError",
    "InvalidCommitOffsetSizeError",
    "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError",
    "ClusterAuthorizationFailedError",
    "TransactionalIdAuthorizationFailedError",
    "SecurityDisabledError",
    "InvalidTimestampError",
    "UnsupportedSaslMechanismError",
    "IllegalSaslStateError",
    "SaslAuthenticationFailedError",
    "ResourceNotFoundError",
    "DuplicateResourceError",
    "UnacceptableCredentialError",
    "UnsupportedVersionError",
    "TopicAlreadyExistsError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "InvalidReplicaAssignmentError",
    "InvalidConfigurationError",
    "NotControllerError",
    "InvalidRequestError",
    "UnsupportedForMessageFormatError",
    "PolicyViolationError",
    "OutOfOrderSequenceNumberError",
    "DuplicateSequenceNumberError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "InvalidProducerIdMappingError",
    "InvalidTransactionTimeoutError",
    "ConcurrentTransactionsError",
    "TransactionCoordinatorFencedError",
    "KafkaStorageError",
    "LogDirInUseError",
    "LogDirNotFoundError",
    "UnknownProducerIdError",
    "NonEmptyGroupError",
    "GroupIdNotFoundError",
    "GroupSubscribedToTopicError",
    "FencedLeaderEpochError",
    "UnknownLeaderEpochError",
    "OffsetNotAvailableError",
    "MemberIdRequiredError",
    "GroupMaxSizeReachedError",
    "FencedInstanceIdError",
    "InvalidRecordError",
    "ProducerFencedError",
    "UnstableOffsetCommitError",
    "TransactionalIdNotFoundError",
    "UnknownTopicIdError",
]

#: Kafka's ``NONE``: the code a response carries when nothing went wrong.
NONE = 0

_by_code: dict[int, type["KafkaError"]] = {}

#: Every error class that owns a code, by code (read-only view).
ERRORS_BY_CODE: Mapping[int, type["KafkaError"]] = MappingProxyType(_by_code)


class KafkaError(Exception):
    """Base of every broker error that has a Kafka error code.

    Raising ``KafkaError`` itself (or an exception that is not one) is what
    Kafka calls an unexpected server error, hence code -1 here; subclasses
    declare their own code in the class statement::

        class OffsetOutOfRangeError(KafkaError, code=1, name="OFFSET_OUT_OF_RANGE"): ...

    A subclass that gives no ``code`` (``LogDirInUseError``) is a more precise
    Python type for its parent's code and answers on the wire as the parent.
    """

    code: ClassVar[int] = -1
    kafka_error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False

    def __init_subclass__(
        cls,
        *,
        code: int | None = None,
        name: str | None = None,
        retriable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        if retriable is not None:
            cls.retriable = retriable
        if code is None:
            if name is not None:
                raise TypeError(f"{cls.__name__}: a Kafka error name needs a code")
            return
        if name is None:
            raise TypeError(f"{cls.__name__}: error code {code} needs its Kafka name")
        # Codes are the wire contract: two classes claiming one would make
        # decoding a response ambiguous.
        if code in _by_code:
            raise TypeError(f"{cls.__name__}: error code {code} already belongs to {_by_code[code].__name__}")
        cls.code = code
        cls.kafka_error_name = name
        _by_code[code] = cls

    def __init__(self, message: str | None = None) -> None:
        # The default message is the error's name so a bare raise still says
        # what went wrong; callers normally pass the object and value at fault.
        self.message = message if message is not None else self.kafka_error_name
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def error_for_code(code: int) -> type[KafkaError]:
    """The exception class for a wire error code.

    A code this module does not know decodes as ``UnknownServerError``, as
    Kafka's clients do with codes newer than themselves. ``NONE`` (0) is not an
    error and is refused.
    """
    if code == NONE:
        raise ValueError("error code 0 (NONE) means success, not an error")
    return _by_code.get(code, UnknownServerError)


def code_for(error: BaseException) -> int:
    """The wire error code for an exception: its own, or -1 if it is not a ``KafkaError``."""
    return error.code if isinstance(error, KafkaError) else UnknownServerError.code


class UnknownServerError(KafkaError, code=-1, name="UNKNOWN_SERVER_ERROR"):
    """The broker failed in a way no other code describes."""


class OffsetOutOfRangeError(KafkaError, code=1, name="OFFSET_OUT_OF_RANGE"):
    """A fetch or list-offsets asked for an offset outside [log start offset, log end offset]."""


class CorruptMessageError(KafkaError, code=2, name="CORRUPT_MESSAGE", retriable=True):
    """A produced batch failed its CRC, its size checks or another format rule."""


class UnknownTopicOrPartitionError(KafkaError, code=3, name="UNKNOWN_TOPIC_OR_PARTITION", retriable=True):
    """This broker does not host the topic-partition."""


class InvalidFetchSizeError(KafkaError, code=4, name="INVALID_FETCH_SIZE"):
    """A fetch asked for a negative or otherwise unusable number of bytes."""


class LeaderNotAvailableError(KafkaError, code=5, name="LEADER_NOT_AVAILABLE", retriable=True):
    """The partition has no leader at the moment (for example while it is being created)."""


class NotLeaderOrFollowerError(KafkaError, code=6, name="NOT_LEADER_OR_FOLLOWER", retriable=True):
    """This broker is neither the leader nor a follower the request may use."""


class RequestTimedOutError(KafkaError, code=7, name="REQUEST_TIMED_OUT", retriable=True):
    """The request waited longer than its timeout (for example for acks=all)."""


class BrokerNotAvailableError(KafkaError, code=8, name="BROKER_NOT_AVAILABLE"):
    """The broker named in the request is not running."""


class ReplicaNotAvailableError(KafkaError, code=9, name="REPLICA_NOT_AVAILABLE", retriable=True):
    """The replica asked about does not exist on this broker."""


class MessageTooLargeError(KafkaError, code=10, name="MESSAGE_TOO_LARGE"):
    """A batch is larger than ``max.message.bytes`` of its topic."""


class OffsetMetadataTooLargeError(KafkaError, code=12, name="OFFSET_METADATA_TOO_LARGE"):
    """The metadata string of an offset commit is longer than the broker allows."""


class NetworkExceptionError(KafkaError, code=13, name="NETWORK_EXCEPTION", retriable=True):
    """The connection closed before a response arrived."""


class CoordinatorLoadInProgressError(KafkaError, code=14, name="COORDINATOR_LOAD_IN_PROGRESS", retriable=True):
    """The coordinator is still loading its state from the offsets topic."""


class CoordinatorNotAvailableError(KafkaError, code=15, name="COORDINATOR_NOT_AVAILABLE", retriable=True):
    """No coordinator is available for the group right now."""


class NotCoordinatorError(KafkaError, code=16, name="NOT_COORDINATOR", retriable=True):
    """This broker is not the coordinator of the group."""


class InvalidTopicError(KafkaError, code=17, name="INVALID_TOPIC_EXCEPTION"):
    """The topic name is illegal (empty, too long, bad characters) or the topic is internal."""


class RecordListTooLargeError(KafkaError, code=18, name="RECORD_LIST_TOO_LARGE"):
    """A produced batch is larger than the topic's ``segment.bytes``."""


class NotEnoughReplicasError(KafkaError, code=19, name="NOT_ENOUGH_REPLICAS", retriable=True):
    """Fewer in-sync replicas than ``min.insync.replicas``; the write was refused."""


class NotEnoughReplicasAfterAppendError(KafkaError, code=20, name="NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True):
    """The write landed, but on fewer in-sync replicas than required."""


class InvalidRequiredAcksError(KafkaError, code=21, name="INVALID_REQUIRED_ACKS"):
    """A produce request asked for acks other than -1, 0 or 1."""


class IllegalGenerationError(KafkaError, code=22, name="ILLEGAL_GENERATION"):
    """The member's ``generation_id`` is not the group's current one."""


class InconsistentGroupProtocolError(KafkaError, code=23, name="INCONSISTENT_GROUP_PROTOCOL"):
    """The joining member shares no protocol with the group's members."""


class InvalidGroupIdError(KafkaError, code=24, name="INVALID_GROUP_ID"):
    """The group id is empty or otherwise unusable."""


class UnknownMemberIdError(KafkaError, code=25, name="UNKNOWN_MEMBER_ID"):
    """The coordinator does not know this ``member_id``."""


class InvalidSessionTimeoutError(KafkaError, code=26, name="INVALID_SESSION_TIMEOUT"):
    """The session timeout is outside [group.min.session.timeout.ms, group.max.session.timeout.ms]."""


class RebalanceInProgressError(KafkaError, code=27, name="REBALANCE_IN_PROGRESS"):
    """The group is rebalancing; the member must rejoin."""


class InvalidCommitOffsetSizeError(KafkaError, code=28, name="INVALID_COMMIT_OFFSET_SIZE"):
    """The offset commit is too large to store."""


class TopicAuthorizationFailedError(KafkaError, code=29, name="TOPIC_AUTHORIZATION_FAILED"):
    """The principal may not perform this operation on the topic."""


class GroupAuthorizationFailedError(KafkaError, code=30, name="GROUP_AUTHORIZATION_FAILED"):
    """The principal may not perform this operation on the group."""


class ClusterAuthorizationFailedError(KafkaError, code=31, name="CLUSTER_AUTHORIZATION_FAILED"):
    """The principal may not perform this operation on the cluster."""


class InvalidTimestampError(KafkaError, code=32, name="INVALID_TIMESTAMP"):
    """A record timestamp is outside the range the topic accepts."""


class UnsupportedSaslMechanismError(KafkaError, code=33, name="UNSUPPORTED_SASL_MECHANISM"):
    """The broker does not offer the SASL mechanism asked for."""


class IllegalSaslStateError(KafkaError, code=34, name="ILLEGAL_SASL_STATE"):
    """The request is not allowed at this point of the SASL exchange."""


class SaslAuthenticationFailedError(KafkaError, code=58, name="SASL_AUTHENTICATION_FAILED"):
    """SASL authentication failed: wrong credentials, an unknown user or a message that breaks the mechanism."""


class ResourceNotFoundError(KafkaError, code=91, name="RESOURCE_NOT_FOUND"):
    """The resource named (a user's SCRAM credential) does not exist."""


class DuplicateResourceError(KafkaError, code=92, name="DUPLICATE_RESOURCE"):
    """One request names the same resource (a user) twice."""


class UnacceptableCredentialError(KafkaError, code=93, name="UNACCEPTABLE_CREDENTIAL"):
    """A SCRAM credential the broker refuses to store (an empty user name, too few or too many iterations)."""


class UnsupportedVersionError(KafkaError, code=35, name="UNSUPPORTED_VERSION"):
    """The broker does not support this version of the API."""


class TopicAlreadyExistsError(KafkaError, code=36, name="TOPIC_ALREADY_EXISTS"):
    """A topic of that name exists already."""


class InvalidPartitionsError(KafkaError, code=37, name="INVALID_PARTITIONS"):
    """The number of partitions is below 1 or would shrink the topic."""


class InvalidReplicationFactorError(KafkaError, code=38, name="INVALID_REPLICATION_FACTOR"):
    """The replication factor is below 1 or above the number of brokers."""


class InvalidReplicaAssignmentError(KafkaError, code=39, name="INVALID_REPLICA_ASSIGNMENT"):
    """The explicit replica assignment is malformed."""


class InvalidConfigurationError(KafkaError, code=40, name="INVALID_CONFIG"):
    """A configuration name or value is not acceptable.

    ``config_name`` and ``value`` say which setting and what was given, when
    the error is about one setting.
    """

    def __init__(self, message: str | None = None, *, config_name: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.config_name = config_name
        self.value = value


class NotControllerError(KafkaError, code=41, name="NOT_CONTROLLER", retriable=True):
    """This broker is not the controller."""


class InvalidRequestError(KafkaError, code=42, name="INVALID_REQUEST"):
    """The request is malformed or inconsistent with itself."""


class UnsupportedForMessageFormatError(KafkaError, code=43, name="UNSUPPORTED_FOR_MESSAGE_FORMAT"):
    """The operation needs a newer message format than the topic's data has."""


class PolicyViolationError(KafkaError, code=44, name="POLICY_VIOLATION"):
    """The request breaks a create-topic or alter-config policy."""


class OutOfOrderSequenceNumberError(KafkaError, code=45, name="OUT_OF_ORDER_SEQUENCE_NUMBER"):
    """An idempotent producer's sequence number skipped ahead."""


class DuplicateSequenceNumberError(KafkaError, code=46, name="DUPLICATE_SEQUENCE_NUMBER"):
    """An idempotent producer resent a batch the log already has."""


class InvalidProducerEpochError(KafkaError, code=47, name="INVALID_PRODUCER_EPOCH"):
    """The producer epoch is older than the one the broker knows."""


class InvalidTxnStateError(KafkaError, code=48, name="INVALID_TXN_STATE"):
    """The transactional operation is not allowed in the transaction's current state."""


class InvalidProducerIdMappingError(KafkaError, code=49, name="INVALID_PRODUCER_ID_MAPPING"):
    """The producer id is not the one assigned to this transactional id."""


class InvalidTransactionTimeoutError(KafkaError, code=50, name="INVALID_TRANSACTION_TIMEOUT"):
    """The transaction timeout exceeds the broker's maximum."""


class ConcurrentTransactionsError(KafkaError, code=51, name="CONCURRENT_TRANSACTIONS", retriable=True):
    """Another transaction of the same producer is still being completed."""


class TransactionCoordinatorFencedError(KafkaError, code=52, name="TRANSACTION_COORDINATOR_FENCED"):
    """A transaction marker came from a coordinator whose epoch is older than one already seen."""


class TransactionalIdAuthorizationFailedError(KafkaError, code=53, name="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
    """The principal may not use the transactional id (WRITE, or DESCRIBE to find its coordinator)."""


class SecurityDisabledError(KafkaError, code=54, name="SECURITY_DISABLED"):
    """An ACL request to a broker without an authorizer (``authorizer.class.name`` unset)."""


class KafkaStorageError(KafkaError, code=56, name="KAFKA_STORAGE_ERROR", retriable=True):
    """A log directory failed: disk error, or a directory the broker cannot use."""


class LogDirInUseError(KafkaStorageError):
    """The log directory is locked by another process (its ``.lock`` file is held).

    Answers on the wire as ``KAFKA_STORAGE_ERROR``; the separate type lets the
    log manager and the CLI tell "someone else owns this directory" from a
    failing disk.
    """


class LogDirReadOnlyError(KafkaStorageError):
    """A write to a log directory opened read-only (``Broker(..., read_only=True)``)."""


class LogDirNotFoundError(KafkaError, code=57, name="LOG_DIR_NOT_FOUND"):
    """The log directory named in the request is not one of the broker's ``log.dirs``."""


class UnknownProducerIdError(KafkaError, code=59, name="UNKNOWN_PRODUCER_ID"):
    """The broker has no state for this producer id (it may have expired)."""


class NonEmptyGroupError(KafkaError, code=68, name="NON_EMPTY_GROUP"):
    """The group still has members, so it cannot be deleted."""


class GroupIdNotFoundError(KafkaError, code=69, name="GROUP_ID_NOT_FOUND"):
    """The group does not exist."""


class FencedLeaderEpochError(KafkaError, code=74, name="FENCED_LEADER_EPOCH", retriable=True):
    """The request's leader epoch is older than the partition's: the sender's metadata is stale."""


class UnknownLeaderEpochError(KafkaError, code=76, name="UNKNOWN_LEADER_EPOCH", retriable=True):
    """The request's leader epoch is newer than this broker knows for the partition."""


class OffsetNotAvailableError(KafkaError, code=78, name="OFFSET_NOT_AVAILABLE", retriable=True):
    """The leader's high watermark has not caught up yet, so the offset cannot be answered."""


class MemberIdRequiredError(KafkaError, code=79, name="MEMBER_ID_REQUIRED"):
    """The joining member must rejoin with the ``member_id`` the coordinator assigned."""


class GroupMaxSizeReachedError(KafkaError, code=81, name="GROUP_MAX_SIZE_REACHED"):
    """The group already has ``group.max.size`` members."""


class FencedInstanceIdError(KafkaError, code=82, name="FENCED_INSTANCE_ID"):
    """Another member joined with the same ``group.instance.id``."""


class GroupSubscribedToTopicError(KafkaError, code=86, name="GROUP_SUBSCRIBED_TO_TOPIC"):
    """The group's members consume the topic, so its offsets cannot be deleted (OffsetDelete)."""


class InvalidRecordError(KafkaError, code=87, name="INVALID_RECORD"):
    """A well-formed batch breaks a rule of the topic (a null key on a compacted topic, a control batch from a client).

    The storage layer's ``format.errors.InvalidRecordError`` is about the
    bytes; this one is the answer the producer gets.
    """


class ProducerFencedError(KafkaError, code=90, name="PRODUCER_FENCED"):
    """A newer producer with the same transactional id has taken over."""


class UnknownTopicIdError(KafkaError, code=100, name="UNKNOWN_TOPIC_ID", retriable=True):
    """This broker hosts no topic with that topic id."""


class UnstableOffsetCommitError(KafkaError, code=88, name="UNSTABLE_OFFSET_COMMIT", retriable=True):
    """The group has offsets committed in a transaction that has not ended yet for this partition."""


class TransactionalIdNotFoundError(KafkaError, code=105, name="TRANSACTIONAL_ID_NOT_FOUND"):
    """The transaction coordinator holds no such transactional id."""


class OffsetMovedToTieredStorageError(KafkaError, code=109, name="OFFSET_MOVED_TO_TIERED_STORAGE"):
    """A follower fetched below the leader's local log start offset: those offsets are in the remote tier only."""
