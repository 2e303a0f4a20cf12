"""SCRAM credentials kept in the log directories (a broker without etcd).

One small JSON document, ``seglog-scram-credentials.json``, in every log dir, written the way the
topic store writes its own (temp file, fsync, rename, fsync of the directory) with a version counter,
so the newest copy wins when directories disagree. It is readable by its owner only. Each user's
credentials are Kafka's strings, as Kafka keeps them under ``/config/users/<user>``::

    {"format": 1, "version": 3,
     "users": {"alice": {"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=4096"}}}

The broker owns the file while it runs; ``seglog users --log-dir`` changes it only on a log dir no
broker holds (``--bootstrap`` otherwise).
"""

from __future__ import annotations

import json
import os
from typing import Mapping, Sequence

from ..log.topic_store import atomic_write, newest_copy
from .credential_store import Credentials, InMemoryCredentialStore
from .scram import ScramCredential, ScramMechanism

__all__ = ["STORE_FILE", "FileCredentialStore", "read_credentials"]

STORE_FILE = "seglog-scram-credentials.json"
STORE_FORMAT_VERSION = 1


def read_credentials(log_dirs: Sequence[str]) -> tuple[int, dict[str, dict[ScramMechanism, ScramCredential]]]:
    """(version, table) of the newest copy among ``log_dirs``; (0, {}) when no dir has one.
    Raises ``ValueError`` naming the file and the entry at fault."""
    newest = newest_copy(log_dirs, STORE_FILE, "SCRAM credentials")
    if newest is None:
        return 0, {}
    doc, path = newest
    version = doc.get("version", 0)
    return version, _decode(path, doc.get("users"))


def _decode(path: str, users: object) -> dict[str, dict[ScramMechanism, ScramCredential]]:
    if not isinstance(users, dict):
        raise ValueError(f"{path}: no \"users\" object")
    table: dict[str, dict[ScramMechanism, ScramCredential]] = {}
    for user, entries in users.items():
        if not isinstance(entries, dict):
            raise ValueError(f"{path}: user {user!r}: not an object of mechanisms")
        for name, text in entries.items():
            mechanism = ScramMechanism.for_name(name)
            if mechanism is None or not isinstance(text, str):
                raise ValueError(f"{path}: user {user!r}: {name!r} is not a SCRAM mechanism with a credential")
            try:
                table.setdefault(user, {})[mechanism] = ScramCredential.from_kafka_string(text)
            except ValueError as exc:
                raise ValueError(f"{path}: user {user!r}, {name}: {exc}") from None
    return table


def encode_users(table: Mapping[str, Credentials]) -> dict[str, dict[str, str]]:
    """The table as Kafka's strings, by user and mechanism name."""
    return {user: {m.mechanism_name: c.to_kafka_string() for m, c in sorted(creds.items(), key=lambda kv: kv[0].type_id)}
            for user, creds in sorted(table.items())}


class FileCredentialStore(InMemoryCredentialStore):
    """The credentials of ``log_dirs``, loaded once and written to every dir on each change."""

    def __init__(self, log_dirs: Sequence[str]) -> None:
        self.log_dirs = list(log_dirs)
        self._version, table = read_credentials(self.log_dirs)
        super().__init__(table)

    def _persist(self, table: Mapping[str, Credentials]) -> None:
        version = self._version + 1
        text = json.dumps({"format": STORE_FORMAT_VERSION, "version": version, "users": encode_users(table)},
                          indent=1, sort_keys=True)
        for d in self.log_dirs:
            atomic_write(os.path.join(d, STORE_FILE), text, mode=0o600)
        self._version = version
