"""Cross-checks against kafka-python's own protocol classes, an independent codec.

Bodies: every declared message at every version is encoded by both codecs to the
same bytes, and each decodes the other's. Frames: requests built and framed by
kafka-python (header included) parse with ``parse_request``, and responses from
``encode_response`` parse with kafka-python's response classes, at classic and
flexible versions.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (AlterConfigsRequest, CreateTopicsRequest, DescribeConfigsResponse,
                                  DescribeLogDirsRequest, DescribeLogDirsResponse, IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker_core.protocol import (
    ApiKey,
    RequestHeader,
    api_versions_fallback_response,
    codec,
    encode_request,
    encode_response,
    parse_request,
    parse_response,
)
from protocol_kit import KAFKA_CASES, case_id, complete, from_kp, kp_class, message_of, project, sample_body, to_kp


def _ours(message, version, body) -> bytes:
    parts: list = []
    codec.encode(message, version, body, parts)
    return b"".join(parts)


def _case_body(key, kind, version, nulls):
    message = message_of(key, kind)
    body = sample_body(message, version, nulls=nulls)
    if key == ApiKey.API_VERSIONS and kind == "response":
        # kafka-python reads any ApiVersions response with an error as v0 (as Kafka's client does).
        body["error_code"] = 0
    return message, body


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("case", KAFKA_CASES, ids=case_id)
def test_our_bytes_equal_kafka_pythons(case, nulls):
    key, kind, version = case
    message, body = _case_body(key, kind, version, nulls)
    assert _ours(message, version, body) == bytes(to_kp(message, version, body).encode(version=version))


@pytest.mark.parametrize("case", KAFKA_CASES, ids=case_id)
def test_kafka_python_decodes_what_we_encode(case):
    key, kind, version = case
    message, body = _case_body(key, kind, version, False)
    decoded = kp_class(key, kind)[version].decode(_ours(message, version, body))
    assert from_kp(message, version, decoded) == project(message, version, complete(message, version, body))


@pytest.mark.parametrize("case", KAFKA_CASES, ids=case_id)
def test_we_decode_what_kafka_python_encodes(case):
    key, kind, version = case
    message, body = _case_body(key, kind, version, True)
    data = bytes(to_kp(message, version, body).encode(version=version))
    assert codec.decode(message, version, data) == (complete(message, version, body), len(data))


# --- whole request frames built by kafka-python ------------------------------------


def _record_batch(n: int = 3) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * 50, headers=[])
    return bytes(builder.build())


def _kp_request_frame(request, correlation_id=41, client_id="kp-client") -> bytes:
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


def _parse_kp(request_frame: bytes):
    assert int.from_bytes(request_frame[:4], "big") == len(request_frame) - 4
    return parse_request(request_frame[4:])


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_kafka_python_api_versions_request_parses(version):
    fields = {"client_software_name": "kafka-python", "client_software_version": "3.0.12"} if version >= 3 else {}
    frame = _kp_request_frame(ApiVersionsRequest[version](**fields))
    request = _parse_kp(frame)
    assert request.header == RequestHeader(ApiKey.API_VERSIONS, version, 41, "kp-client", 2 if version >= 3 else 1)
    if version >= 3:
        assert request.body["client_software_name"] == "kafka-python"
    assert encode_request(ApiKey.API_VERSIONS, version, 41, "kp-client", request.body) == frame


@pytest.mark.parametrize("version", [0, 1, 4, 8, 9, 10, 12])
def test_kafka_python_metadata_request_parses(version):
    topic = MetadataRequest.MetadataRequestTopic
    request = MetadataRequest[version](topics=[topic(name="orders"), topic(name="payments")])
    if version >= 4:
        request.allow_auto_topic_creation = False
    frame = _kp_request_frame(request)
    parsed = _parse_kp(frame)
    assert parsed.header.header_version == (2 if version >= 9 else 1)
    assert [t["name"] for t in parsed.body["topics"]] == ["orders", "payments"]
    assert parsed.body["allow_auto_topic_creation"] is (version < 4)
    assert encode_request(ApiKey.METADATA, version, 41, "kp-client", parsed.body) == frame


def test_kafka_python_metadata_request_for_all_topics_is_a_null_array():
    parsed = _parse_kp(_kp_request_frame(MetadataRequest[12](topics=None)))
    assert parsed.body["topics"] is None


@pytest.mark.parametrize("version", [3, 7, 8, 9, 11])
def test_kafka_python_produce_request_parses_with_its_record_batch(version):
    batch = _record_batch()
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=batch)
    request = ProduceRequest[version](transactional_id=None, acks=-1, timeout_ms=30000,
                                      topic_data=[ProduceRequest.TopicProduceData(name="events", partition_data=[partition])])
    frame = _kp_request_frame(request, correlation_id=9)
    parsed = _parse_kp(frame)
    assert parsed.header.correlation_id == 9
    assert parsed.header.header_version == (2 if version >= 9 else 1)
    assert parsed.body["acks"] == -1 and parsed.body["transactional_id"] is None
    partition_data = parsed.body["topic_data"][0]["partition_data"][0]
    assert partition_data["index"] == 2 and partition_data["records"] == batch
    assert encode_request(ApiKey.PRODUCE, version, 9, "kp-client", parsed.body) == frame


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_kafka_python_fetch_request_parses(version):
    partition = FetchRequest.FetchTopic.FetchPartition(partition=1, fetch_offset=1234, partition_max_bytes=1 << 20,
                                                       current_leader_epoch=5, log_start_offset=-1)
    request = FetchRequest[version](replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20,
                                    isolation_level=1, session_id=0, session_epoch=-1,
                                    topics=[FetchRequest.FetchTopic(topic="events", partitions=[partition])],
                                    forgotten_topics_data=[], rack_id="rack-a")
    frame = _kp_request_frame(request)
    parsed = _parse_kp(frame)
    body = parsed.body
    assert body["max_wait_ms"] == 500 and body["isolation_level"] == 1
    assert body["topics"][0]["partitions"][0]["fetch_offset"] == 1234
    assert body["topics"][0]["partitions"][0]["current_leader_epoch"] == (5 if version >= 9 else -1)
    assert body["rack_id"] == ("rack-a" if version >= 11 else "")
    assert encode_request(ApiKey.FETCH, version, 41, "kp-client", body) == frame


@pytest.mark.parametrize("version", [5, 6, 9])
def test_kafka_python_join_group_request_parses(version):
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01subscription")
    request = JoinGroupRequest[version](group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=30000,
                                        member_id="", group_instance_id=None, protocol_type="consumer",
                                        protocols=[protocol], reason="joining")
    parsed = _parse_kp(_kp_request_frame(request))
    assert parsed.body["protocols"] == [{"name": "range", "metadata": b"\x00\x01subscription"}]
    assert parsed.body["reason"] == ("joining" if version >= 8 else None)


@pytest.mark.parametrize("version", [2, 7, 8, 9])
def test_kafka_python_offset_commit_request_parses(version):
    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=99, committed_leader_epoch=3, committed_metadata=None)
    request = OffsetCommitRequest[version](group_id="g", generation_id_or_member_epoch=4, member_id="m-1",
                                           group_instance_id=None, retention_time_ms=-1,
                                           topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[partition])])
    parsed = _parse_kp(_kp_request_frame(request))
    committed = parsed.body["topics"][0]["partitions"][0]
    assert committed["committed_offset"] == 99 and committed["committed_metadata"] is None


@pytest.mark.parametrize("version", [2, 5, 7])
def test_kafka_python_create_topics_request_parses(version):
    config = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name="cleanup.policy", value="compact")
    topic = CreateTopicsRequest.CreatableTopic(name="t", num_partitions=3, replication_factor=1,
                                               assignments=[], configs=[config])
    frame = _kp_request_frame(CreateTopicsRequest[version](topics=[topic], timeout_ms=5000, validate_only=True))
    parsed = _parse_kp(frame)
    assert parsed.body["timeout_ms"] == 5000 and parsed.body["validate_only"] is True
    assert parsed.body["topics"][0]["configs"] == [{"name": "cleanup.policy", "value": "compact"}]
    assert encode_request(ApiKey.CREATE_TOPICS, version, 41, "kp-client", parsed.body) == frame


@pytest.mark.parametrize("version", [0, 1])
def test_kafka_python_incremental_alter_configs_request_parses_as_its_admin_client_builds_it(version):
    request = IncrementalAlterConfigsRequest[version](
        resources=[(2, "t", [("retention.ms", 0, "1000"), ("cleanup.policy", 1, None), ("cleanup.policy", 2, "x")])],
        validate_only=True)
    frame = _kp_request_frame(request)
    parsed = _parse_kp(frame)
    assert parsed.body == {"validate_only": True, "resources": [{"resource_type": 2, "resource_name": "t", "configs": [
        {"name": "retention.ms", "config_operation": 0, "value": "1000"},
        {"name": "cleanup.policy", "config_operation": 1, "value": None},
        {"name": "cleanup.policy", "config_operation": 2, "value": "x"}]}]}
    assert encode_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, 41, "kp-client", parsed.body) == frame


@pytest.mark.parametrize("version", [0, 1, 2])
def test_kafka_python_alter_configs_request_parses(version):
    frame = _kp_request_frame(AlterConfigsRequest[version](resources=[(2, "t", [("retention.ms", "1000")])],
                                                           validate_only=False))
    parsed = _parse_kp(frame)
    assert parsed.body["resources"] == [{"resource_type": 2, "resource_name": "t",
                                         "configs": [{"name": "retention.ms", "value": "1000"}]}]
    assert encode_request(ApiKey.ALTER_CONFIGS, version, 41, "kp-client", parsed.body) == frame


@pytest.mark.parametrize("version", [1, 2, 4])
def test_kafka_python_describe_log_dirs_request_for_every_partition_is_a_null_array(version):
    assert _parse_kp(_kp_request_frame(DescribeLogDirsRequest[version](topics=None))).body == {"topics": None}
    frame = _kp_request_frame(DescribeLogDirsRequest[version](topics=[("t", [0, 2])]))
    assert _parse_kp(frame).body == {"topics": [{"topic": "t", "partitions": [0, 2]}]}


# --- whole response frames read by kafka-python ------------------------------------


def _header(key, version, correlation_id=77) -> RequestHeader:
    return RequestHeader(key, version, correlation_id, "c", 1)


def _kp_decode_response(cls, version, frame: bytes):
    decoded = cls[version].decode(frame, header=True, framed=True)
    assert decoded.header.correlation_id == 77
    return decoded


def _kp_response_frame(response, correlation_id=77) -> bytes:
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_our_api_versions_response_reads_in_kafka_python_with_a_v0_header(version):
    body = {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 11},
                                          {"api_key": 18, "min_version": 0, "max_version": 4}],
            "throttle_time_ms": 0, "finalized_features_epoch": 5}
    frame = encode_response(_header(ApiKey.API_VERSIONS, version), body)
    decoded = _kp_decode_response(ApiVersionsResponse, version, frame)
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(0, 3, 11), (18, 0, 4)]
    if version >= 3:
        assert decoded.finalized_features_epoch == 5
    # The response header is v0 even for flexible versions: no tagged byte after the correlation id.
    assert frame[4:8] == (77).to_bytes(4, "big") and frame[8:10] == b"\x00\x00"


def test_api_versions_fallback_reads_in_kafka_python_as_an_unsupported_version_error():
    frame = api_versions_fallback_response(RequestHeader(ApiKey.API_VERSIONS, 9, 77, "c", 2))
    decoded = _kp_decode_response(ApiVersionsResponse, 4, frame)
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 4)]


@pytest.mark.parametrize("version", [0, 1, 7, 9, 12])
def test_our_metadata_response_reads_in_kafka_python(version):
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "seglog-cluster",
        "controller_id": 1,
        "topics": [{"error_code": 0, "name": "events", "is_internal": False, "partitions": [
            {"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
             "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []} for p in range(3)]}],
    }
    frame = encode_response(_header(ApiKey.METADATA, version), body)
    decoded = _kp_decode_response(MetadataResponse, version, frame)
    assert [(b.node_id, b.host, b.port) for b in decoded.brokers] == [(1, "127.0.0.1", 9092)]
    assert [p.partition_index for p in decoded.topics[0].partitions] == [0, 1, 2]
    if version >= 2:
        assert decoded.cluster_id == "seglog-cluster"
    # And byte for byte: kafka-python frames the same body (header included) identically.
    assert _kp_response_frame(to_kp(message_of(ApiKey.METADATA, "response"), version, body)) == frame


@pytest.mark.parametrize("version", [3, 8, 9, 10, 11])
def test_our_produce_response_reads_in_kafka_python(version):
    partition = {"index": 2, "error_code": 6, "base_offset": 120, "log_append_time_ms": -1, "log_start_offset": 0,
                 "error_message": "not leader", "current_leader": {"leader_id": 1, "leader_epoch": 4}}
    body = {"responses": [{"name": "events", "partition_responses": [partition]}], "throttle_time_ms": 0,
            "node_endpoints": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}]}
    frame = encode_response(_header(ApiKey.PRODUCE, version), body)
    decoded = _kp_decode_response(ProduceResponse, version, frame)
    got = decoded.responses[0].partition_responses[0]
    assert (got.index, got.error_code, got.base_offset) == (2, 6, 120)
    if version >= 8:
        assert got.error_message == "not leader"
    if version >= 10:
        assert (got.current_leader.leader_id, got.current_leader.leader_epoch) == (1, 4)
        assert decoded.node_endpoints[0].host == "127.0.0.1"


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_our_fetch_response_with_records_reads_in_kafka_python(version):
    batch = _record_batch(5)
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "events", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5, "log_start_offset": 0,
         "aborted_transactions": None, "preferred_read_replica": -1, "records": batch,
         "diverging_epoch": {"epoch": 2, "end_offset": 3}}]}]}
    frame = encode_response(_header(ApiKey.FETCH, version), body)
    decoded = _kp_decode_response(FetchResponse, version, frame)
    got = decoded.responses[0].partitions[0]
    assert bytes(got.records) == batch and got.high_watermark == 5
    if version >= 12:
        assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == (2, 3)
    assert parse_response(ApiKey.FETCH, version, frame[4:])[1]["responses"][0]["partitions"][0]["records"] == batch


@pytest.mark.parametrize("version", [0, 1, 3, 4, 6])
def test_our_find_coordinator_response_reads_in_kafka_python(version):
    body = {"error_code": 0, "error_message": None, "node_id": 1, "host": "localhost", "port": 9092,
            "coordinators": [{"key": "g", "node_id": 1, "host": "localhost", "port": 9092, "error_code": 0,
                              "error_message": None}]}
    decoded = _kp_decode_response(FindCoordinatorResponse, version, encode_response(_header(ApiKey.FIND_COORDINATOR, version), body))
    if version >= 4:
        assert decoded.coordinators[0].key == "g" and decoded.coordinators[0].port == 9092
    else:
        assert (decoded.node_id, decoded.host, decoded.port) == (1, "localhost", 9092)


@pytest.mark.parametrize("version", [1, 5, 6, 8, 9])
def test_our_offset_fetch_response_reads_in_kafka_python(version):
    partition = {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": 0}
    body = {"topics": [{"name": "t", "partitions": [partition]}],
            "groups": [{"group_id": "g", "topics": [{"name": "t", "partitions": [partition]}], "error_code": 0}]}
    decoded = _kp_decode_response(OffsetFetchResponse, version, encode_response(_header(ApiKey.OFFSET_FETCH, version), body))
    topics = decoded.groups[0].topics if version >= 8 else decoded.topics
    assert topics[0].partitions[0].committed_offset == 42


@pytest.mark.parametrize("version", [1, 3, 4])
def test_our_describe_configs_response_reads_in_kafka_python(version):
    config = {"name": "retention.ms", "value": "604800000", "read_only": False, "config_source": 5,
              "is_sensitive": False, "synonyms": [], "config_type": 5, "documentation": None}
    body = {"results": [{"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t",
                         "configs": [config]}]}
    decoded = _kp_decode_response(DescribeConfigsResponse, version, encode_response(_header(ApiKey.DESCRIBE_CONFIGS, version), body))
    got = decoded.results[0].configs[0]
    assert (got.name, got.value, got.config_source) == ("retention.ms", "604800000", 5)


@pytest.mark.parametrize("version", [0, 1])
def test_our_incremental_alter_configs_response_reads_in_kafka_python(version):
    body = {"responses": [{"error_code": 40, "error_message": "Invalid value -5 for configuration segment.bytes",
                           "resource_type": 2, "resource_name": "t"}]}
    frame = encode_response(_header(ApiKey.INCREMENTAL_ALTER_CONFIGS, version), body)
    (got,) = _kp_decode_response(IncrementalAlterConfigsResponse, version, frame).responses
    assert (got.error_code, got.error_message, got.resource_name) == (40, body["responses"][0]["error_message"], "t")


@pytest.mark.parametrize("version", [1, 3, 4])
def test_our_describe_log_dirs_response_reads_in_kafka_python(version):
    body = {"error_code": 0, "results": [{"error_code": 0, "log_dir": "/data/logs", "total_bytes": 10 << 30,
                                          "usable_bytes": 3 << 30, "topics": [{"name": "t", "partitions": [
                                              {"partition_index": 1, "partition_size": 4242, "offset_lag": 0,
                                               "is_future_key": False}]}]}]}
    frame = encode_response(_header(ApiKey.DESCRIBE_LOG_DIRS, version), body)
    (result,) = _kp_decode_response(DescribeLogDirsResponse, version, frame).results
    (partition,) = result.topics[0].partitions
    assert (result.log_dir, partition.partition_index, partition.partition_size) == ("/data/logs", 1, 4242)
    if version >= 4:
        assert (result.total_bytes, result.usable_bytes) == (10 << 30, 3 << 30)
