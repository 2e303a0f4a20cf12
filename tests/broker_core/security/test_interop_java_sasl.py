"""Kafka's Java client (the classes behind kafka-topics.sh and the console producer and consumer, Kafka 4.x)
against a SASL_SSL listener: SCRAM-SHA-512 with a PEM truststore, as a Kafka user configures it."""

from __future__ import annotations

from jvm.apache_kafka import run_tool
from tests.broker_core.security.sasl_listener_kit import USERS, sasl_ssl


def client_properties(tmp_path, server_stores, password: str = USERS["alice"]):
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        f'password="{password}";\n'
        f"ssl.truststore.type=PEM\nssl.truststore.location={server_stores.truststore}\n")
    return str(path)


def java_tool(script: str, *args: str, input: str | None = None) -> list[str]:
    done = run_tool(script, *args, input=input, timeout=120)
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return [line for line in done.stdout.splitlines()
            if not line.startswith(("Warning: ", "Option --")) and "WARN" not in line]


def test_the_java_client_creates_produces_and_consumes_in_a_group_over_sasl_ssl(sasl_broker, server_stores,
                                                                                tmp_path):
    bootstrap, config = sasl_ssl(sasl_broker), client_properties(tmp_path, server_stores)
    assert java_tool("kafka-topics.sh", "--bootstrap-server", bootstrap, "--command-config", config, "--create",
                     "--topic", "java-sasl", "--partitions", "1") == ["Created topic java-sasl."]
    java_tool("kafka-console-producer.sh", "--bootstrap-server", bootstrap, "--command-config", config,
              "--topic", "java-sasl", input="one\ntwo\nthree\n")
    assert java_tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--command-config", config,
                     "--topic", "java-sasl", "--group", "java-group", "--from-beginning", "--max-messages", "3",
                     "--timeout-ms", "30000") == ["one", "two", "three"]
    described = java_tool("kafka-consumer-groups.sh", "--bootstrap-server", bootstrap, "--command-config", config,
                          "--describe", "--group", "java-group")
    assert any(line.split()[:4] == ["java-group", "java-sasl", "0", "3"] for line in described), described


def test_the_java_client_with_a_wrong_password_is_refused(sasl_broker, server_stores, tmp_path):
    done = run_tool("kafka-topics.sh", "--bootstrap-server", sasl_ssl(sasl_broker), "--command-config",
                    client_properties(tmp_path, server_stores, password="wrong"), "--list", timeout=120)
    assert done.returncode != 0
    assert "SaslAuthenticationException" in done.stdout + done.stderr
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in done.stdout + done.stderr
