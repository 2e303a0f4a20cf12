"""A test CA for the security tests, made once per test run, and a broker with SASL listeners."""

from __future__ import annotations

import pytest

from tests.broker_core.security.sasl_listener_kit import start_sasl_broker
from tests.broker_core.security.tls_kit import TestCa


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory) -> TestCa:
    return TestCa(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="session")
def server_stores(test_ca):
    return test_ca.server(key_password="broker-key-secret")


@pytest.fixture(scope="session")
def client_stores(test_ca):
    return test_ca.client("client", unit="eng", organization="seglog")


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory, server_stores):
    # The SASL_SSL listener offers two mechanisms only; SASL_PLAINTEXT every one seglog serves.
    server = start_sasl_broker(tmp_path_factory.mktemp("sasl-broker") / "logs", server_stores,
                               **{"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"})
    yield server
    server.shutdown(timeout_ms=10_000)
