"""A listener's settings: a broker setting, or its ``listener.name.<listener>.<setting>`` override.

Kafka lets each listener override security settings under its lower-case
name — ``listener.name.client.ssl.keystore.location`` wins over
``ssl.keystore.location`` for the ``CLIENT`` listener — so one broker can show
different certificates on different listeners. ``ListenerConfig`` answers a
setting's value for one listener together with the key it came from, so that
an error names the key the operator actually wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import BrokerConfig

LISTENER_PREFIX = "listener.name."

#: Listener and TLS settings the broker reads (kept among the config's ``extra`` settings: a key password
#: must never be reported by DescribeConfigs).
LISTENER_CONFIG_NAMES = frozenset({
    "listener.security.protocol.map", "inter.broker.listener.name",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm",
})


def is_listener_config(name: str) -> bool:
    """A setting the listeners read: one of ``LISTENER_CONFIG_NAMES`` or any per-listener override."""
    return name in LISTENER_CONFIG_NAMES or name.startswith(LISTENER_PREFIX)


def listener_prefix(listener_name: str) -> str:
    """``listener.name.client.`` for ``CLIENT``."""
    return f"{LISTENER_PREFIX}{listener_name.lower()}."


@dataclass(frozen=True)
class ListenerConfig:
    """The settings of one listener of ``config``."""

    config: BrokerConfig
    listener_name: str
    security_protocol: str

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.lookup(name, default)[0]

    def lookup(self, name: str, default: str | None = None) -> tuple[str | None, str]:
        """``(value, key)``: the listener's override if set, else the broker's setting, else ``default``."""
        override = listener_prefix(self.listener_name) + name
        if override in self.config.extra:
            return self.config.extra[override], override
        return self.broker_value(name, default), name

    def is_overridden(self, name: str) -> bool:
        return listener_prefix(self.listener_name) + name in self.config.extra

    def broker_value(self, name: str, default: str | None = None) -> str | None:
        """The broker-wide setting: a BrokerConfig field when it has one, else an ``extra`` setting."""
        attr = name.replace(".", "_")
        if hasattr(self.config, attr):
            value = getattr(self.config, attr)
            if value is None:
                return default
            return ",".join(map(str, value)) if isinstance(value, (tuple, list, frozenset)) else str(value)
        return self.config.extra.get(name, default)
