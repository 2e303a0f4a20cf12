"""A small blocking Kafka protocol client: one connection, one request at a time.

What the ``seglog`` admin commands (with ``--bootstrap``) and the tests use
to talk to a broker without a client library: it connects, asks ApiVersions,
and from then on sends each request at the highest version both sides speak,
with the protocol package's ``encode_request`` / ``parse_response``. It is
not a producer or a consumer: no batching, no retries, no metadata cache.

Given a ``ClientSecurity`` (Kafka client properties: ``--command-config``)
it connects through TLS on SSL and SASL_SSL listeners and, on SASL ones,
authenticates right after ApiVersions — SaslHandshake v1, then the
mechanism's tokens in SaslAuthenticate requests — before any other request.
When the broker limits the session (``connections.max.reauth.ms``), the
client re-authenticates on the same connection before the session ends, as
Kafka's clients do (KIP-368).
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from typing import Any, Mapping

from ..errors import NONE, error_for_code
from ..protocol import SUPPORTED_VERSIONS, ApiKey, ProtocolError, encode_request, parse_response
from .client_security import PLAINTEXT_CLIENT, ClientSecurity

_SIZE = struct.Struct(">i")
DEFAULT_TIMEOUT_S = 30.0
# A SASL exchange that has not ended after this many round trips is not going to (SCRAM needs two).
_MAX_SASL_ROUNDS = 10
# Re-authenticate once this share of the session lifetime has passed (Kafka's clients pick 85-95 %).
_REAUTH_AT = 0.85


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    """``host:port`` (the first of a comma-separated list) as a pair; ``[v6]:port`` works too."""
    first = bootstrap.split(",")[0].strip()
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--bootstrap expects HOST:PORT, got {bootstrap!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class ProtocolClient:
    """A connection to one broker; use as a context manager."""

    def __init__(self, bootstrap: str, *, client_id: str = "seglog", timeout_s: float = DEFAULT_TIMEOUT_S,
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.address = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.security = security
        self._correlation = itertools.count(1)
        self._reauthenticate_at: float | None = None  # monotonic seconds; None: the session does not expire
        self._sock: socket.socket = security.connect(self.address, timeout_s)
        try:
            versions = self.send(ApiKey.API_VERSIONS, {"client_software_name": "seglog",
                                                       "client_software_version": "0.1.0"}, version=0)
            self.broker_versions = {entry["api_key"]: (entry["min_version"], entry["max_version"])
                                    for entry in versions["api_keys"]}
            if security.uses_sasl:
                self._authenticate()
        except BaseException:
            self._sock.close()
            raise

    def _authenticate(self) -> None:
        """SASL on this connection: the handshake picks the mechanism, SaslAuthenticate carries its tokens."""
        from ..security.sasl_client import SaslClient

        where = f"the broker at {self.address[0]}:{self.address[1]}"
        mechanism = self.security.sasl_mechanism
        handshake = self._send(ApiKey.SASL_HANDSHAKE, {"mechanism": mechanism}, version=1)
        if handshake["error_code"] != NONE:
            raise error_for_code(handshake["error_code"])(
                f"{where} does not enable SASL mechanism {mechanism} (it enables "
                f"{', '.join(handshake['mechanisms']) or 'none'})")
        client = SaslClient(mechanism, self.security.username, self.security.password)
        token: bytes | None = client.initial_response()
        started = time.monotonic()
        for _ in range(_MAX_SASL_ROUNDS):
            if token is None:
                return
            response = self._send(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            lifetime_ms = response.get("session_lifetime_ms") or 0
            self._reauthenticate_at = started + lifetime_ms * _REAUTH_AT / 1000 if lifetime_ms > 0 else None
            if response["error_code"] != NONE:
                raise error_for_code(response["error_code"])(
                    f"{where} refused {mechanism} authentication of user {self.security.username}: "
                    f"{response.get('error_message') or 'no reason given'}")
            token = client.evaluate_challenge(response["auth_bytes"])
        raise ProtocolError(f"{where}: the {mechanism} exchange did not end after {_MAX_SASL_ROUNDS} rounds")

    def serves(self, api_key: ApiKey) -> bool:
        """Whether the broker and this client share a version of ``api_key``."""
        ours = SUPPORTED_VERSIONS.get(api_key)
        theirs = self.broker_versions.get(int(api_key))
        return ours is not None and theirs is not None and max(ours[0], theirs[0]) <= min(ours[1], theirs[1])

    def version_for(self, api_key: ApiKey) -> int:
        """The highest version of ``api_key`` both this client and the broker speak."""
        if not self.serves(api_key):
            raise ProtocolError(f"the broker at {self.address[0]}:{self.address[1]} does not serve "
                                f"{api_key.name} in a version this client speaks")
        return min(SUPPORTED_VERSIONS[api_key][1], self.broker_versions[int(api_key)][1])

    def send(self, api_key: ApiKey, body: Mapping[str, Any], version: int | None = None) -> dict:
        """Send one request and wait for its response body."""
        self._reauthenticate_if_due()
        return self._send(api_key, body, version)

    def _reauthenticate_if_due(self) -> None:
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            self._authenticate()

    def _send(self, api_key: ApiKey, body: Mapping[str, Any], version: int | None = None) -> dict:
        version = self.version_for(api_key) if version is None else version
        correlation_id = next(self._correlation)
        self._sock.sendall(encode_request(api_key, version, correlation_id, self.client_id, body))
        (size,) = _SIZE.unpack(self._read_exactly(4))
        got, response = parse_response(api_key, version, self._read_exactly(size))
        if got != correlation_id:
            raise ProtocolError(f"response correlation id {got} does not match request {correlation_id}")
        return response

    def send_no_response(self, api_key: ApiKey, body: Mapping[str, Any], version: int | None = None) -> None:
        """Send a request the broker does not answer (a produce with acks=0)."""
        self._reauthenticate_if_due()
        version = self.version_for(api_key) if version is None else version
        self._sock.sendall(encode_request(api_key, version, next(self._correlation), self.client_id, body))

    def _read_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self._sock.recv(min(n - len(out), 1 << 20))
            if not chunk:
                raise ConnectionError(f"the broker at {self.address[0]}:{self.address[1]} closed the connection")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> ProtocolClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
