"""The declarations carry Kafka's facts: checked field by field, version by version,
against Kafka's message JSON (the copy kafka-python ships), plus the version table
and the declaration language's own checks."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from broker_core.protocol import SUPPORTED_VERSIONS, ApiKey, SeglogApiKey, supported_apis
from broker_core.protocol.headers import REQUEST_HEADER, RESPONSE_HEADER
from broker_core.protocol.messages import APIS, KAFKA_APIS, SEGLOG_APIS
from broker_core.protocol.schema import F, Field, Message, SchemaError, Versions, api, snake_case
from broker_core.protocol.types import ZERO_UUID

EXPECTED_VERSIONS = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 9),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    SeglogApiKey.COMPACTION_LEASE: (0, 0),
    SeglogApiKey.REPLACE_SEGMENTS: (0, 0),
}


def _kafka_json(name: str) -> dict:
    text = (resources.files("kafka.protocol.schemas.resources") / f"{name}.json").read_text()
    data = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    _resolve(data["fields"], common)
    return data


def _resolve(fields: list, common: dict) -> None:
    for f in fields:
        struct = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if "fields" not in f and struct in common:
            f["fields"] = common[struct]
        if "fields" in f:
            _resolve(f["fields"], common)


def _json_default(f: dict):
    kind = f["type"]
    raw = f.get("default")
    if kind.startswith("[]"):
        return None if raw == "null" else ()
    if "fields" in f:
        return None
    if raw == "null":
        return None
    if kind == "bool":
        return raw in ("true", True)
    if kind.startswith("int") or kind.startswith("uint"):
        if raw in (None, ""):
            return 0
        return int(raw, 0) if isinstance(raw, str) else int(raw)
    if kind == "float64":
        return float(raw) if raw else 0.0
    if kind == "string":
        return raw if raw is not None else ""
    if kind == "bytes":
        return b""
    if kind == "records":
        return None
    if kind == "uuid":
        return ZERO_UUID
    raise AssertionError(kind)


def _facts_in_version(json_fields: list, version: int) -> list:
    """What decides the bytes of a struct at one version, from Kafka's JSON."""
    facts = []
    for f in json_fields:
        if version not in Versions.parse(f["versions"]):
            continue
        tagged = version in Versions.parse(f.get("taggedVersions"))
        facts.append((
            f["name"],
            f["type"],
            version in Versions.parse(f.get("nullableVersions")),
            f.get("tag") if tagged else None,
            _json_default(f),
            str(Versions.parse(f["flexibleVersions"])) if "flexibleVersions" in f else None,
            _facts_in_version(f.get("fields", []), version),
        ))
    return facts


def _our_facts_in_version(fields: tuple[Field, ...], version: int) -> list:
    facts = []
    for f in fields:
        if version not in f.versions:
            continue
        facts.append((
            f.name,
            f.type,
            version in f.nullable,
            f.tag if version in f.tagged else None,
            f.default,
            str(f.flexible) if f.flexible is not None else None,
            _our_facts_in_version(f.fields, version),
        ))
    return facts


MESSAGES = [(api.key, message) for api in KAFKA_APIS.values() for message in (api.request, api.response)]


@pytest.mark.parametrize("key,message", MESSAGES, ids=[m.name for _, m in MESSAGES])
def test_declaration_matches_kafka_message_json_at_every_version(key, message: Message):
    data = _kafka_json(message.name)
    assert data["apiKey"] == key
    valid = Versions.parse(data["validVersions"])
    assert valid.low <= message.valid.low and message.valid.high <= valid.high
    assert message.flexible == Versions.parse(data["flexibleVersions"])
    for version in range(message.valid.low, message.valid.high + 1):
        assert _our_facts_in_version(message.fields, version) == _facts_in_version(data["fields"], version), (
            f"{message.name} v{version}"
        )


@pytest.mark.parametrize("message", [REQUEST_HEADER, RESPONSE_HEADER], ids=lambda m: m.name)
def test_header_declarations_match_kafka_message_json(message: Message):
    data = _kafka_json(message.name)
    assert message.flexible == Versions.parse(data["flexibleVersions"])
    for version in range(max(message.valid.low, Versions.parse(data["validVersions"]).low), message.valid.high + 1):
        assert _our_facts_in_version(message.fields, version) == _facts_in_version(data["fields"], version)


def test_request_header_v0_has_no_client_id():
    assert [f.name for f in REQUEST_HEADER.fields if 0 in f.versions] == [
        "RequestApiKey", "RequestApiVersion", "CorrelationId"
    ]


def test_supported_versions_are_the_declared_table():
    assert SUPPORTED_VERSIONS == EXPECTED_VERSIONS


def test_supported_versions_stop_before_topic_ids_replace_names():
    # Produce v13, Fetch v13 and OffsetCommit/OffsetFetch v10 name topics by id only.
    assert SUPPORTED_VERSIONS[ApiKey.PRODUCE][1] < 13
    assert SUPPORTED_VERSIONS[ApiKey.FETCH][1] < 13
    assert SUPPORTED_VERSIONS[ApiKey.OFFSET_COMMIT][1] < 10
    assert SUPPORTED_VERSIONS[ApiKey.OFFSET_FETCH][1] < 10


def test_kafka_python_finds_a_common_version_for_every_api():
    from protocol_kit import kp_class

    for key, (low, high) in SUPPORTED_VERSIONS.items():
        if key not in KAFKA_APIS:
            continue
        cls = kp_class(key, "request")
        assert cls.min_version <= high and low <= cls.max_version, key.name


def test_supported_apis_lists_entries_in_key_order():
    assert supported_apis([ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.PRODUCE]) == [
        {"api_key": 0, "min_version": 3, "max_version": 11},
        {"api_key": 3, "min_version": 0, "max_version": 12},
        {"api_key": 18, "min_version": 0, "max_version": 4},
    ]


def test_supported_apis_refuses_seglogs_own_apis_so_api_versions_never_lists_them():
    for key in SEGLOG_APIS:
        with pytest.raises(ValueError, match="never advertised"):
            supported_apis([ApiKey.API_VERSIONS, key])
        with pytest.raises(ValueError, match="never advertised"):
            supported_apis([int(key)])


def test_seglogs_own_api_keys_lie_outside_kafkas_range_and_are_flexible_from_v0():
    assert [int(k) for k in SEGLOG_APIS] == [32000, 32001]
    assert not set(map(int, SEGLOG_APIS)) & set(map(int, ApiKey))
    assert set(APIS) == set(KAFKA_APIS) | set(SEGLOG_APIS)
    for declared in SEGLOG_APIS.values():
        assert declared.request.flexible == Versions.parse("0+")
    assert SEGLOG_APIS[SeglogApiKey.COMPACTION_LEASE].request.name == "CompactionLeaseRequest"
    assert SEGLOG_APIS[SeglogApiKey.REPLACE_SEGMENTS].response.name == "ReplaceSegmentsResponse"


def test_supported_apis_refuses_an_api_that_is_not_declared():
    with pytest.raises(ValueError, match="RENEW_DELEGATION_TOKEN"):
        supported_apis([ApiKey.RENEW_DELEGATION_TOKEN])


@pytest.mark.parametrize("name,key", [
    ("ThrottleTimeMs", "throttle_time_ms"),
    ("TopicName", "topic_name"),
    ("PartitionIndex", "partition_index"),
    ("ErrorCode", "error_code"),
    ("CorrelationId", "correlation_id"),
    ("Records", "records"),
    ("timeoutMs", "timeout_ms"),
    ("GroupsNames", "groups_names"),
    ("IncludeClusterAuthorizedOperations", "include_cluster_authorized_operations"),
])
def test_body_keys_are_the_snake_case_of_kafka_field_names(name, key):
    assert snake_case(name) == key


def test_api_key_names_are_kafkas():
    assert ApiKey.LIST_OFFSETS == 2 and ApiKey.INIT_PRODUCER_ID == 22 and ApiKey.DELETE_GROUPS == 42
    assert ApiKey.API_VERSIONS.message_name == "ApiVersions"


def test_version_ranges_parse_kafkas_spellings():
    assert Versions.parse("3+") == Versions(3, 0x7FFF)
    assert Versions.parse("0-12") == Versions(0, 12)
    assert Versions.parse("7") == Versions(7, 7)
    assert not Versions.parse("none")
    assert 12 in Versions.parse("0-12") and 13 not in Versions.parse("0-12")


def test_a_tagged_field_outside_flexible_versions_is_refused_at_declaration():
    with pytest.raises(SchemaError, match="tagged"):
        api(ApiKey.HEARTBEAT, "0-4", "4+", request=(F("X", "int32", "3+", tag=0),), response=())


def test_a_null_default_on_a_non_nullable_field_is_refused():
    with pytest.raises(SchemaError, match="null default"):
        F("Name", "string", "0+", default=None)


def test_a_struct_without_fields_is_refused():
    with pytest.raises(SchemaError, match="needs fields"):
        F("Thing", "[]Thing", "0+")


def test_a_field_outside_every_valid_version_is_refused():
    with pytest.raises(SchemaError, match="outside the valid"):
        api(ApiKey.HEARTBEAT, "0-4", "4+", request=(F("X", "int32", "5+"),), response=())
