"""Kafka's own tools (the classes behind its bin/*.sh scripts, Kafka 4.3's Java client) against
``seglog broker``, each beside the same tool run against Apache Kafka where the two outputs can be
compared line for line."""

from __future__ import annotations

import re
import threading
import uuid

import pytest

from jvm.apache_kafka import run_tool

SEGLOG_NODE = 0
KAFKA_NODE = 1


def tool(script: str, *args: str, input: str | None = None) -> list[str]:
    """Run ``script`` with ``args``; its stdout lines without the deprecation notices and warnings."""
    done = run_tool(script, *args, input=input)
    assert done.returncode == 0, f"{script} {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return [line for line in done.stdout.splitlines()
            if not line.startswith(("Warning: ", "Option --")) and "WARN" not in line]


def topics(bootstrap: str, *args: str) -> list[str]:
    return tool("kafka-topics.sh", "--bootstrap-server", bootstrap, *args)


def groups(bootstrap: str, *args: str) -> list[str]:
    return tool("kafka-consumer-groups.sh", "--bootstrap-server", bootstrap, *args)


def unique(name: str) -> str:
    # Apache Kafka runs once for the whole session: names must not meet earlier tests'.
    return f"{name}-{uuid.uuid4().hex[:8]}"


def normalized(lines: list[str], topic: str, node: int) -> list[str]:
    """Describe output with what differs by nature between two brokers replaced: names, ids, nodes."""
    out = []
    for line in lines:
        line = line.replace(topic, "<topic>")
        line = re.sub(r"TopicId: \S+", "TopicId: <id>", line)
        line = re.sub(rf"(Leader|Replicas|Isr): {node}\b", r"\1: <node>", line)
        # A KRaft cluster formatted by kafka-storage.sh holds min.insync.replicas=1 as a cluster default.
        line = line.replace("min.insync.replicas=1,", "")
        out.append(line)
    return out


# --- kafka-topics.sh ------------------------------------------------------------------------------------


def test_kafka_topics_creates_lists_describes_alters_and_deletes_a_topic_on_seglog(broker_server, apache_kafka):
    seglog, kafka = broker_server.bootstrap_servers, apache_kafka.bootstrap
    topic = unique("orders")
    described = {}
    for bootstrap, node in ((seglog, SEGLOG_NODE), (kafka, KAFKA_NODE)):
        assert topics(bootstrap, "--create", "--topic", topic, "--partitions", "2",
                    "--config", "retention.ms=86400000", "--config", "cleanup.policy=compact") == [
            f"Created topic {topic}."]
        topics(bootstrap, "--alter", "--topic", topic, "--partitions", "3")
        described[node] = normalized(topics(bootstrap, "--describe", "--topic", topic), topic, node)
    assert described[SEGLOG_NODE] == described[KAFKA_NODE]
    assert described[SEGLOG_NODE] == [
        "Topic: <topic>\tTopicId: <id>\tPartitionCount: 3\tReplicationFactor: 1\t"
        "Configs: cleanup.policy=compact,retention.ms=86400000",
        *(f"\tTopic: <topic>\tPartition: {p}\tLeader: <node>\tReplicas: <node>\tIsr: <node>\tElr: \tLastKnownElr: "
          for p in range(3))]
    assert topic in topics(seglog, "--list")
    topics(seglog, "--delete", "--topic", topic)
    assert topic not in topics(seglog, "--list")


def test_kafka_cluster_tool_reads_the_cluster_id_of_seglog_through_describe_cluster(broker_server):
    assert tool("org.apache.kafka.tools.ClusterTool", "cluster-id", "--bootstrap-server",
                broker_server.bootstrap_servers) == [
        f"Cluster ID: {broker_server.cluster_id}"]


# --- console producer and consumer ---------------------------------------------------------------------


def test_console_producer_and_consumer_round_trip_keys_and_headers_on_seglog_as_on_kafka(broker_server,
                                                                                          apache_kafka):
    keyed = "alice:order-1\nbob:order 2 with spaces\n"
    with_headers = "trace:abc,region:eu\tcarol\t{\"amount\": 12}\nempty:\tdave\tlast\n"
    consumed = {}
    for bootstrap in (broker_server.bootstrap_servers, apache_kafka.bootstrap):
        topic, group = unique("console"), unique("console-group")
        tool("kafka-console-producer.sh", "--bootstrap-server", bootstrap, "--topic", topic,
             "--property", "parse.key=true", "--property", "key.separator=:", input=keyed)
        tool("kafka-console-producer.sh", "--bootstrap-server", bootstrap, "--topic", topic,
             "--property", "parse.key=true", "--property", "parse.headers=true", input=with_headers)
        consumed[bootstrap] = tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--topic", topic,
                                   "--from-beginning",
                                   "--max-messages", "4", "--property", "print.key=true",
                                   "--property", "print.headers=true", "--group", group)
    assert consumed[broker_server.bootstrap_servers] == [
        "NO_HEADERS\talice\torder-1", "NO_HEADERS\tbob\torder 2 with spaces",
        "trace:abc,region:eu\tcarol\t{\"amount\": 12}", "empty:\tdave\tlast"]
    assert consumed[broker_server.bootstrap_servers] == consumed[apache_kafka.bootstrap]


# --- kafka-consumer-groups.sh -----------------------------------------------------------------------------


def _committed_group(bootstrap: str, topic: str, group: str) -> None:
    """``topic`` with 3 records in partition 0 and 2 in partition 1, ``group`` at their end."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topics(bootstrap, "--create", "--topic", topic, "--partitions", "2")
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    for partition, count in ((0, 3), (1, 2)):
        for i in range(count):
            producer.send(topic, f"r{i}".encode(), partition=partition)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1),
                         TopicPartition(topic, 1): OffsetAndMetadata(2, "", -1)})
    finally:
        consumer.close()


def _group_scenario(bootstrap: str, topic: str, group: str) -> dict[str, list[str]]:
    _committed_group(bootstrap, topic, group)
    out = {"list": groups(bootstrap, "--list", "--state", "Empty"),
           "describe": groups(bootstrap, "--describe", "--group", group)}
    out["to-earliest"] = groups(bootstrap, "--reset-offsets", "--group", group,
                              "--topic", topic, "--to-earliest", "--execute")
    out["to-offset"] = groups(bootstrap, "--reset-offsets", "--group", group,
                            "--topic", f"{topic}:1", "--to-offset", "1", "--execute")
    out["after-reset"] = groups(bootstrap, "--describe", "--group", group)
    out["delete-offsets"] = groups(bootstrap, "--delete-offsets", "--group", group,
                                 "--topic", topic)
    out["delete"] = groups(bootstrap, "--delete", "--group", group)
    return {step: [re.sub(r"\s+", " ", line.replace(topic, "<topic>").replace(group, "<group>")).strip()
                   for line in lines] for step, lines in out.items()}


def test_kafka_consumer_groups_lists_describes_resets_and_deletes_offsets_on_seglog_as_on_kafka(broker_server,
                                                                                                apache_kafka):
    topic, group = unique("lagging"), unique("etl")
    seglog = _group_scenario(broker_server.bootstrap_servers, topic, group)
    kafka = _group_scenario(apache_kafka.bootstrap, topic, group)
    assert "<group> Empty" in seglog["list"]
    assert seglog["describe"] == [
        "", "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID",
        "<group> <topic> 0 3 3 0 - - -", "<group> <topic> 1 2 2 0 - - -"]
    assert seglog["after-reset"][-2:] == ["<group> <topic> 0 0 3 3 - - -", "<group> <topic> 1 1 2 1 - - -"]
    assert seglog["delete-offsets"][0] == "Request succeeded for deleting offsets from group <group>."
    assert seglog["delete"] == ["Deletion of requested consumer groups ('<group>') was successful."]
    for step in ("describe", "to-earliest", "to-offset", "after-reset", "delete-offsets", "delete"):
        assert sorted(seglog[step]) == sorted(kafka[step]), step
    # Kafka lists its other groups too: only this one is compared.
    assert [line for line in kafka["list"] if "<group>" in line] == ["<group> Empty"]


def test_deleting_offsets_of_a_topic_an_active_consumer_reads_is_refused_by_seglog(broker_server):
    from kafka import KafkaConsumer

    bootstrap = broker_server.bootstrap_servers
    topic, group = unique("busy"), unique("readers")
    _committed_group(bootstrap, topic, group)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             session_timeout_ms=30_000)
    stop = threading.Event()

    def keep_polling() -> None:  # stays a member: heartbeats and polls until the tool has answered
        while not stop.is_set():
            consumer.poll(200)

    polling = threading.Thread(target=keep_polling, daemon=True)
    try:
        for _ in range(100):  # until the consumer has joined (Stable with a member)
            consumer.poll(100)
            if consumer.assignment():
                break
        assert consumer.assignment()
        polling.start()
        lines = groups(bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
    finally:
        stop.set()
        if polling.is_alive():
            polling.join(10)
        consumer.close()
    refused = [line.split() for line in lines if line.startswith(topic)]
    assert sorted(r[1] for r in refused) == ["0", "1"]
    assert all("GroupSubscribedToTopicException" in " ".join(r) for r in refused), lines


# --- the perf-test tools ------------------------------------------------------------------------------------


def test_producer_and_consumer_perf_tests_count_every_record_through_seglog(broker_server):
    bootstrap = broker_server.bootstrap_servers
    topic = unique("perf")
    topics(bootstrap, "--create", "--topic", topic, "--partitions", "2")
    produced = tool("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "5000",
                    "--record-size", "100", "--throughput", "-1",
                    "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all")
    assert re.match(r"5000 records sent, [\d.]+ records/sec", produced[-1]), produced
    consumed = tool("kafka-consumer-perf-test.sh", "--bootstrap-server", bootstrap, "--topic", topic,
                    "--messages", "5000", "--timeout", "30000")
    header, values = consumed[-2].split(", "), consumed[-1].split(", ")
    row = dict(zip(header, values, strict=True))
    assert int(row["data.consumed.in.nMsg"]) == 5000
    assert float(row["data.consumed.in.MB"]) == pytest.approx(5000 * 100 / 1024 / 1024, abs=0.001)
