"""TLS listeners in the socket server: the handshake before any request, the certificate's subject as principal,
several listeners at once, PEM settings refused at start-up, and connections that fail TLS closed alone."""

from __future__ import annotations

import os
import random
import socket
import ssl
import struct

import pytest

from broker_core.errors import InvalidConfigurationError
from tests.broker_core.security.tls_kit import server_ssl_props
from tests.broker_core.server.server_kit import read_frame
from tests.broker_core.server.socket_server_kit import TIMEOUT_S, Server, closed_by_server, frame

LISTENERS = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"


def tls_connect(server: Server, stores, client=None, *, listener: str = "SSL",
                protocol: ssl.TLSVersion | None = None) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(stores.truststore))
    if client is not None:
        context.load_cert_chain(str(client.certificate), str(client.key))
    if protocol is not None:
        context.maximum_version = protocol
    return context.wrap_socket(server.connect(listener), server_hostname="127.0.0.1")


def ask(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(frame(payload))
    return read_frame(sock)


@pytest.fixture()
def tls_server(server_stores):
    server = Server(listeners=LISTENERS, **server_ssl_props(server_stores, client_auth="requested")).start()
    yield server
    server.stop()


def test_a_client_certificate_makes_the_principal_its_subject_as_kafka_writes_it(tls_server, server_stores,
                                                                                  client_stores):
    with tls_connect(tls_server, server_stores, client_stores) as sock:
        assert ask(sock, b"whoami") == b"User:CN=client,OU=eng,O=seglog SSL"


def test_a_tls_client_without_a_certificate_is_anonymous_when_certificates_are_only_requested(
        tls_server, server_stores):
    with tls_connect(tls_server, server_stores) as sock:
        assert ask(sock, b"whoami") == b"User:ANONYMOUS SSL"


def test_plaintext_and_ssl_listeners_serve_at_once_each_with_its_security_protocol(tls_server, server_stores):
    with tls_server.connect("PLAINTEXT") as plain, tls_connect(tls_server, server_stores) as secure:
        assert ask(plain, b"whoami") == b"User:ANONYMOUS PLAINTEXT"
        assert ask(secure, b"whoami") == b"User:ANONYMOUS SSL"


def test_a_missing_required_client_certificate_closes_the_connection_and_others_keep_working(
        server_stores, client_stores):
    server = Server(listeners=LISTENERS, **server_ssl_props(server_stores, client_auth="required")).start()
    try:
        with tls_connect(server, server_stores, client_stores) as witness:
            with tls_connect(server, server_stores) as refused:
                # TLS 1.3: the server checks the certificate after the client's handshake has returned.
                refused.sendall(frame(b"whoami"))
                assert closed_by_server(refused)
            assert ask(witness, b"whoami") == b"User:CN=client,OU=eng,O=seglog SSL"
    finally:
        server.stop()


def test_a_plaintext_client_on_a_tls_port_is_closed_and_the_witness_keeps_working(tls_server, server_stores):
    with tls_connect(tls_server, server_stores) as witness:
        with tls_server.connect("SSL") as plain:
            plain.sendall(frame(b"whoami"))  # a Kafka request, in the clear
            assert closed_by_server(plain)
        assert ask(witness, b"whoami") == b"User:ANONYMOUS SSL"
    with tls_connect(tls_server, server_stores) as after:
        assert ask(after, b"whoami") == b"User:ANONYMOUS SSL"


def test_requests_pipelined_in_one_tls_write_are_answered_in_order(tls_server, server_stores):
    with tls_connect(tls_server, server_stores) as sock:
        sock.sendall(b"".join(frame(b"req-%d" % i) for i in range(20)))
        assert [read_frame(sock) for _ in range(20)] == [b"req-%d" % i for i in range(20)]


def test_a_response_of_several_megabytes_arrives_whole_over_tls(tls_server, server_stores):
    with tls_connect(tls_server, server_stores) as sock:
        request = b"parts:400000"
        assert ask(sock, request) == request * 400000


def test_a_client_close_notify_ends_the_connection_on_the_server(tls_server, server_stores):
    sock = tls_connect(tls_server, server_stores)
    assert ask(sock, b"whoami") == b"User:ANONYMOUS SSL"
    raw = sock.unwrap()  # sends close_notify, waits for the server's
    try:
        assert closed_by_server(raw)
    finally:
        raw.close()


def test_the_server_says_close_notify_when_it_closes_a_tls_connection(tls_server, server_stores):
    context = ssl.create_default_context(cafile=str(server_stores.truststore))
    # Without ragged EOFs suppressed, a connection cut without close_notify raises SSLEOFError.
    with context.wrap_socket(tls_server.connect("SSL"), server_hostname="127.0.0.1",
                             suppress_ragged_eofs=False) as sock:
        sock.sendall(frame(b"close"))
        assert sock.recv(1) == b""


def test_ssl_enabled_protocols_refuses_a_client_limited_to_an_older_version(server_stores):
    server = Server(listeners=LISTENERS, **{**server_ssl_props(server_stores), "ssl.enabled.protocols": "TLSv1.3"})
    server.start()
    try:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            tls_connect(server, server_stores, protocol=ssl.TLSVersion.TLSv1_2)
        with tls_connect(server, server_stores) as sock:
            assert sock.version() == "TLSv1.3"
            assert ask(sock, b"whoami") == b"User:ANONYMOUS SSL"
    finally:
        server.stop()


def test_a_listener_override_gives_one_listener_its_own_client_authentication(server_stores, client_stores):
    props = {"listeners": "SSL://127.0.0.1:0,MTLS://127.0.0.1:0", "listener.security.protocol.map":
             "SSL:SSL,MTLS:SSL", **server_ssl_props(server_stores), "listener.name.mtls.ssl.client.auth": "required"}
    server = Server(**props).start()
    try:
        with tls_connect(server, server_stores, client_stores, listener="MTLS") as sock:
            assert ask(sock, b"whoami") == b"User:CN=client,OU=eng,O=seglog SSL"
        with tls_connect(server, server_stores, client_stores, listener="SSL") as sock:
            assert ask(sock, b"whoami") == b"User:ANONYMOUS SSL"  # no certificate asked for there
    finally:
        server.stop()


# --- settings refused at start-up ----------------------------------------------------------------


@pytest.mark.parametrize("change, key, message", [
    (lambda p, d: p.pop("ssl.keystore.location"), "ssl.keystore.location", "needs a PEM file"),
    (lambda p, d: p.update({"ssl.keystore.location": str(d / "nowhere.pem")}), "ssl.keystore.location",
     "no such file"),
    (lambda p, d: p.update({"ssl.truststore.location": str(d / "nowhere.pem")}), "ssl.truststore.location",
     "no such file"),
    (lambda p, d: (d / "junk.pem").write_text("not a key") and p.update(
        {"ssl.keystore.location": str(d / "junk.pem")}), "ssl.keystore.location", "no private key"),
    (lambda p, d: p.update({"ssl.key.password": "wrong"}), "ssl.keystore.location", "wrong ssl.key.password"),
    (lambda p, d: p.update({"ssl.keystore.type": "JKS"}), "ssl.keystore.type", "only PEM"),
    (lambda p, d: p.update({"ssl.client.auth": "sometimes"}), "ssl.client.auth", "none, requested, required"),
    (lambda p, d: p.update({"ssl.enabled.protocols": "SSLv3"}), "ssl.enabled.protocols", "TLSv1.2"),
    (lambda p, d: p.update({"listener.name.ssl.ssl.keystore.location": str(d / "gone.pem")}),
     "listener.name.ssl.ssl.keystore.location", "no such file"),
])
def test_tls_settings_that_cannot_be_used_are_refused_at_start_up_naming_the_setting(
        tmp_path, server_stores, change, key, message):
    props = {"listeners": LISTENERS, **server_ssl_props(server_stores)}
    change(props, tmp_path)
    with pytest.raises(InvalidConfigurationError) as refused:
        Server(**props)
    assert f"for configuration {key}:" in str(refused.value)
    assert message in str(refused.value)


# --- garbage on TLS ports ------------------------------------------------------------------------------


def _client_hello() -> bytes:
    """The first flight of a real TLS client: what the fuzz cuts and corrupts."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


def test_random_bytes_and_truncated_tls_records_on_a_tls_port_crash_nothing_and_serve_no_request(
        tls_server, server_stores):
    rng = random.Random(18)
    hello = _client_hello()
    request = frame(b"whoami")
    samples = [os.urandom(rng.randrange(1, 300)) for _ in range(15)]
    samples += [hello[:rng.randrange(1, len(hello))] for _ in range(15)]  # cut short, then silence
    for _ in range(15):  # one byte changed
        data = bytearray(hello)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        samples.append(bytes(data) + request)
    samples += [struct.pack(">BHH", 0x17, 0x0303, 50) + os.urandom(50) + request,  # application data, no handshake
                struct.pack(">BHH", 0x16, 0x0303, 0xFFFF) + os.urandom(200),  # a record longer than allowed
                request]
    seen_before = len(tls_server.handler.seen)
    with tls_connect(tls_server, server_stores) as witness:
        for sample in samples:
            with tls_server.connect("SSL") as sock:
                sock.settimeout(0.5)
                try:
                    sock.sendall(sample)
                    sock.recv(4096)
                except (OSError, socket.timeout):
                    pass
            assert ask(witness, b"whoami") == b"User:ANONYMOUS SSL"
    # Only the witness's requests reached the handlers.
    assert tls_server.handler.seen[seen_before:] == [b"whoami"] * len(samples)
    assert tls_server.socket_server.connection_count <= 1 + len(samples)
