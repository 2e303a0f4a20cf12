"""The group APIs' request and response bodies, version by version.

Body dicts are the protocol package's: snake_case keys of Kafka's message
JSON, every declared key present after decoding (absent fields at their
default). This module reads the fields each version carries into small typed
requests and shapes the coordinator's results into response dicts that
``broker_core.protocol`` encodes at the request's version — fields a version
does not have are skipped by the encoder, and fields only nullable in later
versions get their non-null spelling here (``""``) for earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from format.layout import TopicPartition

from ..errors import ERRORS_BY_CODE
from .offset_and_metadata import OffsetAndMetadata
from .results import (CLASSIC_GROUP_TYPE, NONE, GroupOverview, GroupSummary, JoinGroupResult, LeaveGroupResult,
                      OffsetFetchResult, SyncGroupResult)

__all__ = [
    "JoinGroupRequest",
    "SyncGroupRequest",
    "OffsetCommitRequest",
    "OffsetFetchGroupRequest",
    "GROUP_AUTHORIZED_OPERATIONS",
]

_NO_NODE = -1
# Kafka's AclOperation codes a group supports (READ, DELETE, DESCRIBE); with no authorizer all are allowed.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
_INVALID_OFFSET = -1
_NO_PARTITION_LEADER_EPOCH = -1


def _error_name(code: int) -> str | None:
    if code == NONE:
        return None
    error = ERRORS_BY_CODE.get(code)
    return error.kafka_error_name if error is not None else f"error {code}"


# --- FindCoordinator ------------------------------------------------------------------


def find_coordinator_keys(body: Mapping[str, Any], version: int) -> list[str]:
    """v0-3 ask for one key, v4+ for a batch."""
    return list(body.get("coordinator_keys") or []) if version >= 4 else [body.get("key") or ""]


def find_coordinator_response(version: int, answers: Sequence[tuple[str, int]], node_id: int, host: str,
                              port: int) -> dict:
    def entry(key: str, error: int) -> dict:
        ok = error == NONE
        return {"key": key, "node_id": node_id if ok else _NO_NODE, "host": host if ok else "",
                "port": port if ok else -1, "error_code": error, "error_message": _error_name(error)}

    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [entry(key, error) for key, error in answers]}
    single = entry(*answers[0])
    del single["key"]
    return {"throttle_time_ms": 0, **single}


# --- JoinGroup ---------------------------------------------------------------------------


@dataclass(frozen=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    reason: str | None
    #: v4+: a member without an id is handed one first (MEMBER_ID_REQUIRED); static members are not.
    require_known_member_id: bool


def parse_join_group(body: Mapping[str, Any], version: int) -> JoinGroupRequest:
    session_timeout_ms = body["session_timeout_ms"]
    # v0 has no rebalance timeout: the session timeout served for both.
    rebalance_timeout_ms = body.get("rebalance_timeout_ms", -1) if version >= 1 else -1
    if rebalance_timeout_ms < 0:
        rebalance_timeout_ms = session_timeout_ms
    group_instance_id = body.get("group_instance_id")
    return JoinGroupRequest(
        group_id=body["group_id"], member_id=body["member_id"] or "", group_instance_id=group_instance_id,
        session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
        protocol_type=body["protocol_type"] or "",
        protocols=[(p["name"], bytes(p["metadata"] or b"")) for p in body["protocols"] or ()],
        reason=body.get("reason"), require_known_member_id=version >= 4 and group_instance_id is None)


def join_group_response(result: JoinGroupResult, version: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": result.error_code,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        # Nullable from v7; before, "no protocol" is the empty string.
        "protocol_name": result.protocol_name if version >= 7 else (result.protocol_name or ""),
        "leader": result.leader_id or "",
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                    for m in result.members],
    }


# --- SyncGroup ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


def parse_sync_group(body: Mapping[str, Any], version: int) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=body["group_id"], generation_id=body["generation_id"], member_id=body["member_id"] or "",
        group_instance_id=body.get("group_instance_id"),
        protocol_type=body.get("protocol_type") if version >= 5 else None,
        protocol_name=body.get("protocol_name") if version >= 5 else None,
        assignments={a["member_id"]: bytes(a["assignment"] or b"") for a in body["assignments"] or ()})


def sync_group_response(result: SyncGroupResult, version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": result.error_code, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}


# --- Heartbeat and LeaveGroup ------------------------------------------------------------------


def heartbeat_response(error_code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": error_code}


def parse_leave_group(body: Mapping[str, Any], version: int) -> list[tuple[str, str | None, str | None]]:
    """(member_id, group_instance_id, reason) of each leaving member: one in v0-2, a batch in v3+."""
    if version < 3:
        return [(body["member_id"] or "", None, None)]
    return [(m["member_id"] or "", m.get("group_instance_id"), m.get("reason")) for m in body["members"] or ()]


def leave_group_response(result: LeaveGroupResult, version: int) -> dict:
    if version < 3:
        # One member, no member list: its error is the request's.
        error = result.error_code or next((m.error_code for m in result.members if m.error_code), NONE)
        return {"throttle_time_ms": 0, "error_code": error}
    return {"throttle_time_ms": 0, "error_code": result.error_code,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "error_code": m.error_code} for m in result.members]}


# --- OffsetCommit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: dict[TopicPartition, OffsetAndMetadata]
    #: The partitions in request order, as the response lists them.
    order: list[tuple[str, list[int]]]


def parse_offset_commit(body: Mapping[str, Any], version: int, now_ms: int) -> OffsetCommitRequest:
    retention_ms = body.get("retention_time_ms", -1) if 2 <= version <= 4 else -1
    # v2-v4 may ask for a retention time of their own; the offset then expires at that time.
    expire = None if retention_ms is None or retention_ms < 0 else now_ms + retention_ms
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    order: list[tuple[str, list[int]]] = []
    for topic in body["topics"] or ():
        partitions = []
        for p in topic["partitions"] or ():
            epoch = p.get("committed_leader_epoch", -1)
            offsets[TopicPartition(topic["name"], p["partition_index"])] = OffsetAndMetadata(
                offset=p["committed_offset"], metadata=p.get("committed_metadata") or "", commit_timestamp=now_ms,
                leader_epoch=None if epoch is None or epoch < 0 else epoch, expire_timestamp=expire)
            partitions.append(p["partition_index"])
        order.append((topic["name"], partitions))
    return OffsetCommitRequest(
        group_id=body["group_id"], generation_id=body.get("generation_id_or_member_epoch", -1),
        member_id=body.get("member_id") or "", group_instance_id=body.get("group_instance_id"), offsets=offsets,
        order=order)


def offset_commit_response(order: Sequence[tuple[str, list[int]]], errors: Mapping[TopicPartition, int]) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": p, "error_code": errors[TopicPartition(name, p)]}
                                      for p in partitions]}
        for name, partitions in order]}


# --- OffsetFetch ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetFetchGroupRequest:
    group_id: str
    #: None asks for every committed offset of the group (v2+).
    partitions: list[TopicPartition] | None
    require_stable: bool


def parse_offset_fetch(body: Mapping[str, Any], version: int) -> list[OffsetFetchGroupRequest]:
    """v1-7 name one group, v8+ a batch of groups."""
    require_stable = bool(body.get("require_stable")) if version >= 7 else False

    def partitions(topics: Iterable[Mapping[str, Any]] | None) -> list[TopicPartition] | None:
        if topics is None:
            return None
        return [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"] or ()]

    if version >= 8:
        return [OffsetFetchGroupRequest(g["group_id"], partitions(g["topics"]), require_stable)
                for g in body["groups"] or ()]
    return [OffsetFetchGroupRequest(body["group_id"], partitions(body["topics"]), require_stable)]


def _fetched_partition(tp: TopicPartition, offset: OffsetAndMetadata | None, error: int) -> dict:
    if offset is None:
        return {"partition_index": tp.partition, "committed_offset": _INVALID_OFFSET,
                "committed_leader_epoch": _NO_PARTITION_LEADER_EPOCH, "metadata": "", "error_code": error}
    return {"partition_index": tp.partition, "committed_offset": offset.offset,
            "committed_leader_epoch": _NO_PARTITION_LEADER_EPOCH if offset.leader_epoch is None
            else offset.leader_epoch, "metadata": offset.metadata, "error_code": error}


def _fetched_topics(request: OffsetFetchGroupRequest, result: OffsetFetchResult, partition_error: int) -> list[dict]:
    wanted = request.partitions if request.partitions is not None else list(result.offsets)
    topics: dict[str, list[dict]] = {}
    for tp in wanted:
        topics.setdefault(tp.topic, []).append(_fetched_partition(tp, result.offsets.get(tp), partition_error))
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]


def offset_fetch_response(results: Sequence[tuple[OffsetFetchGroupRequest, OffsetFetchResult]],
                          version: int) -> dict:
    if version >= 8:
        return {"throttle_time_ms": 0, "groups": [
            {"group_id": request.group_id, "error_code": result.error_code,
             "topics": _fetched_topics(request, result, NONE) if result.error_code == NONE else []}
            for request, result in results]}
    request, result = results[0]
    if result.error_code != NONE and version < 2:
        # No top-level error before v2: every requested partition carries it.
        return {"throttle_time_ms": 0, "topics": _fetched_topics(request, result, result.error_code)}
    return {"throttle_time_ms": 0, "error_code": result.error_code,
            "topics": _fetched_topics(request, result, NONE) if result.error_code == NONE else []}


# --- DescribeGroups, ListGroups, DeleteGroups ----------------------------------------------------


def describe_groups_response(described: Sequence[tuple[str, int, GroupSummary]], include_operations: bool) -> dict:
    return {"throttle_time_ms": 0, "groups": [
        {"error_code": error, "group_id": group_id, "group_state": summary.state,
         "protocol_type": summary.protocol_type, "protocol_data": summary.protocol,
         "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                      "client_host": m.client_host, "member_metadata": m.metadata,
                      "member_assignment": m.assignment} for m in summary.members],
         "authorized_operations": GROUP_AUTHORIZED_OPERATIONS if include_operations
         else AUTHORIZED_OPERATIONS_OMITTED}
        for group_id, error, summary in described]}


def list_groups_response(error: int, groups: Sequence[GroupOverview]) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
         "group_type": CLASSIC_GROUP_TYPE} for g in groups]}


def delete_groups_response(results: Mapping[str, int]) -> dict:
    return {"throttle_time_ms": 0, "results": [{"group_id": group_id, "error_code": error}
                                               for group_id, error in results.items()]}
