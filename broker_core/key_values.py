"""``key=value`` command-line items (``--config``, ``--broker-config``, ``--storage``) as a dict."""

from __future__ import annotations

from typing import Sequence


def parse_key_values(items: Sequence[str] | None, option: str = "--config") -> dict[str, str]:
    """Each ``key=value`` of ``items``, stripped; a ValueError naming ``option`` for anything else."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} expects key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
