"""Helpers for SASL tests: request frames as a client sends them (size prefix stripped, as the
processor hands them to the authenticator), responses read back, and whole exchanges driven by
seglog's own ``SaslClient``."""

from __future__ import annotations

from typing import Any

from broker_core.clock import MockTime
from broker_core.protocol import ApiKey, encode_request, parse_response
from broker_core.security.credential_store import InMemoryCredentialStore
from broker_core.security.sasl_authenticator import SaslServerAuthenticator
from broker_core.security.sasl_client import SaslClient
from broker_core.security.scram import ScramCredential, ScramMechanism

ALL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: A stand-in for the broker's ApiVersions answer: the authenticator only forwards it.
API_VERSIONS_ANSWER = b"api-versions-answer"


def credentials_for(users: dict[str, str], mechanisms=tuple(ScramMechanism)) -> InMemoryCredentialStore:
    """A store holding each user's password under every SCRAM mechanism given."""
    store = InMemoryCredentialStore()
    store.alter((), [(user, m, ScramCredential.from_password(m, password))
                     for user, password in users.items() for m in mechanisms])
    return store


def authenticator(store, *, mechanisms=ALL_MECHANISMS, reauth_ms: int = 0, clock=None) -> SaslServerAuthenticator:
    return SaslServerAuthenticator(enabled_mechanisms=mechanisms, credentials=store,
                                   api_versions_response=lambda frame: API_VERSIONS_ANSWER,
                                   connections_max_reauth_ms=reauth_ms, clock=clock or MockTime())


def request(api_key: ApiKey, version: int, body: dict[str, Any], correlation_id: int = 1) -> bytes:
    """A request frame without its size prefix."""
    return encode_request(api_key, version, correlation_id, "test-client", body)[4:]


def response(api_key: ApiKey, version: int, frame: bytes) -> dict[str, Any]:
    return parse_response(api_key, version, frame)[1]


def handshake(auth: SaslServerAuthenticator, mechanism: str, version: int = 1) -> dict[str, Any]:
    frame = auth.receive(request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism}))
    return response(ApiKey.SASL_HANDSHAKE, version, frame)


def authenticate(auth: SaslServerAuthenticator, token: bytes, version: int = 2) -> dict[str, Any]:
    frame = auth.receive(request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token}))
    return response(ApiKey.SASL_AUTHENTICATE, version, frame)


def log_in(auth: SaslServerAuthenticator, mechanism: str, user: str, password: str, *,
           version: int = 2) -> dict[str, Any]:
    """A full exchange through SaslAuthenticate; the last response."""
    assert handshake(auth, mechanism)["error_code"] == 0
    client = SaslClient(mechanism, user, password)
    answer = authenticate(auth, client.initial_response(), version)
    while not client.complete or not auth.complete:
        assert answer["error_code"] == 0, answer
        token = client.evaluate_challenge(answer["auth_bytes"])
        if token is None:
            break
        answer = authenticate(auth, token, version)
    return answer
