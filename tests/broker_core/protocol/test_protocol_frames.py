"""Whole frames: header versions, unsupported APIs and versions, the ApiVersions
fallback, and the client-side pair encode_request / parse_response."""

from __future__ import annotations

import struct

import pytest

from broker_core.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ProtocolError,
    Request,
    RequestHeader,
    SeglogApiKey,
    UnsupportedVersionError,
    api_versions_fallback_response,
    encode_request,
    encode_response,
    encode_response_buffers,
    parse_request,
    parse_response,
)


def _header_bytes(api_key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    client = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">hhi", api_key, version, correlation_id) + client


def test_a_classic_request_has_a_v1_header():
    frame = _header_bytes(ApiKey.HEARTBEAT, 3, 5, b"app") + b"\x00\x01g\x00\x00\x00\x07\x00\x02m1\xff\xff"
    request = parse_request(frame)
    assert request == Request(RequestHeader(ApiKey.HEARTBEAT, 3, 5, "app", 1),
                              {"group_id": "g", "generation_id": 7, "member_id": "m1", "group_instance_id": None})


def test_a_flexible_request_has_a_v2_header_whose_client_id_is_not_compact():
    # Header tagged fields carry an unknown tag, which is skipped.
    header = _header_bytes(ApiKey.HEARTBEAT, 4, 5, b"app") + b"\x01\x05\x02zz"
    body = b"\x02g" + b"\x00\x00\x00\x07" + b"\x03m1" + b"\x00" + b"\x00"
    request = parse_request(header + body)
    assert request.header == RequestHeader(ApiKey.HEARTBEAT, 4, 5, "app", 2)
    assert request.body["group_id"] == "g" and request.body["member_id"] == "m1"
    assert request.body["group_instance_id"] is None


def test_a_null_client_id_parses_as_none():
    frame = encode_request(ApiKey.API_VERSIONS, 3, 1, None, {})
    assert parse_request(frame[4:]).header.client_id is None


def test_api_key_is_an_api_key_member():
    request = parse_request(encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": None})[4:])
    assert request.header.api_key is ApiKey.METADATA


def test_a_seglog_admin_request_parses_with_a_v2_header_and_a_seglog_api_key():
    # Header v2: key, version, correlation id, classic client id, empty tagged fields.
    header = struct.pack(">hhi", 32000, 0, 8) + b"\x00\x03job" + b"\x00"
    # Compact strings and arrays (length + 1), then each struct's and the body's tagged fields.
    body = (b"\x04abc" + b"\x00" + b"\x00\x00\x75\x30"
            + b"\x02" + b"\x02t" + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x02" + b"\x00" + b"\x00")
    request = parse_request(header + body)
    assert request.header == RequestHeader(SeglogApiKey.COMPACTION_LEASE, 0, 8, "job", 2)
    assert request.header.api_key is SeglogApiKey.COMPACTION_LEASE
    assert request.body == {"lease_id": "abc", "operation": 0, "lease_ms": 30000,
                            "topics": [{"name": "t", "partitions": [0, 2]}]}
    assert encode_request(SeglogApiKey.COMPACTION_LEASE, 0, 8, "job", request.body) == (
        struct.pack(">i", len(header + body)) + header + body)


def test_a_seglog_admin_response_has_a_v1_header():
    header = RequestHeader(SeglogApiKey.REPLACE_SEGMENTS, 0, 12, "job", 2)
    body = {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 1, "error_code": 42, "error_message": "no"}]}]}
    frame = encode_response(header, body)
    assert frame[4:9] == struct.pack(">i", 12) + b"\x00"
    assert parse_response(SeglogApiKey.REPLACE_SEGMENTS, 0, frame[4:]) == (12, body)


def test_a_seglog_admin_api_outside_v0_raises_unsupported_version_naming_it():
    with pytest.raises(UnsupportedVersionError) as caught:
        parse_request(struct.pack(">hhi", 32001, 1, 9) + b"\x00\x01c\x00" + b"\x00" * 8)
    assert caught.value.header.api_key is SeglogApiKey.REPLACE_SEGMENTS
    assert "REPLACE_SEGMENTS v1 is not supported" in str(caught.value)


def test_encode_request_puts_the_size_prefix_first():
    frame = encode_request(ApiKey.API_VERSIONS, 0, 7, "c", {})
    assert frame == struct.pack(">i", 11) + _header_bytes(18, 0, 7, b"c")


def test_flexible_responses_have_a_v1_header_and_classic_ones_v0():
    header = RequestHeader(ApiKey.HEARTBEAT, 4, 99, "c", 2)
    assert encode_response(header, {"error_code": 0}) == struct.pack(">ii", 12, 99) + b"\x00" + b"\x00" * 4 + b"\x00\x00" + b"\x00"
    classic = RequestHeader(ApiKey.HEARTBEAT, 3, 99, "c", 1)
    assert encode_response(classic, {"error_code": 27}) == struct.pack(">ii", 10, 99) + b"\x00" * 4 + b"\x00\x1b"


def test_a_fetch_response_in_buffers_keeps_its_records_uncopied_and_joins_to_the_frame():
    records = [bytes([p]) * (256 * 1024) for p in range(3)]
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": p, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1, "records": r}
        for p, r in enumerate(records)]}]}
    header = RequestHeader(ApiKey.FETCH, 11, 5, "c", 1)
    buffers = encode_response_buffers(header, body)
    assert [b for b in buffers if len(b) >= 256 * 1024] == records
    assert all(any(b is r for b in buffers) for r in records)
    assert len(buffers) == 2 * len(records)  # each partition: its small fields joined, then its records
    assert b"".join(buffers) == encode_response(header, body)
    assert parse_response(ApiKey.FETCH, 11, encode_response(header, body)[4:])[1]["responses"][0]["partitions"][2][
        "records"] == records[2]


def test_api_versions_responses_always_have_a_v0_header():
    header = RequestHeader(ApiKey.API_VERSIONS, 3, 99, "c", 2)
    frame = encode_response(header, {"error_code": 0, "api_keys": []})
    # size, correlation id, then the body straight away: error code, empty compact array, throttle, no tags.
    assert frame == struct.pack(">ii", 12, 99) + b"\x00\x00" + b"\x01" + b"\x00" * 4 + b"\x00"
    assert parse_response(ApiKey.API_VERSIONS, 3, frame[4:]) == (99, {
        "error_code": 0, "api_keys": [], "throttle_time_ms": 0, "supported_features": [],
        "finalized_features_epoch": -1, "finalized_features": [], "zk_migration_ready": False})


def test_an_undeclared_api_raises_unsupported_version_with_the_header():
    frame = _header_bytes(ApiKey.RENEW_DELEGATION_TOKEN, 1, 31, b"sasl") + b"\x00\x05token"
    with pytest.raises(UnsupportedVersionError) as caught:
        parse_request(frame)
    assert caught.value.header == RequestHeader(ApiKey.RENEW_DELEGATION_TOKEN, 1, 31, "sasl", 1)
    assert "RENEW_DELEGATION_TOKEN" in str(caught.value)


def test_an_api_key_kafka_never_assigned_raises_unsupported_version_with_the_raw_key():
    with pytest.raises(UnsupportedVersionError) as caught:
        parse_request(_header_bytes(999, 0, 32, b"x"))
    assert caught.value.header.api_key == 999 and caught.value.header.correlation_id == 32
    assert isinstance(caught.value, ProtocolError)


@pytest.mark.parametrize("key,version", [(ApiKey.PRODUCE, 2), (ApiKey.PRODUCE, 12), (ApiKey.FETCH, 3),
                                         (ApiKey.FETCH, 13), (ApiKey.METADATA, 13), (ApiKey.LIST_OFFSETS, 0)])
def test_a_version_outside_the_supported_range_raises_unsupported_version(key, version):
    with pytest.raises(UnsupportedVersionError) as caught:
        parse_request(_header_bytes(key, version, 33, b"c") + b"\x00" * 40)
    header = caught.value.header
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (key, version, 33, "c")


def test_a_too_new_api_versions_request_keeps_its_flexible_header_version():
    with pytest.raises(UnsupportedVersionError) as caught:
        parse_request(_header_bytes(ApiKey.API_VERSIONS, 7, 34, b"new-client") + b"\x00" + b"anything")
    assert caught.value.header == RequestHeader(ApiKey.API_VERSIONS, 7, 34, "new-client", 2)


def test_controlled_shutdown_v0_has_a_v0_header_without_client_id():
    with pytest.raises(UnsupportedVersionError) as caught:
        parse_request(struct.pack(">hhii", ApiKey.CONTROLLED_SHUTDOWN, 0, 35, 1))
    assert caught.value.header == RequestHeader(ApiKey.CONTROLLED_SHUTDOWN, 0, 35, None, 0)


def test_api_versions_fallback_is_a_v0_response_with_unsupported_version():
    frame = api_versions_fallback_response(RequestHeader(ApiKey.API_VERSIONS, 7, 34, "new-client", 2))
    low, high = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    assert frame == (struct.pack(">i", 16) + struct.pack(">i", 34) + struct.pack(">h", 35)
                     + struct.pack(">i", 1) + struct.pack(">hhh", 18, low, high))


def test_api_versions_fallback_can_list_more_apis():
    frame = api_versions_fallback_response(RequestHeader(ApiKey.API_VERSIONS, 7, 34, "c", 2),
                                           api_keys=[ApiKey.PRODUCE, ApiKey.FETCH])
    _, body = parse_response(ApiKey.API_VERSIONS, 0, frame[4:])
    assert [entry["api_key"] for entry in body["api_keys"]] == [0, 1, 18]


def test_a_client_reads_the_fallback_as_v0_whatever_version_it_asked_with():
    frame = api_versions_fallback_response(RequestHeader(ApiKey.API_VERSIONS, 9, 34, "c", 2))
    correlation_id, body = parse_response(ApiKey.API_VERSIONS, 4, frame[4:])
    assert correlation_id == 34 and body["error_code"] == 35
    assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 4}]


def test_bytes_after_a_request_body_are_ignored_as_kafka_does():
    frame = encode_request(ApiKey.HEARTBEAT, 4, 1, "c", {"group_id": "g"})[4:]
    assert parse_request(frame + b"\x00\x00\x00").body == parse_request(frame).body


def test_a_frame_shorter_than_a_header_is_a_protocol_error_not_unsupported():
    for frame in (b"", b"\x00\x12", b"\x00\x12\x00\x03\x00\x00", b"\x03\xe7\x00\x00\x00\x00\x00\x01\x00\x05ab"):
        with pytest.raises(ProtocolError) as caught:
            parse_request(frame)
        assert not isinstance(caught.value, UnsupportedVersionError)


def test_encoding_a_response_for_an_unsupported_version_is_refused():
    with pytest.raises(ProtocolError, match="PRODUCE v12"):
        encode_response(RequestHeader(ApiKey.PRODUCE, 12, 1, "c", 2), {})


def test_parse_request_accepts_bytearray_and_memoryview_frames():
    frame = encode_request(ApiKey.METADATA, 9, 3, "c", {"topics": [{"name": "t"}]})[4:]
    expected = parse_request(frame)
    assert parse_request(bytearray(frame)) == expected
    assert parse_request(memoryview(frame)) == expected


@pytest.mark.parametrize("key", list(SUPPORTED_VERSIONS))
def test_request_and_response_frames_round_trip_at_every_supported_version(key):
    low, high = SUPPORTED_VERSIONS[key]
    for version in range(low, high + 1):
        frame = encode_request(key, version, version + 1000, "client-Ω", {})
        request = parse_request(frame[4:])
        assert (request.header.api_key, request.header.api_version, request.header.correlation_id) == (key, version, version + 1000)
        assert request.header.client_id == "client-Ω"
        response = encode_response(request.header, {})
        assert struct.unpack(">i", response[:4])[0] == len(response) - 4
        correlation_id, _ = parse_response(key, version, response[4:])
        assert correlation_id == version + 1000
