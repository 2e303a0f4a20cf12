"""``inter.broker.listener.name`` and how a cluster's brokers reach each other there: checked at start-up, before
any log is opened or etcd is asked."""

from __future__ import annotations

import pytest

from broker_core.errors import InvalidConfigurationError
from broker_core.server.broker_server import BrokerServer
from tests.broker_core.security.tls_kit import server_ssl_props
from tests.broker_core.server.server_kit import start_broker


def test_an_inter_broker_listener_name_that_is_not_a_listener_is_refused(tmp_path):
    with pytest.raises(InvalidConfigurationError, match="inter.broker.listener.name: it must be one of the "
                                                        "listener names \\(PLAINTEXT\\)"):
        start_broker(tmp_path / "logs", **{"inter.broker.listener.name": "INTERNAL"})
    assert not (tmp_path / "logs").exists()


def _cluster_props(tmp_path, server_stores, protocol: str = "SASL_SSL", **props) -> dict:
    """A cluster broker whose inter-broker listener INTERNAL uses ``protocol``; etcd is never reached (the
    settings are refused first)."""
    return {"log.dirs": str(tmp_path / "logs"), "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": f"CLIENT:SASL_SSL,INTERNAL:{protocol}",
            "inter.broker.listener.name": "INTERNAL", "etcd.connect": "http://127.0.0.1:1",
            **server_ssl_props(server_stores), **props}


def _refused(props, match: str) -> InvalidConfigurationError:
    with pytest.raises(InvalidConfigurationError, match=match) as refused:
        BrokerServer(props).startup()
    return refused.value


def test_a_sasl_inter_broker_listener_without_an_inter_broker_mechanism_is_refused_before_asking_etcd(
        tmp_path, server_stores):
    error = _refused(_cluster_props(tmp_path, server_stores),
                     "Invalid value GSSAPI for configuration sasl.mechanism.inter.broker.protocol: inter-broker "
                     "listener INTERNAL uses SASL_SSL, and Kafka's default mechanism GSSAPI is not served")
    assert error.config_name == "sasl.mechanism.inter.broker.protocol"
    assert not (tmp_path / "logs").exists()


def test_an_inter_broker_mechanism_seglog_does_not_serve_is_refused(tmp_path, server_stores):
    _refused(_cluster_props(tmp_path, server_stores, **{"sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"}),
             "Invalid value OAUTHBEARER for configuration sasl.mechanism.inter.broker.protocol: it must be one "
             "of the served mechanisms PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")


def test_an_inter_broker_mechanism_the_listener_does_not_enable_is_refused(tmp_path, server_stores):
    _refused(_cluster_props(tmp_path, server_stores, **{
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-512"}),
        "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms of inter-broker "
        "listener INTERNAL \\(SCRAM-SHA-512\\)")


def test_a_sasl_inter_broker_listener_without_the_brokers_jaas_login_is_refused_naming_the_listeners_key(
        tmp_path, server_stores):
    error = _refused(_cluster_props(tmp_path, server_stores, protocol="SASL_PLAINTEXT", **{
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}),
        "Invalid value None for configuration listener.name.internal.scram-sha-512.sasl.jaas.config: "
        "inter-broker listener INTERNAL uses SASL_PLAINTEXT with SCRAM-SHA-512")
    assert error.config_name == "listener.name.internal.scram-sha-512.sasl.jaas.config"


def test_a_jaas_login_without_a_password_is_refused(tmp_path, server_stores):
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker";'
    _refused(_cluster_props(tmp_path, server_stores, **{
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512", "sasl.jaas.config": jaas}),
        "Invalid value \\(hidden\\) for configuration sasl.jaas.config: the broker's username")


def test_a_tls_inter_broker_listener_with_a_missing_truststore_is_refused_naming_the_listeners_key(
        tmp_path, server_stores):
    missing = str(tmp_path / "nowhere.pem")
    _refused(_cluster_props(tmp_path, server_stores, protocol="SSL", **{
        "listener.name.internal.ssl.truststore.location": missing}),
        f"Invalid value {missing} for configuration listener.name.internal.ssl.truststore.location: no such file")


def test_the_named_inter_broker_listener_is_the_one_the_broker_keeps(tmp_path, server_stores):
    server = start_broker(tmp_path / "logs", **{"listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                                                "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:PLAINTEXT",
                                                "inter.broker.listener.name": "internal",
                                                **server_ssl_props(server_stores)})
    try:
        assert server.inter_broker_listener == "INTERNAL"
    finally:
        server.shutdown()
