"""Every declared request and response, at every version, survives encode then decode;
and the codec's body-dict rules (defaults, tagged fields, refusals) hold."""

from __future__ import annotations

import pytest

from broker_core.protocol import ApiKey, ProtocolError
from broker_core.protocol import codec
from broker_core.protocol.messages import APIS
from broker_core.protocol.types import ZERO_UUID
from protocol_kit import ALL_CASES, case_id, complete, message_of, sample_body


def _encode(message, version, body) -> bytes:
    parts: list = []
    codec.encode(message, version, body, parts)
    return b"".join(parts)


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_every_field_set_survives_a_round_trip(case):
    key, kind, version = case
    message = message_of(key, kind)
    body = sample_body(message, version)
    data = _encode(message, version, body)
    decoded, end = codec.decode(message, version, data)
    assert end == len(data)
    assert decoded == complete(message, version, body)


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_nullable_fields_set_to_none_survive_a_round_trip(case):
    key, kind, version = case
    message = message_of(key, kind)
    body = sample_body(message, version, nulls=True)
    data = _encode(message, version, body)
    assert codec.decode(message, version, data) == (complete(message, version, body), len(data))


@pytest.mark.parametrize("case", ALL_CASES, ids=case_id)
def test_an_empty_body_encodes_every_field_at_its_default(case):
    key, kind, version = case
    message = message_of(key, kind)
    decoded, _ = codec.decode(message, version, _encode(message, version, {}))
    assert decoded == complete(message, version, {})


def test_decoding_fills_fields_the_version_lacks_with_kafka_defaults():
    fetch = APIS[ApiKey.FETCH].request
    body = {"max_wait_ms": 500, "min_bytes": 1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 5, "partition_max_bytes": 1024}]}
    ]}
    decoded, _ = codec.decode(fetch, 4, _encode(fetch, 4, body))
    assert decoded["session_epoch"] == -1          # v7+
    assert decoded["rack_id"] == ""                # v11+
    assert decoded["cluster_id"] is None           # tagged, v12+
    assert decoded["forgotten_topics_data"] == []  # v7+
    assert decoded["replica_id"] == -1
    assert decoded["topics"][0]["partitions"][0]["current_leader_epoch"] == -1  # v9+


def test_decoded_default_lists_are_not_shared_between_bodies():
    fetch = APIS[ApiKey.FETCH].request
    first, _ = codec.decode(fetch, 4, _encode(fetch, 4, {}))
    first["forgotten_topics_data"].append("x")
    second, _ = codec.decode(fetch, 4, _encode(fetch, 4, {}))
    assert second["forgotten_topics_data"] == []


def test_tagged_fields_at_their_default_are_not_written():
    response = APIS[ApiKey.API_VERSIONS].response
    plain = _encode(response, 3, {"error_code": 0, "api_keys": []})
    assert plain.endswith(b"\x00")  # empty tagged-field section
    explicit = _encode(response, 3, {"error_code": 0, "api_keys": [], "finalized_features_epoch": -1,
                                     "supported_features": [], "zk_migration_ready": False})
    assert explicit == plain


def test_tagged_fields_are_written_in_tag_order():
    response = APIS[ApiKey.API_VERSIONS].response
    data = _encode(response, 3, {"zk_migration_ready": True, "finalized_features_epoch": 7})
    # error_code, compact empty array, throttle, then 2 tags: 1 (int64) and 3 (bool).
    assert data == (b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x02"
                    + b"\x01\x08" + (7).to_bytes(8, "big") + b"\x03\x01\x01")
    decoded, _ = codec.decode(response, 3, data)
    assert decoded["zk_migration_ready"] is True and decoded["finalized_features_epoch"] == 7


def test_unknown_tags_are_skipped():
    response = APIS[ApiKey.API_VERSIONS].response
    data = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x02" + b"\x09\x03abc" + b"\x03\x01\x01"
    decoded, end = codec.decode(response, 3, data)
    assert end == len(data)
    assert decoded["zk_migration_ready"] is True


def test_a_tagged_value_shorter_than_its_declared_size_is_refused():
    response = APIS[ApiKey.API_VERSIONS].response
    data = b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x01" + b"\x03\x02\x01\x00"
    with pytest.raises(ProtocolError, match="tagged field 3"):
        codec.decode(response, 3, data)


def test_an_unknown_body_key_is_refused_with_its_path():
    produce = APIS[ApiKey.PRODUCE].response
    body = {"responses": [{"name": "t", "partition_responses": [{"index": 0, "partition": 1}]}]}
    with pytest.raises(ProtocolError, match=r"unknown field\(s\) \['partition'\].*responses\[0\]\.partition_responses\[0\]"):
        _encode(produce, 9, body)


def test_none_for_a_field_that_is_not_nullable_in_the_version_is_refused():
    join = APIS[ApiKey.JOIN_GROUP].response
    assert _encode(join, 7, {"protocol_name": None})  # nullable from v7
    with pytest.raises(ProtocolError, match=r"JoinGroupResponse v6: .*not nullable.* at protocol_name"):
        _encode(join, 6, {"protocol_name": None})


def test_a_value_of_the_wrong_type_is_refused_with_its_path():
    produce = APIS[ApiKey.PRODUCE].response
    with pytest.raises(ProtocolError, match=r"as int64.* at responses\[0\]\.partition_responses\[0\]\.base_offset"):
        _encode(produce, 9, {"responses": [{"name": "t", "partition_responses": [{"base_offset": "12"}]}]})
    with pytest.raises(ProtocolError, match="int16"):
        _encode(produce, 9, {"responses": [{"name": "t", "partition_responses": [{"error_code": 1 << 20}]}]})


def test_uuid_fields_are_16_bytes_and_zero_means_null():
    metadata = APIS[ApiKey.METADATA].request
    decoded, _ = codec.decode(metadata, 10, _encode(metadata, 10, {"topics": [{"name": None}]}))
    assert decoded["topics"][0]["topic_id"] == ZERO_UUID
    with pytest.raises(ProtocolError, match="16 bytes"):
        _encode(metadata, 10, {"topics": [{"topic_id": b"short"}]})


def test_records_come_back_as_the_same_bytes_from_a_memoryview_frame():
    produce = APIS[ApiKey.PRODUCE].request
    records = bytes(range(256)) * 40
    body = {"acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": records}]}]}
    data = _encode(produce, 9, body)
    decoded, _ = codec.decode(produce, 9, memoryview(bytearray(data)))
    got = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert type(got) is bytes and got == records


def test_records_may_be_handed_in_as_a_memoryview():
    fetch = APIS[ApiKey.FETCH].response
    records = bytearray(b"\x01" * 5000)
    body = {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": memoryview(records)}]}]}
    decoded, _ = codec.decode(fetch, 12, _encode(fetch, 12, body))
    assert decoded["responses"][0]["partitions"][0]["records"] == bytes(records)


def test_non_ascii_strings_count_bytes_not_characters():
    heartbeat = APIS[ApiKey.HEARTBEAT].request
    for version in (3, 4):
        data = _encode(heartbeat, version, {"group_id": "grüppe-é"})
        decoded, end = codec.decode(heartbeat, version, data)
        assert decoded["group_id"] == "grüppe-é" and end == len(data)


def test_a_string_longer_than_an_int16_length_is_refused_in_classic_versions():
    heartbeat = APIS[ApiKey.HEARTBEAT].request
    with pytest.raises(ProtocolError, match="int16 length"):
        _encode(heartbeat, 3, {"group_id": "g" * 40000})
    # Compact strings have no such bound.
    assert codec.decode(heartbeat, 4, _encode(heartbeat, 4, {"group_id": "g" * 40000}))[0]["group_id"] == "g" * 40000
