"""Users made with ``seglog users`` log in over a SASL_PLAINTEXT listener with Kafka's clients: added on
the log dir before the broker starts, or through the running broker; a changed password and a deleted
user are refused from then on."""

from __future__ import annotations

import socket

import pytest

from broker_core.protocol import ApiKey, encode_request, parse_response
from broker_core.security.sasl_client import SaslClient
from tests.broker_core.cli_kit import run
from tests.broker_core.security.secure_clients_kit import ClientSecurity, expected_values, round_trip
from tests.broker_core.server.server_kit import read_frame, start_broker

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"


def _users(*args: str) -> None:
    code, _, err = run("users", *args)
    assert code == 0, err


def _sasl(server, mechanism: str, user: str, password: str) -> tuple[str, ClientSecurity]:
    return (f"127.0.0.1:{server.bound_port('SASL_PLAINTEXT')}",
            ClientSecurity("SASL_PLAINTEXT", sasl_mechanism=mechanism, username=user, password=password))


def _refused(server, mechanism: str, user: str, password: str) -> bool:
    """Whether the SASL listener answers the exchange SASL_AUTHENTICATION_FAILED (on a raw socket, with
    seglog's own SASL client)."""
    with socket.create_connection(("127.0.0.1", server.bound_port("SASL_PLAINTEXT")), timeout=10) as sock:
        def ask(api_key, body, version):
            sock.sendall(encode_request(api_key, version, 1, "test", body))
            return parse_response(api_key, version, read_frame(sock))[1]

        assert ask(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism}, 1)["error_code"] == 0
        client = SaslClient(mechanism, user, password)
        token = client.initial_response()
        while token is not None:
            answer = ask(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, 2)
            if answer["error_code"]:
                assert answer["error_code"] == 58, answer
                return True
            token = client.evaluate_challenge(answer["auth_bytes"])
        return False


@pytest.mark.parametrize("lib", ["confluent-kafka", "kafka-python"])
def test_users_added_with_seglog_users_log_in_with_scram_and_plain(tmp_path, lib):
    logs = tmp_path / "logs"
    _users("add", "--log-dir", str(logs), "--user", "alice", "--password", "alice-secret")
    server = start_broker(logs, listeners=LISTENERS)
    try:
        _users("add", "--bootstrap", f"127.0.0.1:{server.bound_port('PLAINTEXT')}", "--user", "bob",
               "--password", "bob-secret", "--mechanism", "SCRAM-SHA-256")
        for mechanism, user, password in (("SCRAM-SHA-512", "alice", "alice-secret"),
                                          ("SCRAM-SHA-256", "bob", "bob-secret"), ("PLAIN", "bob", "bob-secret")):
            topic = f"{user}-{mechanism.lower()}"
            assert round_trip(lib, *_sasl(server, mechanism, user, password), topic, f"g-{topic}") == \
                expected_values()
    finally:
        server.shutdown(timeout_ms=10_000)


def test_a_changed_password_and_a_deleted_user_are_refused_from_then_on(tmp_path):
    server = start_broker(tmp_path / "logs", listeners=LISTENERS)
    admin = f"127.0.0.1:{server.bound_port('PLAINTEXT')}"
    try:
        _users("add", "--bootstrap", admin, "--user", "carol", "--password", "old-secret")
        assert not _refused(server, "SCRAM-SHA-512", "carol", "old-secret")
        _users("add", "--bootstrap", admin, "--user", "carol", "--password", "new-secret")
        assert _refused(server, "SCRAM-SHA-512", "carol", "old-secret")
        assert not _refused(server, "PLAIN", "carol", "new-secret")
        _users("delete", "--bootstrap", admin, "--user", "carol")
        assert _refused(server, "SCRAM-SHA-512", "carol", "new-secret")
    finally:
        server.shutdown(timeout_ms=10_000)
