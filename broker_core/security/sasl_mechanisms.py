"""The SASL mechanisms a broker serves, and the server for one exchange of each."""

from __future__ import annotations

from .credential_store import CredentialStore
from .plain_server import PlainSaslServer
from .sasl_server import SaslServer
from .scram import ScramMechanism
from .scram_server import ScramSaslServer

__all__ = ["SERVED_MECHANISMS", "create_sasl_server"]

#: The mechanisms seglog serves; any other enabled name (GSSAPI, OAUTHBEARER) is refused at the handshake.
SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def create_sasl_server(mechanism: str, credentials: CredentialStore) -> SaslServer:
    """The server for one exchange of ``mechanism`` (one of ``SERVED_MECHANISMS``)."""
    if mechanism == "PLAIN":
        return PlainSaslServer(credentials)
    scram_mechanism = ScramMechanism.for_name(mechanism)
    if scram_mechanism is None:
        raise ValueError(f"SASL mechanism {mechanism!r} is not served (served: {', '.join(SERVED_MECHANISMS)})")
    return ScramSaslServer(scram_mechanism, credentials)
