"""Kafka's ``kafka-configs.sh --entity-type users`` (the class behind it) sets and deletes SCRAM users on
``seglog broker`` as on Apache Kafka, and both brokers then describe the same credentials."""

from __future__ import annotations

import uuid

from kafka.admin import KafkaAdminClient

from jvm.apache_kafka import run_tool
from tests.broker_core.security.sasl_kit import authenticator, log_in
from tests.broker_core.server.server_kit import start_broker

CONFIG_COMMAND = "kafka.admin.ConfigCommand"  # bin/kafka-configs.sh


def _configs(bootstrap: str, *args: str) -> str:
    done = run_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args)
    assert done.returncode == 0, f"kafka-configs.sh {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _described(bootstrap: str, user: str):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found = admin.describe_user_scram_credentials([user])[user]
    finally:
        admin.close()
    return found["error"], [(int(i["mechanism"]), i["iterations"]) for i in found["credential_infos"]]


def test_kafka_configs_adds_and_deletes_a_scram_user_on_seglog_as_on_kafka(tmp_path, apache_kafka):
    user = f"alice-{uuid.uuid4().hex[:8]}"  # Apache Kafka runs once for the whole session
    add = ("--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]",
           "--entity-type", "users", "--entity-name", user)
    delete = ("--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", user)
    server = start_broker(tmp_path / "logs")
    try:
        answers = {}
        for name, bootstrap in (("seglog", server.bootstrap_servers), ("kafka", apache_kafka.bootstrap)):
            answers[name] = [_configs(bootstrap, *add), _described(bootstrap, user)]
        assert answers["seglog"] == answers["kafka"] == [
            f"Completed updating config for user {user}.\n", (None, [(2, 8192)])]
        assert log_in(authenticator(server.credential_store), "SCRAM-SHA-512", user, "alice-secret")["error_code"] == 0
        for name, bootstrap in (("seglog", server.bootstrap_servers), ("kafka", apache_kafka.bootstrap)):
            answers[name] = [_configs(bootstrap, *delete), _described(bootstrap, user)[1]]
        assert answers["seglog"] == answers["kafka"] == [f"Completed updating config for user {user}.\n", []]
    finally:
        server.shutdown(timeout_ms=10_000)


def test_seglog_answers_user_credential_requests_as_apache_kafka(tmp_path, apache_kafka):
    from broker_core.client.protocol_client import ProtocolClient
    from broker_core.protocol import ApiKey
    from broker_core.security.credential_admin import deletion, upsertion
    from broker_core.security.scram import ScramMechanism

    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    tag = uuid.uuid4().hex[:8]

    def u(name: str) -> str:
        return f"{name}-{tag}"

    alterations = [
        ([], [upsertion(u("a"), sha256, "x"), upsertion(u("a"), sha512, "x")]),  # one user twice
        ([], [upsertion(u("b"), sha256, "x"), upsertion(u("b"), sha256, "x")]),
        ([deletion(u("c"), sha256)], [upsertion(u("d"), sha512, "x", 8192)]),
        ([], [upsertion("", sha256, "x")]),
        ([], [{**upsertion(u("e"), sha256, "x"), "mechanism": 0}]),
        ([], [upsertion(u("f"), sha256, "x", 4095), upsertion(u("g"), sha512, "x", 16385)]),
        ([deletion(u("d"), sha512)], [upsertion(u("d"), sha256, "x")]),
    ]
    descriptions = [[u("nobody"), u("d"), u("d")], [u("d"), ""]]

    def answers(bootstrap: str) -> list:
        with ProtocolClient(bootstrap) as client:
            # Kafka lists a request's results in a hash map's order: compared by user.
            out = [sorted(client.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": d, "upsertions": p})[
                "results"], key=lambda r: r["user"]) for d, p in alterations]
            for names in descriptions:
                answer = client.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": [{"name": n} for n in names]})
                out.append({**answer, "results": sorted(answer["results"], key=lambda r: r["user"])})
        return out

    server = start_broker(tmp_path / "logs")
    try:
        seglog = answers(server.bootstrap_servers)
    finally:
        server.shutdown(timeout_ms=10_000)
    kafka = answers(apache_kafka.bootstrap)
    assert seglog == kafka
