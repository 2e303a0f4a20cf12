"""Every API a broker serves, asked for what the principal has no ACL for: Kafka's error code in Kafka's place
and no data (no offsets, records, configs, members, producers or states), the resource untouched; after each,
a witness on a fresh connection still reads what it may."""

from __future__ import annotations

from typing import Callable

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey, SeglogApiKey
from broker_core.protocol.types import topic_id_bytes
from format.record import SimpleRecord
from format.record_batch import build_batch
from tests.broker_core.security.acl_kit import AUTHORIZER, acl, seed_acls
from tests.broker_core.server.server_kit import start_broker

TOPIC, GROUP, CLUSTER, TXN, NOT_ATTEMPTED = 29, 30, 31, 53, 55
ANY_FILTER = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
              "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """User:ANONYMOUS may do everything on topic ``granted``, write transactional id ``mine`` and read group
    ``mine``; topic ``secret`` holds a record."""
    log_dir = tmp_path_factory.mktemp("authorization") / "logs"
    seed_acls(log_dir, acl("Topic:granted", "All"), acl("TransactionalId:mine", "Write"), acl("Group:mine", "Read"))
    server = start_broker(log_dir, **AUTHORIZER)
    for name in ("granted", "secret"):
        server.broker.create_topic(name, 1)
        server.broker.produce(name, [b"data"], partition=0)
    try:
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


def _records() -> bytes:
    return build_batch([SimpleRecord(value=b"more")], default_timestamp=1)


def _topics(response: dict, key: str = "topics", partitions: str = "partitions", error: str = "error_code"
            ) -> list[int]:
    return [p[error] for t in response[key] for p in t[partitions]]


def _secret_id(server) -> bytes:
    return topic_id_bytes(server.broker.topics.get("secret").topic_id)


# (api key, version, body or body builder, check(response) -> None)
Case = tuple[ApiKey | SeglogApiKey, int | None, dict | Callable, Callable[[dict], None]]


def _produce(r):
    (p,) = r["responses"][0]["partition_responses"]
    assert (p["error_code"], p["base_offset"]) == (TOPIC, -1)


def _fetch(r):
    (p,) = r["responses"][0]["partitions"]
    assert (p["error_code"], p["high_watermark"], bytes(p["records"] or b"")) == (TOPIC, -1, b"")


def _metadata_lists(r):
    assert [t["name"] for t in r["topics"]] == ["granted"]


def _metadata_named(r):
    (t,) = r["topics"]
    assert (t["error_code"], t["partitions"]) == (TOPIC, [])


def _list_offsets(r):
    (p,) = r["topics"][0]["partitions"]
    assert (p["error_code"], p["offset"]) == (TOPIC, -1)


def _epoch(r):
    (p,) = r["topics"][0]["partitions"]
    assert (p["error_code"], p["end_offset"]) == (TOPIC, -1)


def _configs(code):
    def check(r):
        (result,) = r["results"]
        assert (result["error_code"], result["configs"]) == (code, [])
    return check


def _single(code, key="error_code"):
    def check(r):
        assert r[key] == code
    return check


CASES: dict[str, Case] = {
    "produce": (ApiKey.PRODUCE, None, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "secret", "partition_data": [{"index": 0, "records": _records()}]}]}, _produce),
    "transactional produce": (ApiKey.PRODUCE, None, {"transactional_id": "theirs", "acks": 1, "timeout_ms": 5000,
                                                     "topic_data": [{"name": "granted", "partition_data": [
                                                         {"index": 0, "records": _records()}]}]},
                              lambda r: _single(TXN)(r["responses"][0]["partition_responses"][0])),
    "fetch": (ApiKey.FETCH, None, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": "secret", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
              _fetch),
    "follower fetch": (ApiKey.FETCH, 11, {"replica_id": 7, "max_wait_ms": 0, "min_bytes": 0, "topics": [
        {"topic": "granted", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
                       _fetch),
    "list offsets": (ApiKey.LIST_OFFSETS, None, {"replica_id": -1, "topics": [
        {"name": "secret", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, _list_offsets),
    "offset for leader epoch": (ApiKey.OFFSET_FOR_LEADER_EPOCH, None, {"replica_id": -1, "topics": [
        {"topic": "secret", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
                                _epoch),
    "metadata of every topic": (ApiKey.METADATA, None, {"topics": None}, _metadata_lists),
    "metadata of a named topic": (ApiKey.METADATA, None, {"topics": [{"name": "secret"}]}, _metadata_named),
    "metadata by topic id": (ApiKey.METADATA, 12, lambda s: {"topics": [{"name": None, "topic_id": _secret_id(s)}]},
                             lambda r: (_metadata_named(r), r["topics"][0]["name"] is None or pytest.fail(r))),
    "describe topic partitions": (ApiKey.DESCRIBE_TOPIC_PARTITIONS, None, {"topics": []}, _metadata_lists),
    "create topics": (ApiKey.CREATE_TOPICS, None, {"topics": [{"name": "fresh", "num_partitions": 1,
                                                               "replication_factor": 1}], "timeout_ms": 5000},
                      lambda r: _single(TOPIC)(r["topics"][0])),
    "delete topics by name": (ApiKey.DELETE_TOPICS, 5, {"topic_names": ["secret"], "timeout_ms": 5000},
                              lambda r: _single(TOPIC)(r["responses"][0])),
    "delete topics by id": (ApiKey.DELETE_TOPICS, 6, lambda s: {"topics": [{"name": None, "topic_id": _secret_id(s)}],
                                                                "timeout_ms": 5000},
                            lambda r: _single(TOPIC)(r["responses"][0])),
    "create partitions": (ApiKey.CREATE_PARTITIONS, None, {"topics": [{"name": "secret", "count": 3,
                                                                       "assignments": None}], "timeout_ms": 5000},
                          lambda r: _single(TOPIC)(r["results"][0])),
    "describe topic configs": (ApiKey.DESCRIBE_CONFIGS, None, {"resources": [
        {"resource_type": 2, "resource_name": "secret", "configuration_keys": None}]}, _configs(TOPIC)),
    "describe broker configs": (ApiKey.DESCRIBE_CONFIGS, None, {"resources": [
        {"resource_type": 4, "resource_name": "0", "configuration_keys": None}]}, _configs(CLUSTER)),
    "alter configs": (ApiKey.ALTER_CONFIGS, None, {"resources": [{"resource_type": 2, "resource_name": "secret",
                                                                  "configs": [{"name": "retention.ms",
                                                                               "value": "1"}]}]},
                      lambda r: _single(TOPIC)(r["responses"][0])),
    "incremental alter configs": (ApiKey.INCREMENTAL_ALTER_CONFIGS, None, {"resources": [
        {"resource_type": 2, "resource_name": "secret", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1"}]}]},
                                  lambda r: _single(TOPIC)(r["responses"][0])),
    "describe log dirs": (ApiKey.DESCRIBE_LOG_DIRS, None, {"topics": None},
                          lambda r: (_single(CLUSTER)(r), r["results"] == [] or pytest.fail(r))),
    "init producer id of a transactional id": (ApiKey.INIT_PRODUCER_ID, None, {
        "transactional_id": "theirs", "transaction_timeout_ms": 60000},
        lambda r: (_single(TXN)(r), r["producer_id"] == -1 or pytest.fail(r))),
    "find a group's coordinator": (ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}, _single(GROUP)),
    "find coordinators in a batch": (ApiKey.FIND_COORDINATOR, None, {"key_type": 1, "coordinator_keys": ["theirs"]},
                                     lambda r: _single(TXN)(r["coordinators"][0])),
    "join group": (ApiKey.JOIN_GROUP, None, {"group_id": "g", "session_timeout_ms": 10000,
                                             "rebalance_timeout_ms": 10000, "member_id": "",
                                             "protocol_type": "consumer",
                                             "protocols": [{"name": "range", "metadata": b""}]},
                   lambda r: (_single(GROUP)(r), r["members"] == [] or pytest.fail(r))),
    "sync group": (ApiKey.SYNC_GROUP, None, {"group_id": "g", "generation_id": 1, "member_id": "m"}, _single(GROUP)),
    "heartbeat": (ApiKey.HEARTBEAT, None, {"group_id": "g", "generation_id": 1, "member_id": "m"}, _single(GROUP)),
    "leave group": (ApiKey.LEAVE_GROUP, None, {"group_id": "g", "members": [{"member_id": "m"}]}, _single(GROUP)),
    "offset commit": (ApiKey.OFFSET_COMMIT, None, {"group_id": "g", "topics": [
        {"name": "granted", "partitions": [{"partition_index": 0, "committed_offset": 0}]}]},
                      lambda r: _topics(r) == [GROUP] or pytest.fail(r)),
    "offset commit of a secret topic in one's group": (ApiKey.OFFSET_COMMIT, None, {
        "group_id": "mine", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0}]} for t in ("granted", "secret")]},
        lambda r: {t["name"]: t["partitions"][0]["error_code"] for t in r["topics"]} == {"granted": 0, "secret": TOPIC}
        or pytest.fail(r)),
    "offset fetch": (ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None},
                     lambda r: (_single(GROUP)(r), r["topics"] == [] or pytest.fail(r))),
    "offset fetch of groups": (ApiKey.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]},
                               lambda r: (_single(GROUP)(r["groups"][0]), r["groups"][0]["topics"] == [] or
                                          pytest.fail(r))),
    "describe groups": (ApiKey.DESCRIBE_GROUPS, None, {"groups": ["g"]},
                        lambda r: (_single(GROUP)(r["groups"][0]), r["groups"][0]["members"] == [] or pytest.fail(r))),
    "delete groups": (ApiKey.DELETE_GROUPS, None, {"groups_names": ["g"]},
                      lambda r: _single(GROUP)(r["results"][0])),
    "offset delete": (ApiKey.OFFSET_DELETE, None, {"group_id": "g", "topics": [
        {"name": "granted", "partitions": [{"partition_index": 0}]}]}, _single(GROUP)),
    "add partitions to someone else's transaction": (ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "theirs", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "granted", "partitions": [0]}]},
        lambda r: _topics(r, "results_by_topic_v3_and_below", "results_by_partition", "partition_error_code")
        == [TXN] or pytest.fail(r)),
    "add a secret partition to one's transaction": (ApiKey.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": "mine", "v3_and_below_producer_id": 1, "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "granted", "partitions": [0]}, {"name": "secret", "partitions": [0]}]},
        lambda r: sorted(_topics(r, "results_by_topic_v3_and_below", "results_by_partition",
                                 "partition_error_code")) == [TOPIC, NOT_ATTEMPTED] or pytest.fail(r)),
    "add offsets to txn": (ApiKey.ADD_OFFSETS_TO_TXN, None, {"transactional_id": "mine", "producer_id": 1,
                                                             "producer_epoch": 0, "group_id": "g"}, _single(GROUP)),
    "end txn": (ApiKey.END_TXN, None, {"transactional_id": "theirs", "producer_id": 1, "producer_epoch": 0,
                                       "committed": True}, _single(TXN)),
    "txn offset commit": (ApiKey.TXN_OFFSET_COMMIT, None, {"transactional_id": "theirs", "group_id": "g",
                                                           "producer_id": 1, "producer_epoch": 0, "topics": [
        {"name": "granted", "partitions": [{"partition_index": 0, "committed_offset": 0}]}]},
                          lambda r: _topics(r) == [TXN] or pytest.fail(r)),
    "describe transactions": (ApiKey.DESCRIBE_TRANSACTIONS, None, {"transactional_ids": ["theirs"]},
                              lambda r: (_single(TXN)(r["transaction_states"][0]),
                                         r["transaction_states"][0]["topics"] == [] or pytest.fail(r))),
    "write txn markers": (ApiKey.WRITE_TXN_MARKERS, None, {"markers": [
        {"producer_id": 1, "producer_epoch": 0, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": "granted", "partition_indexes": [0]}]}]},
                          lambda r: _topics(r["markers"][0]) == [CLUSTER] or pytest.fail(r)),
    "describe producers": (ApiKey.DESCRIBE_PRODUCERS, None, {"topics": [{"name": "secret", "partition_indexes": [0]}]},
                           lambda r: (_single(TOPIC)(r["topics"][0]["partitions"][0]),
                                      r["topics"][0]["partitions"][0]["active_producers"] == [] or pytest.fail(r))),
    "create acls": (ApiKey.CREATE_ACLS, None, {"creations": [{
        "resource_type": 2, "resource_name": "secret", "resource_pattern_type": 3, "principal": "User:ANONYMOUS",
        "host": "*", "operation": 2, "permission_type": 3}]}, lambda r: _single(CLUSTER)(r["results"][0])),
    "describe acls": (ApiKey.DESCRIBE_ACLS, None, ANY_FILTER,
                      lambda r: (_single(CLUSTER)(r), r["resources"] == [] or pytest.fail(r))),
    "delete acls": (ApiKey.DELETE_ACLS, None, {"filters": [ANY_FILTER]},
                    lambda r: _single(CLUSTER)(r["filter_results"][0])),
    "describe user scram credentials": (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, None, {"users": None},
                                        lambda r: (_single(CLUSTER)(r), r["results"] == [] or pytest.fail(r))),
    "alter user scram credentials": (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, None, {"deletions": [], "upsertions": [
        {"name": "mallory", "mechanism": 2, "iterations": 8192, "salt": b"s" * 16, "salted_password": b"p" * 64}]},
                                     lambda r: (_single(CLUSTER)(r["results"][0]),
                                                r["results"][0]["user"] == "mallory" or pytest.fail(r))),
    "compaction lease": (SeglogApiKey.COMPACTION_LEASE, 0, {"lease_id": "x", "operation": 0, "lease_ms": 1000,
                                                            "topics": [{"name": "granted", "partitions": [0]}]},
                         _single(CLUSTER)),
    "replace segments": (SeglogApiKey.REPLACE_SEGMENTS, 0, {"lease_id": "x", "topics": [
        {"name": "granted", "partitions": [{"partition_index": 0, "cleaned_through_offset": 0, "segments": []}]}]},
                         lambda r: _single(CLUSTER)(r["topics"][0]["partitions"][0])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_api_without_its_acl_answers_kafkas_error_and_no_data(server, case):
    api_key, version, body, check = CASES[case]
    with ProtocolClient(server.bootstrap_servers) as client:
        check(client.send(api_key, body(server) if callable(body) else body, version=version))
    # Nothing of the secret topic changed, and the witness reads what it may.
    assert server.broker.topics.get("secret").partitions == 1
    assert server.broker.list_offsets("secret", 0, "latest").offset == 1
    assert "retention.ms" not in server.broker.topics.get("secret").config
    assert server.broker.topics.get("fresh") is None
    assert "mallory" not in server.apis.credentials.users()
    with ProtocolClient(server.bootstrap_servers) as witness:
        (granted,) = witness.send(ApiKey.METADATA, {"topics": [{"name": "granted"}]})["topics"]
        assert (granted["error_code"], len(granted["partitions"])) == (0, 1)


def test_a_refused_produce_with_acks_0_closes_the_connection_and_appends_nothing(server):
    with ProtocolClient(server.bootstrap_servers) as client:
        client.send_no_response(ApiKey.PRODUCE, {"transactional_id": None, "acks": 0, "timeout_ms": 5000,
                                                 "topic_data": [{"name": "secret", "partition_data": [
                                                     {"index": 0, "records": _records()}]}]})
        with pytest.raises(OSError):
            client.send(ApiKey.METADATA, {"topics": []})
    assert server.broker.list_offsets("secret", 0, "latest").offset == 1


def test_an_idempotent_producer_with_write_on_some_topic_gets_a_producer_id(server):
    with ProtocolClient(server.bootstrap_servers) as client:
        answer = client.send(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000})
    assert answer["error_code"] == 0 and answer["producer_id"] >= 0


def test_authorized_operations_are_the_principals_own(server):
    all_topic_operations = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
    with ProtocolClient(server.bootstrap_servers) as client:
        metadata = client.send(ApiKey.METADATA, {"topics": [{"name": "granted"}],
                                                 "include_topic_authorized_operations": True}, version=10)
        partitions = client.send(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {"topics": [{"name": "granted"}]})
        cluster = client.send(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True})
    assert metadata["topics"][0]["topic_authorized_operations"] == all_topic_operations
    assert partitions["topics"][0]["topic_authorized_operations"] == all_topic_operations
    assert cluster["cluster_authorized_operations"] == 0  # no ACL on the cluster
