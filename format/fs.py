"""Access to log directories through fsspec: local paths, ``file://`` and ``s3://``.

Readers (the Spark connector, dumps) go through here so the same code reads a
broker's disk and a bucket. Writing stays on local files (the broker owns its
log directory); this module only resolves URLs and reads.
"""

from __future__ import annotations

from typing import Mapping

import fsspec
from fsspec.spec import AbstractFileSystem

_BOOLEAN_WORDS = {"true": True, "false": False}


def _coerce(value):
    if isinstance(value, str) and value.lower() in _BOOLEAN_WORDS:
        return _BOOLEAN_WORDS[value.lower()]
    return value


def storage_options_from(options: Mapping[str, str], prefix: str = "storage.") -> dict:
    """fsspec keyword arguments from ``storage.*`` options (``storage.key`` -> ``key``).

    ``storage.endpoint_url`` is how an S3-compatible server is reached; other
    keys pass straight to the filesystem (``anon``, ``secret``, ``token``, ...).
    """
    out = {}
    for name, value in options.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            out[name[len(prefix):]] = _coerce(value)
    return out


def filesystem_for(url: str, storage_options: Mapping[str, object] | None = None
                   ) -> tuple[AbstractFileSystem, str]:
    """The filesystem holding ``url`` and the path within it."""
    fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    return fs, path.rstrip("/") or "/"


def join(fs: AbstractFileSystem, base: str, *parts: str) -> str:
    sep = getattr(fs, "sep", "/")
    return sep.join([base.rstrip(sep), *parts])


def is_local_url(url: str) -> bool:
    """Whether ``url`` names a place on this machine's disk: a path, or a ``file://`` URL."""
    return "://" not in url or url.startswith("file://")


def is_local(fs: AbstractFileSystem) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in ("file", "local")
