"""Records of Kafka's internal ``__consumer_offsets`` topic, and which partition holds a group.

This module owns the bytes of the offsets topic, so that a log directory
written by a Kafka broker reads here and seglog's commits read in Kafka. A
record's key and value each start with an int16 version; the fields after it
are declared once per record type, as data, after Kafka's message JSON in the
group-coordinator module (``OffsetCommitKey``, ``OffsetCommitValue``,
``GroupMetadataKey``, ``GroupMetadataValue``), and one small codec reads and
writes them all. Version 4 of both values is flexible: compact lengths
(unsigned varint of length + 1) and tagged fields, as Kafka's generated
classes write them.

The key's version says what the record is: 0 or 1 an offset commit, 2 a
group's metadata. A null value is a tombstone: it deletes the committed offset
or the group. Everything here is pure: bytes in, values out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

from format.errors import CorruptRecordError
from format.varint import decode_unsigned_varint, encode_unsigned_varint

__all__ = [
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

#: Kafka's default ``offsets.topic.num.partitions``.
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50

# Key versions are record types: Kafka 0.9 wrote offset keys as version 0,
# 0.10+ as 1 (same layout); group metadata keys are version 2. Newer Kafka
# reuses the version as the record type id (3+: the consumer group protocol's
# records), which readers of offsets skip.
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
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


# --- schemas as data -------------------------------------------------------------

_ALL_VERSIONS = 0x7FFF


@dataclass(frozen=True)
class _Field:
    """One field of a record schema: its type and the versions that carry it."""

    name: str
    type: str | tuple["_Field", ...]  # int32, int64, string, bytes, or the fields of an array's structs
    first: int = 0
    last: int = _ALL_VERSIONS
    nullable: bool = False
    default: object = None

    def present(self, version: int) -> bool:
        return self.first <= version <= self.last


@dataclass(frozen=True)
class _Schema:
    name: str
    lowest: int
    highest: int
    flexible_from: int | None
    fields: tuple[_Field, ...]

    def flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from


_OFFSET_COMMIT_KEY = _Schema("OffsetCommitKey", 0, 1, None, (
    _Field("group", "string"),
    _Field("topic", "string"),
    _Field("partition", "int32"),
))

_GROUP_METADATA_KEY = _Schema("GroupMetadataKey", 2, 2, None, (
    _Field("group", "string"),
))

_OFFSET_COMMIT_VALUE = _Schema("OffsetCommitValue", 0, 4, 4, (
    _Field("offset", "int64"),
    _Field("leader_epoch", "int32", first=3, default=NO_LEADER_EPOCH),
    _Field("metadata", "string"),
    # Version 0 calls it "timestamp"; it is the commit time either way.
    _Field("commit_timestamp", "int64"),
    _Field("expire_timestamp", "int64", first=1, last=1, default=NO_TIMESTAMP),
))

_MEMBER_METADATA = (
    _Field("member_id", "string"),
    _Field("group_instance_id", "string", first=3, nullable=True),
    _Field("client_id", "string"),
    _Field("client_host", "string"),
    _Field("rebalance_timeout", "int32", first=1),
    _Field("session_timeout", "int32"),
    _Field("subscription", "bytes"),
    _Field("assignment", "bytes"),
)

_GROUP_METADATA_VALUE = _Schema("GroupMetadataValue", 0, 4, 4, (
    _Field("protocol_type", "string"),
    _Field("generation", "int32"),
    _Field("protocol", "string", nullable=True),
    _Field("leader", "string", nullable=True),
    _Field("current_state_timestamp", "int64", first=2, default=NO_TIMESTAMP),
    _Field("members", _MEMBER_METADATA),
))

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_FIXED = {"int32": _INT32, "int64": _INT64}


class _Reader:
    def __init__(self, data: bytes, what: str):
        self.data = memoryview(data)
        self.pos = 0
        self.what = what

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise InvalidOffsetsRecordError(f"{self.what}: {n} bytes needed at position {self.pos}, "
                                            f"{len(self.data) - self.pos} left")

    def fixed(self, s: struct.Struct) -> int:
        self._need(s.size)
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return value

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.data, self.pos)
        except CorruptRecordError as exc:
            raise InvalidOffsetsRecordError(f"{self.what}: bad unsigned varint at position {self.pos}: "
                                            f"{exc.reason}") from None
        return value

    def length(self, flexible: bool, wide: bool) -> int:
        """A length prefix: compact (varint of n + 1) in flexible versions, else int16 or int32; -1 is null."""
        if flexible:
            return self.uvarint() - 1
        return self.fixed(_INT32 if wide else _INT16)

    def raw(self, n: int) -> bytes:
        self._need(n)
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def skip_tagged_fields(self) -> None:
        # No tag is defined for these records yet; later versions may add some.
        for _ in range(self.uvarint()):
            self.uvarint()
            self._need(size := self.uvarint())
            self.pos += size


def _read_struct(r: _Reader, fields: tuple[_Field, ...], version: int, flexible: bool) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in fields:
        if not f.present(version):
            out[f.name] = f.default
            continue
        if isinstance(f.type, tuple):
            n = r.length(flexible, wide=True)
            if n < 0:
                raise InvalidOffsetsRecordError(f"{r.what}: array {f.name} is null")
            out[f.name] = [_read_struct(r, f.type, version, flexible) for _ in range(n)]
        elif f.type in _FIXED:
            out[f.name] = r.fixed(_FIXED[f.type])
        else:
            n = r.length(flexible, wide=f.type == "bytes")
            if n < 0:
                if not f.nullable:
                    raise InvalidOffsetsRecordError(f"{r.what}: {f.name} is null but not nullable "
                                                    f"at version {version}")
                out[f.name] = None
            else:
                data = r.raw(n)
                if f.type == "bytes":
                    out[f.name] = data
                else:
                    try:
                        out[f.name] = data.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise InvalidOffsetsRecordError(f"{r.what}: {f.name} is not UTF-8: {exc}") from None
    if flexible:
        r.skip_tagged_fields()
    return out


def _length_prefix(n: int, flexible: bool, wide: bool, what: str) -> bytes:
    if flexible:
        return encode_unsigned_varint(n + 1)
    limit = 0x7FFFFFFF if wide else 0x7FFF
    if n > limit:
        raise InvalidOffsetsRecordError(f"{what}: {n} is longer than {limit}")
    return (_INT32 if wide else _INT16).pack(n)


def _write_struct(out: list[bytes], values: dict[str, object], fields: tuple[_Field, ...], version: int,
                  flexible: bool, what: str) -> None:
    for f in fields:
        if not f.present(version):
            continue
        value = values[f.name]
        if isinstance(f.type, tuple):
            items = list(value)  # type: ignore[call-overload]
            out.append(_length_prefix(len(items), flexible, True, f"{what}.{f.name}"))
            for item in items:
                _write_struct(out, item, f.type, version, flexible, what)
        elif f.type in _FIXED:
            try:
                out.append(_FIXED[f.type].pack(value))
            except struct.error as exc:
                raise InvalidOffsetsRecordError(f"{what}: {f.name}={value!r} does not fit {f.type}") from exc
        elif value is None:
            if not f.nullable:
                raise InvalidOffsetsRecordError(f"{what}: {f.name} may not be null")
            out.append(encode_unsigned_varint(0) if flexible else (_INT32 if f.type == "bytes" else _INT16).pack(-1))
        else:
            data = bytes(value) if f.type == "bytes" else str(value).encode("utf-8")  # type: ignore[arg-type]
            out.append(_length_prefix(len(data), flexible, f.type == "bytes", f"{what}.{f.name}"))
            out.append(data)
    if flexible:
        out.append(encode_unsigned_varint(0))  # no tagged fields


def _encode(schema: _Schema, version: int, values: dict[str, object]) -> bytes:
    if not schema.lowest <= version <= schema.highest:
        raise InvalidOffsetsRecordError(f"{schema.name} has versions {schema.lowest}..{schema.highest}, "
                                        f"not {version}")
    out = [_INT16.pack(version)]
    _write_struct(out, values, schema.fields, version, schema.flexible(version), schema.name)
    return b"".join(out)


def _decode(schema: _Schema, data: bytes) -> tuple[int, dict[str, object]]:
    r = _Reader(data, schema.name)
    version = r.fixed(_INT16)
    if not schema.lowest <= version <= schema.highest:
        raise InvalidOffsetsRecordError(f"{schema.name} version {version} is not supported "
                                        f"(versions {schema.lowest}..{schema.highest} are)")
    r.what = f"{schema.name} v{version}"
    # Trailing bytes are left alone, as Kafka's readers leave them.
    return version, _read_struct(r, schema.fields, version, schema.flexible(version))


# --- keys ----------------------------------------------------------------------


def encode_key(key: OffsetsTopicKey) -> bytes:
    """The record key: offset commit keys as version 1, group metadata keys as version 2."""
    if isinstance(key, OffsetCommitKey):
        return _encode(_OFFSET_COMMIT_KEY, OFFSET_COMMIT_KEY_VERSION,
                       {"group": key.group, "topic": key.topic, "partition": key.partition})
    if isinstance(key, GroupMetadataKey):
        return _encode(_GROUP_METADATA_KEY, GROUP_METADATA_KEY_VERSION, {"group": key.group})
    raise TypeError(f"not an offsets topic key: {type(key).__name__}")


def decode_key(data: bytes) -> OffsetsTopicKey:
    """An offsets topic key; raises UnknownRecordTypeError for other record types (readers skip those)."""
    if len(data) < _INT16.size:
        raise InvalidOffsetsRecordError(f"offsets topic key of {len(data)} bytes has no version")
    (version,) = _INT16.unpack_from(data)
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        _, v = _decode(_OFFSET_COMMIT_KEY, data)
        return OffsetCommitKey(v["group"], v["topic"], v["partition"])  # type: ignore[arg-type]
    if version == GROUP_METADATA_KEY_VERSION:
        _, v = _decode(_GROUP_METADATA_KEY, data)
        return GroupMetadataKey(v["group"])  # type: ignore[arg-type]
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
    return _encode(_OFFSET_COMMIT_VALUE, version, {
        "offset": value.offset, "leader_epoch": value.leader_epoch, "metadata": value.metadata,
        "commit_timestamp": value.commit_timestamp,
        "expire_timestamp": NO_TIMESTAMP if value.expire_timestamp is None else value.expire_timestamp})


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    _, v = _decode(_OFFSET_COMMIT_VALUE, data)
    expire = v["expire_timestamp"]
    return OffsetCommitValue(v["offset"], v["leader_epoch"], v["metadata"], v["commit_timestamp"],  # type: ignore
                             None if expire == NO_TIMESTAMP else expire)  # type: ignore[arg-type]


def encode_offset_commit(key: OffsetCommitKey, value: OffsetCommitValue | None,
                         version: int | None = None) -> tuple[bytes, bytes | None]:
    """Key and value bytes of one offset commit; a None value makes the tombstone that deletes it."""
    return encode_key(key), None if value is None else encode_offset_commit_value(value, version)


# --- group metadata values ---------------------------------------------------------


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout, "subscription": m.subscription,
                "assignment": m.assignment} for m in value.members]
    if version < 3 and any(m.group_instance_id is not None for m in value.members):
        raise InvalidOffsetsRecordError(f"GroupMetadataValue: version {version} cannot store a "
                                        f"group.instance.id (version 3 is the first)")
    return _encode(_GROUP_METADATA_VALUE, version, {
        "protocol_type": value.protocol_type, "generation": value.generation, "protocol": value.protocol,
        "leader": value.leader, "current_state_timestamp": value.current_state_timestamp, "members": members})


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    version, v = _decode(_GROUP_METADATA_VALUE, data)
    members = []
    for m in v["members"]:  # type: ignore[union-attr]
        # Version 0 had no rebalance timeout; Kafka took the session timeout for it.
        rebalance_timeout = m["session_timeout"] if version == 0 else m["rebalance_timeout"]
        members.append(MemberMetadata(m["member_id"], m["client_id"], m["client_host"], m["session_timeout"],
                                      rebalance_timeout, m["subscription"], m["assignment"],
                                      m["group_instance_id"]))
    return GroupMetadataValue(v["protocol_type"], v["generation"], v["protocol"], v["leader"],  # type: ignore
                              v["current_state_timestamp"], tuple(members))  # type: ignore[arg-type]


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
