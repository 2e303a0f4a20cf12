"""How a broker reaches the other brokers of its cluster: the inter-broker listener's security, as a client.

Replica fetchers and transaction marker senders connect to other brokers on
``inter.broker.listener.name`` and speak its security protocol, as Kafka's
brokers do:

- TLS (SSL, SASL_SSL) with the broker's own ``ssl.truststore.*`` and
  ``ssl.keystore.*`` (the keystore is the client certificate a listener with
  ``ssl.client.auth`` asks for), ``listener.name.<l>.ssl.*`` overriding them;
- SASL (SASL_PLAINTEXT, SASL_SSL) with ``sasl.mechanism.inter.broker.protocol``
  and the broker's username and password from
  ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (the mechanism in lower
  case), else ``sasl.jaas.config``.

Kafka's default mechanism, GSSAPI, is not served: a SASL inter-broker listener
needs the mechanism named, one seglog serves and the listener enables. Every
refusal comes at start-up, naming the setting.
"""

from __future__ import annotations

from ..client.client_security import ClientSecurity, parse_jaas_config
from ..config import BrokerConfig
from ..errors import InvalidConfigurationError
from ..network.endpoint import SASL_PROTOCOLS, TLS_PROTOCOLS
from ..network.listener_config import ListenerConfig, listener_prefix
from ..security.sasl_mechanisms import SERVED_MECHANISMS
from ..security.ssl_factory import client_ssl_context

__all__ = ["INTER_BROKER_MECHANISM", "inter_broker_security"]

INTER_BROKER_MECHANISM = "sasl.mechanism.inter.broker.protocol"
_JAAS = "sasl.jaas.config"


def _invalid(key: str, value: object, reason: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"Invalid value {value} for configuration {key}: {reason}",
                                     config_name=key, value=value)


def inter_broker_security(config: BrokerConfig, listener_name: str, security_protocol: str,
                          enabled_mechanisms: list[str]) -> ClientSecurity:
    """The client side of listener ``listener_name`` (``security_protocol``) for this broker;
    ``enabled_mechanisms`` are the listener's ``sasl.enabled.mechanisms``."""
    listener = ListenerConfig(config, listener_name, security_protocol)
    context = client_ssl_context(listener.lookup) if security_protocol in TLS_PROTOCOLS else None
    if security_protocol not in SASL_PROTOCOLS:
        return ClientSecurity(security_protocol, context)
    value = config.extra.get(INTER_BROKER_MECHANISM)
    mechanism = (value or "").strip().upper()
    if not mechanism:
        raise _invalid(INTER_BROKER_MECHANISM, "GSSAPI",
                       f"inter-broker listener {listener_name} uses {security_protocol}, and Kafka's default "
                       f"mechanism GSSAPI is not served (set it to one of {', '.join(SERVED_MECHANISMS)})")
    if mechanism not in SERVED_MECHANISMS:
        raise _invalid(INTER_BROKER_MECHANISM, value, f"it must be one of the served mechanisms "
                                                      f"{', '.join(SERVED_MECHANISMS)}")
    if mechanism not in enabled_mechanisms:
        raise _invalid(INTER_BROKER_MECHANISM, value,
                       f"{INTER_BROKER_MECHANISM} must be included in sasl.enabled.mechanisms of inter-broker "
                       f"listener {listener_name} ({', '.join(enabled_mechanisms)}) when SASL is used for "
                       f"inter-broker communication")
    key = f"{listener_prefix(listener_name)}{mechanism.lower()}.{_JAAS}"
    if key not in config.extra:
        key = _JAAS if _JAAS in config.extra else key
    text = config.extra.get(key)
    if not text:
        raise _invalid(key, None, f"inter-broker listener {listener_name} uses {security_protocol} with "
                                  f"{mechanism}, and the broker needs its username and password here (or in "
                                  f"{_JAAS})")
    _, options = parse_jaas_config(text, key)
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise _invalid(key, "(hidden)", "the broker's username=\"...\" and password=\"...\" are missing")
    return ClientSecurity(security_protocol, context, mechanism, username, password)
