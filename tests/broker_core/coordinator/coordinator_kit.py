"""A group coordinator on simulated time, and clients that speak to it in request bodies.

``Harness`` builds a ``GroupCoordinator`` over a ``MockTime``, an
``InlineExecutor`` (expired operations run inside ``advance``) and an
``InMemoryGroupStore``, with no reaper threads: nothing moves unless a test
sends a request or calls ``advance``. Requests are real body dicts: the
helpers encode them with the protocol package and decode them back, turn them
into the coordinator's typed requests with ``wire`` and its typed results
back into response bodies, as the broker's request handlers do, so the
coordinator sees exactly what a client's request would give it (every field
of the version, defaults included), and every response is encoded at the
request's version, so a shape the wire would refuse fails the test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker_core.clock import MockTime
from broker_core.coordinator.group import (GroupCoordinator, GroupCoordinatorConfig, GroupMetadata, InMemoryGroupStore,
                                           wire)
from broker_core.coordinator.group.store import GroupStore
from broker_core.coordinator.transaction import wire as txn_wire
from broker_core.protocol import ApiKey, encode_request, parse_request
from broker_core.protocol.codec import encode
from broker_core.protocol.messages import APIS
from broker_core.timer import InlineExecutor

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82

SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
INITIAL_DELAY_MS = 3_000
START_MS = 1_700_000_000_000

# The newest version of each API, which tests use unless they say otherwise.
LATEST = {key: api.versions.high for key, api in APIS.items()}


def request_body(api_key: ApiKey, version: int, **fields: Any) -> dict:
    """``fields`` as the coordinator receives them: encoded at ``version`` and decoded again."""
    frame = encode_request(api_key, version, 1, "test-client", fields)
    return parse_request(frame[4:]).body  # without the size prefix


def check_response(api_key: ApiKey, version: int, body: dict) -> dict:
    """Encode ``body`` as the response of ``api_key`` at ``version`` (raises if it does not fit)."""
    encode(APIS[api_key].response, version, body, [])
    return body


def _next_expiration(purgatory: Any) -> int | None:
    """When the purgatory's timer has its next bucket due (the timer offers no public way to ask)."""
    return purgatory.timer._delay_queue.peek_expiration_ms()


@dataclass
class Pending:
    """The ``respond`` callback of a parked request: collects what it is called with."""

    api_key: ApiKey
    version: int
    responses: list[dict] = field(default_factory=list)

    def __call__(self, body: dict) -> None:
        self.responses.append(check_response(self.api_key, self.version, body))

    @property
    def done(self) -> bool:
        return bool(self.responses)

    @property
    def response(self) -> dict:
        assert len(self.responses) == 1, f"expected exactly one response, got {self.responses}"
        return self.responses[0]

    @property
    def error(self) -> int:
        return self.response["error_code"]


@dataclass
class Member:
    """What a client remembers between requests."""

    member_id: str = ""
    generation_id: int = -1
    group_instance_id: str | None = None


class Harness:
    """A coordinator on a fake clock; ``advance(ms)`` moves time and runs whatever expired."""

    def __init__(self, config: GroupCoordinatorConfig | None = None, store: GroupStore | None = None,
                 clock: MockTime | None = None, *, load: bool = True, group_id: str = "group",
                 elected_partitions_only: bool = False) -> None:
        self.clock = clock if clock is not None else MockTime(current_time_ms=START_MS)
        self.config = config if config is not None else GroupCoordinatorConfig(
            group_initial_rebalance_delay_ms=INITIAL_DELAY_MS)
        self.store = store if store is not None else InMemoryGroupStore(self.config.offsets_topic_num_partitions)
        self.coordinator = GroupCoordinator(0, self.config, self.store, clock=self.clock, executor=InlineExecutor(),
                                            reaper_enabled=False)
        self.coordinator.startup(load=load and not elected_partitions_only,
                                 elected_partitions_only=elected_partitions_only)
        self.group_id = group_id

    def close(self) -> None:
        self.coordinator.shutdown()

    def advance(self, ms: int) -> None:
        """Move time ``ms`` forward, stopping at each expiration on the way, as a reaper thread would.

        Stopping matters for chained operations: an operation that expires
        schedules the next one relative to the time it ran at, so jumping
        straight to the end would run it late and shift what follows.
        """
        target = self.clock.hi_res_clock_ms() + ms
        while True:
            due = [e for e in map(_next_expiration, self._purgatories()) if e is not None and e <= target]
            if not due:
                break
            self.clock.set_time_ms(max(min(due), self.clock.hi_res_clock_ms()))
            self.coordinator.advance_clock(0)
        self.clock.set_time_ms(target)
        self.coordinator.advance_clock(0)

    def _purgatories(self) -> list:
        return [self.coordinator.rebalance_purgatory, self.coordinator.heartbeat_purgatory]

    @property
    def group(self) -> GroupMetadata:
        group = self.coordinator.group(self.group_id)
        assert group is not None, f"no group {self.group_id!r}"
        return group

    # -- requests ----------------------------------------------------------------------

    def find_coordinator(self, version: int, **fields: Any) -> dict:
        """FindCoordinator answered for a listener at broker.local:9092."""
        request = wire.parse_find_coordinator(request_body(ApiKey.FIND_COORDINATOR, version, **fields), version)
        body = wire.find_coordinator_response(version, self.coordinator.find_coordinator(request),
                                              self.coordinator.broker_id, "broker.local", 9092)
        return check_response(ApiKey.FIND_COORDINATOR, version, body)

    def join(self, member: Member, *, protocols: list[tuple[str, bytes]] | None = None,
             protocol_type: str = "consumer", session_timeout_ms: int = SESSION_TIMEOUT_MS,
             rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS, version: int | None = None,
             client_id: str = "consumer", group_id: str | None = None) -> Pending:
        """Send one JoinGroup; the member learns its id and generation when the response comes."""
        version = LATEST[ApiKey.JOIN_GROUP] if version is None else version
        fields: dict[str, Any] = {
            "group_id": self.group_id if group_id is None else group_id,
            "session_timeout_ms": session_timeout_ms, "rebalance_timeout_ms": rebalance_timeout_ms,
            "member_id": member.member_id, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m}
                          for n, m in (protocols if protocols is not None else [("range", b"sub")])]}
        if version >= 5:
            fields["group_instance_id"] = member.group_instance_id
        pending = Pending(ApiKey.JOIN_GROUP, version)

        def respond(body: dict) -> None:
            pending(body)
            if body["error_code"] in (NONE, MEMBER_ID_REQUIRED):
                member.member_id = body["member_id"]
            if body["error_code"] == NONE:
                member.generation_id = body["generation_id"]

        request = wire.parse_join_group(request_body(ApiKey.JOIN_GROUP, version, **fields), version,
                                        client_id=client_id, client_host="/127.0.0.1")
        self.coordinator.join_group(request, lambda result: respond(wire.join_group_response(result, version)))
        return pending

    def join_new(self, member: Member, **kwargs: Any) -> Pending:
        """A new member's JoinGroup, after the MEMBER_ID_REQUIRED round trip of v4+."""
        first = self.join(member, **kwargs)
        version = kwargs.get("version")
        if member.group_instance_id is None and (LATEST[ApiKey.JOIN_GROUP] if version is None else version) >= 4:
            assert first.error == MEMBER_ID_REQUIRED, first.responses
            assert member.member_id
            return self.join(member, **kwargs)
        return first

    def sync(self, member: Member, assignments: dict[str, bytes] | None = None, *, generation_id: int | None = None,
             version: int | None = None, protocol_name: str | None = "range",
             protocol_type: str = "consumer") -> Pending:
        version = LATEST[ApiKey.SYNC_GROUP] if version is None else version
        fields: dict[str, Any] = {
            "group_id": self.group_id, "member_id": member.member_id,
            "generation_id": member.generation_id if generation_id is None else generation_id,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]}
        if version >= 3:
            fields["group_instance_id"] = member.group_instance_id
        if version >= 5:
            fields["protocol_type"] = protocol_type
            fields["protocol_name"] = protocol_name
        pending = Pending(ApiKey.SYNC_GROUP, version)
        request = wire.parse_sync_group(request_body(ApiKey.SYNC_GROUP, version, **fields), version)
        self.coordinator.sync_group(request, lambda result: pending(wire.sync_group_response(result, version)))
        return pending

    def heartbeat(self, member: Member, *, generation_id: int | None = None, version: int | None = None) -> int:
        version = LATEST[ApiKey.HEARTBEAT] if version is None else version
        fields: dict[str, Any] = {"group_id": self.group_id, "member_id": member.member_id,
                                  "generation_id": member.generation_id if generation_id is None else generation_id}
        if version >= 3:
            fields["group_instance_id"] = member.group_instance_id
        request = wire.parse_heartbeat(request_body(ApiKey.HEARTBEAT, version, **fields), version)
        body = wire.heartbeat_response(self.coordinator.heartbeat(request))
        return check_response(ApiKey.HEARTBEAT, version, body)["error_code"]

    def leave(self, *members: Member, version: int | None = None) -> dict:
        version = LATEST[ApiKey.LEAVE_GROUP] if version is None else version
        if version >= 3:
            fields: dict[str, Any] = {"group_id": self.group_id, "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id} for m in members]}
        else:
            (member,) = members
            fields = {"group_id": self.group_id, "member_id": member.member_id}
        request = wire.parse_leave_group(request_body(ApiKey.LEAVE_GROUP, version, **fields), version)
        body = wire.leave_group_response(self.coordinator.leave_group(request), version)
        return check_response(ApiKey.LEAVE_GROUP, version, body)

    def commit(self, offsets: dict[tuple[str, int], int], member: Member | None = None, *,
               generation_id: int | None = None, metadata: str = "", version: int | None = None,
               group_id: str | None = None, retention_time_ms: int = -1) -> dict[tuple[str, int], int]:
        """OffsetCommit; the error code of each (topic, partition)."""
        version = LATEST[ApiKey.OFFSET_COMMIT] if version is None else version
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                 "committed_metadata": metadata})
        fields: dict[str, Any] = {
            "group_id": self.group_id if group_id is None else group_id,
            "generation_id_or_member_epoch": (generation_id if generation_id is not None
                                              else member.generation_id if member is not None else -1),
            "member_id": member.member_id if member is not None else "",
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        if 2 <= version <= 4:
            fields["retention_time_ms"] = retention_time_ms
        if version >= 7 and member is not None:
            fields["group_instance_id"] = member.group_instance_id
        request = wire.parse_offset_commit(request_body(ApiKey.OFFSET_COMMIT, version, **fields), version)
        body = wire.offset_commit_response(request, self.coordinator.commit_offsets(request))
        check_response(ApiKey.OFFSET_COMMIT, version, body)
        return {(t["name"], p["partition_index"]): p["error_code"] for t in body["topics"] for p in t["partitions"]}

    def txn_commit(self, offsets: dict[tuple[str, int], int], *, producer_id: int, producer_epoch: int = 0,
                   transactional_id: str = "txn", version: int | None = None) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit in ``producer_id``'s open transaction; the error code of each (topic, partition)."""
        version = LATEST[ApiKey.TXN_OFFSET_COMMIT] if version is None else version
        topics: dict[str, list[dict]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                                 "committed_metadata": ""})
        request = txn_wire.parse_txn_offset_commit(request_body(
            ApiKey.TXN_OFFSET_COMMIT, version, transactional_id=transactional_id, group_id=self.group_id,
            producer_id=producer_id, producer_epoch=producer_epoch,
            topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]), version)
        body = txn_wire.txn_offset_commit_response(request, self.coordinator.commit_transactional_offsets(request))
        check_response(ApiKey.TXN_OFFSET_COMMIT, version, body)
        return {(t["name"], p["partition_index"]): p["error_code"] for t in body["topics"] for p in t["partitions"]}

    def end_transaction(self, producer_id: int, *, commit: bool) -> None:
        """Tell the coordinator the COMMIT or ABORT marker of ``producer_id`` landed in the group's
        offsets topic partition (as the broker tells it once the marker is written)."""
        self.coordinator.on_transaction_completed(self.coordinator.partition_for(self.group_id), producer_id, commit)

    def fetch(self, partitions: list[tuple[str, int]] | None = None, *, version: int | None = None,
              group_id: str | None = None, require_stable: bool = False) -> dict:
        version = LATEST[ApiKey.OFFSET_FETCH] if version is None else version
        group_id = self.group_id if group_id is None else group_id
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        if version >= 8:
            fields: dict[str, Any] = {"groups": [{"group_id": group_id, "topics": topics}]}
        else:
            fields = {"group_id": group_id, "topics": topics}
        if version >= 7:
            fields["require_stable"] = require_stable
        request = wire.parse_offset_fetch(request_body(ApiKey.OFFSET_FETCH, version, **fields), version)
        body = wire.offset_fetch_response(request, self.coordinator.fetch_offsets(request), version)
        return check_response(ApiKey.OFFSET_FETCH, version, body)

    def committed(self, partitions: list[tuple[str, int]] | None = None) -> dict[tuple[str, int], int]:
        """The group's committed offsets as OffsetFetch (latest version) reports them; -1 when none."""
        (group,) = self.fetch(partitions)["groups"]
        assert group["error_code"] == NONE, group
        return {(t["name"], p["partition_index"]): p["committed_offset"]
                for t in group["topics"] for p in t["partitions"]}

    def describe(self, *group_ids: str, version: int | None = None) -> list[dict]:
        version = LATEST[ApiKey.DESCRIBE_GROUPS] if version is None else version
        request = wire.parse_describe_groups(
            request_body(ApiKey.DESCRIBE_GROUPS, version, groups=list(group_ids or [self.group_id]),
                         include_authorized_operations=True), version)
        body = wire.describe_groups_response(request, self.coordinator.describe_groups(request))
        return check_response(ApiKey.DESCRIBE_GROUPS, version, body)["groups"]

    def list_groups(self, *, states: list[str] | None = None, types: list[str] | None = None,
                    version: int | None = None) -> dict:
        version = LATEST[ApiKey.LIST_GROUPS] if version is None else version
        fields: dict[str, Any] = {}
        if version >= 4:
            fields["states_filter"] = states or []
        if version >= 5:
            fields["types_filter"] = types or []
        request = wire.parse_list_groups(request_body(ApiKey.LIST_GROUPS, version, **fields), version)
        body = wire.list_groups_response(*self.coordinator.list_groups(request))
        return check_response(ApiKey.LIST_GROUPS, version, body)

    def delete(self, *group_ids: str, version: int | None = None) -> dict[str, int]:
        version = LATEST[ApiKey.DELETE_GROUPS] if version is None else version
        request = wire.parse_delete_groups(
            request_body(ApiKey.DELETE_GROUPS, version, groups_names=list(group_ids)), version)
        body = wire.delete_groups_response(self.coordinator.delete_groups(request))
        check_response(ApiKey.DELETE_GROUPS, version, body)
        return {r["group_id"]: r["error_code"] for r in body["results"]}

    def delete_offsets(self, partitions: list[tuple[str, int]], *, group_id: str | None = None
                       ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete (v0, its only version); the group's error and each (topic, partition)'s."""
        topics: dict[str, list[dict]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append({"partition_index": partition})
        request = wire.parse_offset_delete(request_body(
            ApiKey.OFFSET_DELETE, 0, group_id=self.group_id if group_id is None else group_id,
            topics=[{"name": t, "partitions": ps} for t, ps in topics.items()]), 0)
        body = check_response(ApiKey.OFFSET_DELETE, 0, wire.offset_delete_response(
            *self.coordinator.delete_offsets(request)))
        return body["error_code"], {(t["name"], p["partition_index"]): p["error_code"]
                                    for t in body["topics"] for p in t["partitions"]}

    # -- whole rebalances ------------------------------------------------------------------

    def form_group(self, *members: Member, assignments: dict[str, bytes] | None = None,
                   protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer") -> None:
        """The first rebalance of a new group: every member joins, the initial delay passes, all sync."""
        pendings = [self.join_new(member, protocols=protocols, protocol_type=protocol_type) for member in members]
        # Each member that arrived during the initial delay extends it once more.
        for _ in members:
            if all(p.done for p in pendings):
                break
            self.advance(self.config.group_initial_rebalance_delay_ms)
        assert all(p.done and p.error == NONE for p in pendings), [p.responses for p in pendings]
        self.sync_all(*members, assignments=assignments, protocol_type=protocol_type)

    def sync_all(self, *members: Member, assignments: dict[str, bytes] | None = None,
                 protocol_type: str = "consumer") -> list[Pending]:
        """Everyone syncs (followers first, then the leader with ``assignments`` or one per member)."""
        leader_id = self.group.leader_id
        leader = next(m for m in members if m.member_id == leader_id)
        followers = [self.sync(m, protocol_type=protocol_type) for m in members if m is not leader]
        if assignments is None:
            assignments = {m.member_id: f"assignment-of-{m.member_id}".encode() for m in members}
        syncs = followers + [self.sync(leader, assignments, protocol_type=protocol_type)]
        assert all(p.error == NONE for p in syncs), [p.responses for p in syncs]
        return syncs
