"""The client side of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, for seglog's own client.

``SaslClient(mechanism, username, password)`` gives the first token (``initial_response``) and
answers each server token (``evaluate_challenge``) until ``complete``; the transport (SaslAuthenticate
requests, or raw frames after a v0 handshake) is the caller's. A SCRAM client checks the server's
signature, so a server that does not hold the user's credential is refused with ``SaslClientError``.
"""

from __future__ import annotations

import hmac

from . import scram
from .scram import ScramMechanism
from .scram_messages import ClientFinalMessage, ClientFirstMessage, ServerFinalMessage, ServerFirstMessage, auth_message

__all__ = ["SaslClient", "SaslClientError", "CLIENT_MECHANISMS"]

CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslClientError(Exception):
    """The server's answer breaks the mechanism (a wrong server signature, an error, a malformed token)."""


class SaslClient:
    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        if mechanism not in CLIENT_MECHANISMS:
            raise ValueError(f"SASL mechanism {mechanism!r} is not supported by this client "
                             f"(supported: {', '.join(CLIENT_MECHANISMS)})")
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._scram = ScramMechanism.for_name(mechanism)
        self._nonce = nonce or scram.new_nonce()
        self._client_first: ClientFirstMessage | None = None
        self._auth_message = b""
        self._salted = b""
        self._step = 0
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        """The first token the client sends."""
        if self._step != 0:
            raise SaslClientError(f"{self.mechanism}: the initial response was already sent")
        self._step = 1
        if self._scram is None:
            self._complete = True
            return f"\0{self._username}\0{self._password}".encode("utf-8")
        self._client_first = ClientFirstMessage(scram.sasl_name(self._username), self._nonce)
        return self._client_first.to_bytes()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The token answering the server's ``challenge``; None when there is nothing more to send."""
        if self._scram is None:
            if challenge:
                raise SaslClientError(f"PLAIN: unexpected server token of {len(challenge)} bytes")
            return None
        try:
            if self._step == 1:
                self._step = 2
                return self._client_final(ServerFirstMessage.parse(challenge))
            if self._step == 2:
                self._step = 3
                self._check_server_final(ServerFinalMessage.parse(challenge))
                self._complete = True
                return None
        except ValueError as exc:
            raise SaslClientError(f"{self.mechanism}: {exc}") from None
        raise SaslClientError(f"{self.mechanism}: unexpected server token after step {self._step}")

    def _client_final(self, server_first: ServerFirstMessage) -> bytes:
        mechanism, client_first = self._scram, self._client_first
        assert mechanism is not None and client_first is not None
        if not server_first.nonce.startswith(client_first.nonce) or server_first.nonce == client_first.nonce:
            raise SaslClientError(f"{mechanism}: the server's nonce does not extend the client's")
        if server_first.iterations < mechanism.min_iterations:
            raise SaslClientError(f"{mechanism}: Requested iterations {server_first.iterations} is less than the "
                                  f"minimum {mechanism.min_iterations} for {mechanism}")
        self._salted = scram.salted_password(mechanism, self._password, server_first.salt, server_first.iterations)
        final = ClientFinalMessage.build(client_first.gs2_header.encode("utf-8"), server_first.nonce)
        self._auth_message = auth_message(client_first, server_first, final)
        proof = scram.client_proof(mechanism, scram.client_key(mechanism, self._salted), self._auth_message)
        return final.with_proof(proof).to_bytes()

    def _check_server_final(self, server_final: ServerFinalMessage) -> None:
        mechanism = self._scram
        assert mechanism is not None
        if server_final.error is not None:
            raise SaslClientError(f"{mechanism}: the server refused: {server_final.error}")
        expected = scram.server_signature(mechanism, scram.server_key(mechanism, self._salted), self._auth_message)
        if not hmac.compare_digest(expected, server_final.server_signature or b""):
            raise SaslClientError(f"{mechanism}: Invalid server signature in server final message")
