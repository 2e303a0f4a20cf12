"""The bootstrap address of the ``broker_server`` fixture (tests/conftest.py), for the server and interop tests,
and a protocol client connected to it."""

from __future__ import annotations

import pytest

from broker_core.client.protocol_client import ProtocolClient


@pytest.fixture()
def bootstrap(broker_server) -> str:
    return broker_server.bootstrap_servers


@pytest.fixture()
def client(bootstrap):
    with ProtocolClient(bootstrap) as c:
        yield c
