"""A broker with SASL listeners for the security tests: PLAINTEXT, SASL_SSL and SASL_PLAINTEXT on 127.0.0.1, users
alice and bob in its credential store, and seglog's client settings to reach it."""

from __future__ import annotations

from broker_core.client.client_security import ClientSecurity as SeglogClientSecurity
from broker_core.server.broker_server import BrokerServer
from tests.broker_core.security.sasl_kit import credentials_for
from tests.broker_core.security.tls_kit import server_ssl_props

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"


def start_sasl_broker(log_dir, server_stores, **props) -> BrokerServer:
    settings = {"log.dirs": str(log_dir), "listeners": LISTENERS, "num.network.threads": 2, "num.io.threads": 4,
                "group.initial.rebalance.delay.ms": 0, **server_ssl_props(server_stores), **props}
    return BrokerServer(settings, credential_store=credentials_for(USERS)).startup()


def sasl_ssl(server) -> str:
    return f"127.0.0.1:{server.bound_port('SASL_SSL')}"


def seglog_security(server_stores, mechanism: str = "SCRAM-SHA-512", user: str = "alice",
                    password: str | None = None, protocol: str = "SASL_SSL") -> SeglogClientSecurity:
    password = USERS.get(user, "") if password is None else password
    return SeglogClientSecurity.from_props({
        "security.protocol": protocol, "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(server_stores.truststore), "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
                            f'password="{password}";'})
