"""The server side of one SASL mechanism exchange, and the mechanisms a broker can serve.

A ``SaslServer`` is fed the client's tokens (``evaluate_response``) and answers the next challenge
until it is ``complete``; its ``authorization_id`` is then the user the connection acts as. It
raises ``SaslServerError`` to refuse: ``reason`` is for the broker's log, and the client is told
``client_message`` when there is one (Kafka's ``SaslAuthenticationException``) or else Kafka's
generic "invalid credentials" sentence (Kafka's ``SaslException``), so that a wrong password, an
unknown user and a tampered message look the same from outside.
"""

from __future__ import annotations

from typing import Protocol

from .credential_store import CredentialStore

__all__ = ["SaslServer", "SaslServerError", "SERVED_MECHANISMS", "create_sasl_server"]

#: The mechanisms seglog serves; any other enabled name (GSSAPI, OAUTHBEARER) is refused at the handshake.
SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslServerError(Exception):
    """A mechanism refuses the client: ``reason`` for the log, ``client_message`` (if any) for the client."""

    def __init__(self, reason: str, *, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.client_message = client_message


class SaslServer(Protocol):
    mechanism_name: str

    def evaluate_response(self, response: bytes) -> bytes:
        """The challenge answering the client's token (empty when there is nothing to say)."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user; only meaningful once complete."""
        ...


def create_sasl_server(mechanism: str, credentials: CredentialStore) -> SaslServer:
    """The server for one exchange of ``mechanism`` (one of ``SERVED_MECHANISMS``)."""
    from .plain_server import PlainSaslServer
    from .scram import ScramMechanism
    from .scram_server import ScramSaslServer

    if mechanism == "PLAIN":
        return PlainSaslServer(credentials)
    scram_mechanism = ScramMechanism.for_name(mechanism)
    if scram_mechanism is None:
        raise ValueError(f"SASL mechanism {mechanism!r} is not served (served: {', '.join(SERVED_MECHANISMS)})")
    return ScramSaslServer(scram_mechanism, credentials)
