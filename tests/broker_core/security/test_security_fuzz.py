"""Fuzz on the secured listeners of a running broker: random bytes, cut and corrupted TLS records, and random or
mangled SASL frames (handshakes, tokens, raw v0 tokens, Kafka requests slipped in between). Nothing crashes, a
witness that authenticated first keeps working, and no request reaches the handlers unauthenticated: the
Metadata requests hidden in the fuzz would auto-create their topics if one were served."""

from __future__ import annotations

import os
import random
import socket
import ssl
import struct

import pytest

from broker_core.protocol import ApiKey, encode_request
from broker_core.security.sasl_client import SaslClient
from tests.broker_core.security.secure_clients_kit import Witness
from tests.broker_core.security.sasl_listener_kit import USERS, seglog_security, start_sasl_broker

SEED = 1818
ROUNDS = 60


@pytest.fixture()
def broker(tmp_path, server_stores):
    server = start_sasl_broker(tmp_path / "logs", server_stores)
    yield server
    server.shutdown(timeout_ms=10_000)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _metadata(topic: str, correlation_id: int) -> bytes:
    return encode_request(ApiKey.METADATA, 4, correlation_id, "fuzz", {"topics": [{"name": topic}],
                                                                       "allow_auto_topic_creation": True})


def _mangle(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        choice = rng.randrange(3)
        if choice == 0 and data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif choice == 1 and len(data) > 4:
            del data[rng.randrange(4, len(data)):]
        else:
            data[rng.randrange(len(data) + 1):0] = os.urandom(rng.randrange(1, 16))
    return bytes(data)


def _sasl_sequence(rng: random.Random, n: int) -> list[bytes]:
    """One connection's worth of SASL traffic: alice's correct PLAIN exchange or a random one, then a Metadata
    request; often broken somewhere (a frame mangled, a request slipped in before authentication, garbage first)."""
    if rng.random() < 0.4:
        mechanism, user, password, version = "PLAIN", "alice", USERS["alice"], 1
    else:
        mechanism = rng.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER", "", "x" * 300])
        user = rng.choice(["alice", "mallory", "", "alice\x00admin"])
        password = rng.choice([USERS["alice"], "wrong", ""])
        version = rng.choice([0, 1])
    client = SaslClient(mechanism if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") else "PLAIN",
                        user or "u", password or "p")
    token = client.initial_response()
    messages = [encode_request(ApiKey.API_VERSIONS, rng.choice([0, 3]), 1, "fuzz", {}),
                encode_request(ApiKey.SASL_HANDSHAKE, version, 2, "fuzz", {"mechanism": mechanism})]
    if version == 0:
        messages.append(_frame(token))  # raw v0 token
        messages.append(_frame(os.urandom(rng.randrange(0, 64))))
    else:
        auth_bytes = token if rng.random() < 0.7 else rng.choice([os.urandom(40), b"", b"n,,n=alice,r="])
        messages.append(encode_request(ApiKey.SASL_AUTHENTICATE, rng.choice([0, 1, 2]), 3, "fuzz",
                                       {"auth_bytes": auth_bytes}))
    messages.append(_metadata(f"fuzz-{n}", 4))
    if rng.random() < 0.5:
        cut = rng.randrange(len(messages))
        messages[cut] = _mangle(rng, messages[cut])
    if rng.random() < 0.2:
        messages.insert(rng.randrange(len(messages)), _metadata(f"fuzz-{n}", 9))  # before authentication
    if rng.random() < 0.1:
        messages.insert(0, _frame(os.urandom(rng.randrange(0, 200))))
    return messages


def _connect(broker, server_stores, listener: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.bound_port(listener)), timeout=2)
    if listener == "SASL_SSL":
        context = ssl.create_default_context(cafile=str(server_stores.truststore))
        sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
    sock.settimeout(0.3)
    return sock


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(65536):
            pass
    except (OSError, socket.timeout):
        pass


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_random_and_mangled_sasl_frames_crash_nothing_and_serve_nothing_unauthenticated(broker, server_stores,
                                                                                     listener):
    rng = random.Random(f"{SEED}-{listener}")
    witness = Witness(f"127.0.0.1:{broker.bound_port('SASL_SSL')}", seglog_security(server_stores))
    witness.check()
    for n in range(ROUNDS):
        try:
            with _connect(broker, server_stores, listener) as sock:
                for message in _sasl_sequence(rng, n):
                    sock.sendall(message)
                _drain(sock)
        except (OSError, ssl.SSLError):
            pass  # the broker closed the connection while the fuzz was still writing
        if n % 10 == 9:
            witness.check()
    witness.check()
    # The "fuzz-n" topics that exist are exactly those of the sequences that authenticated as alice before
    # their Metadata request (replayed on the authenticator alone); no other sequence was served.
    created = {t for t in witness.topic_names() if t.startswith("fuzz-")}
    rng = random.Random(f"{SEED}-{listener}")
    legitimate = {f"fuzz-{n}" for n in range(ROUNDS) if _authenticates(_sasl_sequence(rng, n))}
    assert legitimate, "the fuzz should let some sequences through, to show it would see them served"
    assert created == legitimate
    witness.close()


def _authenticates(messages: list[bytes]) -> bool:
    """Replays ``messages`` against a fresh authenticator: whether the first request after authentication is
    a Metadata request (a broken frame there closes the connection instead)."""
    from tests.broker_core.security.sasl_kit import authenticator, credentials_for
    from broker_core.security.sasl_authenticator import SaslAuthenticationFailed

    auth = authenticator(credentials_for(USERS))
    for message in messages:
        if len(message) < 4:
            return False
        size = struct.unpack(">i", message[:4])[0]
        if size != len(message) - 4:
            return False  # the stream is out of step from here on; the broker reads garbage sizes
        if auth.complete:
            return struct.unpack_from(">h", message, 4)[0] == ApiKey.METADATA
        try:
            auth.receive(message[4:])
        except SaslAuthenticationFailed:
            return False
    return False


def test_tls_garbage_on_the_sasl_ssl_port_crashes_nothing(broker, server_stores):
    rng = random.Random(SEED)
    witness = Witness(f"127.0.0.1:{broker.bound_port('SASL_SSL')}", seglog_security(server_stores))
    for n in range(40):
        with socket.create_connection(("127.0.0.1", broker.bound_port("SASL_SSL")), timeout=2) as sock:
            sock.settimeout(0.3)
            data = rng.choice([os.urandom(rng.randrange(1, 400)), _metadata(f"tls-garbage-{n}", 1),
                               struct.pack(">BHH", 0x16, 0x0301, rng.randrange(1 << 16)) + os.urandom(64)])
            try:
                sock.sendall(data)
            except OSError:
                pass
            _drain(sock)
    witness.check()
    assert not {t for t in witness.topic_names() if t.startswith("tls-garbage-")}
    witness.close()
