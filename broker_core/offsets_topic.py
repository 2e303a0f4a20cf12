"""Records of Kafka's internal ``__consumer_offsets`` topic, and which partition holds a group.

This module owns the bytes of the offsets topic, so that a log directory
written by a Kafka broker reads here and seglog's commits read in Kafka. A
record's key and value each start with an int16 version; the fields after it
are declared once per record type in the protocol package's schema language,
after Kafka's message JSON in the group-coordinator module
(``OffsetCommitKey``, ``OffsetCommitValue``, ``GroupMetadataKey``,
``GroupMetadataValue``), and the protocol's one codec reads and writes them
(version 4 of both values is flexible: compact lengths and tagged fields).

The key's version says what the record is: 0 or 1 an offset commit, 2 a
group's metadata. A null value is a tombstone: it deletes the committed offset
or the group. Everything here is pure: bytes in, values out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

from format import layout

from .protocol.versioned_record import decode_versioned, encode_versioned, record_version
from .protocol.schema import F, Message, Versions

__all__ = [
    "OFFSETS_TOPIC",
    "DEFAULT_OFFSETS_TOPIC_PARTITIONS",
    "OFFSET_COMMIT_KEY_VERSION",
    "GROUP_METADATA_KEY_VERSION",
    "InvalidOffsetsRecordError",
    "UnknownRecordTypeError",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetsTopicKey",
    "OffsetsTopicValue",
    "java_string_hash_code",
    "partition_for_group",
    "encode_key",
    "encode_offset_commit",
    "encode_offset_commit_value",
    "encode_group_metadata",
    "encode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_group_metadata_value",
    "decode_record",
]

#: The topic's name (Kafka's ``Topic.GROUP_METADATA_TOPIC_NAME``).
OFFSETS_TOPIC = layout.GROUP_METADATA_TOPIC_NAME

#: Kafka's default ``offsets.topic.num.partitions``.
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50

# Key versions are record types: Kafka 0.9 wrote offset keys as version 0,
# 0.10+ as 1 (same layout); group metadata keys are version 2. Newer Kafka
# reuses the version as the record type id (3+: the consumer group protocol's
# records), which readers of offsets skip.
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2

# What Kafka writes: offset value v3 (leader epoch, no expire timestamp) or v1
# when the commit carries an expire timestamp; group metadata value v3
# (static membership's group.instance.id).
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

NO_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_INT32_MIN = -(1 << 31)


class InvalidOffsetsRecordError(ValueError):
    """A key or value of the offsets topic that cannot be decoded (or encoded) at its version."""


class UnknownRecordTypeError(InvalidOffsetsRecordError):
    """A key whose version is neither an offset commit nor group metadata.

    Kafka's loader skips such records (they belong to record types it does not
    manage here), and so do seglog's readers.
    """

    def __init__(self, version: int):
        self.version = version
        super().__init__(f"offsets topic key version {version} is neither an offset commit (0, 1) "
                         f"nor group metadata (2)")


# --- the records ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset; ``leader_epoch`` is -1 and ``expire_timestamp`` None when not recorded."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member of a classic group as the coordinator stores it (subscription and assignment are opaque)."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A classic group's state after a rebalance (or when it became empty)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = NO_TIMESTAMP
    members: tuple[MemberMetadata, ...] = ()


OffsetsTopicKey = Union[OffsetCommitKey, GroupMetadataKey]
OffsetsTopicValue = Union[OffsetCommitValue, GroupMetadataValue]


# --- the group's partition -------------------------------------------------------


def java_string_hash_code(s: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as int32."""
    h = 0
    # Java strings are UTF-16: a character outside the BMP counts as its two
    # surrogates; "surrogatepass" keeps lone surrogates, which Java allows too.
    for (unit,) in struct.iter_unpack(">H", s.encode("utf-16-be", "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group_id: str, num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition of a group: ``Utils.abs(groupId.hashCode()) % n``."""
    if num_partitions < 1:
        raise ValueError(f"the offsets topic needs at least one partition, not {num_partitions}")
    h = java_string_hash_code(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative).
    return (0 if h == _INT32_MIN else abs(h)) % num_partitions


# --- the records, declared as Kafka's message JSON declares them ----------------------

_NO_FLEXIBLE = Versions.parse("none")

OFFSET_COMMIT_KEY = Message("OffsetCommitKey", None, Versions.parse("0-1"), _NO_FLEXIBLE, (
    F("group", "string", "0-1"),
    F("topic", "string", "0-1"),
    F("partition", "int32", "0-1"),
))

GROUP_METADATA_KEY = Message("GroupMetadataKey", None, Versions.parse("2"), _NO_FLEXIBLE, (
    F("group", "string", "2"),
))

OFFSET_COMMIT_VALUE = Message("OffsetCommitValue", None, Versions.parse("0-4"), Versions.parse("4+"), (
    F("offset", "int64", "0+"),
    F("leaderEpoch", "int32", "3+", default=NO_LEADER_EPOCH),
    F("metadata", "string", "0+"),
    # Version 0 calls it "timestamp"; it is the commit time either way.
    F("commitTimestamp", "int64", "0+"),
    F("expireTimestamp", "int64", "1", default=NO_TIMESTAMP),
))

GROUP_METADATA_VALUE = Message("GroupMetadataValue", None, Versions.parse("0-4"), Versions.parse("4+"), (
    F("protocolType", "string", "0+"),
    F("generation", "int32", "0+"),
    F("protocol", "string", "0+", nullable="0+", default=None),
    F("leader", "string", "0+", nullable="0+", default=None),
    F("currentStateTimestamp", "int64", "2+", default=NO_TIMESTAMP),
    F("members", "[]MemberMetadata", "0+", fields=(
        F("memberId", "string", "0+"),
        F("groupInstanceId", "string", "3+", nullable="3+", default=None),
        F("clientId", "string", "0+"),
        F("clientHost", "string", "0+"),
        F("rebalanceTimeout", "int32", "1+"),
        F("sessionTimeout", "int32", "0+"),
        F("subscription", "bytes", "0+"),
        F("assignment", "bytes", "0+"),
    )),
))

def _encode(message: Message, version: int, body: dict) -> bytes:
    return encode_versioned(message, version, body, InvalidOffsetsRecordError)


def _decode(message: Message, data: bytes) -> tuple[int, dict]:
    return decode_versioned(message, data, InvalidOffsetsRecordError)


# --- keys ----------------------------------------------------------------------


def encode_key(key: OffsetsTopicKey) -> bytes:
    """The record key: offset commit keys as version 1, group metadata keys as version 2."""
    if isinstance(key, OffsetCommitKey):
        return _encode(OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY_VERSION,
                       {"group": key.group, "topic": key.topic, "partition": key.partition})
    if isinstance(key, GroupMetadataKey):
        return _encode(GROUP_METADATA_KEY, GROUP_METADATA_KEY_VERSION, {"group": key.group})
    raise TypeError(f"not an offsets topic key: {type(key).__name__}")


def decode_key(data: bytes) -> OffsetsTopicKey:
    """An offsets topic key; raises UnknownRecordTypeError for other record types (readers skip those)."""
    version = record_version(data)
    if version is None:
        raise InvalidOffsetsRecordError(f"offsets topic key of {len(data)} bytes has no version")
    if version in OFFSET_COMMIT_KEY.valid:
        _, v = _decode(OFFSET_COMMIT_KEY, data)
        return OffsetCommitKey(v["group"], v["topic"], v["partition"])
    if version in GROUP_METADATA_KEY.valid:
        _, v = _decode(GROUP_METADATA_KEY, data)
        return GroupMetadataKey(v["group"])
    raise UnknownRecordTypeError(version)


# --- offset commit values --------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue, version: int | None = None) -> bytes:
    """Kafka's choice by default: version 1 when there is an expire timestamp, else version 3."""
    if version is None:
        version = (OFFSET_COMMIT_VALUE_VERSION if value.expire_timestamp is None
                   else OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE)
    if value.expire_timestamp is not None and version != 1:
        raise InvalidOffsetsRecordError(f"OffsetCommitValue: only version 1 stores an expire timestamp, "
                                        f"not version {version}")
    return _encode(OFFSET_COMMIT_VALUE, version, {
        "offset": value.offset, "leader_epoch": value.leader_epoch, "metadata": value.metadata,
        "commit_timestamp": value.commit_timestamp,
        "expire_timestamp": NO_TIMESTAMP if value.expire_timestamp is None else value.expire_timestamp})


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    _, v = _decode(OFFSET_COMMIT_VALUE, data)
    expire = v["expire_timestamp"]
    return OffsetCommitValue(v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"],
                             None if expire == NO_TIMESTAMP else expire)


def encode_offset_commit(key: OffsetCommitKey, value: OffsetCommitValue | None,
                         version: int | None = None) -> tuple[bytes, bytes | None]:
    """Key and value bytes of one offset commit; a None value makes the tombstone that deletes it."""
    return encode_key(key), None if value is None else encode_offset_commit_value(value, version)


# --- group metadata values ---------------------------------------------------------


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if version < 3 and any(m.group_instance_id is not None for m in value.members):
        raise InvalidOffsetsRecordError(f"GroupMetadataValue: version {version} cannot store a "
                                        f"group.instance.id (version 3 is the first)")
    members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout, "subscription": m.subscription,
                "assignment": m.assignment} for m in value.members]
    return _encode(GROUP_METADATA_VALUE, version, {
        "protocol_type": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
        "leader": value.leader, "current_state_timestamp": value.current_state_timestamp, "members": members})


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    version, v = _decode(GROUP_METADATA_VALUE, data)
    members = []
    for m in v["members"]:
        # Version 0 had no rebalance timeout; Kafka took the session timeout for it.
        rebalance_timeout = m["session_timeout"] if version == 0 else m["rebalance_timeout"]
        members.append(MemberMetadata(m["member_id"], m["client_id"], m["client_host"], m["session_timeout"],
                                      rebalance_timeout, m["subscription"], m["assignment"],
                                      m["group_instance_id"]))
    return GroupMetadataValue(v["protocol_type"], v["generation"], v["protocol"], v["leader"],
                              v["current_state_timestamp"], tuple(members))


def encode_group_metadata(key: GroupMetadataKey, value: GroupMetadataValue | None,
                          version: int = GROUP_METADATA_VALUE_VERSION) -> tuple[bytes, bytes | None]:
    """Key and value bytes of a group's metadata; a None value makes the tombstone that deletes the group."""
    return encode_key(key), None if value is None else encode_group_metadata_value(value, version)


# --- whole records ---------------------------------------------------------------


def decode_record(key: bytes, value: bytes | None) -> tuple[OffsetsTopicKey, OffsetsTopicValue | None]:
    """Both halves of one record; the value is None for a tombstone."""
    decoded = decode_key(key)
    if value is None:
        return decoded, None
    if isinstance(decoded, OffsetCommitKey):
        return decoded, decode_offset_commit_value(value)
    return decoded, decode_group_metadata_value(value)
