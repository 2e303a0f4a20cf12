"""Where a broker finds its users' SCRAM credentials: the ``CredentialStore`` boundary and its in-memory form.

A store maps (user, mechanism) to a ``ScramCredential`` and never holds a password. PLAIN checks a
password against the same credentials (``verify_password``), so one ``seglog users add`` serves all
three mechanisms. ``alter`` applies one AlterUserScramCredentials request's deletions and upsertions
together, so a durable store writes once per request. The durable stores (the log dir:
``credential_file``; etcd in cluster mode: ``controller.credential_etcd``) keep the same table.
"""

from __future__ import annotations

import hmac
import threading
from typing import Iterable, Mapping, Protocol, runtime_checkable

from . import scram
from .scram import ScramCredential, ScramMechanism

__all__ = ["CredentialStore", "InMemoryCredentialStore", "Credentials", "verify_password"]

#: One user's credentials, by mechanism.
Credentials = Mapping[ScramMechanism, ScramCredential]


@runtime_checkable
class CredentialStore(Protocol):
    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """The user's credential for ``mechanism``; None when there is none."""
        ...

    def credentials(self, user: str) -> dict[ScramMechanism, ScramCredential]:
        """Every credential of the user (empty for an unknown user)."""
        ...

    def users(self) -> list[str]:
        """The users with at least one credential, sorted."""
        ...

    def alter(self, deletions: Iterable[tuple[str, ScramMechanism]],
              upsertions: Iterable[tuple[str, ScramMechanism, ScramCredential]]) -> None:
        """Delete, then insert or replace, as one change; a deletion of a missing credential is a no-op."""
        ...


class InMemoryCredentialStore:
    """The table itself, guarded by a lock; the durable stores persist it after each ``alter``."""

    def __init__(self, table: Mapping[str, Credentials] | None = None) -> None:
        self._lock = threading.Lock()
        self._table: dict[str, dict[ScramMechanism, ScramCredential]] = {
            user: dict(creds) for user, creds in (table or {}).items() if creds}

    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._lock:
            return self._table.get(user, {}).get(mechanism)

    def credentials(self, user: str) -> dict[ScramMechanism, ScramCredential]:
        with self._lock:
            return dict(self._table.get(user, {}))

    def users(self) -> list[str]:
        with self._lock:
            return sorted(self._table)

    def alter(self, deletions: Iterable[tuple[str, ScramMechanism]],
              upsertions: Iterable[tuple[str, ScramMechanism, ScramCredential]]) -> None:
        with self._lock:
            table = {user: dict(creds) for user, creds in self._table.items()}
            for user, mechanism in deletions:
                table.get(user, {}).pop(mechanism, None)
            for user, mechanism, credential in upsertions:
                table.setdefault(user, {})[mechanism] = credential
            table = {user: creds for user, creds in table.items() if creds}
            self._persist(table)
            self._table = table

    def _persist(self, table: Mapping[str, Credentials]) -> None:
        """Make ``table`` durable before it is served; raising leaves the store as it was."""


def verify_password(store: CredentialStore, user: str, password: str) -> bool:
    """Whether ``password`` is the user's, checked against any of the user's SCRAM credentials (PLAIN).

    An unknown user costs the same PBKDF2 as a known one, so the answer's timing does not tell
    which users exist.
    """
    credentials = store.credentials(user)
    if not credentials:
        scram.salted_password(ScramMechanism.SCRAM_SHA_256, password, b"unknown user", scram.MIN_ITERATIONS)
        return False
    for mechanism, credential in sorted(credentials.items(), key=lambda kv: kv[0].type_id):
        salted = scram.salted_password(mechanism, password, credential.salt, credential.iterations)
        stored = scram.stored_key(mechanism, scram.client_key(mechanism, salted))
        if hmac.compare_digest(stored, credential.stored_key):
            return True
    return False
