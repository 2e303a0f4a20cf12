"""Who the broker is and where it listens: meta.properties, producer ids, listener endpoints."""

from __future__ import annotations

import pytest

from broker_core.errors import InvalidConfigurationError
from broker_core.meta_properties import (MetaProperties, ensure_meta_properties, read_meta_properties,
                                         write_meta_properties)
from broker_core.network.endpoint import EndPoint, advertised_endpoints, inter_broker_listener_name, parse_listeners
from broker_core.server.producer_id_manager import ProducerIdManager


def test_meta_properties_are_written_once_and_read_back(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    cluster_id = ensure_meta_properties([str(a), str(b)], node_id=2)
    assert ensure_meta_properties([str(a), str(b)], node_id=2) == cluster_id
    meta_a, meta_b = read_meta_properties(str(a)), read_meta_properties(str(b))
    assert (meta_a.cluster_id, meta_a.node_id, meta_a.version) == (cluster_id, 2, 1)
    assert meta_a.directory_id != meta_b.directory_id and len(cluster_id) == 22
    text = (a / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}\n" in text and "node.id=2\n" in text and "version=1\n" in text


def test_a_new_log_dir_joins_the_cluster_of_the_others(tmp_path):
    cluster_id = ensure_meta_properties([str(tmp_path / "a")], node_id=0)
    assert ensure_meta_properties([str(tmp_path / "a"), str(tmp_path / "b")], node_id=0) == cluster_id
    assert read_meta_properties(str(tmp_path / "b")).cluster_id == cluster_id


def test_log_dirs_of_different_clusters_or_nodes_are_refused(tmp_path):
    for d, cluster in (("a", "AAAAAAAAAAAAAAAAAAAAAA"), ("b", "BBBBBBBBBBBBBBBBBBBBBB")):
        (tmp_path / d).mkdir()
        write_meta_properties(str(tmp_path / d), MetaProperties(cluster, 0, "dir-" + d))
    with pytest.raises(InvalidConfigurationError, match="different clusters"):
        ensure_meta_properties([str(tmp_path / "a"), str(tmp_path / "b")], node_id=0)
    with pytest.raises(InvalidConfigurationError, match="Stored node id 0"):
        ensure_meta_properties([str(tmp_path / "a")], node_id=1)


def test_producer_ids_continue_after_the_last_granted_block(tmp_path):
    first = ProducerIdManager(str(tmp_path), block_size=10)
    assert [first.generate_producer_id() for _ in range(3)] == [0, 1, 2]
    second = ProducerIdManager(str(tmp_path), block_size=10)  # a restart, clean or not
    assert second.generate_producer_id() == 10
    assert [second.generate_producer_id() for _ in range(10)][-1] == 20  # crossed into the next block


def test_listeners_parse_with_kafka_syntax():
    assert parse_listeners("PLAINTEXT://127.0.0.1:9092, client://:0", security_protocol_map="CLIENT:PLAINTEXT") == [
        EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092), EndPoint("CLIENT", "PLAINTEXT", "", 0)]
    assert parse_listeners("PLAINTEXT://[::1]:9092")[0].host == "::1"


def test_listeners_of_every_security_protocol_parse_and_a_name_takes_its_protocol_from_the_map():
    endpoints = parse_listeners("PLAINTEXT://:1,SSL://:2,SASL_PLAINTEXT://:3,SASL_SSL://:4,CLIENT://:5",
                                security_protocol_map="CLIENT:SASL_SSL")
    assert [(e.listener_name, e.security_protocol) for e in endpoints] == [
        ("PLAINTEXT", "PLAINTEXT"), ("SSL", "SSL"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT"), ("SASL_SSL", "SASL_SSL"),
        ("CLIENT", "SASL_SSL")]


def test_the_inter_broker_listener_is_the_named_one_or_else_the_first():
    assert inter_broker_listener_name(None, ["CLIENT", "REPLICATION"]) == "CLIENT"
    assert inter_broker_listener_name("replication", ["CLIENT", "REPLICATION"]) == "REPLICATION"
    with pytest.raises(InvalidConfigurationError, match="inter.broker.listener.name: it must be one of"):
        inter_broker_listener_name("OTHER", ["CLIENT", "REPLICATION"])


@pytest.mark.parametrize("text, message", [
    ("PLAINTEXT://h:1,PLAINTEXT://h:2", "appears twice"),
    ("PLAINTEXT://h:99999", "out of range"),
    ("INTERNAL://h:1", "no security protocol"),
    ("", "no listener"),
])
def test_listeners_the_broker_cannot_serve_are_refused(text, message):
    with pytest.raises(InvalidConfigurationError, match=message):
        parse_listeners(text)


def test_advertised_listeners_override_the_bound_ones_by_name():
    bound = [EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 40001)]
    assert advertised_endpoints(bound, None)["PLAINTEXT"].port == 40001
    advertised = advertised_endpoints(bound, "PLAINTEXT://kafka.example:9092")
    assert (advertised["PLAINTEXT"].host, advertised["PLAINTEXT"].port) == ("kafka.example", 9092)
    with pytest.raises(InvalidConfigurationError, match="not in listeners"):
        advertised_endpoints(bound, "OTHER://kafka.example:9092", {"listener.security.protocol.map": "OTHER:PLAINTEXT"})


def test_a_start_refused_for_a_foreign_node_id_leaves_the_log_dir_untouched(tmp_path):
    from broker_core.broker import Broker
    from broker_core.config import BrokerConfig
    from broker_core.server.broker_server import BrokerServer

    with Broker(str(tmp_path)) as broker:
        broker.create_topic("orders", 1)
        broker.produce("orders", [b"a", b"b"])
    (tmp_path / ".kafka_cleanshutdown").unlink()  # as after a crash: the next owner must recover
    write_meta_properties(str(tmp_path), MetaProperties("AAAAAAAAAAAAAAAAAAAAAA", 7, "dir-a"))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    config = BrokerConfig.from_props({"log.dirs": str(tmp_path), "node.id": "0",
                                      "listeners": "PLAINTEXT://127.0.0.1:0"})
    with pytest.raises(InvalidConfigurationError, match="Stored node id 7"):
        BrokerServer(config).startup()
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert after == before
