"""The group APIs' request and response bodies, version by version.

Body dicts are the protocol package's: snake_case keys of Kafka's message
JSON, every declared key present after decoding (absent fields at their
default). ``parse_*`` reads the fields each version carries into the typed
requests of ``requests`` — what a version changes in the coordinator's
behaviour becomes a field there, so the state machine never sees a version —
and ``*_response`` shapes the coordinator's results into response dicts that
``broker_core.protocol`` encodes at the request's version: fields a version
does not have are skipped by the encoder, and fields only nullable in later
versions get their non-null spelling here (``""``) for earlier ones.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from format.layout import TopicPartition

from ...errors import ERRORS_BY_CODE, UnstableOffsetCommitError
from .offset_and_metadata import OffsetAndMetadata
from .requests import (COORDINATOR_TYPE_GROUP, DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest,
                       HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, LeavingMember, ListGroupsRequest,
                       OffsetCommitPartition, OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchGroup,
                       OffsetFetchRequest, SyncGroupRequest)
from .results import (CLASSIC_GROUP_TYPE, NONE, GroupOverview, GroupSummary, JoinGroupResult, LeaveGroupResult,
                      OffsetFetchResult, SyncGroupResult)

__all__ = [
    "parse_find_coordinator",
    "find_coordinator_response",
    "parse_join_group",
    "join_group_response",
    "parse_sync_group",
    "sync_group_response",
    "parse_heartbeat",
    "heartbeat_response",
    "parse_leave_group",
    "leave_group_response",
    "parse_offset_commit",
    "offset_commit_response",
    "parse_offset_fetch",
    "offset_fetch_response",
    "parse_describe_groups",
    "describe_groups_response",
    "parse_list_groups",
    "list_groups_response",
    "parse_delete_groups",
    "delete_groups_response",
    "parse_offset_delete",
    "offset_delete_response",
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


def parse_find_coordinator(body: Mapping[str, Any], version: int) -> FindCoordinatorRequest:
    """v0-3 ask for one key, v4+ for a batch; v0 only for groups."""
    keys = tuple(body.get("coordinator_keys") or ()) if version >= 4 else (body.get("key") or "",)
    # v0 has no key type: it asks for a group's coordinator.
    return FindCoordinatorRequest(key_type=body.get("key_type", COORDINATOR_TYPE_GROUP), keys=keys)


def find_coordinator_response(version: int, answers: Sequence[tuple[str, int]], node_id: int, host: str,
                              port: int) -> dict:
    """Every key answered by one node (``node_id`` at ``host:port``) unless its error says otherwise."""
    return find_coordinators_response(version, [(key, error, (node_id, host, port)) for key, error in answers])


def find_coordinators_response(version: int, answers: Sequence[tuple[str, int, tuple[int, str, int] | None]]
                               ) -> dict:
    """Each key with its error code and, without one, its coordinator as ``(node_id, host, port)``."""
    def entry(key: str, error: int, node: tuple[int, str, int] | None) -> dict:
        node_id, host, port = node if error == NONE and node is not None else (_NO_NODE, "", -1)
        return {"key": key, "node_id": node_id, "host": host, "port": port, "error_code": error,
                "error_message": _error_name(error)}

    if version >= 4:
        return {"throttle_time_ms": 0, "coordinators": [entry(*answer) for answer in answers]}
    single = entry(*answers[0])
    del single["key"]
    return {"throttle_time_ms": 0, **single}


# --- JoinGroup ---------------------------------------------------------------------------


def parse_join_group(body: Mapping[str, Any], version: int, *, client_id: str = "",
                     client_host: str = "") -> JoinGroupRequest:
    """``client_id`` is the request header's, ``client_host`` the peer address (both shown by DescribeGroups)."""
    session_timeout_ms = body["session_timeout_ms"]
    # v0 has no rebalance timeout: the session timeout served for both.
    rebalance_timeout_ms = body.get("rebalance_timeout_ms", -1) if version >= 1 else -1
    if rebalance_timeout_ms < 0:
        rebalance_timeout_ms = session_timeout_ms
    # Static membership (group.instance.id) from v5.
    group_instance_id = body.get("group_instance_id") if version >= 5 else None
    return JoinGroupRequest(
        group_id=body["group_id"], member_id=body["member_id"] or "", group_instance_id=group_instance_id,
        session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
        protocol_type=body["protocol_type"] or "",
        protocols=tuple((p["name"], bytes(p["metadata"] or b"")) for p in body["protocols"] or ()),
        reason=body.get("reason") if version >= 8 else None, client_id=client_id, client_host=client_host,
        require_known_member_id=version >= 4 and group_instance_id is None,
        supports_skip_assignment=version >= 9)


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


def parse_sync_group(body: Mapping[str, Any], version: int) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=body["group_id"], generation_id=body["generation_id"], member_id=body["member_id"] or "",
        group_instance_id=body.get("group_instance_id") if version >= 3 else None,
        protocol_type=body.get("protocol_type") if version >= 5 else None,
        protocol_name=body.get("protocol_name") if version >= 5 else None,
        assignments={a["member_id"]: bytes(a["assignment"] or b"") for a in body["assignments"] or ()},
        protocol_type_and_name_required=version >= 5)


def sync_group_response(result: SyncGroupResult, version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": result.error_code, "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name, "assignment": result.assignment}


# --- Heartbeat and LeaveGroup ------------------------------------------------------------------


def parse_heartbeat(body: Mapping[str, Any], version: int) -> HeartbeatRequest:
    return HeartbeatRequest(group_id=body["group_id"], member_id=body["member_id"] or "",
                            generation_id=body["generation_id"],
                            group_instance_id=body.get("group_instance_id") if version >= 3 else None)


def heartbeat_response(error_code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": error_code}


def parse_leave_group(body: Mapping[str, Any], version: int) -> LeaveGroupRequest:
    """One leaving member in v0-2, a batch (static members by group.instance.id) in v3+."""
    if version < 3:
        members: tuple[LeavingMember, ...] = (LeavingMember(body["member_id"] or ""),)
    else:
        members = tuple(LeavingMember(m["member_id"] or "", m.get("group_instance_id"), m.get("reason"))
                        for m in body["members"] or ())
    return LeaveGroupRequest(group_id=body["group_id"], members=members)


def leave_group_response(result: LeaveGroupResult, version: int) -> dict:
    if version < 3:
        # One member, no member list: its error is the request's.
        error = result.error_code or next((m.error_code for m in result.members if m.error_code), NONE)
        return {"throttle_time_ms": 0, "error_code": error}
    return {"throttle_time_ms": 0, "error_code": result.error_code,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "error_code": m.error_code} for m in result.members]}


# --- OffsetCommit ----------------------------------------------------------------------------------


def parse_offset_commit(body: Mapping[str, Any], version: int) -> OffsetCommitRequest:
    # v2-v4 may ask for a retention time of their own; the offset then expires at that time.
    retention_ms = body.get("retention_time_ms", -1) if 2 <= version <= 4 else -1
    offsets: dict[TopicPartition, OffsetCommitPartition] = {}
    for topic in body["topics"] or ():
        for p in topic["partitions"] or ():
            epoch = p.get("committed_leader_epoch", -1) if version >= 6 else -1
            offsets[TopicPartition(topic["name"], p["partition_index"])] = OffsetCommitPartition(
                offset=p["committed_offset"], metadata=p.get("committed_metadata") or "",
                leader_epoch=None if epoch is None or epoch < 0 else epoch)
    return OffsetCommitRequest(
        group_id=body["group_id"], generation_id=body.get("generation_id_or_member_epoch", -1),
        member_id=body.get("member_id") or "",
        group_instance_id=body.get("group_instance_id") if version >= 7 else None, offsets=offsets,
        retention_ms=None if retention_ms is None or retention_ms < 0 else retention_ms)


def offset_commit_response(request: OffsetCommitRequest, errors: Mapping[TopicPartition, int]) -> dict:
    """Every partition of ``request`` with its error, grouped by topic in request order (as Kafka's builder)."""
    topics: dict[str, list[dict]] = {}
    for tp in request.offsets:
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": errors[tp]})
    return {"throttle_time_ms": 0, "topics": [{"name": name, "partitions": partitions}
                                              for name, partitions in topics.items()]}


# --- OffsetFetch ------------------------------------------------------------------------------------


def parse_offset_fetch(body: Mapping[str, Any], version: int) -> OffsetFetchRequest:
    """v1-7 name one group, v8+ a batch of groups; v2+ may ask for all partitions (null topics)."""

    def partitions(topics: Iterable[Mapping[str, Any]] | None) -> tuple[TopicPartition, ...] | None:
        if topics is None:
            return None
        return tuple(TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"] or ())

    if version >= 8:
        groups = tuple(OffsetFetchGroup(g["group_id"], partitions(g["topics"])) for g in body["groups"] or ())
    else:
        groups = (OffsetFetchGroup(body["group_id"], partitions(body["topics"])),)
    return OffsetFetchRequest(groups=groups,
                              require_stable=bool(body.get("require_stable")) if version >= 7 else False)


def _fetched_partition(tp: TopicPartition, offset: OffsetAndMetadata | None, error: int) -> dict:
    if offset is None:
        return {"partition_index": tp.partition, "committed_offset": _INVALID_OFFSET,
                "committed_leader_epoch": _NO_PARTITION_LEADER_EPOCH, "metadata": "", "error_code": error}
    return {"partition_index": tp.partition, "committed_offset": offset.offset,
            "committed_leader_epoch": _NO_PARTITION_LEADER_EPOCH if offset.leader_epoch is None
            else offset.leader_epoch, "metadata": offset.metadata, "error_code": error}


def _fetched_topics(group: OffsetFetchGroup, result: OffsetFetchResult, partition_error: int) -> list[dict]:
    wanted = group.partitions if group.partitions is not None else list(result.offsets)
    topics: dict[str, list[dict]] = {}
    for tp in wanted:
        error = UnstableOffsetCommitError.code if tp in result.unstable else partition_error
        topics.setdefault(tp.topic, []).append(_fetched_partition(tp, result.offsets.get(tp), error))
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]


def offset_fetch_response(request: OffsetFetchRequest, results: Sequence[OffsetFetchResult], version: int) -> dict:
    """``results`` holds one result per group of ``request``, in its order."""
    if version >= 8:
        return {"throttle_time_ms": 0, "groups": [
            {"group_id": group.group_id, "error_code": result.error_code,
             "topics": _fetched_topics(group, result, NONE) if result.error_code == NONE else []}
            for group, result in zip(request.groups, results, strict=True)]}
    (group,), (result,) = request.groups, results
    if result.error_code != NONE and version < 2:
        # No top-level error before v2: every requested partition carries it.
        return {"throttle_time_ms": 0, "topics": _fetched_topics(group, result, result.error_code)}
    return {"throttle_time_ms": 0, "error_code": result.error_code,
            "topics": _fetched_topics(group, result, NONE) if result.error_code == NONE else []}


# --- DescribeGroups, ListGroups, DeleteGroups ----------------------------------------------------


def parse_describe_groups(body: Mapping[str, Any], version: int) -> DescribeGroupsRequest:
    return DescribeGroupsRequest(
        group_ids=tuple(body["groups"] or ()),
        include_authorized_operations=bool(body.get("include_authorized_operations")) if version >= 3 else False)


def describe_groups_response(request: DescribeGroupsRequest, described: Sequence[tuple[int, GroupSummary]]) -> dict:
    """``described`` holds the error and summary of each group of ``request``, in its order."""
    return {"throttle_time_ms": 0, "groups": [
        {"error_code": error, "group_id": group_id, "group_state": summary.state,
         "protocol_type": summary.protocol_type, "protocol_data": summary.protocol,
         "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                      "client_host": m.client_host, "member_metadata": m.metadata,
                      "member_assignment": m.assignment} for m in summary.members],
         "authorized_operations": GROUP_AUTHORIZED_OPERATIONS if request.include_authorized_operations
         else AUTHORIZED_OPERATIONS_OMITTED}
        for group_id, (error, summary) in zip(request.group_ids, described, strict=True)]}


def parse_list_groups(body: Mapping[str, Any], version: int) -> ListGroupsRequest:
    """States filter from v4, types filter from v5."""
    return ListGroupsRequest(states_filter=tuple(body.get("states_filter") or ()) if version >= 4 else (),
                             types_filter=tuple(body.get("types_filter") or ()) if version >= 5 else ())


def list_groups_response(error: int, groups: Sequence[GroupOverview]) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "groups": [
        {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
         "group_type": CLASSIC_GROUP_TYPE} for g in groups]}


def parse_delete_groups(body: Mapping[str, Any], version: int) -> DeleteGroupsRequest:
    return DeleteGroupsRequest(group_ids=tuple(body["groups_names"] or ()))


def delete_groups_response(results: Mapping[str, int]) -> dict:
    return {"throttle_time_ms": 0, "results": [{"group_id": group_id, "error_code": error}
                                               for group_id, error in results.items()]}


# --- OffsetDelete ----------------------------------------------------------------------------


def parse_offset_delete(body: Mapping[str, Any], version: int) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(group_id=body["group_id"], partitions=tuple(
        TopicPartition(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]))


def offset_delete_response(error: int, partitions: Mapping[TopicPartition, int]) -> dict:
    """A group-level error answers with no topics, as Kafka's does; otherwise each partition's error, by topic."""
    topics: dict[str, list[dict]] = {}
    if error == NONE:
        for tp, code in partitions.items():
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
    return {"error_code": error, "throttle_time_ms": 0,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}
