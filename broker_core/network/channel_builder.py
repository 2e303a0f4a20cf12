"""What a listener's connections are made of: their transport and their authentication (Kafka's ChannelBuilder).

One ``ChannelBuilder`` per listener, built at start-up from the listener's
security protocol and settings: PLAINTEXT and SASL_PLAINTEXT connections are
plain sockets, SSL and SASL_SSL ones TLS with the listener's context (so a
missing or unreadable keystore stops the broker before it listens). SASL
listeners also hand each connection a SASL server authenticator.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Callable

from ..clock import SYSTEM_CLOCK, Clock
from ..config import BrokerConfig
from ..errors import InvalidConfigurationError
from ..security.credential_store import CredentialStore
from ..security.principal import KafkaPrincipal
from ..security.sasl_authenticator import SaslServerAuthenticator
from ..security.sasl_mechanisms import SERVED_MECHANISMS
from ..security.ssl_factory import server_ssl_context
from ..security.transport_layer import PlaintextTransportLayer, SslTransportLayer
from .endpoint import PLAINTEXT, SASL_PROTOCOLS, TLS_PROTOCOLS, EndPoint
from .listener_config import ListenerConfig

#: Builds a connection's SASL server authenticator from the principal its transport established (None).
AuthenticatorFactory = Callable[[KafkaPrincipal | None], SaslServerAuthenticator]
# Kafka's default (GSSAPI) is not served here: a SASL listener left at it would let nobody in.
DEFAULT_SASL_ENABLED_MECHANISMS = ",".join(SERVED_MECHANISMS)


def sasl_enabled_mechanisms(listener: ListenerConfig) -> tuple[list[str], str | None, str]:
    """A listener's ``sasl.enabled.mechanisms`` (upper case), with the text and the key it came from."""
    text, key = listener.lookup("sasl.enabled.mechanisms", DEFAULT_SASL_ENABLED_MECHANISMS)
    return [m.strip().upper() for m in (text or "").split(",") if m.strip()], text, key


def sasl_authenticator_factory(config: BrokerConfig, endpoint: EndPoint, credentials: CredentialStore,
                               api_versions_response: Callable[[bytes], bytes],
                               clock: Clock = SYSTEM_CLOCK) -> AuthenticatorFactory:
    """The authenticators of a SASL listener: ``sasl.enabled.mechanisms`` and ``connections.max.reauth.ms``
    (each overridable per listener), the broker's credentials, its ApiVersions answer."""
    listener = ListenerConfig(config, endpoint.listener_name, endpoint.security_protocol)
    mechanisms, mechanisms_text, mechanisms_key = sasl_enabled_mechanisms(listener)
    reauth_text, reauth_key = listener.lookup("connections.max.reauth.ms", "0")
    try:
        reauth_ms = int(reauth_text or 0)
    except ValueError:
        raise InvalidConfigurationError(f"Invalid value {reauth_text} for configuration {reauth_key}: "
                                        f"not a number", config_name=reauth_key, value=reauth_text) from None
    if not any(m in SERVED_MECHANISMS for m in mechanisms):
        raise InvalidConfigurationError(
            f"Invalid value {mechanisms_text} for configuration {mechanisms_key}: listener {endpoint.listener_name} "
            f"uses {endpoint.security_protocol} and needs one of {', '.join(SERVED_MECHANISMS)}",
            config_name=mechanisms_key, value=mechanisms_text)

    def build(transport_principal: KafkaPrincipal | None) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(enabled_mechanisms=mechanisms, credentials=credentials,
                                       api_versions_response=api_versions_response,
                                       connections_max_reauth_ms=reauth_ms, clock=clock,
                                       transport_principal=transport_principal)

    return build


@dataclass(frozen=True)
class ChannelBuilder:
    listener_name: str
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    authenticator_factory: AuthenticatorFactory | None = None

    @classmethod
    def for_listener(cls, config: BrokerConfig, endpoint: EndPoint,
                     authenticator_factory: AuthenticatorFactory | None = None) -> ChannelBuilder:
        protocol = endpoint.security_protocol
        context = None
        if protocol in TLS_PROTOCOLS:
            listener = ListenerConfig(config, endpoint.listener_name, protocol)
            context = server_ssl_context(listener.lookup, endpoint.listener_name, protocol,
                                         client_auth_overridden=listener.is_overridden("ssl.client.auth"))
        if protocol in SASL_PROTOCOLS and authenticator_factory is None:
            raise ValueError(f"ChannelBuilder({endpoint.connection_string}): a {protocol} listener needs a SASL "
                             f"authenticator")
        return cls(endpoint.listener_name, protocol, context,
                   authenticator_factory if protocol in SASL_PROTOCOLS else None)

    @classmethod
    def plaintext(cls, listener_name: str = PLAINTEXT) -> ChannelBuilder:
        return cls(listener_name, PLAINTEXT)

    def transport_layer(self, sock: socket.socket) -> PlaintextTransportLayer | SslTransportLayer:
        if self.ssl_context is None:
            return PlaintextTransportLayer(sock)
        return SslTransportLayer(sock, self.ssl_context)
