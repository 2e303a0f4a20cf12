"""SASL listeners in the socket server: the principal a connection authenticates as reaches every request,
Kafka's v0 framing (raw tokens) included, SASL over TLS with a client certificate, and frames before
authentication closing the connection before any handler sees them."""

from __future__ import annotations

import socket
import ssl
import struct

import pytest

from broker_core.protocol import ApiKey
from broker_core.security.sasl_client import SaslClient
from tests.broker_core.security.sasl_kit import credentials_for, request, response
from tests.broker_core.security.tls_kit import server_ssl_props
from tests.broker_core.server.server_kit import read_frame
from tests.broker_core.server.socket_server_kit import Server, frame

USERS = {"alice": "alice-secret"}


@pytest.fixture()
def sasl_server(server_stores):
    props = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
             **server_ssl_props(server_stores), "listener.name.sasl_ssl.ssl.client.auth": "required"}
    server = Server(credentials=credentials_for(USERS), **props).start()
    yield server
    server.stop()


def ask(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(frame(payload))
    return read_frame(sock)


def log_in(sock: socket.socket, mechanism: str, user: str = "alice", password: str = USERS["alice"]) -> None:
    """Handshake v1 and the mechanism's exchange in SaslAuthenticate v2."""
    answer = response(ApiKey.SASL_HANDSHAKE, 1, ask(sock, request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})))
    assert answer["error_code"] == 0
    client = SaslClient(mechanism, user, password)
    token = client.initial_response()
    while token is not None:
        answer = response(ApiKey.SASL_AUTHENTICATE, 2,
                          ask(sock, request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})))
        assert answer["error_code"] == 0, answer
        token = client.evaluate_challenge(answer["auth_bytes"])


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_requests_after_sasl_carry_the_authenticated_user_as_principal(sasl_server, mechanism):
    with sasl_server.connect("SASL_PLAINTEXT") as sock:
        log_in(sock, mechanism)
        assert ask(sock, b"whoami") == b"User:alice SASL_PLAINTEXT"


def test_kafkas_v0_framing_sends_raw_tokens_and_an_empty_answer_is_a_bare_size_prefix(sasl_server):
    with sasl_server.connect("SASL_PLAINTEXT") as sock:
        answer = ask(sock, request(ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"}))
        assert response(ApiKey.SASL_HANDSHAKE, 0, answer)["error_code"] == 0
        assert ask(sock, SaslClient("PLAIN", "alice", USERS["alice"]).initial_response()) == b""
        assert ask(sock, b"whoami") == b"User:alice SASL_PLAINTEXT"


def test_sasl_over_tls_with_a_client_certificate_names_the_sasl_user(sasl_server, server_stores, client_stores):
    context = ssl.create_default_context(cafile=str(server_stores.truststore))
    context.load_cert_chain(str(client_stores.certificate), str(client_stores.key))
    with context.wrap_socket(sasl_server.connect("SASL_SSL"), server_hostname="127.0.0.1") as sock:
        log_in(sock, "SCRAM-SHA-512")
        assert ask(sock, b"whoami") == b"User:alice SASL_SSL"


def test_a_frame_before_authentication_closes_the_connection_unseen_by_the_handlers(sasl_server):
    seen = len(sasl_server.handler.seen)
    with sasl_server.connect("SASL_PLAINTEXT") as sock:
        sock.sendall(frame(struct.pack(">hhi", int(ApiKey.METADATA), 4, 1) + b"\x00\x00"))
        assert sock.recv(1) == b""
    assert len(sasl_server.handler.seen) == seen
