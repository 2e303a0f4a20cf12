"""The console over a broker with a known workload (``console_kit``), one per test module."""

from __future__ import annotations

import pytest

from tests.broker_core.console.console_kit import console_workload


@pytest.fixture(scope="module")
def workload():
    with console_workload() as running:
        yield running
