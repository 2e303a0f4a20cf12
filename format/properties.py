"""Java properties files (``meta.properties``, ``remote-tier.properties``): ``key=value`` lines."""

from __future__ import annotations

__all__ = ["parse_properties"]


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file's ``key=value`` lines (comments and blank lines skipped)."""
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        props[key.strip()] = value.strip()
    return props
