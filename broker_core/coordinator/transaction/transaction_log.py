"""Records of Kafka's internal ``__transaction_state`` topic, and which partition holds a transactional id.

This module owns the bytes of the topic, so that Kafka's
``kafka-dump-log.sh --transaction-log-decoder`` reads seglog's records and a
log dir Kafka wrote loads here. A record's key and value each start with an
int16 version; the fields after it are declared once in the protocol
package's schema language, after Kafka's ``TransactionLogKey`` and
``TransactionLogValue`` message JSON, and the protocol's one codec reads and
writes them. The key (version 0) holds the transactional id; the value
(version 0, or the flexible version 1 with tagged fields) the producer id and
epoch, timeout, state, partitions and timestamps; a null value (tombstone)
removes an expired transactional id. ``format_record`` prints a record as
``kafka-dump-log.sh --transaction-log-decoder`` does (``seglog dump``).
Everything here is pure: bytes in, values out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from format import layout
from format.layout import TopicPartition

from ...offsets_topic import partition_for_group
from ...protocol.versioned_record import decode_versioned, encode_versioned, record_version
from ...protocol.schema import F, Field, Message, Versions
from .transaction_state import TransactionState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TRANSACTION_LOG_KEY_VERSION",
    "TRANSACTION_LOG_VALUE_VERSION",
    "InvalidTransactionLogRecordError",
    "TransactionLogValue",
    "partition_for_transactional_id",
    "encode_key",
    "decode_key",
    "encode_value",
    "decode_value",
    "format_record",
]

#: The topic's name (Kafka's ``Topic.TRANSACTION_STATE_TOPIC_NAME``).
TRANSACTION_STATE_TOPIC = layout.TRANSACTION_STATE_TOPIC_NAME

#: The key's version is its record type; the transaction log has one (Kafka's CoordinatorRecordType 0).
TRANSACTION_LOG_KEY_VERSION = 0
#: What Kafka writes for producers of transaction.version 0 and 1: value version 0.
TRANSACTION_LOG_VALUE_VERSION = 0

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_NO_FLEXIBLE = Versions.parse("none")

TRANSACTION_LOG_KEY = Message("TransactionLogKey", None, Versions.parse("0"), _NO_FLEXIBLE, (
    F("TransactionalId", "string", "0"),
))

TRANSACTION_LOG_VALUE = Message("TransactionLogValue", None, Versions.parse("0-1"), Versions.parse("1+"), (
    F("ProducerId", "int64", "0+"),
    F("PreviousProducerId", "int64", "1+", tag=0, default=NO_PRODUCER_ID),
    F("NextProducerId", "int64", "1+", tag=1, default=NO_PRODUCER_ID),
    F("ProducerEpoch", "int16", "0+"),
    F("NextProducerEpoch", "int16", "1+", tag=3, default=NO_PRODUCER_EPOCH),
    F("TransactionTimeoutMs", "int32", "0+"),
    F("TransactionStatus", "int8", "0+"),
    F("TransactionPartitions", "[]PartitionsSchema", "0+", nullable="0+", fields=(
        F("Topic", "string", "0+"),
        F("PartitionIds", "[]int32", "0+"),
    )),
    F("TransactionLastUpdateTimestampMs", "int64", "0+"),
    F("TransactionStartTimestampMs", "int64", "0+"),
    F("ClientTransactionVersion", "int16", "1+", tag=2, default=0),
))

class InvalidTransactionLogRecordError(ValueError):
    """A key or value of ``__transaction_state`` that cannot be decoded (or encoded) at its version."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """What the coordinator stores of one transactional id (Kafka's TxnTransitMetadata, as written)."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID


def partition_for_transactional_id(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition: ``Utils.abs(transactionalId.hashCode) % n``, as for groups."""
    return partition_for_group(transactional_id, num_partitions)


def _encode(message: Message, version: int, body: dict) -> bytes:
    return encode_versioned(message, version, body, InvalidTransactionLogRecordError)


def _decode(message: Message, data: bytes) -> tuple[int, dict]:
    return decode_versioned(message, data, InvalidTransactionLogRecordError)


def encode_key(transactional_id: str) -> bytes:
    return _encode(TRANSACTION_LOG_KEY, TRANSACTION_LOG_KEY_VERSION, {"transactional_id": transactional_id})


def decode_key(data: bytes) -> str:
    """The transactional id of a record key."""
    return _decode(TRANSACTION_LOG_KEY, data)[1]["transactional_id"]


def encode_value(value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_VERSION) -> bytes:
    """Kafka's layout; partitions are null in Empty (which must have none), grouped by topic otherwise."""
    if value.state is TransactionState.EMPTY and value.partitions:
        raise InvalidTransactionLogRecordError(f"a transaction in state Empty has no partitions, not "
                                               f"{sorted(value.partitions)}")
    partitions = None
    if value.state is not TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(value.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = [{"topic": t, "partition_ids": ids} for t, ids in by_topic.items()]
    return _encode(TRANSACTION_LOG_VALUE, version, {
        "producer_id": value.producer_id, "previous_producer_id": value.previous_producer_id,
        "next_producer_id": value.next_producer_id, "producer_epoch": value.producer_epoch,
        "next_producer_epoch": NO_PRODUCER_EPOCH, "transaction_timeout_ms": value.transaction_timeout_ms,
        "transaction_status": value.state.id, "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.start_timestamp_ms, "client_transaction_version": 0})


def decode_value(data: bytes) -> TransactionLogValue:
    _, v = _decode(TRANSACTION_LOG_VALUE, data)
    try:
        state = TransactionState.from_id(v["transaction_status"])
    except ValueError as exc:
        raise InvalidTransactionLogRecordError(str(exc)) from None
    partitions = frozenset() if state is TransactionState.EMPTY else frozenset(
        TopicPartition(p["topic"], i) for p in v["transaction_partitions"] or () for i in p["partition_ids"])
    return TransactionLogValue(v["producer_id"], v["producer_epoch"], v["transaction_timeout_ms"], state, partitions,
                               v["transaction_last_update_timestamp_ms"], v["transaction_start_timestamp_ms"],
                               v["previous_producer_id"], v["next_producer_id"])


def _json_fields(fields: tuple[Field, ...], version: int, body: dict) -> dict[str, Any]:
    """Kafka's generated JSON converter: the fields of ``version`` by their camelCase names, tagged
    fields only when they differ from their default."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        value = body[f.key]
        if f.tag is not None and version in f.tagged and value == f.default:
            continue
        if f.is_struct and value is not None:
            value = ([_json_fields(f.fields, version, v) for v in value] if f.is_array
                     else _json_fields(f.fields, version, value))
        out[f.name[0].lower() + f.name[1:]] = value
    return out


def _json(tag: str, version: int, message: Message, body: dict) -> str:
    return json.dumps({tag: str(version), "data": _json_fields(message.fields, version, body)},
                      separators=(",", ":"), ensure_ascii=False)


def format_record(key: bytes | None, value: bytes | None) -> tuple[str | None, str | None]:
    """A record's key and value as ``kafka-dump-log.sh --transaction-log-decoder`` prints them:
    ``{"type":"0","data":{...}}`` and ``{"version":"0","data":{...}}``, ``<DELETE>`` for a tombstone,
    ``Unknown(version=N)`` for a version this layout does not know."""
    if key is None:
        return "Failed to decode a record without a key using the transaction log decoder", None
    key_version = record_version(key)
    if key_version is None:
        return f"Failed to decode a key of {len(key)} bytes using the transaction log decoder", None
    if key_version not in TRANSACTION_LOG_KEY.valid:
        return f"Unknown(version={key_version})", None
    try:
        _, key_body = _decode(TRANSACTION_LOG_KEY, key)
    except InvalidTransactionLogRecordError as exc:
        return f"Failed to decode the key: {exc}", None
    key_text = _json("type", key_version, TRANSACTION_LOG_KEY, key_body)
    if value is None:
        return key_text, "<DELETE>"
    value_version = record_version(value)
    if value_version is None:
        return key_text, f"Failed to decode a value of {len(value)} bytes"
    if value_version not in TRANSACTION_LOG_VALUE.valid:
        return key_text, f"Unknown(version={value_version})"
    try:
        _, value_body = _decode(TRANSACTION_LOG_VALUE, value)
    except InvalidTransactionLogRecordError as exc:
        return key_text, f"Failed to decode the value: {exc}"
    return key_text, _json("version", value_version, TRANSACTION_LOG_VALUE, value_body)
