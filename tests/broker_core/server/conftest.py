"""The bootstrap address of the ``broker_server`` fixture (tests/conftest.py), for the server and interop tests."""

from __future__ import annotations

import pytest


@pytest.fixture()
def bootstrap(broker_server) -> str:
    return broker_server.bootstrap_servers
