"""Listener endpoints: ``listeners`` and ``advertised.listeners`` as Kafka writes them.

``PLAINTEXT://127.0.0.1:9092,INTERNAL://:9093`` is a comma-separated list of
``NAME://host:port``. An empty host binds every interface; port 0 asks the
operating system for a free port (the bound port is what gets advertised).
A listener's security protocol is its name's entry in
``listener.security.protocol.map`` (``CLIENT:SASL_SSL,REPLICATION:SSL``);
the four protocol names map to themselves: ``PLAINTEXT``, ``SSL``,
``SASL_PLAINTEXT``, ``SASL_SSL``.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, replace
from typing import Mapping

from ..errors import InvalidConfigurationError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
#: The protocols whose connections are TLS, and those that authenticate with SASL.
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})
# [::1] style hosts keep their brackets out of the host part.
_ENDPOINT = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)://(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:/\[\]]*)):(?P<port>-?\d+)$")


@dataclass(frozen=True)
class EndPoint:
    """One listener: its name, security protocol and address."""

    listener_name: str
    security_protocol: str
    host: str
    port: int

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    def with_port(self, port: int) -> EndPoint:
        return replace(self, port=port)


def _security_map(config_map: str | None) -> dict[str, str]:
    """``listener.security.protocol.map`` (``CLIENT:PLAINTEXT,...``); every protocol maps to itself."""
    mapping = {p: p for p in SECURITY_PROTOCOLS}
    for item in (config_map or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise InvalidConfigurationError(
                f"Invalid value {config_map} for configuration listener.security.protocol.map: "
                f"{item!r} is not NAME:PROTOCOL", config_name="listener.security.protocol.map", value=config_map)
        mapping[name.strip().upper()] = protocol.strip().upper()
    return mapping


def parse_listeners(text: str, config_name: str = "listeners",
                    security_protocol_map: str | None = None) -> list[EndPoint]:
    """The endpoints of a ``listeners``-style value; names must be unique and have a security protocol."""
    protocols = _security_map(security_protocol_map)
    endpoints: list[EndPoint] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise InvalidConfigurationError(
                f"Invalid value {text} for configuration {config_name}: {item!r} is not NAME://host:port",
                config_name=config_name, value=text)
        name = match["name"].upper()
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise InvalidConfigurationError(f"Invalid value {text} for configuration {config_name}: "
                                            f"port {port} is out of range", config_name=config_name, value=text)
        protocol = protocols.get(name)
        if protocol is None:
            raise InvalidConfigurationError(
                f"Invalid value {text} for configuration {config_name}: listener {name} has no security protocol "
                f"(add it to listener.security.protocol.map)", config_name=config_name, value=text)
        if any(e.listener_name == name for e in endpoints):
            raise InvalidConfigurationError(f"Invalid value {text} for configuration {config_name}: "
                                            f"listener name {name} appears twice", config_name=config_name,
                                            value=text)
        host = match["v6"] if match["v6"] is not None else match["host"]
        endpoints.append(EndPoint(name, protocol, host, port))
    if not endpoints:
        raise InvalidConfigurationError(f"Invalid value {text} for configuration {config_name}: no listener given",
                                        config_name=config_name, value=text)
    return endpoints


def advertised_endpoints(bound: list[EndPoint], advertised: str | None,
                         extra: Mapping[str, str] | None = None) -> dict[str, EndPoint]:
    """What Metadata tells clients to connect to, per listener name.

    ``advertised.listeners`` wins where it names a listener; otherwise the
    bound listener is advertised, with the port the socket really got and,
    for a wildcard host, this machine's name (clients cannot connect to
    0.0.0.0), as Kafka does.
    """
    out: dict[str, EndPoint] = {}
    for endpoint in bound:
        host = endpoint.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        out[endpoint.listener_name] = replace(endpoint, host=host)
    if advertised:
        security_map = (extra or {}).get("listener.security.protocol.map")
        for endpoint in parse_listeners(advertised, "advertised.listeners", security_map):
            if endpoint.listener_name not in out:
                raise InvalidConfigurationError(
                    f"Invalid value {advertised} for configuration advertised.listeners: listener "
                    f"{endpoint.listener_name} is not in listeners", config_name="advertised.listeners",
                    value=advertised)
            port = endpoint.port or out[endpoint.listener_name].port
            out[endpoint.listener_name] = replace(endpoint, port=port)
    return out


def inter_broker_listener_name(config_value: str | None, listener_names: list[str]) -> str:
    """``inter.broker.listener.name``: the listener brokers reach each other on; the first listener
    when unset. A name that is not a listener is refused."""
    if not listener_names:
        raise ValueError("inter_broker_listener_name: no listeners")
    if config_value is None or not config_value.strip():
        return listener_names[0]
    name = config_value.strip().upper()
    if name not in listener_names:
        raise InvalidConfigurationError(
            f"Invalid value {config_value} for configuration inter.broker.listener.name: it must be one of the "
            f"listener names ({', '.join(listener_names)})", config_name="inter.broker.listener.name",
            value=config_value)
    return name
