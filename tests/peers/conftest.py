"""seglog beside its JVM peers: a ``seglog broker`` (a ``BrokerServer`` in this process) on
loopback for Kafka's Java client and tools and Spark's Kafka source to talk to; Apache Kafka
itself and the Spark session come from tests/conftest.py."""

from __future__ import annotations

import pytest

from tests.broker_core.server.server_kit import start_broker


@pytest.fixture()
def seglog_server(tmp_path):
    """A started seglog broker over a fresh log dir (``.bootstrap_servers``); shut down after the test."""
    server = start_broker(tmp_path / "seglog-logs")
    try:
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)
