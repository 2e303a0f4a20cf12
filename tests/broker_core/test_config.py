"""LogConfig, BrokerConfig and ConfigEntry against Kafka's names, defaults and checks.

The error-code table of ``broker_core.errors`` is checked at the end: its
``InvalidConfigurationError`` is what every failure here raises.
"""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_core import errors
from broker_core.config import (
    BROKER_CONFIG_NAMES,
    CONFIG_SOURCE_IDS,
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    LONG_MAX,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG_NAMES,
    TOPIC_CONFIG_SYNONYMS,
    BrokerConfig,
    ConfigEntry,
    LogConfig,
)
from broker_core.errors import InvalidConfigurationError

# Kafka 3.9's topic defaults as its documentation lists them, in Kafka's text form.
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.type": "producer",
    "compression.zstd.level": "3",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "index.interval.bytes": "4096",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
    "remote.storage.enable": "false",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
}


def invalid(match: str):
    return pytest.raises(InvalidConfigurationError, match=match)


# --- LogConfig defaults and parsing ---------------------------------------------


def test_log_config_defaults_are_kafkas_topic_defaults():
    assert LogConfig().to_props() == KAFKA_TOPIC_DEFAULTS


def test_topic_config_names_are_exactly_the_keys_to_props_writes():
    assert TOPIC_CONFIG_NAMES == set(KAFKA_TOPIC_DEFAULTS)


def test_default_log_config_deletes_and_does_not_compact():
    config = LogConfig()
    assert config.cleanup_policy == ("delete",)
    assert (config.delete, config.compact) == (True, False)


def test_from_props_parses_kafka_text_forms():
    config = LogConfig.from_props({
        "segment.bytes": " 4096 ",
        "retention.ms": "-1",
        "min.cleanable.dirty.ratio": "0.25",
        "preallocate": "TRUE",
        "unclean.leader.election.enable": "false",
        "cleanup.policy": "compact, delete",
        "message.timestamp.type": "LogAppendTime",
        "flush.messages": "9223372036854775807",
    })
    assert config.segment_bytes == 4096
    assert config.retention_ms == -1
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.preallocate is True
    assert config.unclean_leader_election_enable is False
    assert (config.compact, config.delete) == (True, True)
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.flush_messages == LONG_MAX


def test_from_props_takes_python_values_too():
    config = LogConfig.from_props({"segment.bytes": 3000, "min.cleanable.dirty.ratio": 1, "preallocate": True,
                                   "cleanup.policy": ["compact"]})
    assert config.segment_bytes == 3000
    assert config.min_cleanable_dirty_ratio == 1.0 and isinstance(config.min_cleanable_dirty_ratio, float)
    assert config.preallocate is True
    assert (config.compact, config.delete) == (True, False)


def test_cleanup_policy_order_and_repeats_do_not_matter():
    a = LogConfig.from_props({"cleanup.policy": "delete,compact,delete"})
    b = LogConfig.from_props({"cleanup.policy": "compact,delete"})
    assert a == b
    assert a.to_props()["cleanup.policy"] == "compact,delete"


def test_an_empty_cleanup_policy_neither_deletes_nor_compacts():
    config = LogConfig.from_props({"cleanup.policy": ""})
    assert config.cleanup_policy == ()
    assert (config.compact, config.delete) == (False, False)


def test_from_props_starts_from_the_given_defaults():
    defaults = LogConfig(segment_bytes=5000, retention_ms=1000)
    config = LogConfig.from_props({"retention.ms": "2000"}, defaults=defaults)
    assert (config.segment_bytes, config.retention_ms) == (5000, 2000)


def test_with_overrides_applies_a_topics_settings_on_top():
    base = LogConfig(segment_bytes=5000)
    assert base.with_overrides({"cleanup.policy": "compact"}) == LogConfig(segment_bytes=5000,
                                                                           cleanup_policy=("compact",))


def test_to_props_round_trips_through_from_props():
    config = LogConfig.from_props({"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.00001",
                                   "preallocate": "true", "segment.ms": "100"})
    assert config.to_props()["min.cleanable.dirty.ratio"] == "1.0E-5"  # Java's Double.toString form
    assert LogConfig.from_props(config.to_props()) == config


def test_log_config_is_frozen_and_hashable():
    config = LogConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.segment_bytes = 1  # type: ignore[misc]
    assert hash(config) == hash(LogConfig())


def test_max_segment_ms_is_capped_by_max_compaction_lag_on_compacted_topics():
    assert LogConfig(segment_ms=10_000, max_compaction_lag_ms=3_000).max_segment_ms == 10_000
    compacted = LogConfig(segment_ms=10_000, max_compaction_lag_ms=3_000, cleanup_policy=("compact",))
    assert compacted.max_segment_ms == 3_000


def test_init_file_size_is_segment_bytes_only_when_preallocating():
    assert LogConfig(segment_bytes=5000).init_file_size == 0
    assert LogConfig(segment_bytes=5000, preallocate=True).init_file_size == 5000


# --- LogConfig validation ------------------------------------------------------------


@pytest.mark.parametrize("name, value, message", [
    ("segment.bytes", "-5", "Invalid value -5 for configuration segment.bytes: Value must be at least 14"),
    ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ("segment.ms", "0", "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
    ("segment.index.bytes", "3", "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"),
    ("index.interval.bytes", "-1",
     "Invalid value -1 for configuration index.interval.bytes: Value must be at least 0"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("max.message.bytes", "-1", "Invalid value -1 for configuration max.message.bytes: Value must be at least 0"),
    ("flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be at least 1"),
    ("max.compaction.lag.ms", "0",
     "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"),
    ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
    ("min.cleanable.dirty.ratio", "1.5",
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "-0.1",
     "Invalid value -0.1 for configuration min.cleanable.dirty.ratio: Value must be at least 0"),
    ("cleanup.policy", "compact,remove",
     "Invalid value remove for configuration cleanup.policy: String must be one of: compact, delete"),
    ("message.timestamp.type", "createtime",
     "Invalid value createtime for configuration message.timestamp.type: "
     "String must be one of: CreateTime, LogAppendTime"),
    ("compression.type", "brotli",
     "Invalid value brotli for configuration compression.type: "
     "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("compression.gzip.level", "0",
     "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ("compression.lz4.level", "18",
     "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"),
    ("segment.bytes", "abc", "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
    ("segment.bytes", "1_000", "Invalid value 1_000 for configuration segment.bytes: Not a number of type INT"),
    ("segment.bytes", "2147483648",
     "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
    ("retention.ms", "9223372036854775808",
     "Invalid value 9223372036854775808 for configuration retention.ms: Not a number of type LONG"),
    ("min.cleanable.dirty.ratio", "half",
     "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
    ("preallocate", "yes",
     "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
])
def test_a_bad_value_is_refused_with_kafkas_message_naming_key_and_value(name, value, message):
    with pytest.raises(InvalidConfigurationError) as caught:
        LogConfig.from_props({name: value})
    assert str(caught.value) == message
    assert caught.value.config_name == name
    assert caught.value.code == 40


def test_the_smallest_accepted_values_are_accepted():
    config = LogConfig.from_props({"segment.bytes": "14", "segment.ms": "1", "retention.ms": "-1",
                                   "min.cleanable.dirty.ratio": "0", "segment.index.bytes": "4"})
    assert (config.segment_bytes, config.segment_ms, config.retention_ms) == (14, 1, -1)


def test_retention_bytes_takes_any_negative_as_unlimited_like_kafka():
    assert LogConfig.from_props({"retention.bytes": "-100"}).retention_bytes == -100


def test_a_bool_is_not_a_number():
    with invalid(r"Invalid value true for configuration segment\.bytes: Expected value to be a 32-bit integer"):
        LogConfig.from_props({"segment.bytes": True})


def test_a_number_is_not_a_bool():
    with invalid(r"for configuration preallocate: Expected value to be either true or false"):
        LogConfig.from_props({"preallocate": 1})


def test_none_is_refused_for_a_topic_setting():
    with invalid(r"Invalid value null for configuration retention\.ms: Value must be non-null"):
        LogConfig.from_props({"retention.ms": None})  # type: ignore[dict-item]


def test_nan_is_not_a_valid_ratio():
    with invalid(r"Invalid value NaN for configuration min\.cleanable\.dirty\.ratio"):
        LogConfig.from_props({"min.cleanable.dirty.ratio": "NaN"})


def test_an_unknown_topic_config_is_refused_by_name():
    with pytest.raises(InvalidConfigurationError) as caught:
        LogConfig.from_props({"foo": "1"})
    assert str(caught.value) == "Unknown topic config name: foo"
    assert caught.value.config_name == "foo"


def test_a_broker_key_is_not_a_topic_config():
    with invalid("Unknown topic config name: log.retention.hours"):
        LogConfig.from_props({"log.retention.hours": "1"})


def test_min_compaction_lag_above_max_compaction_lag_is_refused():
    with invalid(r"min\.compaction\.lag\.ms.*greater than max\.compaction\.lag\.ms \(500\)"):
        LogConfig.from_props({"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "500"})


def test_direct_construction_is_validated_too():
    with invalid(r"Invalid value 10 for configuration segment\.bytes: Value must be at least 14"):
        LogConfig(segment_bytes=10)


# --- overrides and describe -------------------------------------------------------------


def test_overrides_lists_only_the_settings_that_differ_in_kafka_text_form():
    defaults = LogConfig()
    config = defaults.with_overrides({"retention.ms": "1000", "cleanup.policy": "compact",
                                      "segment.bytes": "1073741824"})
    assert config.overrides(defaults) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert defaults.overrides(defaults) == {}


def test_describe_reports_topic_overrides_broker_settings_and_defaults():
    broker = BrokerConfig.from_props({"log.retention.hours": "24", "log.segment.bytes": "100000"})
    overrides = {"cleanup.policy": "compact", "segment.bytes": "5000"}
    config = broker.log_config_defaults().with_overrides(overrides)
    entries = {e.name: e for e in config.describe(overrides, broker)}
    assert set(entries) == TOPIC_CONFIG_NAMES
    assert entries["cleanup.policy"] == ConfigEntry("cleanup.policy", "compact", DYNAMIC_TOPIC_CONFIG)
    assert entries["segment.bytes"] == ConfigEntry("segment.bytes", "5000", DYNAMIC_TOPIC_CONFIG)
    assert entries["retention.ms"] == ConfigEntry("retention.ms", "86400000", STATIC_BROKER_CONFIG)
    assert entries["segment.ms"] == ConfigEntry("segment.ms", "604800000", DEFAULT_CONFIG)
    assert all(not e.read_only and not e.is_sensitive for e in entries.values())


def test_describe_is_sorted_by_name():
    names = [e.name for e in LogConfig().describe({}, BrokerConfig())]
    assert names == sorted(TOPIC_CONFIG_NAMES)


def test_a_broker_setting_given_at_its_default_value_is_still_static():
    broker = BrokerConfig.from_props({"log.cleanup.policy": "delete"})
    entries = {e.name: e for e in broker.log_config_defaults().describe({}, broker)}
    assert entries["cleanup.policy"].source == STATIC_BROKER_CONFIG


def test_a_lower_priority_synonym_makes_the_topic_setting_static():
    broker = BrokerConfig.from_props({"log.flush.scheduler.interval.ms": "1000"})
    entries = {e.name: e for e in broker.log_config_defaults().describe({}, broker)}
    assert entries["flush.ms"] == ConfigEntry("flush.ms", "1000", STATIC_BROKER_CONFIG)


def test_config_source_ids_are_the_describe_configs_wire_values():
    assert CONFIG_SOURCE_IDS[DYNAMIC_TOPIC_CONFIG] == 1
    assert CONFIG_SOURCE_IDS[STATIC_BROKER_CONFIG] == 4
    assert CONFIG_SOURCE_IDS[DEFAULT_CONFIG] == 5


# --- BrokerConfig --------------------------------------------------------------------


def test_broker_defaults_are_kafkas_with_the_single_broker_choices():
    b = BrokerConfig()
    assert b.log_dirs == ("/tmp/kafka-logs",)
    assert (b.node_id, b.num_partitions, b.default_replication_factor) == (0, 1, 1)
    assert b.auto_create_topics_enable is True
    assert b.message_max_bytes == 1048588
    assert b.log_segment_bytes == 1073741824
    assert (b.log_roll_ms, b.log_roll_hours, b.log_roll_time_millis) == (None, 168, 604800000)
    assert (b.log_roll_jitter_hours, b.log_roll_time_jitter_millis) == (0, 0)
    assert (b.log_retention_ms, b.log_retention_minutes, b.log_retention_hours) == (None, None, 168)
    assert b.log_retention_time_millis == 604800000
    assert b.log_retention_bytes == -1
    assert b.log_retention_check_interval_ms == 300000
    assert b.log_index_size_max_bytes == 10485760
    assert b.log_index_interval_bytes == 4096
    assert b.log_flush_interval_messages == LONG_MAX
    assert b.log_flush_interval_ms is None and b.log_flush_scheduler_interval_ms == LONG_MAX
    assert b.log_flush_interval_millis == LONG_MAX
    assert b.log_flush_offset_checkpoint_interval_ms == 60000
    assert b.log_flush_start_offset_checkpoint_interval_ms == 60000
    assert b.log_segment_delete_delay_ms == 60000
    assert b.log_message_timestamp_type == "CreateTime"
    assert b.log_cleanup_policy == ("delete",)
    assert (b.log_cleaner_enable, b.log_cleaner_threads) == (True, 1)
    assert b.log_cleaner_dedupe_buffer_size == 134217728
    assert b.log_cleaner_io_max_bytes_per_second == 1.7976931348623157e308
    assert b.log_cleaner_min_cleanable_ratio == 0.5
    assert b.log_cleaner_delete_retention_ms == 86400000
    assert (b.log_cleaner_min_compaction_lag_ms, b.log_cleaner_max_compaction_lag_ms) == (0, LONG_MAX)
    assert b.log_cleaner_backoff_ms == 15000
    assert (b.compression_type, b.log_preallocate) == ("producer", False)
    assert b.num_recovery_threads_per_data_dir == 2
    assert b.listeners == "PLAINTEXT://:9092" and b.advertised_listeners is None
    assert b.socket_request_max_bytes == 104857600
    assert b.max_connections == 2147483647
    assert b.connections_max_idle_ms == 600000
    assert (b.num_network_threads, b.num_io_threads) == (3, 8)
    assert (b.offsets_topic_num_partitions, b.offsets_topic_replication_factor) == (50, 1)
    assert (b.offsets_retention_minutes, b.offsets_topic_segment_bytes) == (10080, 104857600)
    assert b.group_initial_rebalance_delay_ms == 3000
    assert (b.group_min_session_timeout_ms, b.group_max_session_timeout_ms) == (6000, 1800000)
    assert (b.unclean_leader_election_enable, b.min_insync_replicas) == (False, 1)
    assert b.static_overrides == frozenset() and dict(b.extra) == {}


def test_default_broker_gives_kafkas_default_topic_config():
    assert BrokerConfig().log_config_defaults() == LogConfig()


@pytest.mark.parametrize("props, expected_ms", [
    ({}, 168 * 3_600_000),
    ({"log.retention.hours": "1"}, 3_600_000),
    ({"log.retention.minutes": "5", "log.retention.hours": "1"}, 300_000),
    ({"log.retention.ms": "1234", "log.retention.minutes": "5", "log.retention.hours": "1"}, 1234),
    ({"log.retention.ms": "1234", "log.retention.hours": "1"}, 1234),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.minutes": "-5"}, -1),
    ({"log.retention.ms": "-1", "log.retention.hours": "1"}, -1),
])
def test_log_retention_precedence_is_ms_then_minutes_then_hours(props, expected_ms):
    broker = BrokerConfig.from_props(props)
    assert broker.log_retention_time_millis == expected_ms
    assert broker.log_config_defaults().retention_ms == expected_ms


def test_zero_retention_is_refused_naming_the_setting_that_gave_it():
    with invalid(r"Invalid value 0 for configuration log\.retention\.minutes"):
        BrokerConfig.from_props({"log.retention.minutes": "0", "log.retention.hours": "5"})


@pytest.mark.parametrize("props, expected_ms", [
    ({}, 604_800_000),
    ({"log.roll.hours": "2"}, 7_200_000),
    ({"log.roll.ms": "500", "log.roll.hours": "2"}, 500),
])
def test_log_roll_precedence_is_ms_then_hours(props, expected_ms):
    broker = BrokerConfig.from_props(props)
    assert broker.log_roll_time_millis == expected_ms
    assert broker.log_config_defaults().segment_ms == expected_ms


def test_log_roll_jitter_precedence_is_ms_then_hours():
    assert BrokerConfig.from_props({"log.roll.jitter.hours": "1"}).log_roll_time_jitter_millis == 3_600_000
    assert BrokerConfig.from_props({"log.roll.jitter.ms": "7", "log.roll.jitter.hours": "1"}
                                   ).log_roll_time_jitter_millis == 7


def test_log_flush_interval_ms_falls_back_to_the_scheduler_interval():
    assert BrokerConfig.from_props({"log.flush.scheduler.interval.ms": "3000"}).log_config_defaults().flush_ms == 3000
    both = BrokerConfig.from_props({"log.flush.interval.ms": "100", "log.flush.scheduler.interval.ms": "3000"})
    assert both.log_config_defaults().flush_ms == 100


def test_broker_log_settings_become_the_topic_defaults():
    broker = BrokerConfig.from_props({
        "log.segment.bytes": "5000",
        "log.index.size.max.bytes": "1024",
        "log.index.interval.bytes": "100",
        "log.flush.interval.messages": "10",
        "log.retention.bytes": "99999",
        "message.max.bytes": "2000",
        "log.message.timestamp.type": "LogAppendTime",
        "log.message.timestamp.before.max.ms": "11",
        "log.message.timestamp.after.max.ms": "12",
        "log.cleanup.policy": "compact",
        "log.cleaner.min.cleanable.ratio": "0.1",
        "log.cleaner.delete.retention.ms": "13",
        "log.cleaner.min.compaction.lag.ms": "14",
        "log.cleaner.max.compaction.lag.ms": "15",
        "log.segment.delete.delay.ms": "16",
        "compression.type": "zstd",
        "compression.zstd.level": "7",
        "log.preallocate": "true",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
    })
    topic = broker.log_config_defaults()
    assert topic.to_props() == KAFKA_TOPIC_DEFAULTS | {
        "segment.bytes": "5000",
        "segment.index.bytes": "1024",
        "index.interval.bytes": "100",
        "flush.messages": "10",
        "retention.bytes": "99999",
        "max.message.bytes": "2000",
        "message.timestamp.type": "LogAppendTime",
        "message.timestamp.before.max.ms": "11",
        "message.timestamp.after.max.ms": "12",
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.1",
        "delete.retention.ms": "13",
        "min.compaction.lag.ms": "14",
        "max.compaction.lag.ms": "15",
        "file.delete.delay.ms": "16",
        "compression.type": "zstd",
        "compression.zstd.level": "7",
        "preallocate": "true",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
    }


def test_log_dirs_is_a_comma_separated_list_and_wins_over_log_dir():
    assert BrokerConfig.from_props({"log.dirs": "/a, /b"}).log_dirs == ("/a", "/b")
    assert BrokerConfig.from_props({"log.dir": "/c"}).log_dirs == ("/c",)
    assert BrokerConfig.from_props({"log.dir": "/c", "log.dirs": "/a"}).log_dirs == ("/a",)


def test_empty_log_dirs_are_refused():
    with invalid(r"for configuration log\.dirs"):
        BrokerConfig.from_props({"log.dirs": ""})


def test_broker_id_is_the_older_name_of_node_id_and_they_must_agree():
    assert BrokerConfig.from_props({"broker.id": "3"}).node_id == 3
    assert BrokerConfig.from_props({"node.id": "4", "broker.id": "4"}).node_id == 4
    with invalid(r"Invalid value 5 for configuration broker\.id: it must equal node\.id \(4\)"):
        BrokerConfig.from_props({"node.id": "4", "broker.id": "5"})


def test_unknown_broker_settings_are_kept_not_refused():
    broker = BrokerConfig.from_props({"zookeeper.connect": "localhost:2181", "quota.window.num": 11})
    assert dict(broker.extra) == {"zookeeper.connect": "localhost:2181", "quota.window.num": "11"}
    assert broker.static_overrides == frozenset()


def test_static_overrides_name_the_settings_given():
    broker = BrokerConfig.from_props({"num.partitions": "1", "log.retention.hours": "24", "foo": "x"})
    assert broker.static_overrides == {"num.partitions", "log.retention.hours"}


def test_a_broker_built_in_python_counts_changed_fields_as_static():
    broker = BrokerConfig(log_segment_bytes=5000)
    assert "log.segment.bytes" in broker.static_overrides
    entries = {e.name: e for e in broker.log_config_defaults().describe({}, broker)}
    assert entries["segment.bytes"] == ConfigEntry("segment.bytes", "5000", STATIC_BROKER_CONFIG)


@pytest.mark.parametrize("name, value, message", [
    ("num.partitions", "0", "Invalid value 0 for configuration num.partitions: Value must be at least 1"),
    ("log.segment.bytes", "13", "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14"),
    ("log.roll.hours", "0", "Invalid value 0 for configuration log.roll.hours: Value must be at least 1"),
    ("log.roll.ms", "0", "Invalid value 0 for configuration log.roll.ms: Value must be at least 1"),
    ("log.cleanup.policy", "archive",
     "Invalid value archive for configuration log.cleanup.policy: String must be one of: compact, delete"),
    ("log.cleaner.min.cleanable.ratio", "2",
     "Invalid value 2.0 for configuration log.cleaner.min.cleanable.ratio: Value must be no more than 1"),
    ("num.recovery.threads.per.data.dir", "0",
     "Invalid value 0 for configuration num.recovery.threads.per.data.dir: Value must be at least 1"),
    ("offsets.topic.replication.factor", "40000",
     "Invalid value 40000 for configuration offsets.topic.replication.factor: Not a number of type SHORT"),
    ("auto.create.topics.enable", "on",
     "Invalid value on for configuration auto.create.topics.enable: Expected value to be either true or false"),
    ("message.max.bytes", "-1", "Invalid value -1 for configuration message.max.bytes: Value must be at least 0"),
])
def test_a_bad_broker_value_is_refused_naming_key_and_value(name, value, message):
    with pytest.raises(InvalidConfigurationError) as caught:
        BrokerConfig.from_props({name: value})
    assert str(caught.value) == message


def test_broker_compaction_lags_must_be_ordered():
    with invalid(r"log\.cleaner\.min\.compaction\.lag\.ms"):
        BrokerConfig.from_props({"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"})


def test_a_nullable_broker_setting_may_be_none():
    assert BrokerConfig.from_props({"log.retention.ms": None, "advertised.listeners": None}).log_retention_ms is None


def test_every_topic_setting_has_known_broker_synonyms():
    assert set(TOPIC_CONFIG_SYNONYMS) == TOPIC_CONFIG_NAMES
    for name, synonyms in TOPIC_CONFIG_SYNONYMS.items():
        # Kafka has no broker default for remote.storage.enable: each topic turns it on.
        assert (synonyms or name == "remote.storage.enable") and set(synonyms) <= BROKER_CONFIG_NAMES


def test_each_broker_synonym_drives_its_topic_setting():
    """Setting the first synonym of a topic key changes exactly that key of the topic defaults."""
    probe = {
        "segment.bytes": "5000", "segment.ms": "5000", "segment.jitter.ms": "5000", "segment.index.bytes": "5000",
        "index.interval.bytes": "5000", "flush.messages": "5000", "flush.ms": "5000", "retention.ms": "5000",
        "retention.bytes": "5000", "max.message.bytes": "5000", "message.timestamp.type": "LogAppendTime",
        "message.timestamp.before.max.ms": "5000", "message.timestamp.after.max.ms": "5000",
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.25", "delete.retention.ms": "5000",
        "min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "5000", "file.delete.delay.ms": "5000",
        "compression.type": "gzip", "compression.gzip.level": "5", "compression.lz4.level": "5",
        "compression.zstd.level": "5", "preallocate": "true", "min.insync.replicas": "5",
        "unclean.leader.election.enable": "true", "local.retention.ms": "5000", "local.retention.bytes": "5000",
    }
    assert set(probe) == TOPIC_CONFIG_NAMES - {"remote.storage.enable"}
    for topic_name, value in probe.items():
        broker = BrokerConfig.from_props({TOPIC_CONFIG_SYNONYMS[topic_name][0]: value})
        changed = broker.log_config_defaults().overrides(LogConfig())
        assert changed == {topic_name: value}, topic_name


def test_broker_config_is_frozen_and_hashable():
    broker = BrokerConfig.from_props({"foo": "bar"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        broker.num_partitions = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        broker.extra["foo"] = "baz"  # type: ignore[index]
    assert hash(broker) == hash(BrokerConfig.from_props({"foo": "other"}))


@given(st.integers(min_value=14, max_value=2**31 - 1), st.integers(min_value=-1, max_value=2**63 - 1),
       st.floats(min_value=0, max_value=1, allow_nan=False))
def test_valid_values_round_trip_through_kafka_text(segment_bytes, retention_ms, ratio):
    config = LogConfig(segment_bytes=segment_bytes, retention_ms=retention_ms, min_cleanable_dirty_ratio=ratio)
    assert LogConfig.from_props(config.to_props()) == config


# --- error codes ---------------------------------------------------------------------


@pytest.mark.parametrize("cls, code, name", [
    (errors.UnknownServerError, -1, "UNKNOWN_SERVER_ERROR"),
    (errors.OffsetOutOfRangeError, 1, "OFFSET_OUT_OF_RANGE"),
    (errors.CorruptMessageError, 2, "CORRUPT_MESSAGE"),
    (errors.UnknownTopicOrPartitionError, 3, "UNKNOWN_TOPIC_OR_PARTITION"),
    (errors.NotLeaderOrFollowerError, 6, "NOT_LEADER_OR_FOLLOWER"),
    (errors.MessageTooLargeError, 10, "MESSAGE_TOO_LARGE"),
    (errors.NotCoordinatorError, 16, "NOT_COORDINATOR"),
    (errors.InvalidTopicError, 17, "INVALID_TOPIC_EXCEPTION"),
    (errors.RecordListTooLargeError, 18, "RECORD_LIST_TOO_LARGE"),
    (errors.IllegalGenerationError, 22, "ILLEGAL_GENERATION"),
    (errors.UnknownMemberIdError, 25, "UNKNOWN_MEMBER_ID"),
    (errors.RebalanceInProgressError, 27, "REBALANCE_IN_PROGRESS"),
    (errors.InvalidTimestampError, 32, "INVALID_TIMESTAMP"),
    (errors.UnsupportedVersionError, 35, "UNSUPPORTED_VERSION"),
    (errors.TopicAlreadyExistsError, 36, "TOPIC_ALREADY_EXISTS"),
    (errors.InvalidConfigurationError, 40, "INVALID_CONFIG"),
    (errors.InvalidRequestError, 42, "INVALID_REQUEST"),
    (errors.KafkaStorageError, 56, "KAFKA_STORAGE_ERROR"),
    (errors.UnknownProducerIdError, 59, "UNKNOWN_PRODUCER_ID"),
    (errors.NonEmptyGroupError, 68, "NON_EMPTY_GROUP"),
    (errors.GroupIdNotFoundError, 69, "GROUP_ID_NOT_FOUND"),
    (errors.MemberIdRequiredError, 79, "MEMBER_ID_REQUIRED"),
    (errors.GroupMaxSizeReachedError, 81, "GROUP_MAX_SIZE_REACHED"),
    (errors.FencedInstanceIdError, 82, "FENCED_INSTANCE_ID"),
    (errors.InvalidRecordError, 87, "INVALID_RECORD"),
    (errors.UnknownTopicIdError, 100, "UNKNOWN_TOPIC_ID"),
])
def test_error_classes_carry_kafkas_code_and_name(cls, code, name):
    assert (cls.code, cls.kafka_error_name) == (code, name)
    assert errors.error_for_code(code) is cls
    assert issubclass(cls, errors.KafkaError)


def test_retriable_follows_kafka():
    retriable = {errors.CorruptMessageError, errors.UnknownTopicOrPartitionError, errors.LeaderNotAvailableError,
                 errors.NotLeaderOrFollowerError, errors.RequestTimedOutError, errors.CoordinatorLoadInProgressError,
                 errors.CoordinatorNotAvailableError, errors.NotCoordinatorError, errors.NotEnoughReplicasError,
                 errors.NotControllerError, errors.ConcurrentTransactionsError, errors.KafkaStorageError,
                 errors.UnknownTopicIdError}
    for cls in retriable:
        assert cls.retriable is True, cls.__name__
    for cls in (errors.OffsetOutOfRangeError, errors.MessageTooLargeError, errors.RebalanceInProgressError,
                errors.TopicAlreadyExistsError, errors.InvalidConfigurationError, errors.UnknownServerError):
        assert cls.retriable is False, cls.__name__


def test_every_code_is_owned_by_one_class_named_after_it():
    for code, cls in errors.ERRORS_BY_CODE.items():
        assert cls.code == code
        assert cls.__name__ in errors.__all__
        assert getattr(errors, cls.__name__) is cls


def test_error_for_code_decodes_unknown_codes_as_unknown_server_error_and_refuses_none():
    assert errors.error_for_code(9999) is errors.UnknownServerError
    with pytest.raises(ValueError):
        errors.error_for_code(errors.NONE)
    assert errors.NONE == 0


def test_log_dir_in_use_is_a_storage_error_on_the_wire():
    err = errors.LogDirInUseError("/data/kafka: locked by another process")
    assert isinstance(err, errors.KafkaStorageError)
    assert (err.code, err.kafka_error_name) == (56, "KAFKA_STORAGE_ERROR")
    assert errors.error_for_code(56) is errors.KafkaStorageError
    assert errors.code_for(err) == 56


def test_an_error_keeps_its_message_and_defaults_to_its_name():
    assert str(errors.OffsetOutOfRangeError("offset 7 is beyond the log end offset 5")) == \
        "offset 7 is beyond the log end offset 5"
    assert str(errors.OffsetOutOfRangeError()) == "OFFSET_OUT_OF_RANGE"


def test_code_for_a_foreign_exception_is_unknown_server_error():
    assert errors.code_for(RuntimeError("boom")) == -1
    assert errors.code_for(errors.TopicAlreadyExistsError("t")) == 36


def test_errors_survive_pickling_with_their_message():
    err = pickle.loads(pickle.dumps(errors.InvalidConfigurationError("Unknown topic config name: foo",
                                                                     config_name="foo")))
    assert type(err) is errors.InvalidConfigurationError and str(err) == "Unknown topic config name: foo"
    storage = pickle.loads(pickle.dumps(errors.LogDirInUseError("/data: locked")))
    assert type(storage) is errors.LogDirInUseError and str(storage) == "/data: locked"


def test_a_second_class_cannot_claim_a_taken_code():
    with pytest.raises(TypeError, match="already belongs to OffsetOutOfRangeError"):
        class Clash(errors.KafkaError, code=1, name="CLASH"):  # noqa: F841
            pass
