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

from ..config import BrokerConfig
from ..security.principal import KafkaPrincipal
from ..security.ssl_factory import server_ssl_context
from ..security.transport_layer import PlaintextTransportLayer, SslTransportLayer
from .endpoint import PLAINTEXT, SASL_PROTOCOLS, TLS_PROTOCOLS, EndPoint
from .listener_config import ListenerConfig

#: Builds a connection's SASL server authenticator from the principal its transport established (None).
AuthenticatorFactory = Callable[[KafkaPrincipal | None], object]


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
