"""The peers' fixtures start what they say: Apache Kafka answers Kafka's own topic tool."""

import base64

from jvm.apache_kafka import random_cluster_id, run_tool


def test_apache_kafka_creates_and_lists_a_topic_through_kafka_topics(apache_kafka):
    created = run_tool("kafka-topics.sh", "--bootstrap-server", apache_kafka.bootstrap, "--create",
                       "--topic", "fixture-check", "--partitions", "2")
    assert created.returncode == 0, created.stderr
    listed = run_tool("kafka-topics.sh", "--bootstrap-server", apache_kafka.bootstrap, "--list")
    assert "fixture-check" in listed.stdout.split()


def test_a_cluster_id_is_sixteen_bytes_and_never_reads_as_an_option():
    # One id in 64 would start with "-" and kafka-storage.sh would take it for an option.
    ids = [random_cluster_id() for _ in range(5_000)]
    assert not [i for i in ids if i.startswith("-")]
    assert {len(base64.urlsafe_b64decode(i + "==")) for i in ids} == {16}
    assert len(set(ids)) == len(ids)
