"""The peers' fixtures start what they say: Apache Kafka answers Kafka's own topic tool."""

from jvm.apache_kafka import run_tool


def test_apache_kafka_creates_and_lists_a_topic_through_kafka_topics(apache_kafka):
    created = run_tool("kafka-topics.sh", "--bootstrap-server", apache_kafka.bootstrap, "--create",
                       "--topic", "fixture-check", "--partitions", "2")
    assert created.returncode == 0, created.stderr
    listed = run_tool("kafka-topics.sh", "--bootstrap-server", apache_kafka.bootstrap, "--list")
    assert "fixture-check" in listed.stdout.split()
