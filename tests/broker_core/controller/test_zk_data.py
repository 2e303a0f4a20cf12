"""Kafka's ZooKeeper paths and JSON: what Kafka wrote decodes, what we write round-trips."""

from __future__ import annotations

import json
import re

import pytest

from broker_core.controller import zk_data
from broker_core.controller.etcd_connect import EtcdConnect, parse_etcd_connect
from broker_core.controller.partition_state import NO_LEADER, PartitionState
from broker_core.errors import InvalidConfigurationError
from broker_core.network.endpoint import EndPoint
from format.layout import TopicPartition


def test_a_broker_registration_written_by_kafka_decodes():
    kafka = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://host1:9092"],'
             b'"rack":"dc1","jmx_port":-1,"host":"host1","timestamp":"1500000000000","port":9092,"version":4}')
    assert zk_data.decode_broker_info(3, kafka) == zk_data.BrokerInfo(
        3, (EndPoint("PLAINTEXT", "PLAINTEXT", "host1", 9092),), "dc1")


def test_a_broker_registration_round_trips_in_kafkas_version_4_form():
    broker = zk_data.BrokerInfo(2, (EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9093),), None)
    data = zk_data.encode_broker_info(broker, 1_700_000_000_000)
    assert json.loads(data) == {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "endpoints": ["PLAINTEXT://127.0.0.1:9093"],
        "rack": None, "jmx_port": -1, "host": "127.0.0.1", "timestamp": "1700000000000", "port": 9093, "version": 4}
    assert zk_data.decode_broker_info(2, data) == broker


def test_a_partition_state_written_by_kafka_decodes_and_ours_round_trips():
    tp = TopicPartition("orders", 7)
    kafka = b'{"controller_epoch":4,"leader":2,"version":1,"leader_epoch":9,"isr":[2,0,1]}'
    state = zk_data.decode_partition_state(tp, kafka)
    assert state == PartitionState(2, 9, (2, 0, 1), 4)
    assert json.loads(zk_data.encode_partition_state(state)) == json.loads(kafka)
    offline = PartitionState(NO_LEADER, 10, (2,), 5)
    assert zk_data.decode_partition_state(tp, zk_data.encode_partition_state(offline)) == offline


def test_a_partition_state_whose_leader_is_outside_its_isr_is_refused_with_its_path():
    with pytest.raises(ValueError, match="/brokers/topics/t/partitions/0/state: .*leader 3 is not in the ISR"):
        zk_data.decode_partition_state(TopicPartition("t", 0),
                                       b'{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":0,"isr":[1]}')


def test_a_malformed_node_is_refused_naming_its_path_and_field():
    with pytest.raises(ValueError, match="/brokers/topics/t: field 'partitions' is \\[\\], not dict"):
        zk_data.decode_topic_assignment("t", b'{"version":1,"partitions":[]}')
    with pytest.raises(ValueError, match="/controller: not JSON"):
        zk_data.decode_controller(b"{oops")


def test_the_topic_assignment_the_controller_and_its_epoch_round_trip():
    assignment = {1: (2, 3), 0: (1, 2)}
    data = zk_data.encode_topic_assignment(assignment)
    assert json.loads(data) == {"version": 1, "partitions": {"0": [1, 2], "1": [2, 3]}}
    assert zk_data.decode_topic_assignment("t", data) == {0: (1, 2), 1: (2, 3)}
    assert zk_data.decode_controller(zk_data.encode_controller(5, 1)) == 5
    assert zk_data.decode_controller(b"5") == 5  # Kafka 0.8's form
    assert zk_data.decode_controller_epoch(zk_data.encode_controller_epoch(12)) == 12
    assert zk_data.decode_cluster_id(zk_data.encode_cluster_id("Y2LsYqTUSMyV8rmV2EtVZw")) == "Y2LsYqTUSMyV8rmV2EtVZw"


def test_paths_are_kafkas_and_parse_back():
    tp = TopicPartition("a.b", 12)
    assert zk_data.partition_state_path(tp) == "/brokers/topics/a.b/partitions/12/state"
    assert zk_data.partition_from_state_path("/brokers/topics/a.b/partitions/12/state") == tp
    assert zk_data.partition_from_state_path("/brokers/topics/a.b") is None
    assert zk_data.topic_from_path("/brokers/topics/a.b") == "a.b"
    assert zk_data.topic_from_path("/brokers/topics/a.b/partitions/12/state") is None
    assert zk_data.broker_id_from_path(zk_data.broker_path(7)) == 7


def test_etcd_connect_is_parsed_as_zookeeper_connect():
    assert parse_etcd_connect("127.0.0.1:2379,10.0.0.2:2380/seglog/prod") == EtcdConnect(
        (("127.0.0.1", 2379), ("10.0.0.2", 2380)), "/seglog/prod")
    assert parse_etcd_connect("etcd1") == EtcdConnect((("etcd1", 2379),), "")
    assert parse_etcd_connect("[::1]:2379/") == EtcdConnect((("::1", 2379),), "")
    assert str(parse_etcd_connect("a:1,b:2/x")) == "a:1,b:2/x"


@pytest.mark.parametrize("value, reason", [
    ("h:2379/seglog/", "chroot /seglog/ must not end with /"),
    ("h:2379/a//b", "chroot /a//b has an empty, '.' or '..' segment"),
    ("h:2379,,h2:1", "an empty host"),
    ("h:port", "port 'port' of 'h:port' is not a number"),
    ("h:70000", "port '70000' of 'h:70000' is not a number between 1 and 65535"),
])
def test_a_malformed_etcd_connect_is_refused_naming_the_value(value, reason):
    with pytest.raises(InvalidConfigurationError,
                       match=re.escape(f"Invalid value {value} for configuration etcd.connect: {reason}")):
        parse_etcd_connect(value)


def test_a_topic_assignment_carries_the_topic_id_as_kafkas_topic_znode_does():
    data = zk_data.encode_topic_assignment({0: (1, 2), 1: (2, 1)}, "q1ZtCzCuRYGYZc7HrMFV4A")
    assert json.loads(data) == {"version": 1, "partitions": {"0": [1, 2], "1": [2, 1]},
                                "topic_id": "q1ZtCzCuRYGYZc7HrMFV4A"}
    assert zk_data.decode_topic_id("events", data) == "q1ZtCzCuRYGYZc7HrMFV4A"
    assert zk_data.decode_topic_assignment("events", data) == {0: (1, 2), 1: (2, 1)}
    assert zk_data.decode_topic_id("events", zk_data.encode_topic_assignment({0: (1,)})) is None
