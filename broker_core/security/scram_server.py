"""SCRAM-SHA-256 / SCRAM-SHA-512 on the server (RFC 5802, RFC 7677), as Kafka's ``ScramSaslServer``.

Two client messages: the first names the user and a client nonce and is answered with the full
nonce (client's + a fresh server nonce), the salt and the iteration count; the final one repeats the
nonce and carries the proof, and is answered with the server signature. A final message must carry
this exchange's nonce and the GS2 header the client began with, and its proof must match the stored
key, so a message replayed from another exchange, or altered in any byte the proof covers, fails.

An unknown user gets a made-up salt (stable for that name) and fails at the proof like a wrong
password, so the exchange does not tell which users exist. Every refusal goes to the client as
Kafka's generic invalid-credentials message (a ``SaslServerError`` without ``client_message``),
except an authorization id other than the user, which Kafka reports as it is.
"""

from __future__ import annotations

import enum
import hmac
import secrets

from . import scram, scram_messages
from .credential_store import CredentialStore
from .sasl_server import SaslServerError
from .scram import ScramCredential, ScramMechanism
from .scram_messages import ClientFinalMessage, ClientFirstMessage, ServerFinalMessage, ServerFirstMessage

__all__ = ["ScramSaslServer"]

# Salts for users that do not exist are derived from this process-wide secret: the same name gets the
# same salt every time, as a real user would.
_UNKNOWN_USER_SECRET = secrets.token_bytes(32)


class _State(enum.Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = "receive client first message"
    RECEIVE_CLIENT_FINAL_MESSAGE = "receive client final message"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramSaslServer:
    def __init__(self, mechanism: ScramMechanism, credentials: CredentialStore) -> None:
        self.mechanism = mechanism
        self.mechanism_name = mechanism.mechanism_name
        self._credentials = credentials
        self._state = _State.RECEIVE_CLIENT_FIRST_MESSAGE
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None
        self._known_user = False
        self._username = ""

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def authorization_id(self) -> str:
        return self._username if self.complete else ""

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            if self._state is _State.RECEIVE_CLIENT_FIRST_MESSAGE:
                challenge = self._client_first_message(response)
                self._state = _State.RECEIVE_CLIENT_FINAL_MESSAGE
                return challenge
            if self._state is _State.RECEIVE_CLIENT_FINAL_MESSAGE:
                challenge = self._client_final_message(response)
                self._state = _State.COMPLETE
                return challenge
            raise SaslServerError(f"{self.mechanism}: a token in state {self._state.value}")
        except SaslServerError:
            self._fail()
            raise
        except ValueError as exc:
            self._fail()
            raise SaslServerError(f"{self.mechanism}: {exc}") from None

    def _fail(self) -> None:
        self._state = _State.FAILED
        self._credential = None

    def _client_first_message(self, response: bytes) -> bytes:
        first = ClientFirstMessage.parse(response)
        if first.extensions.get("tokenauth", "false").lower() == "true":
            raise SaslServerError(f"{self.mechanism}: delegation tokens are not supported")
        username = scram.username_of(first.saslname)
        if first.authorization_id and scram.username_of(first.authorization_id) != username:
            raise SaslServerError(
                f"{self.mechanism}: user {username!r} asked for authorization id {first.authorization_id!r}",
                client_message="Authentication failed: Client requested an authorization id that is different "
                               "from username")
        credential = self._credentials.credential(username, self.mechanism)
        self._known_user = credential is not None
        if credential is None:
            credential = self._unknown_user_credential(username)
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslServerError(f"{self.mechanism}: Iterations {credential.iterations} is less than the minimum "
                                  f"{self.mechanism.min_iterations} for {self.mechanism}")
        self._username = username
        self._credential = credential
        self._client_first = first
        self._server_first = ServerFirstMessage(first.nonce + scram.new_nonce(), credential.salt,
                                                credential.iterations)
        return self._server_first.to_bytes()

    def _client_final_message(self, response: bytes) -> bytes:
        final = ClientFinalMessage.parse(response)
        assert self._client_first is not None and self._server_first is not None and self._credential is not None
        # librdkafka before 2.6.1 (Debian's kcat among its users) sends its own nonce once more in front of
        # the server's; Kafka 3.8.1-3.9 accepted that form too. Either way the fresh server nonce is in it.
        if final.nonce not in (self._server_first.nonce, self._client_first.nonce + self._server_first.nonce):
            raise SaslServerError(f"{self.mechanism}: Invalid client nonce in the final client message")
        if final.channel_binding != self._client_first.gs2_header.encode("utf-8"):
            raise SaslServerError(f"{self.mechanism}: the channel binding does not repeat the GS2 header")
        auth_message = scram_messages.auth_message(self._client_first, self._server_first, final)
        client_key = scram.recover_client_key(self.mechanism, self._credential.stored_key, auth_message, final.proof)
        proof_matches = hmac.compare_digest(scram.stored_key(self.mechanism, client_key), self._credential.stored_key)
        if not (proof_matches and self._known_user):
            what = "wrong password" if self._known_user else "unknown user"
            raise SaslServerError(f"{self.mechanism}: Invalid client credentials ({what} {self._username!r})")
        signature = scram.server_signature(self.mechanism, self._credential.server_key, auth_message)
        self._credential = None
        return ServerFinalMessage(signature).to_bytes()

    def _unknown_user_credential(self, username: str) -> ScramCredential:
        salt = hmac.new(_UNKNOWN_USER_SECRET, username.encode("utf-8"), "sha256").digest()
        size = self.mechanism.digest_size
        return ScramCredential(salt, secrets.token_bytes(size), secrets.token_bytes(size), scram.MIN_ITERATIONS)
