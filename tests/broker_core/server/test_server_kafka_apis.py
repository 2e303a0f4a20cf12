"""The APIs over a real socket, spoken with the protocol package: what each request gets back."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.meta_properties import read_meta_properties
from broker_core.protocol import ApiKey, encode_request, parse_response
from broker_core.server.kafka_apis import MIN_VERSIONS
from format import layout
from format.compression import CompressionType
from format.record import Header, SimpleRecord
from format.record_batch import build_batch, iter_batches

from server_kit import create_topic, fetch, produce, read_frame, start_broker

UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REQUEST = 42
NONE = 0
UNSUPPORTED_VERSION = 35
INVALID_CONFIG = 40
INVALID_TOPIC_EXCEPTION = 17
KAFKA_STORAGE_ERROR = 56


def batch(*values: bytes, key: bytes | None = None, timestamp: int = 1_700_000_000_000) -> bytes:
    return build_batch([SimpleRecord(v, key, timestamp + i) for i, v in enumerate(values)])


def list_offset(client: ProtocolClient, topic: str, partition: int, timestamp: int, isolation_level: int = 0
                ) -> dict:
    response = client.send(ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": isolation_level, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}]})
    return response["topics"][0]["partitions"][0]


def values_of(records: bytes, from_offset: int = 0) -> list[bytes]:
    return [r.value for b in iter_batches(bytes(records)) for r in b.records() if r.offset >= from_offset]


# --- ApiVersions and unsupported requests ---------------------------------------------


def test_api_versions_advertises_exactly_the_served_apis(client):
    served = {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.METADATA,
              ApiKey.API_VERSIONS,
              ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.INIT_PRODUCER_ID, ApiKey.DESCRIBE_CONFIGS,
              ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.DESCRIBE_LOG_DIRS,
              ApiKey.CREATE_PARTITIONS, ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_TOPIC_PARTITIONS,
              ApiKey.DESCRIBE_PRODUCERS,
              # SCRAM users (KIP-554).
              ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
              # The group coordinator's.
              ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
              ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
              ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE,
              # The transaction coordinator's.
              ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT,
              ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS,
              # What coordinators send the partitions' leaders.
              ApiKey.WRITE_TXN_MARKERS,
              # SASL: answered by the authenticator of SASL listeners; out of place elsewhere.
              ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE}
    assert set(client.broker_versions) == {int(k) for k in served}
    for key, floor in MIN_VERSIONS.items():
        assert client.broker_versions[int(key)][0] >= floor


# Fields whose default makes a request that gets no answer by design (a produce with acks=0).
_ANSWERED_DEFAULTS = {ApiKey.PRODUCE: {"acks": -1}}


def test_every_advertised_version_of_every_api_is_answered(client):
    # A version advertised but not served would close the connection: the client's next send fails.
    asked = 0
    for key, (low, high) in sorted(client.broker_versions.items()):
        for version in range(low, high + 1):
            response = client.send(ApiKey(key), _ANSWERED_DEFAULTS.get(ApiKey(key), {}), version=version)
            assert isinstance(response, dict), (ApiKey(key).name, version)
            asked += 1
    assert asked > 100


def _raw_header(api_key: int, version: int, correlation_id: int) -> bytes:
    client_id = b"raw"
    payload = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(payload)) + payload


def test_api_versions_of_a_newer_version_gets_the_v0_fallback(broker_server):
    with socket.create_connection(("127.0.0.1", broker_server.bound_port()), timeout=5) as sock:
        sock.sendall(_raw_header(ApiKey.API_VERSIONS, 99, 7))
        correlation_id, body = parse_response(ApiKey.API_VERSIONS, 0, read_frame(sock))
    assert correlation_id == 7
    assert body["error_code"] == UNSUPPORTED_VERSION
    assert any(e["api_key"] == ApiKey.API_VERSIONS for e in body["api_keys"])


@pytest.mark.parametrize("api_key, version", [(1000, 0), (ApiKey.JOIN_GROUP, 0), (ApiKey.PRODUCE, 2)])
def test_a_request_for_an_api_not_served_closes_the_connection(broker_server, api_key, version):
    with socket.create_connection(("127.0.0.1", broker_server.bound_port()), timeout=5) as sock:
        sock.sendall(_raw_header(int(api_key), version, 1))
        assert sock.recv(1) == b""


def test_bytes_after_a_request_body_are_ignored_as_kafka_does(broker_server):
    # librdkafka's Metadata v9+ request for all topics leaves 3 bytes of a placeholder after the body.
    frame = encode_request(ApiKey.METADATA, 12, 9, "rdkafka", {"topics": None}) + b"\x01\x00\x00"
    frame = struct.pack(">i", len(frame) - 4) + frame[4:]
    with socket.create_connection(("127.0.0.1", broker_server.bound_port()), timeout=5) as sock:
        sock.sendall(frame)
        correlation_id, body = parse_response(ApiKey.METADATA, 12, read_frame(sock))
    assert correlation_id == 9 and body["brokers"][0]["node_id"] == 0


# --- Metadata and meta.properties --------------------------------------------------------


def test_metadata_names_this_broker_leader_of_every_partition(client, broker_server):
    create_topic(client, "orders", 3)
    response = client.send(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})
    assert response["brokers"] == [{"node_id": 0, "host": "127.0.0.1", "port": broker_server.bound_port(),
                                    "rack": None}]
    assert response["controller_id"] == 0
    assert response["cluster_id"] == read_meta_properties(broker_server.broker.log_manager.log_dirs[0]).cluster_id
    (topic,) = response["topics"]
    assert topic["name"] == "orders" and topic["error_code"] == 0 and len(topic["topic_id"]) == 16
    assert [(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["leader_epoch"])
            for p in topic["partitions"]] == [(i, 0, [0], [0], 0) for i in range(3)]


def test_metadata_auto_creates_a_requested_topic_only_when_allowed(client):
    refused = client.send(ApiKey.METADATA, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": False})
    assert refused["topics"][0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    created = client.send(ApiKey.METADATA, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True})
    assert created["topics"][0]["error_code"] == 0 and len(created["topics"][0]["partitions"]) == 1


def test_metadata_marks_kafkas_internal_topics_internal(client):
    create_topic(client, "orders", 1)
    client.send(ApiKey.METADATA, {"topics": [{"name": "__consumer_offsets"}], "allow_auto_topic_creation": True})
    listed = client.send(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})["topics"]
    assert {t["name"]: t["is_internal"] for t in listed} == {"__consumer_offsets": True, "orders": False}


def test_the_cluster_id_survives_a_restart(tmp_path):
    first = start_broker(tmp_path)
    cluster_id = first.cluster_id
    first.shutdown()
    assert os.path.exists(tmp_path / layout.CLEAN_SHUTDOWN_FILE)
    second = start_broker(tmp_path)
    try:
        assert second.cluster_id == cluster_id
    finally:
        second.shutdown()


def test_advertised_listeners_are_what_metadata_reports(tmp_path):
    server = start_broker(tmp_path, **{"advertised.listeners": "PLAINTEXT://broker.example:19092"})
    try:
        with ProtocolClient(server.bootstrap_servers) as c:
            brokers = c.send(ApiKey.METADATA, {"topics": []})["brokers"]
        assert [(b["host"], b["port"]) for b in brokers] == [("broker.example", 19092)]
    finally:
        server.shutdown()


# --- Produce ---------------------------------------------------------------------------


def test_produce_assigns_offsets_and_reports_the_base_offset(client):
    create_topic(client, "t")
    assert produce(client, "t", 0, batch(b"a", b"b"))["base_offset"] == 0
    second = produce(client, "t", 0, batch(b"c"))
    assert (second["error_code"], second["base_offset"], second["log_start_offset"]) == (0, 2, 0)


def test_produce_errors_are_per_partition(client):
    create_topic(client, "t", configs={"max.message.bytes": "200"})
    good = batch(b"ok")
    corrupt = bytearray(batch(b"flipped"))
    corrupt[-1] ^= 0xFF
    response = client.send(ApiKey.PRODUCE, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": good}, {"index": 7, "records": good}]},
        {"name": "missing", "partition_data": [{"index": 0, "records": good}]},
    ]})
    codes = [(t["name"], p["index"], p["error_code"]) for t in response["responses"] for p in t["partition_responses"]]
    assert codes == [("t", 0, 0), ("t", 7, UNKNOWN_TOPIC_OR_PARTITION), ("missing", 0, UNKNOWN_TOPIC_OR_PARTITION)]
    assert produce(client, "t", 0, bytes(corrupt))["error_code"] == CORRUPT_MESSAGE
    too_large = produce(client, "t", 0, batch(b"x" * 500))
    assert too_large["error_code"] == MESSAGE_TOO_LARGE and "max.message.bytes" in too_large["error_message"]
    assert produce(client, "t", 0, good, acks=2)["error_code"] == INVALID_REQUIRED_ACKS


def test_a_storage_error_in_an_append_is_kafka_storage_error_for_that_partition_and_serving_goes_on(
        broker_server, client):
    create_topic(client, "t", partitions=2)
    produce(client, "t", 1, batch(b"before"))
    # A log whose files were closed under it, as a failed log dir leaves it: its appends raise KafkaStorageError.
    broker_server.broker.log_manager.get_log(layout.TopicPartition("t", 1)).close()
    response = client.send(ApiKey.PRODUCE, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch(b"a")}, {"index": 1, "records": batch(b"b")}]},
    ]})
    ok, failed = response["responses"][0]["partition_responses"]
    assert (ok["index"], ok["error_code"], ok["base_offset"]) == (0, 0, 0)
    assert (failed["index"], failed["error_code"], failed["base_offset"]) == (1, KAFKA_STORAGE_ERROR, -1)
    assert "t-1" in failed["error_message"]
    assert produce(client, "t", 0, batch(b"c"))["base_offset"] == 1
    data = fetch(client, [("t", 0, 0, 1 << 20)])[("t", 0)]
    assert values_of(data["records"]) == [b"a", b"c"]


def test_produce_with_acks_0_gets_no_response_and_the_connection_goes_on(client):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"fire", b"forget"), acks=0)
    assert list_offset(client, "t", 0, -1)["offset"] == 2


def test_a_failed_produce_with_acks_0_closes_the_connection(client):
    produce(client, "missing", 0, batch(b"x"), acks=0)
    with pytest.raises(ConnectionError):
        client.send(ApiKey.METADATA, {"topics": []})


# --- Fetch -----------------------------------------------------------------------------


def test_fetch_returns_the_batches_and_offsets_of_the_partition(client):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a", b"b", b"c"))
    data = fetch(client, [("t", 0, 1, 1 << 20)])[("t", 0)]
    assert (data["error_code"], data["high_watermark"], data["last_stable_offset"], data["log_start_offset"]) \
        == (0, 3, 3, 0)
    assert values_of(data["records"], from_offset=1) == [b"b", b"c"]
    assert data["aborted_transactions"] is None


def test_fetch_read_committed_reports_an_empty_aborted_list(client):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a"))
    data = fetch(client, [("t", 0, 0, 1 << 20)], isolation_level=1)[("t", 0)]
    assert data["aborted_transactions"] == [] and values_of(data["records"]) == [b"a"]


def idempotent(*values: bytes, producer_id: int = 4000, epoch: int = 0, sequence: int = 0,
               transactional: bool = False) -> bytes:
    # Timestamps of now: the markers the broker writes take its clock, and older records would roll the segment.
    now = int(time.time() * 1000)
    return build_batch([SimpleRecord(v, None, now) for v in values], producer_id=producer_id,
                       producer_epoch=epoch, base_sequence=sequence, is_transactional=transactional)


def test_a_retried_idempotent_produce_answers_the_first_base_offset_and_writes_nothing(client):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"before"))
    first = produce(client, "t", 0, idempotent(b"a", b"b"))
    retry = produce(client, "t", 0, idempotent(b"a", b"b"))
    assert (first["error_code"], first["base_offset"]) == (0, 1)
    assert (retry["error_code"], retry["base_offset"]) == (0, 1)
    assert list_offset(client, "t", 0, -1)["offset"] == 3


def test_an_idempotent_produce_out_of_sequence_or_of_a_fenced_epoch_gets_kafkas_error(client):
    create_topic(client, "t")
    produce(client, "t", 0, idempotent(b"a", epoch=2))
    gap = produce(client, "t", 0, idempotent(b"b", epoch=2, sequence=5))
    fenced = produce(client, "t", 0, idempotent(b"b", epoch=1, sequence=1))
    assert gap["error_code"] == 45 and "out of order sequence number" in gap["error_message"]  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert fenced["error_code"] == 47  # INVALID_PRODUCER_EPOCH
    assert list_offset(client, "t", 0, -1)["offset"] == 1


def test_read_committed_fetches_stop_at_the_lso_and_list_the_aborted_transactions(client, broker_server):
    create_topic(client, "t")
    produce(client, "t", 0, idempotent(b"aborted-1", producer_id=1, transactional=True))   # 0
    produce(client, "t", 0, idempotent(b"committed", producer_id=2, transactional=True))   # 1
    broker_server.broker.append_control_marker("t", 0, 1, 0, 0, commit=False)             # 2
    produce(client, "t", 0, idempotent(b"open", producer_id=3, transactional=True))        # 3
    broker_server.broker.append_control_marker("t", 0, 2, 0, 0, commit=True)              # 4
    committed = fetch(client, [("t", 0, 0, 1 << 20)], isolation_level=1)[("t", 0)]
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (5, 3)
    assert committed["aborted_transactions"] == [{"producer_id": 1, "first_offset": 0}]
    assert [b.header.base_offset for b in iter_batches(committed["records"])] == [0, 1, 2]
    uncommitted = fetch(client, [("t", 0, 0, 1 << 20)])[("t", 0)]
    assert uncommitted["aborted_transactions"] is None
    assert [b.header.base_offset for b in iter_batches(uncommitted["records"])] == [0, 1, 2, 3, 4]
    assert list_offset(client, "t", 0, -1, isolation_level=1)["offset"] == 3
    assert list_offset(client, "t", 0, -1, isolation_level=0)["offset"] == 5


def describe_producers(client: ProtocolClient, topics: dict[str, list[int]]) -> dict[tuple[str, int], dict]:
    response = client.send(ApiKey.DESCRIBE_PRODUCERS, {"topics": [
        {"name": name, "partition_indexes": partitions} for name, partitions in topics.items()]})
    return {(t["name"], p["partition_index"]): p for t in response["topics"] for p in t["partitions"]}


def test_describe_producers_answers_each_partitions_producer_state(client, broker_server):
    create_topic(client, "t", partitions=2)
    produce(client, "t", 0, idempotent(b"a", b"b", b"c", producer_id=7, epoch=3))                # 0-2
    produce(client, "t", 0, idempotent(b"open", producer_id=8, transactional=True))             # 3
    produce(client, "t", 0, idempotent(b"done", producer_id=9, epoch=1, transactional=True))    # 4
    broker_server.broker.append_control_marker("t", 0, 9, 1, 5, commit=True)                   # 5
    described = describe_producers(client, {"t": [0, 1]})
    assert (described[("t", 0)]["error_code"], described[("t", 0)]["error_message"]) == (NONE, None)
    producers = described[("t", 0)]["active_producers"]
    assert [{k: v for k, v in p.items() if k != "last_timestamp"} for p in producers] == [
        {"producer_id": 7, "producer_epoch": 3, "last_sequence": 2, "coordinator_epoch": -1,
         "current_txn_start_offset": -1},
        {"producer_id": 8, "producer_epoch": 0, "last_sequence": 0, "coordinator_epoch": -1,
         "current_txn_start_offset": 3},
        {"producer_id": 9, "producer_epoch": 1, "last_sequence": 0, "coordinator_epoch": 5,
         "current_txn_start_offset": -1}]
    assert all(p["last_timestamp"] > 0 for p in producers)
    assert described[("t", 1)]["error_code"] == NONE and described[("t", 1)]["active_producers"] == []


def test_describe_producers_of_unknown_topics_partitions_and_invalid_names_gets_kafkas_errors(client):
    create_topic(client, "t")
    described = describe_producers(client, {"t": [0, 4], "gone": [0], "bad/name": [0]})
    assert {tp: p["error_code"] for tp, p in described.items()} == {
        ("t", 0): NONE, ("t", 4): UNKNOWN_TOPIC_OR_PARTITION, ("gone", 0): UNKNOWN_TOPIC_OR_PARTITION,
        ("bad/name", 0): INVALID_TOPIC_EXCEPTION}
    assert "t-4" in described[("t", 4)]["error_message"] and "gone-0" in described[("gone", 0)]["error_message"]


def test_fetch_out_of_range_and_unknown_partitions_get_their_error(client):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a"))
    result = fetch(client, [("t", 0, 5, 1 << 20), ("t", 3, 0, 1 << 20), ("gone", 0, 0, 1 << 20)])
    assert result[("t", 0)]["error_code"] == OFFSET_OUT_OF_RANGE
    assert result[("t", 3)]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert result[("gone", 0)]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_respects_partition_max_bytes_but_returns_one_batch_for_the_first_partition(client):
    create_topic(client, "t", 2)
    for p in (0, 1):
        for i in range(3):
            produce(client, "t", p, batch(b"x" * 1000))
    result = fetch(client, [("t", 0, 0, 10), ("t", 1, 0, 10)])
    assert len(values_of(result[("t", 0)]["records"])) == 1  # over the limit, but one whole batch
    assert values_of(result[("t", 1)]["records"]) == []  # only the first partition may exceed it
    both = fetch(client, [("t", 0, 0, 1 << 20), ("t", 1, 0, 1 << 20)], max_bytes=2500)
    assert len(values_of(both[("t", 0)]["records"])) == 2
    assert values_of(both[("t", 1)]["records"]) == []


def test_fetch_waits_up_to_max_wait_ms_for_min_bytes(client):
    create_topic(client, "t")
    started = time.monotonic()
    data = fetch(client, [("t", 0, 0, 1 << 20)], max_wait_ms=300, min_bytes=1)[("t", 0)]
    assert time.monotonic() - started >= 0.25
    assert data["error_code"] == 0 and values_of(data["records"]) == []


def test_a_produce_completes_a_waiting_fetch(bootstrap):
    with ProtocolClient(bootstrap) as consumer, ProtocolClient(bootstrap) as producer:
        create_topic(producer, "t")
        produced = threading.Timer(0.2, lambda: produce(producer, "t", 0, batch(b"wake")))
        produced.start()
        started = time.monotonic()
        data = fetch(consumer, [("t", 0, 0, 1 << 20)], max_wait_ms=10_000, min_bytes=1)[("t", 0)]
        elapsed = time.monotonic() - started
        produced.join()
    assert values_of(data["records"]) == [b"wake"]
    assert elapsed < 5


def test_a_waiting_fetch_is_answered_when_the_broker_shuts_down(tmp_path):
    server = start_broker(tmp_path)
    with ProtocolClient(server.bootstrap_servers) as c:
        create_topic(c, "t")
        result: dict = {}
        waiter = threading.Thread(target=lambda: result.update(
            fetch(c, [("t", 0, 0, 1 << 20)], max_wait_ms=30_000, min_bytes=1)))
        waiter.start()
        time.sleep(0.3)
        started = time.monotonic()
        server.shutdown()
        waiter.join(10)
    assert time.monotonic() - started < 10
    assert result[("t", 0)]["error_code"] == 0
    assert os.path.exists(tmp_path / layout.CLEAN_SHUTDOWN_FILE)


# --- ListOffsets -------------------------------------------------------------------------


def test_list_offsets_earliest_latest_max_timestamp_and_by_timestamp(client):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a", b"b", b"c", timestamp=1000))  # timestamps 1000, 1001, 1002
    assert list_offset(client, "t", 0, -2)["offset"] == 0
    assert list_offset(client, "t", 0, -1)["offset"] == 3
    assert (list_offset(client, "t", 0, -3)["offset"], list_offset(client, "t", 0, -3)["timestamp"]) == (2, 1002)
    found = list_offset(client, "t", 0, 1001)
    assert (found["offset"], found["timestamp"], found["leader_epoch"]) == (1, 1001, 0)
    missing = list_offset(client, "t", 0, 5000)
    assert (missing["error_code"], missing["offset"], missing["timestamp"]) == (0, -1, -1)
    assert list_offset(client, "nope", 0, -1)["error_code"] == UNKNOWN_TOPIC_OR_PARTITION


# --- topic administration --------------------------------------------------------------


def test_create_topics_reports_configs_and_refuses_what_one_broker_cannot_do(client):
    created = create_topic(client, "t", 2, {"cleanup.policy": "compact"})
    assert (created["error_code"], created["num_partitions"], created["replication_factor"]) == (0, 2, 1)
    policy = next(c for c in created["configs"] if c["name"] == "cleanup.policy")
    assert (policy["value"], policy["config_source"]) == ("compact", 1)
    create_topic(client, "t", expect_error=TOPIC_ALREADY_EXISTS)
    response = client.send(ApiKey.CREATE_TOPICS, {"topics": [
        {"name": "r3", "num_partitions": 1, "replication_factor": 3, "assignments": [], "configs": []},
        {"name": "bad", "num_partitions": 1, "replication_factor": 1, "assignments": [],
         "configs": [{"name": "retention.ms", "value": "soon"}]},
        {"name": "dry", "num_partitions": 4, "replication_factor": -1, "assignments": [], "configs": []},
    ], "timeout_ms": 5000, "validate_only": True})
    codes = {t["name"]: t["error_code"] for t in response["topics"]}
    assert codes == {"r3": INVALID_REPLICATION_FACTOR, "bad": 40, "dry": 0}
    listed = client.send(ApiKey.METADATA, {"topics": None})
    assert [t["name"] for t in listed["topics"]] == ["t"]  # validate_only created nothing


def test_create_partitions_and_delete_topics(client):
    create_topic(client, "t", 1)
    response = client.send(ApiKey.CREATE_PARTITIONS, {"topics": [
        {"name": "t", "count": 3, "assignments": None}, {"name": "t2", "count": 3, "assignments": None}],
        "timeout_ms": 5000, "validate_only": False})
    assert [(r["name"], r["error_code"]) for r in response["results"]] == [("t", 0), ("t2", UNKNOWN_TOPIC_OR_PARTITION)]
    shrink = client.send(ApiKey.CREATE_PARTITIONS, {"topics": [{"name": "t", "count": 2, "assignments": None}],
                                                    "timeout_ms": 5000, "validate_only": False})
    assert shrink["results"][0]["error_code"] == INVALID_PARTITIONS
    metadata = client.send(ApiKey.METADATA, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
    assert len(metadata["topics"][0]["partitions"]) == 3
    deleted = client.send(ApiKey.DELETE_TOPICS, {"topic_names": ["t", "nope"], "topics": [
        {"name": "t"}, {"name": "nope"}], "timeout_ms": 5000})
    codes = [(r["name"], r["error_code"]) for r in deleted["responses"]]
    assert codes[-1] == ("nope", UNKNOWN_TOPIC_OR_PARTITION) and ("t", 0) in codes
    assert client.send(ApiKey.METADATA, {"topics": None})["topics"] == []


def test_describe_configs_of_a_topic_and_of_the_broker(client):
    create_topic(client, "t", configs={"retention.ms": "1000"})
    response = client.send(ApiKey.DESCRIBE_CONFIGS, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": ["retention.ms", "segment.bytes"]},
        {"resource_type": 2, "resource_name": "nope", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "0", "configuration_keys": ["num.partitions"]},
    ], "include_synonyms": True})
    topic, missing, broker = response["results"]
    configs = {c["name"]: c for c in topic["configs"]}
    assert set(configs) == {"retention.ms", "segment.bytes"}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["config_source"]) == ("1000", 1)
    assert [s["name"] for s in configs["retention.ms"]["synonyms"]] == ["retention.ms", "log.retention.ms"]
    assert configs["segment.bytes"]["config_source"] == 5
    assert missing["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert [(c["name"], c["value"]) for c in broker["configs"]] == [("num.partitions", "1")]


# --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def incremental_alter(client: ProtocolClient, resources: list[tuple[int, str, list[tuple]]],
                      validate_only: bool = False) -> list[tuple[int, str | None]]:
    """``resources``: (type, name, [(key, operation, value)]); returns (error code, message) per resource."""
    response = client.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, {"validate_only": validate_only, "resources": [
        {"resource_type": t, "resource_name": n, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in configs]} for t, n, configs in resources]})
    return [(r["error_code"], r["error_message"]) for r in response["responses"]]


def topic_overrides(client: ProtocolClient, name: str) -> dict[str, str]:
    response = client.send(ApiKey.DESCRIBE_CONFIGS, {"resources": [
        {"resource_type": 2, "resource_name": name, "configuration_keys": None}]})
    return {c["name"]: c["value"] for c in response["results"][0]["configs"] if c["config_source"] == 1}


def test_alter_configs_replaces_every_override_of_the_topic(client):
    create_topic(client, "t", configs={"retention.ms": "1000", "segment.bytes": "4096"})
    response = client.send(ApiKey.ALTER_CONFIGS, {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.bytes", "value": "99999"}]}]})
    assert [(r["error_code"], r["resource_type"], r["resource_name"]) for r in response["responses"]] == [(0, 2, "t")]
    assert topic_overrides(client, "t") == {"retention.bytes": "99999"}


def test_incremental_alter_configs_sets_deletes_appends_and_subtracts(client):
    create_topic(client, "t", configs={"retention.ms": "1000"})
    assert incremental_alter(client, [(2, "t", [("retention.ms", DELETE, None), ("segment.bytes", SET, "4096"),
                                                ("cleanup.policy", APPEND, "compact")])]) == [(0, None)]
    assert topic_overrides(client, "t") == {"segment.bytes": "4096", "cleanup.policy": "compact,delete"}
    assert incremental_alter(client, [(2, "t", [("cleanup.policy", SUBTRACT, "delete,compact")])]) == [(0, None)]
    assert topic_overrides(client, "t") == {"segment.bytes": "4096", "cleanup.policy": ""}


def test_validate_only_checks_everything_and_changes_nothing(client):
    create_topic(client, "t", configs={"retention.ms": "1000"})
    assert incremental_alter(client, [(2, "t", [("retention.ms", DELETE, None)]),
                                      (2, "nope", [("retention.ms", SET, "5")]),
                                      (2, "t2", [("segment.bytes", SET, "1")])], validate_only=True) == [
        (0, None),
        (UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
        (INVALID_CONFIG, "Invalid value 1 for configuration segment.bytes: Value must be at least 14")]
    assert topic_overrides(client, "t") == {"retention.ms": "1000"}


def test_each_resource_is_answered_on_its_own_with_kafkas_error(client):
    create_topic(client, "t")
    answers = incremental_alter(client, [
        (2, "t", [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)]),
        (2, "t", [("segment.bytes", SET, "4096")]),
    ])
    assert answers == [(INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    answers = incremental_alter(client, [
        (2, "t1", [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)]),
        (2, "t2", [("retention.ms", SET, None)]),
        (2, "t3", [("retention.ms", 9, "5")]),
        (2, "t4", [("retention.ms", APPEND, "5")]),
        (2, "t5", [("no.such.config", SET, "5")]),
        (2, "bad/name", [("retention.ms", SET, "5")]),
        (7, "x", [("retention.ms", SET, "5")]),
        (2, "t", [("retention.ms", SET, "77")]),
    ])
    codes = [code for code, _ in answers]
    assert codes == [INVALID_REQUEST, INVALID_REQUEST, INVALID_REQUEST, INVALID_CONFIG, INVALID_CONFIG,
                     INVALID_TOPIC_EXCEPTION, INVALID_REQUEST, 0]
    assert answers[0][1] == "Error due to duplicate config keys"
    assert answers[1][1] == "Null value not supported for : retention.ms"
    assert answers[3][1] == "Can't APPEND to key retention.ms because its type is not LIST."
    assert answers[4][1] == "Unknown topic config name: no.such.config"
    assert topic_overrides(client, "t") == {"retention.ms": "77"}


def test_broker_configs_cannot_change_while_the_broker_runs(client):
    answers = incremental_alter(client, [(4, "0", [("log.retention.ms", SET, "5")])])
    assert answers[0][0] == INVALID_REQUEST
    assert "Cannot update these configs dynamically: log.retention.ms" in answers[0][1]
    assert incremental_alter(client, [(4, "3", [("log.retention.ms", SET, "5")])]) == [
        (INVALID_REQUEST, "Unexpected broker id, expected 0, but received 3")]
    assert incremental_alter(client, [(4, "", [])]) == [(0, None)]


# --- DescribeLogDirs ---------------------------------------------------------------------


def test_describe_log_dirs_tells_each_dir_its_partitions_sizes_and_volume(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    server = start_broker(",".join(dirs))
    try:
        with ProtocolClient(server.bootstrap_servers) as c:
            create_topic(c, "t", partitions=2)
            create_topic(c, "other")
            produce(c, "t", 0, batch(b"x" * 100, b"y" * 100))
            produce(c, "t", 1, batch(b"z"))
            response = c.send(ApiKey.DESCRIBE_LOG_DIRS, {"topics": [{"topic": "t", "partitions": [0, 1, 9]}]})
            everything = c.send(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
    finally:
        server.shutdown()
    assert response["error_code"] == 0
    assert [r["log_dir"] for r in response["results"]] == dirs
    found = {}
    for result in response["results"]:
        assert result["error_code"] == 0 and 0 < result["usable_bytes"] <= result["total_bytes"]
        for topic in result["topics"]:
            for p in topic["partitions"]:
                assert (p["offset_lag"], p["is_future_key"]) == (0, False)
                found[(topic["name"], p["partition_index"])] = (result["log_dir"], p["partition_size"])
    assert sorted(found) == [("t", 0), ("t", 1)]  # partition 9 does not exist; "other" was not asked for
    for (topic, index), (log_dir, size) in found.items():
        segment = os.path.join(log_dir, f"{topic}-{index}", "00000000000000000000.log")
        assert size == os.path.getsize(segment) > 0
    assert {found[("t", 0)][0], found[("t", 1)][0]} == set(dirs)  # one partition in each dir
    named = {t["name"] for r in everything["results"] for t in r["topics"]}
    assert named == {"t", "other"}


# --- InitProducerId ---------------------------------------------------------------------


def test_producer_ids_increase_and_are_not_reused_after_a_restart(tmp_path):
    ids = []
    for _ in range(2):
        server = start_broker(tmp_path)
        try:
            with ProtocolClient(server.bootstrap_servers) as c:
                for _ in range(3):
                    response = c.send(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None,
                                                                "transaction_timeout_ms": 60000})
                    assert (response["error_code"], response["producer_epoch"]) == (0, 0)
                    ids.append(response["producer_id"])
        finally:
            server.shutdown()
    assert ids == sorted(set(ids))


def test_init_producer_id_with_a_transactional_id_bumps_the_epoch_of_one_producer_id(client):
    first = client.send(ApiKey.INIT_PRODUCER_ID, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
    second = client.send(ApiKey.INIT_PRODUCER_ID, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
    assert (first["error_code"], first["producer_epoch"]) == (NONE, 0)
    assert (second["error_code"], second["producer_id"], second["producer_epoch"]) == (NONE, first["producer_id"], 1)


def test_init_producer_id_with_an_empty_transactional_id_is_invalid(client):
    response = client.send(ApiKey.INIT_PRODUCER_ID, {"transactional_id": "", "transaction_timeout_ms": 60000})
    assert response["error_code"] == INVALID_REQUEST


def test_records_with_headers_and_compression_come_back_as_sent(client):
    create_topic(client, "t")
    sent = [SimpleRecord(b"v1", b"k1", 1000, (Header("h", b"x"), Header("h", None))), SimpleRecord(None, b"k2", 1001)]
    produce(client, "t", 0, build_batch(sent, compression=CompressionType.ZSTD))
    (stored,) = list(iter_batches(fetch(client, [("t", 0, 0, 1 << 20)])[("t", 0)]["records"]))
    assert stored.header.compression_type == CompressionType.ZSTD
    assert [(r.key, r.value, r.timestamp, r.headers) for r in stored.records()] == \
        [(s.key, s.value, s.timestamp, s.headers) for s in sent]


def test_encode_request_round_trip_sanity():
    # The raw frames above rely on the v1 request header layout.
    frame = encode_request(ApiKey.METADATA, 1, 5, "raw", {"topics": None})
    assert struct.unpack(">hhi", frame[4:12]) == (ApiKey.METADATA, 1, 5)
