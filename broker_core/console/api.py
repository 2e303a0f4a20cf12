"""The console's JSON API: one handler per ``/api/...`` path, each a read of a ``ServerView`` shaped into
plain JSON (what the pages draw). A handler's errors carry the object and the value that was wrong and
the Kafka error name; ``ApiError`` says which HTTP status answers them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable, Mapping

from format.layout import TopicPartition

from ..broker import TopicDescription
from ..errors import (GroupIdNotFoundError, InvalidRequestError, KafkaError, OffsetOutOfRangeError,
                      UnknownTopicOrPartitionError)
from ..group_offsets import GroupDescription
from .lag_sampler import LagSampler
from .records import read_page
from .server_view import ServerView

Params = Mapping[str, str]

_STATUS = {UnknownTopicOrPartitionError: 404, GroupIdNotFoundError: 404, InvalidRequestError: 400,
           OffsetOutOfRangeError: 416}


class ApiError(Exception):
    """An API request that cannot be answered: ``status`` is its HTTP status, the message says why."""

    def __init__(self, status: int, message: str, error: str = "INVALID_REQUEST") -> None:
        super().__init__(message)
        self.status = status
        self.error = error

    @classmethod
    def of(cls, exc: KafkaError) -> ApiError:
        status = next((s for kind, s in _STATUS.items() if isinstance(exc, kind)), 503 if exc.retriable else 500)
        return cls(status, str(exc), exc.kafka_error_name)


def _required(params: Params, name: str) -> str:
    value = params.get(name)
    if not value:
        raise ApiError(400, f"query parameter {name!r} is missing")
    return value


def _int(params: Params, name: str, default: int | None = None) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ApiError(400, f"query parameter {name}={value!r} is not an integer") from None


def _partition(view: ServerView, params: Params) -> tuple[str, int]:
    topic = _required(params, "topic")
    partition = _int(params, "partition")
    count = view.partition_count(topic)
    if partition is None or not 0 <= partition < count:
        raise ApiError(404, f"topic {topic!r} has no partition {params.get('partition')!r} (it has {count})",
                       UnknownTopicOrPartitionError.kafka_error_name)
    return topic, partition


def _described_topics(view: ServerView) -> list[TopicDescription]:
    out = []
    for name in view.topic_names():
        try:
            out.append(view.describe_topic(name))
        except UnknownTopicOrPartitionError:
            continue  # deleted since listed
    return out


# --- handlers -------------------------------------------------------------------------


def cluster(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    described = view.cluster()
    topics = _described_topics(view)
    partitions = [p for t in topics for p in t.partitions]
    return {
        "cluster_id": described.cluster_id,
        "controller_id": described.controller_id,
        "node_id": described.node_id,
        "brokers": [asdict(b) for b in described.brokers],
        "topics": len(topics),
        "partitions": len(partitions),
        "under_replicated_partitions": sum(p.is_under_replicated for p in partitions),
        "size_bytes": sum(p.size_bytes or 0 for p in partitions),
        "groups": len(view.group_ids()),
    }


def topics(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    """Each topic's partitions, size, segments and records — the offsets its partitions span, as consoles
    count them (compaction and transaction markers make it more than the records readable) — and retention."""
    out = []
    for described in _described_topics(view):
        config = view.retention_config(described.name)
        out.append({
            "name": described.name,
            "partitions": described.partition_count,
            "size_bytes": sum(p.size_bytes or 0 for p in described.partitions),
            "segments": sum(p.segments or 0 for p in described.partitions),
            "records": sum(p.log_end_offset - p.log_start_offset for p in described.partitions),
            "cleanup_policy": config.get("cleanup.policy"),
            "retention_ms": int(config["retention.ms"]),
            "retention_bytes": int(config["retention.bytes"]),
        })
    return {"topics": out}


def topic(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    name = _required(params, "topic")
    described = view.describe_topic(name)
    return {
        "name": name,
        "topic_id": described.topic_id,
        "config": view.retention_config(name),
        "overrides": described.config,
        "partitions": [asdict(p) for p in described.partitions],
    }


def segments(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    name, partition = _partition(view, params)
    return {"topic": name, "partition": partition,
            "segments": [asdict(s) for s in view.segments(name, partition)]}


def records(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    name, partition = _partition(view, params)
    view.held_log(name, partition)
    page = read_page(view.broker, name, partition, offset=_int(params, "offset"),
                     timestamp=_int(params, "timestamp"), limit=_int(params, "limit", 20),
                     fmt=params.get("format") or "text")
    return asdict(page)


def _lag_total(description: GroupDescription) -> int:
    return sum(row.lag for row in description.partitions if row.lag is not None)


def groups(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    out = []
    for group_id in view.group_ids():
        try:
            described = view.describe_group(group_id)
        except GroupIdNotFoundError:
            continue  # deleted since listed
        out.append({"group": group_id, "state": described.state, "protocol_type": described.protocol_type,
                    "members": len(described.members), "partitions": len(described.partitions),
                    "lag": _lag_total(described)})
    return {"groups": out}


def group(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    described = view.describe_group(_required(params, "group"))
    return {
        "group": described.group,
        "state": described.state,
        "protocol_type": described.protocol_type,
        "protocol": described.protocol,
        "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                     "group_instance_id": m.group_instance_id,
                     "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment]}
                    for m in described.members],
        "partitions": [{"topic": row.topic, "partition": row.partition, "current_offset": row.current_offset,
                        "log_end_offset": row.log_end_offset, "lag": row.lag,
                        "member_id": getattr(described.owner(TopicPartition(row.topic, row.partition)), "member_id",
                                             None)}
                       for row in described.partitions],
        "lag": _lag_total(described),
    }


def lag_history(view: ServerView, sampler: LagSampler, params: Params) -> dict:
    """Every group's lag over the last window, or one group's (``group=``)."""
    wanted = params.get("group")
    samples = sampler.samples()
    names = sorted({g for s in samples for g in s.lag}) if not wanted else [wanted]
    return {
        "interval_ms": sampler.interval_ms,
        "window_ms": sampler.window_ms,
        "now_ms": sampler.clock.milliseconds(),
        "series": {g: sampler.history(g) for g in names},
    }


ROUTES: Mapping[str, Callable[[ServerView, LagSampler, Params], dict]] = {
    "/api/cluster": cluster,
    "/api/topics": topics,
    "/api/topic": topic,
    "/api/segments": segments,
    "/api/records": records,
    "/api/groups": groups,
    "/api/group": group,
    "/api/lag-history": lag_history,
}
