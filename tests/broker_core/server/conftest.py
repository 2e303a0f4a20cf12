"""A real ``BrokerServer`` on an ephemeral loopback port, for the server and interop tests."""

from __future__ import annotations

import pytest

from server_kit import start_broker


@pytest.fixture()
def broker_server(tmp_path):
    """A started broker over a fresh log dir; shut down (gracefully) after the test."""
    server = start_broker(tmp_path / "logs")
    try:
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


@pytest.fixture()
def bootstrap(broker_server) -> str:
    return broker_server.bootstrap_servers
