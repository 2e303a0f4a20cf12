"""``metrics.listener``: where the broker serves ``/metrics`` and its health endpoints, as ``http://host:port``.

Pure parsing, shared by the configuration's check (a bad value stops the
start, naming the setting) and the listener that binds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class MetricsListenerAddress:
    """Where to bind: ``host`` (empty: every interface) and ``port`` (0: one the system picks)."""

    host: str
    port: int


def parse_metrics_listener(value: str) -> MetricsListenerAddress:
    """``http://host:port`` (``http://[::1]:port`` for IPv6, ``http://:port`` for every interface);
    raises ValueError saying what is wrong."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not an http://host:port address ({exc})") from None
    if parts.scheme != "http":
        raise ValueError("the address must start with http:// (the listener serves plain HTTP)")
    if port is None:
        raise ValueError("the address names no port (http://host:port; port 0 picks a free one)")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError("the address takes a host and a port only (the paths are /metrics, /healthz and /readyz)")
    return MetricsListenerAddress(parts.hostname or "", port)
