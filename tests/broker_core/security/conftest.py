"""A test CA for the security tests, made once per test run, and a broker serving TLS."""

from __future__ import annotations

import pytest

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
