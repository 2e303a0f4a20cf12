"""One connection's SASL authentication on the broker, as a state machine over frames (Kafka's
``SaslServerAuthenticator``): frames in, response frames out, no sockets and no threads.

Until ``complete``, the network processor hands every request frame (size prefix stripped) to
``receive`` and writes what it returns (a frame without size prefix). A connection may ask
ApiVersions once, then must send SaslHandshake naming an enabled mechanism; the mechanism's tokens
follow in SaslAuthenticate requests (handshake v1) or, after a v0 handshake, as raw frames of their
own, answered by raw frames. Whatever breaks the sequence raises ``SaslAuthenticationFailed``: the
processor writes its ``response`` when there is one and closes the connection. Any other API before
authentication completes closes the connection without an answer, as in Kafka.

The answers are Kafka's: UNSUPPORTED_SASL_MECHANISM with the mechanisms on offer; SASL_AUTHENTICATION_FAILED
with "Authentication failed during authentication due to invalid credentials with SASL mechanism M"
(or the mechanism's own message where Kafka has one); ILLEGAL_SASL_STATE for a SASL request out of
order.

``connections.max.reauth.ms`` (KIP-368): when positive, a successful SaslAuthenticate (v1+) tells the
client its session lifetime and ``session_expiration_ms`` says when the session ends on the injected
clock's monotonic milliseconds. A client re-authenticates by sending SaslHandshake on the
authenticated connection: the processor calls ``begin_reauthentication`` and passes that frame and the
ones after it to ``receive`` until ``complete`` again. Re-authentication must keep the mechanism and
the principal. With re-authentication off, or a second one within a second, the handshake is answered
ILLEGAL_SASL_STATE and the session carries on, as Kafka's KafkaApis answers it.
"""

from __future__ import annotations

import enum
import logging
from typing import Any, Callable, Sequence

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import NONE, IllegalSaslStateError, SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from ..protocol import ApiKey, ProtocolError, UnsupportedVersionError, encode_response, parse_request
from ..protocol.api import Request as KafkaRequest
from .credential_store import CredentialStore
from .principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from .sasl_server import SERVED_MECHANISMS, SaslServer, SaslServerError, create_sasl_server

__all__ = ["SaslServerAuthenticator", "SaslAuthenticationFailed"]

log = logging.getLogger(__name__)

# Kafka lets a connection re-authenticate at most once a second (KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
MIN_REAUTH_INTERVAL_MS = 1000


class SaslAuthenticationFailed(Exception):
    """Close the connection, after writing ``response`` (a frame without size prefix) if it is not None."""

    def __init__(self, response: bytes | None, reason: str) -> None:
        super().__init__(reason)
        self.response = response
        self.reason = reason


class _State(enum.Enum):
    INITIAL_REQUEST = "initial request"
    HANDSHAKE_OR_VERSIONS_REQUEST = "handshake or versions request"
    HANDSHAKE_REQUEST = "handshake request"
    AUTHENTICATE = "authenticate"
    REAUTH_PROCESS_HANDSHAKE = "re-authentication handshake"
    REAUTH_REFUSED = "re-authentication refused"
    REAUTH_BAD_MECHANISM = "re-authentication with another mechanism"
    COMPLETE = "complete"
    FAILED = "failed"


_HANDSHAKE_STATES = (_State.INITIAL_REQUEST, _State.HANDSHAKE_OR_VERSIONS_REQUEST, _State.HANDSHAKE_REQUEST)


class SaslServerAuthenticator:
    def __init__(self, *, enabled_mechanisms: Sequence[str], credentials: CredentialStore,
                 api_versions_response: Callable[[bytes], bytes], connections_max_reauth_ms: int = 0,
                 clock: Clock = SYSTEM_CLOCK, transport_principal: KafkaPrincipal | None = None) -> None:
        #: What the handshake offers: the enabled mechanisms seglog serves, in the configured order.
        self.mechanisms = [m for m in enabled_mechanisms if m in SERVED_MECHANISMS]
        self._credentials = credentials
        self._api_versions_response = api_versions_response
        self._max_reauth_ms = connections_max_reauth_ms
        self._clock = clock
        self._state = _State.INITIAL_REQUEST
        self._raw_tokens = False  # after a v0 handshake
        self._server: SaslServer | None = None
        self._mechanism: str | None = None
        self._reauthenticating = False
        self._last_reauth_start_ms: int | None = None
        self._bad_mechanism = ""  # why a re-authentication asking for another mechanism fails
        #: The transport's principal (an SSL client certificate's subject) until SASL names the user.
        self.principal: KafkaPrincipal = transport_principal or ANONYMOUS
        #: Monotonic ms (``clock.hi_res_clock_ms``) after which the session is expired; None: never.
        self.session_expiration_ms: int | None = None

    @property
    def complete(self) -> bool:
        """Authentication (or the latest re-authentication) finished successfully."""
        return self._state is _State.COMPLETE

    @property
    def mechanism(self) -> str | None:
        """The mechanism the client chose; None before the handshake."""
        return self._mechanism

    def begin_reauthentication(self) -> None:
        """A SaslHandshake arrived on the authenticated connection: it and the frames after it go to ``receive``."""
        if self._state is not _State.COMPLETE:
            raise RuntimeError(f"re-authentication begins on an authenticated connection, not in state "
                               f"{self._state.value}")
        now = self._clock.hi_res_clock_ms()
        recent = self._last_reauth_start_ms is not None and now - self._last_reauth_start_ms < MIN_REAUTH_INTERVAL_MS
        if self.session_expiration_ms is None or recent:
            self._state = _State.REAUTH_REFUSED
            return
        self._last_reauth_start_ms = now
        self._reauthenticating = True
        self._state = _State.REAUTH_PROCESS_HANDSHAKE

    def receive(self, frame: bytes) -> bytes | None:
        """One request frame (size prefix stripped) → the response frame to write (no size prefix), or None."""
        if self._state is _State.FAILED:
            raise SaslAuthenticationFailed(None, "authentication already failed on this connection")
        if self._state is _State.COMPLETE:
            raise SaslAuthenticationFailed(None, "a frame for the authenticator after authentication completed")
        try:
            if self._state is _State.AUTHENTICATE and self._raw_tokens:
                return self._raw_token(bytes(frame))
            return self._request(frame)
        except SaslAuthenticationFailed:
            self._state = _State.FAILED
            self._server = None
            raise

    # -- Kafka requests ------------------------------------------------------------------------------

    def _request(self, frame: bytes) -> bytes | None:
        try:
            request = parse_request(frame)
        except UnsupportedVersionError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS and self._state in _HANDSHAKE_STATES[:2]:
                # Too new a version: the callback answers with the versions this broker speaks; the client retries.
                self._state = _State.HANDSHAKE_OR_VERSIONS_REQUEST
                return self._api_versions_response(bytes(frame))
            raise SaslAuthenticationFailed(None, f"{exc} during SASL {self._phase()}") from None
        except ProtocolError as exc:
            if self._state is _State.INITIAL_REQUEST:
                # Kafka takes such a first frame for a Kafka 0.9 client's GSSAPI token; GSSAPI is not served.
                raise SaslAuthenticationFailed(None, f"the first frame is not a Kafka request ({exc}) and GSSAPI "
                                                     f"is not served") from None
            raise SaslAuthenticationFailed(None, f"malformed request during SASL {self._phase()}: {exc}") from None
        api_key = request.header.api_key
        if self._state is _State.INITIAL_REQUEST:
            self._state = _State.HANDSHAKE_OR_VERSIONS_REQUEST
        if api_key == ApiKey.API_VERSIONS:
            return self._api_versions(frame)
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(request)
        if api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(request)
        name = getattr(api_key, "name", api_key)
        raise SaslAuthenticationFailed(None, f"Unexpected Kafka request of type {name} during SASL {self._phase()}")

    def _api_versions(self, frame: bytes) -> bytes:
        if self._state is not _State.HANDSHAKE_OR_VERSIONS_REQUEST:
            raise SaslAuthenticationFailed(
                None, f"Unexpected ApiVersions request received during SASL authentication state {self._state.value}")
        self._state = _State.HANDSHAKE_REQUEST
        return self._api_versions_response(bytes(frame))

    def _handshake(self, request: KafkaRequest) -> bytes:
        if self._state is _State.REAUTH_REFUSED:
            # What KafkaApis answers a SaslHandshake on an authenticated connection; the session carries on.
            self._state = _State.COMPLETE
            return _encode(request, {"error_code": IllegalSaslStateError.code, "mechanisms": []})
        if self._state not in (*_HANDSHAKE_STATES, _State.REAUTH_PROCESS_HANDSHAKE):
            response = _encode(request, {"error_code": IllegalSaslStateError.code, "mechanisms": self.mechanisms})
            raise SaslAuthenticationFailed(response, f"SaslHandshake in SASL state {self._state.value}")
        mechanism = request.body["mechanism"]
        if mechanism not in self.mechanisms:
            response = _encode(request, {"error_code": UnsupportedSaslMechanismError.code,
                                         "mechanisms": self.mechanisms})
            raise SaslAuthenticationFailed(response, f"Unsupported SASL mechanism {mechanism}")
        response = _encode(request, {"error_code": NONE, "mechanisms": self.mechanisms})
        if self._reauthenticating:
            if request.header.api_version == 0:
                raise SaslAuthenticationFailed(None, "re-authentication with SaslHandshake v0")
            if mechanism != self._mechanism:
                self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                       f"re-authentication of mechanism '{self._mechanism}'")
                self._state = _State.REAUTH_BAD_MECHANISM
                return response
        self._raw_tokens = request.header.api_version == 0
        self._mechanism = mechanism
        self._server = create_sasl_server(mechanism, self._credentials)
        self._state = _State.AUTHENTICATE
        return response

    def _authenticate(self, request: KafkaRequest) -> bytes:
        if self._state is _State.REAUTH_BAD_MECHANISM:
            raise SaslAuthenticationFailed(self._authenticate_error(request, SaslAuthenticationFailedError.code,
                                                                    self._bad_mechanism), self._bad_mechanism)
        if self._state is not _State.AUTHENTICATE or self._raw_tokens:
            message = f"Unexpected Kafka request of type SASL_AUTHENTICATE during SASL {self._phase()}"
            raise SaslAuthenticationFailed(self._authenticate_error(request, IllegalSaslStateError.code, message),
                                           message)
        try:
            challenge = self._evaluate(request.body["auth_bytes"])
        except SaslServerError as exc:
            message = exc.client_message or (
                f"Authentication failed during {'re-authentication' if self._reauthenticating else 'authentication'}"
                f" due to invalid credentials with SASL mechanism {self._mechanism}")
            raise SaslAuthenticationFailed(
                self._authenticate_error(request, SaslAuthenticationFailedError.code, message),
                f"{exc.reason} ({self._mechanism}, {message})") from None
        session_lifetime_ms = 0
        if self._server.complete:
            try:
                session_lifetime_ms = self._finish()
            except SaslAuthenticationFailed as exc:
                raise SaslAuthenticationFailed(
                    self._authenticate_error(request, SaslAuthenticationFailedError.code, exc.reason),
                    exc.reason) from None
        return _encode(request, {"error_code": NONE, "error_message": None, "auth_bytes": challenge,
                                 "session_lifetime_ms": session_lifetime_ms})

    # -- raw tokens (after a v0 handshake) -------------------------------------------------------------

    def _raw_token(self, token: bytes) -> bytes | None:
        try:
            challenge = self._evaluate(token)
        except SaslServerError as exc:
            # v0 has no frame for an error: the connection just closes, as in Kafka.
            raise SaslAuthenticationFailed(None, f"{exc.reason} ({self._mechanism}, handshake v0)") from None
        if self._server.complete:
            self._finish()
        # An empty challenge (PLAIN's) is still written: a v0 client waits for its size prefix.
        return challenge

    def _evaluate(self, token: bytes) -> bytes:
        assert self._server is not None
        try:
            return self._server.evaluate_response(token)
        except SaslServerError:
            raise
        except Exception as exc:
            # The credential store failed (etcd unreachable, an unreadable entry): this client is not let in, and
            # the network thread that called carries on with its other connections.
            log.exception("SASL %s: the exchange failed", self._mechanism)
            raise SaslServerError(f"{self._mechanism}: the credentials could not be checked: {exc}") from exc

    # -- completion --------------------------------------------------------------------------------------

    def _finish(self) -> int:
        """Take the authenticated principal; the session's lifetime for the client (0: unlimited)."""
        assert self._server is not None
        principal = KafkaPrincipal(USER_TYPE, self._server.authorization_id)
        if self._reauthenticating and principal != self.principal:
            raise SaslAuthenticationFailed(
                None, f"Cannot change principals during re-authentication from {self.principal}: {principal}")
        self.principal = principal
        self._server = None
        self._state = _State.COMPLETE
        self._reauthenticating = False
        if self._max_reauth_ms > 0:
            self.session_expiration_ms = self._clock.hi_res_clock_ms() + self._max_reauth_ms
            return self._max_reauth_ms
        self.session_expiration_ms = None
        return 0

    def _phase(self) -> str:
        return "authentication" if self._state is _State.AUTHENTICATE else "handshake"

    @staticmethod
    def _authenticate_error(request: KafkaRequest, code: int, message: str) -> bytes:
        return _encode(request, {"error_code": code, "error_message": message, "auth_bytes": b"",
                                 "session_lifetime_ms": 0})


def _encode(request: KafkaRequest, body: dict[str, Any]) -> bytes:
    # encode_response's frame starts with the size prefix, which the processor adds itself.
    return encode_response(request.header, body)[4:]
