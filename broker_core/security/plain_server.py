"""SASL/PLAIN on the server (RFC 4616): one message, ``authzid NUL authcid NUL password``.

The password is checked against the user's SCRAM credentials (``verify_password``): seglog keeps no
password, so PLAIN users are the SCRAM users. Messages are Kafka's ``PlainSaslServer``'s; they go to
the client as they are, as in Kafka. PLAIN sends the password itself: serve it over SASL_SSL only.
"""

from __future__ import annotations

from .credential_store import CredentialStore, verify_password
from .sasl_server import SaslServerError

__all__ = ["PlainSaslServer"]


class PlainSaslServer:
    mechanism_name = "PLAIN"

    def __init__(self, credentials: CredentialStore) -> None:
        self._credentials = credentials
        self._complete = False
        self._authorization_id = ""

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        return self._authorization_id

    def evaluate_response(self, response: bytes) -> bytes:
        if self._complete:
            raise SaslServerError("PLAIN: a token after authentication completed",
                                  client_message="Authentication failed: PLAIN exchange already complete")
        try:
            text = bytes(response).decode("utf-8")
        except UnicodeDecodeError:
            raise _refuse("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise _refuse(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise _refuse("Authentication failed: username not specified")
        if not password:
            raise _refuse("Authentication failed: password not specified")
        if not verify_password(self._credentials, username, password):
            raise SaslServerError(f"PLAIN: wrong password or unknown user {username!r}",
                                  client_message="Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise _refuse("Authentication failed: Client requested an authorization id that is different from "
                          "username")
        self._authorization_id = username
        self._complete = True
        return b""


def _refuse(message: str) -> SaslServerError:
    return SaslServerError(f"PLAIN: {message}", client_message=message)
