import pytest

from connector.client_options import client_security
from connector.options import SeglogOptionError, parse_options

BASE = {"path": "/data/logs", "subscribe": "orders"}


def test_defaults_follow_sparks_kafka_source():
    batch = parse_options(BASE)
    assert batch.starting.kind == "earliest" and batch.ending.kind == "latest"
    assert batch.fail_on_data_loss and not batch.include_headers
    assert parse_options(BASE, streaming=True).starting.kind == "latest"


def test_option_names_are_case_insensitive():
    opts = parse_options({"PATH": "/x", "SubScribe": "a,b", "failondataloss": "FALSE", "INCLUDEHEADERS": "true"})
    assert opts.subscribe == ("a", "b") and not opts.fail_on_data_loss and opts.include_headers


def test_offsets_json_is_parsed_per_partition():
    opts = parse_options({**BASE, "startingOffsets": '{"orders": {"0": 23, "1": -2}}',
                          "endingOffsets": '{"orders": {"0": -1, "1": 50}}'})
    assert opts.starting.for_partition("orders", 0) == 23 and opts.starting.for_partition("orders", 1) == -2
    assert opts.ending.for_partition("orders", 1) == 50


@pytest.mark.parametrize("extra, option", [
    ({"assign": '{"orders": [0]}'}, "subscribe and assign"),
    ({"startingOffsets": '{"orders": {"0": 1'}, "startingOffsets"),
    ({"startingOffsets": '{"orders": [1]}'}, "startingOffsets"),
    ({"endingOffsets": '{"orders": {"0": "x"}}'}, "endingOffsets"),
    ({"view": "lag"}, "view"),
    ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"minPartitions": "0"}, "minPartitions"),
    ({"maxOffsetsPerTrigger": "ten"}, "maxOffsetsPerTrigger"),
    ({"startingTimestamp": "yesterday"}, "startingTimestamp"),
    ({"startingTimestamp": "1", "startingOffsets": "earliest"}, "startingOffsets and startingTimestamp"),
    ({"subscribePattern": "orders["}, "subscribePattern"),
    ({"startingOffsets": "group"}, "groupId"),
    ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
    ({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),
    ({"colour": "blue"}, "colour"),
])
def test_bad_options_name_the_option(extra, option):
    with pytest.raises(SeglogOptionError, match=option):
        parse_options({**BASE, **extra}, streaming=None)


def test_a_topic_selector_and_a_path_are_required():
    with pytest.raises(SeglogOptionError, match="subscribe, subscribePattern or assign"):
        parse_options({"path": "/x"})
    with pytest.raises(SeglogOptionError, match="path"):
        parse_options({"subscribe": "t"})


def test_mode_specific_rules():
    with pytest.raises(SeglogOptionError, match="latest is for streaming"):
        parse_options({**BASE, "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(SeglogOptionError, match="batch queries only"):
        parse_options({**BASE, "endingOffsets": "latest"}, streaming=True)
    assert parse_options({**BASE, "startingOffsets": "latest"}, streaming=None).starting.kind == "latest"


def test_storage_options_are_passed_to_the_filesystem():
    opts = parse_options({**BASE, "storage.key": "k", "storage.endpoint_url": "http://127.0.0.1:1",
                          "storage.anon": "false"})
    assert opts.storage_options == {"key": "k", "endpoint_url": "http://127.0.0.1:1", "anon": False}


def test_auto_offset_reset_defaults_to_kafkas_latest_and_goes_with_group():
    group = {**BASE, "startingOffsets": "group", "groupId": "etl"}
    assert parse_options(group).auto_offset_reset == "latest"
    assert parse_options({**group, "autoOffsetReset": "None"}).auto_offset_reset == "none"
    assert parse_options({**group, "kafka.auto.offset.reset": "earliest"}).auto_offset_reset == "earliest"
    with pytest.raises(SeglogOptionError, match="autoOffsetReset goes with startingOffsets=group"):
        parse_options({**BASE, "autoOffsetReset": "earliest"})


def test_a_future_starting_timestamp_starts_at_the_log_end_unless_the_strategy_is_error():
    assert parse_options(BASE).starting_timestamp_strategy == "latest"
    assert parse_options({**BASE, "startingOffsetsByTimestampStrategy": "ERROR"}).starting_timestamp_strategy \
        == "error"


def test_rules_of_one_query_kind_are_checked_once_the_kind_is_known():
    with pytest.raises(SeglogOptionError, match="option endingTimestamp is for batch queries only"):
        parse_options({**BASE, "endingTimestamp": "5"}, streaming=True)
    with pytest.raises(SeglogOptionError, match="option view=offsets is for batch reads"):
        parse_options({"path": "/x", "view": "offsets"}, streaming=True)
    with pytest.raises(SeglogOptionError, match="offset -1 \\(latest\\) of orders-0"):
        parse_options({**BASE, "startingOffsets": '{"orders": {"0": -1}}'}, streaming=False)
    both = {**BASE, "endingTimestamp": "5", "startingOffsets": '{"orders": {"0": -1}}'}
    assert parse_options(both, streaming=None).ending.timestamp == 5  # load(): the kind is not known yet


def test_isolation_level_defaults_to_read_uncommitted_as_kafkas_consumer():
    assert parse_options(BASE).isolation_level == "read_uncommitted"
    assert not parse_options(BASE).read_committed


@pytest.mark.parametrize("name", ["isolation.level", "kafka.isolation.level", "Kafka.Isolation.Level"])
def test_isolation_level_is_taken_under_its_name_and_as_sparks_kafka_source_spells_it(name):
    assert parse_options({**BASE, name: "read_committed"}).read_committed


def test_isolation_level_given_twice_must_agree():
    both = {**BASE, "isolation.level": "read_committed", "kafka.isolation.level": "READ_COMMITTED"}
    assert parse_options(both).read_committed
    with pytest.raises(SeglogOptionError, match="options isolation.level .* and kafka.isolation.level .* disagree"):
        parse_options({**both, "kafka.isolation.level": "read_uncommitted"})


@pytest.mark.parametrize("name", ["isolation.level", "kafka.isolation.level"])
def test_a_bad_isolation_level_names_the_option_and_its_values(name):
    with pytest.raises(SeglogOptionError, match=f"option {name} must be one of read_uncommitted, read_committed, "
                                                f"not 'committed'"):
        parse_options({**BASE, name: "committed"})


def test_remote_storage_url_names_the_remote_tier_of_the_log_dir_in_path():
    options = parse_options({"path": "/data/logs", "subscribe": "t", "remote.storage.url": "s3://bucket/tier",
                             "storage.endpoint_url": "http://127.0.0.1:8333"})
    assert options.remote_storage_url == "s3://bucket/tier"
    assert options.storage_options == {"endpoint_url": "http://127.0.0.1:8333"}


@pytest.mark.parametrize("given", [{"bootstrap": "127.0.0.1:9092"}, {"path": "/data/logs"}])
def test_remote_storage_url_without_a_path_or_without_a_scheme_is_refused_naming_the_option(given):
    url = "s3://bucket/tier" if "bootstrap" in given else "bucket/tier"
    with pytest.raises(SeglogOptionError, match="option remote.storage.url"):
        parse_options({**given, "subscribe": "t", "remote.storage.url": url})


_SECURED = {**BASE, "bootstrap": "127.0.0.1:9093", "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      'username="etl" password="etl-secret";'}


def test_the_kafka_security_options_are_the_client_properties_without_the_prefix():
    options = parse_options({**_SECURED, "KAFKA.SSL.Truststore.Type": "PEM"}, streaming=None)
    assert options.client_props == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                                    "sasl.jaas.config": _SECURED["kafka.sasl.jaas.config"],
                                    "ssl.truststore.type": "PEM"}
    security = client_security(options.client_props)
    assert (security.security_protocol, security.sasl_mechanism, security.username, security.password) == \
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", "etl", "etl-secret")
    assert "etl-secret" not in repr(options)


@pytest.mark.parametrize("extra, option", [
    ({"kafka.security.protocol": "SASL_TLS"}, "option kafka.security.protocol"),
    ({"kafka.sasl.mechanism": "GSSAPI"}, "option kafka.sasl.mechanism"),
    ({"kafka.sasl.jaas.config": 'username="etl" password="etl-secret"'}, "option kafka.sasl.jaas.config"),
    ({"kafka.security.protocol": "SASL_SSL", "kafka.ssl.truststore.location": "/no/such/ca.pem"},
     "option kafka.ssl.truststore.location"),
    ({"kafka.security.protocol": "SSL", "kafka.ssl.keystore.type": "JKS"}, "option kafka.ssl.keystore.type"),
])
def test_a_bad_security_option_names_the_option_and_hides_the_password(extra, option):
    with pytest.raises(SeglogOptionError, match=option) as err:
        parse_options({**_SECURED, **extra}, streaming=None)
    assert "etl-secret" not in str(err.value)
