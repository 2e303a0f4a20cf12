"""SASL listeners with Kafka's clients: produce, consume and groups over SASL_SSL with SCRAM-SHA-512 and PLAIN
(and SASL_PLAINTEXT), seglog's CLI with a ``--command-config`` file, and every refusal — wrong password, unknown
user, a mechanism not enabled, requests before authentication, a plaintext client on the TLS port, an expired
session — each beside a witness that authenticated before it and keeps working."""

from __future__ import annotations

import re
import socket
import ssl
import time

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from broker_core.protocol import ApiKey, encode_request, parse_response
from broker_core.security.sasl_client import SaslClient
from tests.broker_core.cli_kit import run
from tests.broker_core.security.secure_clients_kit import (LIBRARIES, ClientSecurity, Witness, expected_values,
                                                            round_trip)
from tests.broker_core.security.sasl_listener_kit import USERS, sasl_ssl, seglog_security, start_sasl_broker
from tests.broker_core.server.server_kit import read_frame
from tests.broker_core.server.socket_server_kit import closed_by_server


def security(server_stores, mechanism: str = "SCRAM-SHA-512", user: str = "alice",
             password: str | None = None) -> ClientSecurity:
    return ClientSecurity("SASL_SSL", cafile=str(server_stores.truststore), sasl_mechanism=mechanism,
                          username=user, password=USERS.get(user, "") if password is None else password)


@pytest.fixture()
def witness(sasl_broker, server_stores, request):
    topic = re.sub(r"[^A-Za-z0-9._-]", "-", f"witness-{request.node.name}")[:200]
    watcher = Witness(sasl_ssl(sasl_broker), seglog_security(server_stores), topic=topic)
    watcher.check()
    yield watcher
    watcher.check()  # still serving after the test's refusals
    watcher.close()


def tls_socket(server, server_stores, listener: str = "SASL_SSL") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.bound_port(listener)), timeout=5)
    if listener.endswith("SSL"):
        context = ssl.create_default_context(cafile=str(server_stores.truststore))
        sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
    return sock


# --- the clients ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
@pytest.mark.parametrize("lib", LIBRARIES)
def test_each_client_produces_consumes_and_commits_in_a_group_over_sasl_ssl(sasl_broker, server_stores, lib,
                                                                             mechanism):
    topic = f"sasl-ssl-{lib}-{mechanism}"
    values = round_trip(lib, sasl_ssl(sasl_broker), security(server_stores, mechanism), topic, f"group-{topic}")
    assert values == expected_values()


@pytest.mark.parametrize("lib", LIBRARIES)
def test_each_client_authenticates_with_scram_sha_256_over_sasl_plaintext(sasl_broker, lib):
    plain = ClientSecurity("SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", username="bob", password="bob-secret")
    topic = f"sasl-plaintext-{lib}"
    values = round_trip(lib, f"127.0.0.1:{sasl_broker.bound_port('SASL_PLAINTEXT')}", plain, topic, f"g-{topic}")
    assert values == expected_values()


def _command_config(server_stores, tmp_path) -> str:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={server_stores.truststore}\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="alice-secret";\n')
    return str(config)


def test_the_cli_works_through_a_sasl_ssl_listener_with_a_command_config_file(sasl_broker, server_stores, tmp_path):
    where = ["--bootstrap", sasl_ssl(sasl_broker), "--command-config", _command_config(server_stores, tmp_path)]
    assert run("topics", "create", *where, "--topic", "cli-sasl")[0] == 0
    assert run("produce", *where, "--topic", "cli-sasl", stdin="one\ntwo\n")[0] == 0
    code, out, err = run("consume", *where, "--topic", "cli-sasl", "--from-beginning", "--timeout-ms", "0")
    assert (code, out.split()) == (0, ["one", "two"]), err


def test_every_command_taking_bootstrap_takes_a_command_config_file():
    import argparse

    from broker_core.cli.seglog_command import build_parser

    def commands(parser, name=""):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from commands(sub, f"{name} {sub_name}".strip())
        yield name, {flag for action in parser._actions for flag in action.option_strings}

    with_bootstrap = {name: flags for name, flags in commands(build_parser()) if "--bootstrap" in flags}
    assert {"topics", "produce", "consume", "groups", "transactions", "cluster", "compact", "acls",
            "users add", "users list", "users delete"} <= set(with_bootstrap)
    assert [name for name, flags in with_bootstrap.items() if "--command-config" not in flags] == []


def test_users_and_groups_work_through_a_sasl_ssl_listener_with_a_command_config_file(sasl_broker, server_stores,
                                                                                      tmp_path):
    where = ["--bootstrap", sasl_ssl(sasl_broker), "--command-config", _command_config(server_stores, tmp_path)]
    code, _, err = run("users", "add", *where, "--user", "carol", "--password", "carol-secret")
    assert code == 0, err
    code, out, err = run("users", "list", *where, "--user", "carol")
    assert (code, out.split()[3:]) == (0, ["carol", "SCRAM-SHA-512", "4096"]), err
    ProtocolClient(sasl_ssl(sasl_broker), security=seglog_security(server_stores, user="carol",
                                                                   password="carol-secret")).close()
    code, _, err = run("users", "list", "--bootstrap", sasl_ssl(sasl_broker))
    assert code != 0


# --- refusals, each beside a witness --------------------------------------------------------------------


def test_a_wrong_password_is_refused_with_kafkas_error_and_the_witness_keeps_working(
        sasl_broker, server_stores, witness):
    with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials with SASL mechanism SCRAM-SHA-512"):
        ProtocolClient(sasl_ssl(sasl_broker), security=seglog_security(server_stores, password="wrong"))
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": sasl_ssl(sasl_broker),
                         **security(server_stores, "PLAIN", password="wrong").confluent()})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    witness.check()


def test_an_unknown_user_is_refused_and_the_witness_keeps_working(sasl_broker, server_stores, witness):
    for mechanism in ("SCRAM-SHA-512", "PLAIN"):
        with pytest.raises(SaslAuthenticationFailedError):
            ProtocolClient(sasl_ssl(sasl_broker),
                           security=seglog_security(server_stores, mechanism, user="mallory", password="x"))
    witness.check()


def test_a_mechanism_the_listener_does_not_enable_is_refused_naming_those_it_does(sasl_broker, server_stores,
                                                                                  witness):
    with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-512, PLAIN"):
        ProtocolClient(sasl_ssl(sasl_broker), security=seglog_security(server_stores, "SCRAM-SHA-256"))
    witness.check()


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_requests_before_authentication_close_the_connection_and_are_not_served(sasl_broker, server_stores,
                                                                               witness, listener):
    metadata = encode_request(ApiKey.METADATA, 4, 1, "early", {"topics": [{"name": f"created-early-{listener}"}],
                                                               "allow_auto_topic_creation": True})
    with tls_socket(sasl_broker, server_stores, listener) as sock:
        sock.sendall(metadata)
        assert closed_by_server(sock)
    # After ApiVersions and a handshake, still not authenticated: the same.
    with tls_socket(sasl_broker, server_stores, listener) as sock:
        sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "early", {"mechanism": "PLAIN"}))
        read_frame(sock)
        sock.sendall(metadata)
        assert closed_by_server(sock)
    witness.check()
    assert f"created-early-{listener}" not in witness.topic_names()


def test_a_plaintext_client_on_the_sasl_ssl_port_is_closed_and_the_witness_keeps_working(sasl_broker, witness):
    with socket.create_connection(("127.0.0.1", sasl_broker.bound_port("SASL_SSL")), timeout=5) as sock:
        sock.sendall(encode_request(ApiKey.API_VERSIONS, 0, 1, "plain", {}))
        assert closed_by_server(sock)
    witness.check()


@pytest.fixture()
def reauth_broker(tmp_path, server_stores):
    server = start_sasl_broker(tmp_path / "logs", server_stores, **{"connections.max.reauth.ms": 1500})
    yield server
    server.shutdown(timeout_ms=10_000)


def test_a_session_past_connections_max_reauth_ms_is_closed_when_the_client_does_not_reauthenticate(
        reauth_broker, server_stores):
    witness = Witness(sasl_ssl(reauth_broker), seglog_security(server_stores))  # re-authenticates as it goes
    with tls_socket(reauth_broker, server_stores) as sock:
        sock.sendall(encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "once", {"mechanism": "PLAIN"}))
        read_frame(sock)
        token = SaslClient("PLAIN", "alice", USERS["alice"]).initial_response()
        sock.sendall(encode_request(ApiKey.SASL_AUTHENTICATE, 1, 2, "once", {"auth_bytes": token}))
        answer = parse_response(ApiKey.SASL_AUTHENTICATE, 1, read_frame(sock))[1]
        assert (answer["error_code"], answer["session_lifetime_ms"]) == (0, 1500)
        metadata = encode_request(ApiKey.METADATA, 4, 3, "once", {"topics": [], "allow_auto_topic_creation": False})
        sock.sendall(metadata)
        assert parse_response(ApiKey.METADATA, 4, read_frame(sock))[0] == 3  # served while the session lasts
        time.sleep(2.0)
        witness.check()
        sock.sendall(metadata)
        assert closed_by_server(sock)
    witness.check()
    witness.close()


def test_clients_that_reauthenticate_keep_their_connection_across_sessions(reauth_broker, server_stores):
    # seglog's client never reconnects: a connection closed at the session's end would fail the next request.
    client = ProtocolClient(sasl_ssl(reauth_broker), security=seglog_security(server_stores))
    deadline = time.monotonic() + 4.5  # three sessions
    while time.monotonic() < deadline:
        client.send(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False})
        time.sleep(0.25)
    client.close()
    # librdkafka re-authenticates too (KIP-368): it keeps producing across sessions.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": sasl_ssl(reauth_broker), **security(server_stores).confluent()})
    delivered = []
    deadline = time.monotonic() + 4.5
    while time.monotonic() < deadline:
        producer.produce("across-sessions", b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(5)
        time.sleep(0.2)
    assert len(delivered) >= 10 and set(delivered) == {None}
