"""The group coordinator inside the server: the group APIs over a real socket, spoken with the protocol package."""

from __future__ import annotations

import threading
import time

from broker_core.client.protocol_client import ProtocolClient
from broker_core.coordinator.group import GroupCoordinator
from broker_core.offsets_topic import OFFSETS_TOPIC
from broker_core.protocol import ApiKey

from server_kit import create_topic, start_broker
from tests.broker_core.wait_kit import wait_until

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
MEMBER_ID_REQUIRED = 79
TIMEOUT_S = 10


def commit(client: ProtocolClient, group: str, offsets: dict[tuple[str, int], int], *, version: int | None = None,
           retention_time_ms: int = -1) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_metadata": ""})
    response = client.send(ApiKey.OFFSET_COMMIT, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": retention_time_ms,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, version=version)
    return {(t["name"], p["partition_index"]): p["error_code"] for t in response["topics"] for p in t["partitions"]}


def fetch_offsets(client: ProtocolClient, group: str) -> tuple[int, dict[tuple[str, int], int]]:
    """(group error code, committed offsets) from OffsetFetch v8+ for every partition of the group."""
    response = client.send(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": None}]})
    (answer,) = response["groups"]
    return answer["error_code"], {(t["name"], p["partition_index"]): p["committed_offset"]
                                  for t in answer["topics"] for p in t["partitions"]}


def test_find_coordinator_names_this_broker_as_clients_reach_it(tmp_path):
    server = start_broker(tmp_path, **{"advertised.listeners": "PLAINTEXT://broker.example:19092"})
    try:
        with ProtocolClient(server.bootstrap_servers) as c:
            batched = c.send(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["a", "b"]})
            single = c.send(ApiKey.FIND_COORDINATOR, {"key": "a", "key_type": 0}, version=3)
    finally:
        server.shutdown(timeout_ms=10_000)
    assert [(e["key"], e["error_code"], e["node_id"], e["host"], e["port"]) for e in batched["coordinators"]] == [
        ("a", NONE, 0, "broker.example", 19092), ("b", NONE, 0, "broker.example", 19092)]
    assert (single["error_code"], single["host"], single["port"]) == (NONE, "broker.example", 19092)


def test_offset_commit_answers_unknown_partitions_itself_and_stores_the_rest(client):
    create_topic(client, "orders", 2)
    errors = commit(client, "app", {("orders", 0): 5, ("orders", 7): 1, ("missing", 0): 3, ("orders", 1): 6})
    assert errors == {("orders", 0): NONE, ("orders", 7): UNKNOWN_TOPIC_OR_PARTITION,
                      ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION, ("orders", 1): NONE}
    assert fetch_offsets(client, "app") == (NONE, {("orders", 0): 5, ("orders", 1): 6})
    # Only unknown partitions: the coordinator is not asked, and no group appears.
    assert commit(client, "ghost", {("missing", 0): 1}) == {("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
    listed = client.send(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []})
    assert [g["group_id"] for g in listed["groups"]] == ["app"]


def test_the_offsets_topic_is_created_by_the_first_group_record(client, broker_server):
    assert broker_server.broker.topics.get(OFFSETS_TOPIC) is None
    create_topic(client, "orders", 1)
    commit(client, "app", {("orders", 0): 1})
    created = broker_server.broker.topics.get(OFFSETS_TOPIC)
    assert created.partitions == broker_server.config.offsets_topic_num_partitions


def test_committed_offsets_are_loaded_again_after_a_restart(tmp_path, monkeypatch):
    server = start_broker(tmp_path)
    with ProtocolClient(server.bootstrap_servers) as c:
        create_topic(c, "orders", 2)
        commit(c, "app", {("orders", 0): 4, ("orders", 1): 9})
    server.shutdown(timeout_ms=10_000)

    # Hold the loader until the test has seen the coordinator answer that it is loading.
    release = threading.Event()
    original = GroupCoordinator.load

    def held_load(self):
        release.wait(TIMEOUT_S)
        original(self)

    monkeypatch.setattr(GroupCoordinator, "load", held_load)
    server = start_broker(tmp_path)
    try:
        with ProtocolClient(server.bootstrap_servers) as c:
            assert fetch_offsets(c, "app") == (COORDINATOR_LOAD_IN_PROGRESS, {})
            release.set()
            assert wait_until(lambda: fetch_offsets(c, "app")[0] == NONE)
            assert fetch_offsets(c, "app") == (NONE, {("orders", 0): 4, ("orders", 1): 9})
    finally:
        release.set()
        server.shutdown(timeout_ms=10_000)


def test_offsets_expire_on_the_coordinators_timer(tmp_path):
    server = start_broker(tmp_path, **{"offsets.retention.check.interval.ms": 100})
    try:
        with ProtocolClient(server.bootstrap_servers) as c:
            create_topic(c, "orders", 1)
            # OffsetCommit v2-v4 may carry a retention time of its own (long enough to be read back at once
            # on a busy machine).
            assert commit(c, "short", {("orders", 0): 1}, version=2, retention_time_ms=3000) == {("orders", 0): NONE}
            assert commit(c, "long", {("orders", 0): 2}) == {("orders", 0): NONE}
            assert fetch_offsets(c, "short") == (NONE, {("orders", 0): 1})
            assert wait_until(lambda: fetch_offsets(c, "short") == (NONE, {}), timeout_s=30)
            # An Empty group left without offsets is gone; the other keeps its offset.
            groups = c.send(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []})["groups"]
            assert [g["group_id"] for g in groups] == ["long"]
            assert fetch_offsets(c, "long") == (NONE, {("orders", 0): 2})
    finally:
        server.shutdown(timeout_ms=10_000)


def test_shutdown_answers_a_parked_join_group_at_once(tmp_path):
    # The first member of an empty group waits group.initial.rebalance.delay.ms (Kafka's 3 s).
    server = start_broker(tmp_path)
    answers: list[dict] = []
    with ProtocolClient(server.bootstrap_servers) as c:
        join = {"group_id": "app", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 60_000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
        first = c.send(ApiKey.JOIN_GROUP, join)
        assert first["error_code"] == MEMBER_ID_REQUIRED
        parked = threading.Thread(target=lambda: answers.append(
            c.send(ApiKey.JOIN_GROUP, {**join, "member_id": first["member_id"]})))
        parked.start()
        assert wait_until(lambda: server.group_coordinator.group("app").size == 1)
        started = time.monotonic()
        server.shutdown(timeout_ms=10_000)
        parked.join(TIMEOUT_S)
    assert time.monotonic() - started < 2
    assert [a["error_code"] for a in answers] == [NOT_COORDINATOR]
