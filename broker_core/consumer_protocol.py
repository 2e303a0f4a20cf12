"""The consumer's embedded protocol: what a consumer group's JoinGroup metadata and SyncGroup assignments hold.

The coordinator treats a member's subscription and assignment as opaque
bytes; consumers fill them with Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` (an int16 version, then the struct). Tools
that show who owns which partition (``seglog groups describe``, DescribeGroups
over ``--bootstrap``) read them here. Declared as data like every other
message, and read by the same codec; a version newer than the declared ones
is read as the newest declared, as Kafka's clients do (later versions only
add fields at the end).
"""

from __future__ import annotations

import struct

from format.layout import TopicPartition

from .protocol.codec import decode, encode
from .protocol.errors import ProtocolError
from .protocol.schema import F, Message, Versions

__all__ = ["CONSUMER_PROTOCOL_TYPE", "decode_assignment", "decode_subscription", "encode_assignment",
           "encode_subscription"]

#: The protocol type consumers join groups with.
CONSUMER_PROTOCOL_TYPE = "consumer"

_NO_FLEXIBLE = Versions.parse("none")

_TOPIC_PARTITION = (
    F("Topic", "string", "0+"),
    F("Partitions", "[]int32", "0+"),
)

CONSUMER_PROTOCOL_SUBSCRIPTION = Message("ConsumerProtocolSubscription", None, Versions.parse("0-3"), _NO_FLEXIBLE, (
    F("Topics", "[]string", "0+"),
    F("UserData", "bytes", "0+", nullable="0+", default=None),
    F("OwnedPartitions", "[]TopicPartition", "1+", fields=_TOPIC_PARTITION),
    F("GenerationId", "int32", "2+", default=-1),
    F("RackId", "string", "3+", nullable="3+", default=None),
))

CONSUMER_PROTOCOL_ASSIGNMENT = Message("ConsumerProtocolAssignment", None, Versions.parse("0-3"), _NO_FLEXIBLE, (
    F("AssignedPartitions", "[]TopicPartition", "0+", fields=_TOPIC_PARTITION),
    F("UserData", "bytes", "0+", nullable="0+", default=None),
))

_VERSION = struct.Struct(">h")


def _decode(message: Message, data: bytes) -> dict | None:
    if len(data) < _VERSION.size:
        return None  # a member without an assignment (or a group of another protocol type)
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise ProtocolError(f"{message.name}: negative version {version}")
    body, _ = decode(message, min(version, message.valid.high), memoryview(data), _VERSION.size)
    return body


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """The partitions a consumer's assignment names, sorted; empty for empty bytes."""
    body = _decode(CONSUMER_PROTOCOL_ASSIGNMENT, bytes(data or b""))
    if body is None:
        return []
    return sorted(TopicPartition(t["topic"], p)
                  for t in body["assigned_partitions"] or () for p in t["partitions"] or ())


def decode_subscription(data: bytes) -> list[str]:
    """The topics a consumer's JoinGroup metadata subscribes to; empty for empty bytes."""
    body = _decode(CONSUMER_PROTOCOL_SUBSCRIPTION, bytes(data or b""))
    return [] if body is None else list(body["topics"] or ())


def encode_assignment(partitions: list[TopicPartition], version: int = 0) -> bytes:
    """A ``ConsumerProtocolAssignment`` naming ``partitions`` (for tests and tools)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out: list = [_VERSION.pack(version)]
    encode(CONSUMER_PROTOCOL_ASSIGNMENT, version, {
        "assigned_partitions": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()], "user_data": None},
        out)
    return b"".join(bytes(p) for p in out)


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    """A ``ConsumerProtocolSubscription`` to ``topics`` (for tests and tools)."""
    out: list = [_VERSION.pack(version)]
    encode(CONSUMER_PROTOCOL_SUBSCRIPTION, version, {"topics": list(topics), "user_data": None}, out)
    return b"".join(bytes(p) for p in out)
