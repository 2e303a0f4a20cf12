"""Topic configs changed by kafka-python's and confluent-kafka's admin clients (IncrementalAlterConfigs,
AlterConfigs), and log dirs described by kafka-python's (DescribeLogDirs), against a ``seglog broker``."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, NewTopic
from confluent_kafka.admin import ConfigResource as ConfluentConfigResource
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from server_kit import start_broker

pytestmark = pytest.mark.slow

TIMEOUT_S = 20
DEFAULT_RETENTION_MS = str(7 * 24 * 3600 * 1000)


@pytest.fixture()
def kp_admin(bootstrap):
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


@pytest.fixture()
def ck_admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_resource(name: str, configs: dict | None = None) -> ConfigResource:
    return ConfigResource(ConfigResourceType.TOPIC, name, configs=configs)


def kp_topic_configs(admin: KafkaAdminClient, name: str) -> dict[str, tuple[str, str]]:
    """Every config of the topic as (value, source), as kafka-python's admin client reads them."""
    described = admin.describe_configs([topic_resource(name)], config_filter="all")["topic"][name]
    return {key: (entry["value"], entry["config_source"]) for key, entry in described.items()}


def ck_create(admin: AdminClient, name: str, partitions: int = 1, config: dict | None = None) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        future.result(TIMEOUT_S)


def ck_incremental(admin: AdminClient, name: str, *entries: ConfigEntry, validate_only: bool = False) -> None:
    resource = ConfluentConfigResource("topic", name, incremental_configs=list(entries))
    (future,) = admin.incremental_alter_configs([resource], validate_only=validate_only).values()
    future.result(TIMEOUT_S)


def ck_topic_configs(admin: AdminClient, name: str) -> dict:
    (future,) = admin.describe_configs([ConfluentConfigResource("topic", name)]).values()
    return future.result(TIMEOUT_S)


def ck_error(excinfo) -> KafkaError:
    return excinfo.value.args[0]


# --- kafka-python ------------------------------------------------------------------------


def test_kafka_python_alter_configs_sets_retention_ms_and_the_log_applies_it(tmp_path):
    # Records an hour old: kept by the default retention (7 days), deleted once retention.ms is a minute.
    server = start_broker(tmp_path / "logs", **{"log.retention.check.interval.ms": 50})
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap_servers, request_timeout_ms=10_000)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers, linger_ms=0, batch_size=1)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap_servers, group_id=None)
    tp = TopicPartition("aging", 0)
    try:
        admin.create_topics({"aging": {"num_partitions": 1, "replication_factor": 1,
                                       "configs": {"segment.bytes": "1024"}}})
        an_hour_ago = int(time.time() * 1000) - 3600_000
        for i in range(40):
            producer.send("aging", b"v" * 100, partition=0, timestamp_ms=an_hour_ago + i).get(TIMEOUT_S)
        time.sleep(0.3)  # several retention checks
        assert consumer.beginning_offsets([tp])[tp] == 0

        result = admin.alter_configs([topic_resource("aging", {"retention.ms": "60000"})])
        assert result == {"topic": {"aging": "OK"}}
        assert kp_topic_configs(admin, "aging")["retention.ms"] == ("60000", "DYNAMIC_TOPIC_CONFIG")
        deadline = time.monotonic() + 10
        while consumer.beginning_offsets([tp])[tp] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert consumer.beginning_offsets([tp])[tp] > 0
        assert consumer.end_offsets([tp])[tp] == 40
    finally:
        consumer.close()
        producer.close(TIMEOUT_S)
        admin.close()
        server.shutdown(timeout_ms=10_000)


def test_kafka_python_reset_configs_deletes_the_override_back_to_the_default(kp_admin):
    kp_admin.create_topics({"resettable": {"num_partitions": 1, "replication_factor": 1,
                                           "configs": {"retention.ms": "60000", "segment.bytes": "4096"}}})
    assert kp_admin.reset_configs([topic_resource("resettable", {"retention.ms": None})]) == {
        "topic": {"resettable": "OK"}}
    configs = kp_topic_configs(kp_admin, "resettable")
    assert configs["retention.ms"] == (DEFAULT_RETENTION_MS, "DEFAULT_CONFIG")
    assert configs["segment.bytes"] == ("4096", "DYNAMIC_TOPIC_CONFIG")


def test_kafka_python_validate_only_changes_nothing(kp_admin):
    kp_admin.create_topics({"checked": {"num_partitions": 1, "replication_factor": 1}})
    for incremental in (True, False):
        result = kp_admin.alter_configs([topic_resource("checked", {"retention.ms": "60000"})], validate_only=True,
                                        incremental=incremental)
        assert result == {"topic": {"checked": "OK"}}
        assert kp_topic_configs(kp_admin, "checked")["retention.ms"] == (DEFAULT_RETENTION_MS, "DEFAULT_CONFIG")


def test_kafka_python_a_bad_value_is_invalid_config_naming_the_key(kp_admin):
    kp_admin.create_topics({"strict": {"num_partitions": 1, "replication_factor": 1}})
    for incremental in (True, False):
        result = kp_admin.alter_configs([topic_resource("strict", {"segment.bytes": "-5"})], incremental=incremental)
        message = result["topic"]["strict"]
        assert "InvalidConfigurationError" in message  # kafka-python's name for INVALID_CONFIG (40)
        assert "Invalid value -5 for configuration segment.bytes" in message
    assert kp_topic_configs(kp_admin, "strict")["segment.bytes"][1] == "DEFAULT_CONFIG"


def test_kafka_python_an_unknown_topic_is_unknown_topic_or_partition(kp_admin):
    result = kp_admin.alter_configs([topic_resource("missing", {"retention.ms": "60000"})], raise_on_unknown=False)
    assert "UnknownTopicOrPartitionError" in result["topic"]["missing"]
    assert "'missing'" in result["topic"]["missing"]


def test_kafka_python_describe_log_dirs_shows_the_partitions_real_sizes(broker_server, kp_admin):
    kp_admin.create_topics({"sized": {"num_partitions": 2, "replication_factor": 1}})
    producer = KafkaProducer(bootstrap_servers=broker_server.bootstrap_servers, linger_ms=0)
    try:
        for i in range(30):
            producer.send("sized", b"x" * (100 + i), partition=i % 2)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close(TIMEOUT_S)
    (answer,) = kp_admin.describe_log_dirs({"sized": [0, 1]})
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == broker_server.broker.log_manager.log_dirs[0]
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    (topic,) = log_dir["topics"]
    assert topic["name"] == "sized"
    for p in topic["partitions"]:
        partition_dir = os.path.join(log_dir["log_dir"], f"sized-{p['partition_index']}")
        on_disk = sum(os.path.getsize(os.path.join(partition_dir, f))
                      for f in os.listdir(partition_dir) if f.endswith(".log"))
        assert p["partition_size"] == on_disk > 15 * 100
        assert (p["offset_lag"], p["is_future_key"]) == (0, False)


# --- confluent-kafka ---------------------------------------------------------------------


def test_confluent_incremental_alter_configs_sets_a_config_describe_configs_shows(ck_admin):
    ck_create(ck_admin, "ck-set")
    ck_incremental(ck_admin, "ck-set", ConfigEntry("retention.ms", "60000",
                                                   incremental_operation=AlterConfigOpType.SET))
    configs = ck_topic_configs(ck_admin, "ck-set")
    assert configs["retention.ms"].value == "60000" and not configs["retention.ms"].is_default


def test_confluent_incremental_delete_restores_the_default(ck_admin):
    ck_create(ck_admin, "ck-delete", config={"retention.ms": "60000", "segment.bytes": "4096"})
    ck_incremental(ck_admin, "ck-delete", ConfigEntry("retention.ms", None,
                                                      incremental_operation=AlterConfigOpType.DELETE))
    configs = ck_topic_configs(ck_admin, "ck-delete")
    assert configs["retention.ms"].value == DEFAULT_RETENTION_MS and configs["retention.ms"].is_default
    assert configs["segment.bytes"].value == "4096"


def test_confluent_append_and_subtract_change_a_list_config(ck_admin):
    ck_create(ck_admin, "ck-list")
    ck_incremental(ck_admin, "ck-list", ConfigEntry("cleanup.policy", "compact",
                                                    incremental_operation=AlterConfigOpType.APPEND))
    assert ck_topic_configs(ck_admin, "ck-list")["cleanup.policy"].value == "compact,delete"
    ck_incremental(ck_admin, "ck-list", ConfigEntry("cleanup.policy", "delete",
                                                    incremental_operation=AlterConfigOpType.SUBTRACT))
    assert ck_topic_configs(ck_admin, "ck-list")["cleanup.policy"].value == "compact"


def test_confluent_validate_only_changes_nothing(ck_admin):
    ck_create(ck_admin, "ck-dry")
    ck_incremental(ck_admin, "ck-dry", ConfigEntry("retention.ms", "60000",
                                                   incremental_operation=AlterConfigOpType.SET), validate_only=True)
    assert ck_topic_configs(ck_admin, "ck-dry")["retention.ms"].is_default


def test_confluent_a_bad_value_is_invalid_config_naming_the_key(ck_admin):
    ck_create(ck_admin, "ck-bad")
    with pytest.raises(KafkaException) as excinfo:
        ck_incremental(ck_admin, "ck-bad", ConfigEntry("segment.bytes", "-5",
                                                       incremental_operation=AlterConfigOpType.SET))
    assert ck_error(excinfo).code() == KafkaError.INVALID_CONFIG
    assert "Invalid value -5 for configuration segment.bytes" in ck_error(excinfo).str()
    assert ck_topic_configs(ck_admin, "ck-bad")["segment.bytes"].is_default


def test_confluent_appending_to_a_config_that_is_not_a_list_is_invalid_config(ck_admin):
    ck_create(ck_admin, "ck-append")
    with pytest.raises(KafkaException) as excinfo:
        ck_incremental(ck_admin, "ck-append", ConfigEntry("retention.ms", "5",
                                                          incremental_operation=AlterConfigOpType.APPEND))
    assert ck_error(excinfo).code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in ck_error(excinfo).str()


def test_confluent_an_unknown_topic_is_unknown_topic_or_partition(ck_admin):
    with pytest.raises(KafkaException) as excinfo:
        ck_incremental(ck_admin, "ck-missing", ConfigEntry("retention.ms", "60000",
                                                           incremental_operation=AlterConfigOpType.SET))
    assert ck_error(excinfo).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_legacy_alter_configs_replaces_every_override(ck_admin):
    ck_create(ck_admin, "ck-legacy", config={"retention.ms": "60000"})
    resource = ConfluentConfigResource("topic", "ck-legacy", set_config={"segment.bytes": "4096"})
    with pytest.warns(DeprecationWarning):
        (future,) = ck_admin.alter_configs([resource]).values()
    future.result(TIMEOUT_S)
    configs = ck_topic_configs(ck_admin, "ck-legacy")
    assert configs["segment.bytes"].value == "4096"
    assert configs["retention.ms"].is_default  # not given again: back to the default, as in Kafka
