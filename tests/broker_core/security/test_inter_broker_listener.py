"""``inter.broker.listener.name``: checked at start-up, before any log is opened or etcd is asked."""

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


def test_a_cluster_refuses_a_tls_inter_broker_listener_before_asking_etcd(tmp_path, server_stores):
    props = {"log.dirs": str(tmp_path / "logs"), "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
             "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SSL", "inter.broker.listener.name": "INTERNAL",
             "etcd.connect": "http://127.0.0.1:1", **server_ssl_props(server_stores)}
    with pytest.raises(InvalidConfigurationError, match="listener INTERNAL uses SSL, and brokers reach each other "
                                                        "over PLAINTEXT listeners only"):
        BrokerServer(props).startup()


def test_the_named_inter_broker_listener_is_the_one_the_broker_keeps(tmp_path, server_stores):
    server = start_broker(tmp_path / "logs", **{"listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                                                "listener.security.protocol.map": "CLIENT:SSL,INTERNAL:PLAINTEXT",
                                                "inter.broker.listener.name": "internal",
                                                **server_ssl_props(server_stores)})
    try:
        assert server.inter_broker_listener == "INTERNAL"
    finally:
        server.shutdown()
