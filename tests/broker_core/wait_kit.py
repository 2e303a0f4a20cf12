"""Waiting, bounded, for what another thread or process does: the one polling loop of the tests."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(probe: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.01) -> T:
    """Call ``probe`` until it returns something truthy or ``timeout_s`` passes; returns its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)
