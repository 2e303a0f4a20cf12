"""The server side of one SASL mechanism exchange.

A ``SaslServer`` is fed the client's tokens (``evaluate_response``) and answers the next challenge
until it is ``complete``; its ``authorization_id`` is then the user the connection acts as. It
raises ``SaslServerError`` to refuse: ``reason`` is for the broker's log, and the client is told
``client_message`` when there is one (Kafka's ``SaslAuthenticationException``) or else Kafka's
generic "invalid credentials" sentence (Kafka's ``SaslException``), so that a wrong password, an
unknown user and a tampered message look the same from outside.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["SaslServer", "SaslServerError"]


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
