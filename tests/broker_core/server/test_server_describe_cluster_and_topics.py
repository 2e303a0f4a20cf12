"""DescribeCluster and DescribeTopicPartitions over a real socket: what Kafka's admin client reads for
``describeCluster`` and ``describeTopics``."""

from __future__ import annotations

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.meta_properties import read_meta_properties
from broker_core.protocol import ApiKey

from server_kit import create_topic

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
MISMATCHED_ENDPOINT_TYPE = 114
UNSUPPORTED_ENDPOINT_TYPE = 115


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster_names_this_broker_the_only_broker_and_the_controller(client, broker_server, tmp_path,
                                                                              version):
    response = client.send(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True}, version=version)
    assert response["error_code"] == NONE
    assert response["cluster_id"] == read_meta_properties(tmp_path / "logs").cluster_id
    assert response["controller_id"] == 0
    assert [(b["broker_id"], b["host"], b["port"], b["rack"], b["is_fenced"]) for b in response["brokers"]] == [
        (0, "127.0.0.1", broker_server.bound_port(), None, False)]
    # With no authorizer every cluster operation is allowed: DESCRIBE (8) and ALTER (7) among them.
    assert response["cluster_authorized_operations"] & (1 << 8) and response["cluster_authorized_operations"] & (1 << 7)


def test_describe_cluster_for_controllers_or_an_unknown_endpoint_type_is_refused_as_kafka_does(client):
    controllers = client.send(ApiKey.DESCRIBE_CLUSTER, {"endpoint_type": 2}, version=2)
    assert (controllers["error_code"], controllers["brokers"]) == (MISMATCHED_ENDPOINT_TYPE, [])
    assert controllers["error_message"] == ("The request was sent to an endpoint of type BROKER, "
                                            "but we wanted an endpoint of type CONTROLLER")
    unknown = client.send(ApiKey.DESCRIBE_CLUSTER, {"endpoint_type": 7}, version=1)
    assert (unknown["error_code"], unknown["error_message"]) == (UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7")


def _page(client: ProtocolClient, topics: list[str], limit: int, cursor: tuple[str, int] | None = None) -> dict:
    return client.send(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {
        "topics": [{"name": t} for t in topics], "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}})


def _partitions(response: dict) -> list[tuple[str, int]]:
    return [(t["name"], p["partition_index"]) for t in response["topics"] for p in t["partitions"]]


def test_describe_topic_partitions_pages_through_the_topics_by_name_with_a_cursor(client):
    for name, partitions in (("charlie", 1), ("alpha", 3), ("bravo", 2)):
        create_topic(client, name, partitions)
    first = _page(client, [], 2)
    assert _partitions(first) == [("alpha", 0), ("alpha", 1)]
    assert first["next_cursor"] == {"topic_name": "alpha", "partition_index": 2}
    second = _page(client, [], 2, ("alpha", 2))
    assert _partitions(second) == [("alpha", 2), ("bravo", 0)]
    assert second["next_cursor"] == {"topic_name": "bravo", "partition_index": 1}
    third = _page(client, [], 2, ("bravo", 1))
    assert _partitions(third) == [("bravo", 1), ("charlie", 0)]
    assert third["next_cursor"] is None
    # A page full at a topic's end points the cursor at the next topic's first partition.
    assert _page(client, ["bravo", "charlie"], 2)["next_cursor"] == {"topic_name": "charlie", "partition_index": 0}
    (partition,) = third["topics"][1]["partitions"]
    assert (partition["leader_id"], partition["replica_nodes"], partition["isr_nodes"],
            partition["eligible_leader_replicas"], partition["last_known_elr"]) == (0, [0], [0], [], [])


def test_describe_topic_partitions_answers_unknown_topics_and_refuses_a_cursor_outside_the_topics(client):
    create_topic(client, "orders", 1)
    response = _page(client, ["orders", "missing", "bad/name"], 100)
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [
        ("bad/name", INVALID_TOPIC_EXCEPTION), ("missing", UNKNOWN_TOPIC_OR_PARTITION), ("orders", NONE)]
    refused = _page(client, ["orders"], 100, ("payments", 0))
    assert [(t["name"], t["error_code"], t["partitions"]) for t in refused["topics"]] == [
        ("orders", INVALID_REQUEST, [])]


def test_seglog_cluster_names_a_single_broker_its_own_controller(broker_server, tmp_path):
    from tests.broker_core.cli_kit import run

    code, out, err = run("cluster", "--bootstrap", f"127.0.0.1:{broker_server.bound_port()}")
    assert code == 0, err
    assert out.splitlines() == [
        f"Cluster id: {read_meta_properties(tmp_path / 'logs').cluster_id}", "Controller: 0", "",
        "BROKER HOST      PORT" + " " * max(0, len(str(broker_server.bound_port())) - 4) + " RACK CONTROLLER",
        f"0      127.0.0.1 {broker_server.bound_port()} -    yes"]
