"""How the connector reaches a secured broker: Spark's ``kafka.``-prefixed client options.

Spark's Kafka source hands every ``kafka.*`` option to the Kafka client with the
prefix dropped; seglog does the same for the security settings::

    .option("kafka.security.protocol", "SASL_SSL")
    .option("kafka.sasl.mechanism", "SCRAM-SHA-512")
    .option("kafka.sasl.jaas.config", 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                      'username="etl" password="...";')
    .option("kafka.ssl.truststore.type", "PEM").option("kafka.ssl.truststore.location", "/etc/kafka/ca.pem")

They become one ``ClientSecurity`` (the one ``--command-config`` makes) for every
connection the driver and the tasks open. The options travel to the tasks as
strings; each Python process builds the TLS context from them once.
"""

from __future__ import annotations

import ssl
from functools import lru_cache
from typing import Mapping

from broker_core.client.client_security import ClientSecurity
from broker_core.errors import InvalidConfigurationError, SaslAuthenticationFailedError, UnsupportedSaslMechanismError

from .option_error import SeglogOptionError

PREFIX = "kafka."
# The Kafka client properties seglog's client reads (without the prefix).
SECURITY_KEYS = ("security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
                 "ssl.truststore.type", "ssl.truststore.location", "ssl.keystore.type", "ssl.keystore.location",
                 "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.enabled.protocols",
                 "ssl.protocol", "ssl.cipher.suites")


def security_props(options: Mapping[str, str]) -> dict[str, str]:
    """The Kafka client security properties among the data source's options (case-insensitive names)."""
    lowered = {k.lower(): v for k, v in options.items()}
    return {key: lowered[PREFIX + key] for key in SECURITY_KEYS if PREFIX + key in lowered}


def client_security(props: Mapping[str, str]) -> ClientSecurity:
    """The ``ClientSecurity`` of ``props``; a bad value raises ``SeglogOptionError`` naming its option."""
    return _built(tuple(sorted(props.items())))


@lru_cache(maxsize=8)
def _built(items: tuple[tuple[str, str], ...]) -> ClientSecurity:
    try:
        return ClientSecurity.from_props(dict(items))
    except InvalidConfigurationError as exc:
        raise SeglogOptionError(f"option {PREFIX}{exc.config_name}: {exc}") from None


def open_broker(bootstrap: str, props: Mapping[str, str]):
    """A ``RemoteBroker`` at ``bootstrap`` reached with ``props``; a refused login raises
    ``SeglogOptionError`` naming the option at fault."""
    from broker_core.client.remote_broker import RemoteBroker

    security = client_security(props)
    try:
        return RemoteBroker(bootstrap, security)
    except UnsupportedSaslMechanismError as exc:
        raise SeglogOptionError(f"option {PREFIX}sasl.mechanism={props.get('sasl.mechanism')}: {exc}") from None
    except SaslAuthenticationFailedError as exc:
        raise SeglogOptionError(f"option {PREFIX}sasl.jaas.config: the broker at {bootstrap} refused the login: "
                                f"{exc}") from None
    except ssl.SSLCertVerificationError as exc:
        raise SeglogOptionError(f"option {PREFIX}ssl.truststore.location={props.get('ssl.truststore.location')}: "
                                f"the certificate of the broker at {bootstrap} is not trusted "
                                f"({exc.verify_message})") from None
