"""The SCRAM users of a running broker through the Kafka protocol: AlterUserScramCredentials and
DescribeUserScramCredentials with confluent-kafka's and kafka-python's admin clients and raw requests,
Kafka's errors, durability across a restart; and the SASL APIs a plaintext connection is answered."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import admin as confluent_admin
from kafka.admin import KafkaAdminClient, UserScramCredentialDeletion, UserScramCredentialUpsertion

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey
from broker_core.security.credential_admin import deletion, upsertion
from broker_core.security.sasl_authenticator import SaslAuthenticationFailed
from broker_core.security.scram import ScramMechanism

from server_kit import start_broker
from tests.broker_core.security.sasl_kit import authenticator, log_in

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM = 91, 92, 93, 33


def _confluent(bootstrap):
    return confluent_admin.AdminClient({"bootstrap.servers": bootstrap})


def _alter(client: ProtocolClient, deletions=(), upsertions=()) -> list[dict]:
    return client.send(ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
                       {"deletions": list(deletions), "upsertions": list(upsertions)})["results"]


def test_a_user_added_with_confluent_kafka_is_described_and_authenticates_against_the_broker(broker_server,
                                                                                             bootstrap):
    admin = _confluent(bootstrap)
    info = confluent_admin.ScramCredentialInfo(confluent_admin.ScramMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials(
        [confluent_admin.UserScramCredentialUpsertion("alice", info, b"alice-secret")])
    futures["alice"].result(timeout=30)
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(timeout=30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (confluent_admin.ScramMechanism.SCRAM_SHA_512, 8192)]
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        auth = authenticator(broker_server.credential_store)
        assert log_in(auth, mechanism, "alice", "alice-secret")["error_code"] == 0
        assert str(auth.principal) == "User:alice"


def test_describing_an_unknown_user_with_confluent_kafka_is_resource_not_found(bootstrap):
    admin = _confluent(bootstrap)  # kept: the futures fail once their client is collected
    futures = admin.describe_user_scram_credentials(["nobody"])
    with pytest.raises(KafkaException) as caught:
        futures["nobody"].result(timeout=30)
    assert caught.value.args[0].code() == RESOURCE_NOT_FOUND


def test_kafka_python_adds_lists_and_deletes_users(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        errors = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("bob", "SCRAM-SHA-256", "bob-secret", iterations=4096),
            UserScramCredentialUpsertion("carol", "SCRAM-SHA-512", "carol-secret", iterations=16384)])
        assert errors == {"bob": None, "carol": None}
        described = admin.describe_user_scram_credentials()
        assert {user: [(int(i["mechanism"]), i["iterations"]) for i in d["credential_infos"]]
                for user, d in described.items()} == {"bob": [(1, 4096)], "carol": [(2, 16384)]}
        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", "SCRAM-SHA-256")]) == {
            "bob": None}
        assert list(admin.describe_user_scram_credentials()) == ["carol"]
    finally:
        admin.close()


@pytest.mark.parametrize("iterations,message", [(4095, "Too few iterations"), (16385, "Too many iterations")])
def test_iterations_outside_kafkas_bounds_are_an_unacceptable_credential(client, iterations, message):
    (result,) = _alter(client, upsertions=[upsertion("alice", SHA512, "pw", iterations)])
    assert (result["error_code"], result["error_message"]) == (UNACCEPTABLE_CREDENTIAL, message)
    assert client.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})["results"] == []


def test_an_empty_user_name_is_an_unacceptable_credential(client):
    (result,) = _alter(client, upsertions=[upsertion("", SHA512, "pw")])
    assert (result["error_code"], result["error_message"]) == (UNACCEPTABLE_CREDENTIAL, "Username must not be empty")


@pytest.mark.parametrize("change", [{"salt": b""}, {"salted_password": bytes(32)}])
def test_an_empty_salt_or_a_salted_password_of_another_digests_size_is_an_unacceptable_credential(client, change):
    (result,) = _alter(client, upsertions=[{**upsertion("alice", SHA512, "pw"), **change}])
    assert (result["error_code"], result["error_message"]) == (
        UNACCEPTABLE_CREDENTIAL, "The salt is empty or the salted password is not a digest")
    assert client.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})["results"] == []


@pytest.mark.parametrize("mechanism_type", [0, 3, -1])
def test_a_mechanism_other_than_scram_sha_256_or_512_is_an_unsupported_sasl_mechanism(client, mechanism_type):
    entry = {**upsertion("alice", SHA256, "pw"), "mechanism": mechanism_type}
    (result,) = _alter(client, upsertions=[entry])
    assert (result["error_code"], result["error_message"]) == (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")


def test_deleting_a_credential_that_does_not_exist_is_resource_not_found(client):
    _alter(client, upsertions=[upsertion("alice", SHA512, "pw")])
    (result,) = _alter(client, deletions=[deletion("alice", SHA256)])
    assert (result["error_code"], result["error_message"]) == (
        RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")


def test_a_user_named_twice_in_one_alteration_is_a_duplicate_resource_and_nothing_of_theirs_changes(client):
    results = _alter(client, upsertions=[upsertion("alice", SHA512, "pw"), upsertion("alice", SHA256, "pw"),
                                         upsertion("bob", SHA256, "pw")])
    assert sorted((r["user"], r["error_code"]) for r in results) == [("alice", DUPLICATE_RESOURCE), ("bob", 0)]
    described = client.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})["results"]
    assert [r["user"] for r in described] == ["bob"]


def test_a_user_named_twice_in_one_description_is_a_duplicate_resource(client):
    _alter(client, upsertions=[upsertion("alice", SHA512, "pw")])
    (result,) = client.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
                            {"users": [{"name": "alice"}, {"name": "alice"}]})["results"]
    assert result["error_code"] == DUPLICATE_RESOURCE and result["credential_infos"] == []


def test_credentials_survive_a_broker_restart_and_no_password_reaches_the_log_dir(tmp_path):
    log_dir = tmp_path / "logs"
    server = start_broker(log_dir)
    try:
        with ProtocolClient(server.bootstrap_servers) as client:
            assert _alter(client, upsertions=[upsertion("alice", SHA256, "alice-secret-9")])[0]["error_code"] == 0
    finally:
        server.shutdown(timeout_ms=10_000)
    assert not any(b"alice-secret-9" in p.read_bytes() for p in log_dir.rglob("*") if p.is_file())
    server = start_broker(log_dir)
    try:
        assert log_in(authenticator(server.credential_store), "SCRAM-SHA-256", "alice", "alice-secret-9")["error_code"] == 0
    finally:
        server.shutdown(timeout_ms=10_000)


def test_api_versions_advertises_the_sasl_and_user_apis(client):
    advertised = client.broker_versions
    assert advertised[ApiKey.SASL_HANDSHAKE] == (0, 1)
    assert advertised[ApiKey.SASL_AUTHENTICATE] == (0, 2)
    assert advertised[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert advertised[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)


def test_a_sasl_handshake_on_a_plaintext_connection_is_an_illegal_sasl_state_and_the_connection_carries_on(client):
    assert client.send(ApiKey.SASL_HANDSHAKE, {"mechanism": "PLAIN"}) == {"error_code": 34, "mechanisms": []}
    answer = client.send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0pw"})
    assert answer["error_code"] == 34 and answer["error_message"] == (
        "SaslAuthenticate request received after successful authentication")
    assert client.send(ApiKey.METADATA, {"topics": None})["brokers"]


def test_in_cluster_mode_a_user_added_through_one_broker_is_known_to_every_broker(tmp_path, etcd_server):
    connect = etcd_server.connect("/seglog")
    servers = [start_broker(tmp_path / f"logs-{n}", **{"node.id": n, "etcd.connect": connect}) for n in (1, 2)]
    try:
        with ProtocolClient(servers[0].bootstrap_servers) as first:
            assert _alter(first, upsertions=[upsertion("alice", SHA512, "alice-secret")])[0]["error_code"] == 0
        assert log_in(authenticator(servers[1].credential_store), "PLAIN", "alice", "alice-secret")["error_code"] == 0
        with ProtocolClient(servers[1].bootstrap_servers) as second:
            (described,) = second.send(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})["results"]
            assert described["user"] == "alice" and described["credential_infos"] == [
                {"mechanism": 2, "iterations": 4096}]
            assert _alter(second, deletions=[deletion("alice", SHA512)])[0]["error_code"] == 0
        with pytest.raises(SaslAuthenticationFailed):
            log_in(authenticator(servers[0].credential_store), "SCRAM-SHA-512", "alice", "alice-secret")
        assert not any((tmp_path / f"logs-{n}" / "seglog-scram-credentials.json").exists() for n in (1, 2))
    finally:
        for server in servers:
            server.shutdown(timeout_ms=10_000)
