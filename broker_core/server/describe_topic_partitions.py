"""DescribeTopicPartitions (KIP-966): topics and their partitions a page at a time.

Kafka's admin client asks this for ``describeTopics`` when the broker serves it
(``kafka-topics.sh --describe``). The answer follows Kafka's
DescribeTopicPartitionsRequestHandler and its metadata cache: the topics in name
order starting at the cursor's topic (and, in it, at the cursor's partition), at
most ``min(ResponsePartitionLimit, 2000)`` partitions in all, and a next cursor
where the page ends before the last partition. Named topics that do not exist
answer UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name);
a cursor outside the asked topics makes the whole request INVALID_REQUEST.

This module is pure: the caller hands in the topics the broker holds and the
partition entry of one partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from format import layout
from format.errors import InvalidTopicError as FormatInvalidTopicError

from ..errors import NONE, InvalidRequestError, InvalidTopicError, UnknownTopicOrPartitionError

__all__ = ["DescribedTopic", "MAX_REQUEST_PARTITION_SIZE_LIMIT", "describe_topic_partitions"]

#: Kafka's ``max.request.partition.size.limit``: the most partitions one response holds.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
_ZERO_UUID = bytes(16)
_OPERATIONS_OMITTED = -2147483648


@dataclass(frozen=True, slots=True)
class DescribedTopic:
    """What the answer tells of one topic the broker holds."""

    topic_id: bytes
    partitions: int
    is_internal: bool


def describe_topic_partitions(body: Mapping[str, Any], topics: Mapping[str, DescribedTopic],
                              partition_entry: Callable[[str, int], dict],
                              topic_authorized_operations: int = _OPERATIONS_OMITTED) -> dict:
    """The response body answering the request ``body`` over ``topics`` (by name)."""
    asked = [t["name"] for t in body["topics"]]
    cursor = body["cursor"]
    cursor_topic = cursor["topic_name"] if cursor is not None else ""
    try:
        names = _topics_to_describe(asked, topics, cursor)
    except InvalidRequestError:
        return {"throttle_time_ms": 0, "next_cursor": None, "topics": [
            {"error_code": InvalidRequestError.code, "name": name, "topic_id": _ZERO_UUID, "is_internal": False,
             "partitions": [], "topic_authorized_operations": _OPERATIONS_OMITTED} for name in asked]}
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, body["response_partition_limit"]), 1)
    describe_all = not asked
    out: list[dict] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            # The page is full at a topic boundary: the next one starts at this topic.
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic = topics.get(name)
        if topic is None:
            if not describe_all:
                out.append({"error_code": _missing_topic_error(name), "name": name, "topic_id": _ZERO_UUID,
                            "is_internal": False, "partitions": [],
                            "topic_authorized_operations": _OPERATIONS_OMITTED})
            continue
        first = min(cursor["partition_index"], topic.partitions) if cursor is not None and name == cursor_topic else 0
        end = min(topic.partitions, first + remaining)
        out.append({"error_code": NONE, "name": name, "topic_id": topic.topic_id, "is_internal": topic.is_internal,
                    "partitions": [partition_entry(name, p) for p in range(first, end)],
                    "topic_authorized_operations": topic_authorized_operations})
        if end < topic.partitions:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= end - first
    return {"throttle_time_ms": 0, "topics": out, "next_cursor": next_cursor}


def _topics_to_describe(asked: list[str], topics: Mapping[str, DescribedTopic],
                        cursor: Mapping[str, Any] | None) -> list[str]:
    cursor_topic = cursor["topic_name"] if cursor is not None else ""
    candidates = asked if asked else topics
    names = sorted({name for name in candidates if name >= cursor_topic})
    if cursor is not None:
        if cursor["partition_index"] < 0:
            raise InvalidRequestError(f"DescribeTopicPartitions cursor partition must be valid: "
                                      f"{cursor['partition_index']}")
        if cursor_topic not in names:
            raise InvalidRequestError(f"DescribeTopicPartitions topic list should contain the cursor topic: "
                                      f"{cursor_topic}")
    return names


def _missing_topic_error(name: str) -> int:
    try:
        layout.validate_topic_name(name)
    except FormatInvalidTopicError:
        return InvalidTopicError.code
    return UnknownTopicOrPartitionError.code
