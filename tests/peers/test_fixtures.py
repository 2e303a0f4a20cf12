"""The peers' fixtures start what they say: Apache Kafka answers Kafka's own topic tool, and serves a SASL_SSL
listener to a SCRAM user formatted into its metadata."""

import base64
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from jvm.apache_kafka import KafkaBroker, ScramUser, random_cluster_id, run_tool
from tests.broker_core.security.tls_kit import TestCa, server_ssl_props


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


def _sasl_ssl_client(kafka: KafkaBroker, truststore, password: str) -> dict[str, str]:
    return {"bootstrap.servers": kafka.bootstrap_of("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(truststore), "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": password}


@pytest.mark.slow
def test_apache_kafka_serves_sasl_ssl_to_a_scram_user_formatted_into_its_metadata(tmp_path):
    # Unencrypted: Java 17 reads no PBES2-encrypted key ("PBES2 SecretKeyFactory not available").
    stores = TestCa(tmp_path / "ca").server()
    with KafkaBroker(tmp_path / "kafka", listeners={"SASL_SSL": "SASL_SSL"},
                     scram_users=[ScramUser("alice", "alice-secret")],
                     overrides={**server_ssl_props(stores, "listener.name.sasl_ssl."),
                                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"}) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.create_topics([NewTopic("secured", 1)])["secured"].result(60)
        producer = Producer(_sasl_ssl_client(kafka, stores.truststore, "alice-secret"))
        producer.produce("secured", b"over SASL_SSL")
        assert producer.flush(60) == 0
        consumer = Consumer({**_sasl_ssl_client(kafka, stores.truststore, "alice-secret"), "group.id": "g"})
        consumer.assign([TopicPartition("secured", 0, 0)])
        message = consumer.poll(60)
        consumer.close()
        assert (message.error(), message.value()) == (None, b"over SASL_SSL")

        errors = []
        refused = Producer({**_sasl_ssl_client(kafka, stores.truststore, "wrong"), "error_cb": errors.append})
        deadline = time.monotonic() + 60
        while not errors and time.monotonic() < deadline:
            refused.poll(0.2)
        assert [e.code() for e in errors[:1]] == [KafkaError._AUTHENTICATION], errors


def test_a_scram_user_kafka_storage_cannot_take_unquoted_is_refused_with_its_value():
    assert ScramUser("bench", "s3cret").add_scram() == "SCRAM-SHA-512=[name=bench,password=s3cret]"
    with pytest.raises(ValueError, match=r"SCRAM user 'bench': password 'a,b' is empty or holds one of"):
        ScramUser("bench", "a,b")
