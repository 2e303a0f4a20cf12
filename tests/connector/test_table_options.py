"""A sync's settings checked before Spark starts (``connector.table_options``): defaults, and errors that
name the option and the value."""

from __future__ import annotations

import os

import pytest

from connector.option_error import SeglogOptionError
from connector.table_options import Trigger, group_id_for, parse_sync_options, resolve_mode, table_of_group


def parse(**settings):
    return parse_sync_options(**{"table": "/data/orders", "topic": "orders", "log_dir": "/data/logs", **settings})


def test_a_sync_reads_the_topic_from_the_earliest_offset_with_headers_and_commits_the_table_s_group():
    options = parse()
    assert options.source_options == {"startingOffsets": "earliest", "includeHeaders": "true", "subscribe": "orders",
                                      "path": "/data/logs", "groupId": "seglog-tables-/data/orders"}
    assert options.group_id == group_id_for("/data/orders") == "seglog-tables-/data/orders"
    assert table_of_group(options.group_id) == "/data/orders"
    assert table_of_group("orders-etl") is None


def test_the_checkpoint_and_dead_letters_live_inside_the_table_s_directory():
    options = parse(table="s3://bucket/tables/orders/")
    assert options.table == "s3://bucket/tables/orders"
    assert options.checkpoint == "s3://bucket/tables/orders/_seglog/checkpoint"
    assert options.dead_letter_table == "s3://bucket/tables/orders/_seglog/dead_letters"


def test_a_local_table_is_named_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert parse(table="orders").table == os.path.join(str(tmp_path), "orders")
    assert parse(table=f"file://{tmp_path}/t").table == f"{tmp_path}/t"


def test_a_compacted_topic_is_upserted_and_any_other_appended_unless_the_mode_is_given():
    assert resolve_mode(None, {"orders": "compact"}) == "upsert"
    assert resolve_mode(None, {"orders": "compact,delete"}) == "upsert"
    assert resolve_mode(None, {"orders": "delete"}) == "append"
    assert resolve_mode(None, {"a": "compact", "b": "delete"}) == "append"
    assert resolve_mode(None, {}) == "append"
    assert resolve_mode("append", {"orders": "compact"}) == "append"


def test_the_trigger_is_once_available_now_or_a_processing_time():
    assert parse(trigger="once").trigger.spark_arguments() == {"once": True}
    assert parse().trigger.spark_arguments() == {"availableNow": True}
    assert parse(trigger="processing-time=30s").trigger == Trigger("processing-time", 30_000)
    assert parse(trigger="processing-time=30s").trigger.spark_arguments() == {"processingTime": "30000 milliseconds"}


def test_the_table_is_partitioned_by_the_record_date_unless_told_otherwise():
    assert parse().partition_columns == ["date"]
    assert parse(partition_by="partition").partition_columns == ["partition"]
    assert parse(partition_by="none").partition_columns == []


@pytest.mark.parametrize("settings, message", [
    ({"mode": "merge"}, "--mode must be one of append, upsert, not 'merge'"),
    ({"trigger": "sometimes"}, "--trigger must be one of once, available-now, processing-time=<interval> "
                               "(e.g. processing-time=30s), not 'sometimes'"),
    ({"trigger": "processing-time=soon"}, "option --trigger processing-time must be a duration such as 15m or 30s, "
                                          "not 'soon'"),
    ({"value_format": "avro"}, "--value-format must be one of raw, json, json-schema=FILE, not 'avro'"),
    ({"partition_by": "a b"}, "--partition-by must be a column name"),
    ({"topic": None}, "give one of --topic or --topic-pattern"),
    ({"topic": "a,b"}, "--topic must name one topic (--topic-pattern for several), not 'a,b'"),
    ({"topic": None, "topic_pattern": "orders-("}, "--topic-pattern 'orders-(' is not a regular expression"),
    ({"bootstrap": "127.0.0.1:9092"}, "give one of --log-dir (the topic's log directory) or --bootstrap"),
    ({"table": " "}, "--table is empty"),
    ({"max_offsets_per_trigger": 0}, "--max-offsets-per-trigger must be a positive integer, not 0"),
])
def test_a_bad_setting_is_refused_naming_the_option_and_the_value(settings, message):
    with pytest.raises(SeglogOptionError) as refused:
        parse(**settings)
    assert message in str(refused.value)


def test_upkeep_is_due_once_its_interval_has_passed_since_the_last_optimize():
    upkeep = parse(optimize_interval="1h", vacuum_retain_hours=24).upkeep
    assert upkeep.interval_ms == 3_600_000 and upkeep.vacuum_retain_hours == 24
    assert not upkeep.due(last_optimize_ms=1_000, now_ms=1_000 + 3_599_999)
    assert upkeep.due(last_optimize_ms=1_000, now_ms=1_000 + 3_600_000)
    assert parse().upkeep is None


@pytest.mark.parametrize("settings, message", [
    ({"vacuum_retain_hours": 24}, "--vacuum-retain goes with --optimize-interval"),
    ({"optimize_interval": "0s"}, "--optimize-interval must be longer than 0, not '0s'"),
    ({"optimize_interval": "hourly"}, "--optimize-interval must be a duration such as 15m or 30s, not 'hourly'"),
    ({"optimize_interval": "1h", "vacuum_retain_hours": -1}, "--vacuum-retain must be 0 hours or more, not -1"),
])
def test_a_bad_upkeep_schedule_is_refused_naming_the_option(settings, message):
    with pytest.raises(SeglogOptionError) as refused:
        parse(**settings)
    assert message in str(refused.value)


def test_a_table_in_a_bucket_gets_hadoop_s3a_settings_from_seglog_s_storage_names():
    options = parse_sync_options(table="s3://lake/orders", topic="orders", log_dir="/data/logs",
                                 storage_options={"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:8333"})
    assert options.hadoop_conf == {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem", "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.access.key": "k", "fs.s3a.secret.key": "s", "fs.s3a.endpoint": "http://127.0.0.1:8333",
        "fs.s3a.path.style.access": "true", "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.endpoint.region": "us-east-1"}
    assert options.checkpoint == "s3://lake/orders/_seglog/checkpoint"
    assert not any(name.startswith("storage.") for name in options.source_options)


def test_a_log_dir_in_a_bucket_gets_the_storage_settings_as_source_options():
    options = parse_sync_options(table="/data/t", topic="orders", log_dir="s3://logs/dir",
                                 storage_options={"key": "k", "endpoint_url": "http://127.0.0.1:8333"})
    assert options.hadoop_conf == {}
    assert options.source_options["storage.key"] == "k"
    assert options.source_options["storage.endpoint_url"] == "http://127.0.0.1:8333"


def test_delta_rs_gets_the_same_storage_settings_by_its_own_names():
    from connector.table_storage import delta_rs_options

    assert delta_rs_options({"key": "k", "secret": "s", "endpoint_url": "http://h:1"}) == {
        "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": "http://h:1",
        "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}


def test_a_storage_setting_that_is_not_an_object_store_s_fails_naming_it():
    with pytest.raises(SeglogOptionError, match="--storage anon: not an object store setting of a table"):
        parse_sync_options(table="s3://lake/t", topic="orders", log_dir="/data/logs", storage_options={"anon": "1"})


def test_a_command_config_file_becomes_the_source_s_kafka_options_and_a_source_option_wins(tmp_path):
    import argparse

    from broker_core.cli.table_sync_arguments import add_sync_arguments
    from connector.tables_job import source_options

    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      "username=\"etl\" password=\"p\";\nclient.id=ignored\n")
    parser = argparse.ArgumentParser()
    add_sync_arguments(parser)
    args = parser.parse_args(["--table", "/t", "--topic", "o", "--bootstrap", "127.0.0.1:9092", "--command-config",
                              str(config), "--source-option", "kafka.sasl.mechanism=PLAIN"])
    assert source_options(args) == {
        "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" '
                                  'password="p";'}
    missing = parser.parse_args(["--table", "/t", "--topic", "o", "--bootstrap", "h:1", "--command-config",
                                 str(tmp_path / "nowhere.properties")])
    with pytest.raises(SeglogOptionError, match="nowhere.properties"):
        source_options(missing)


def test_a_log_dir_in_a_bucket_needs_the_mode_given_rather_than_guessing_append():
    from connector.tables import cleanup_policies

    with pytest.raises(SeglogOptionError, match="--mode: give it for a log dir in a bucket"):
        cleanup_policies(topic="accounts", log_dir="s3://logs/dir")
