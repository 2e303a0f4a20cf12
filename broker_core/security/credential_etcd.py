"""SCRAM credentials kept in etcd (cluster mode), where Kafka kept them in ZooKeeper: ``/config/users/U``
holds ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``.

Every broker of the cluster reads the same keys, so a user added through any broker is known to all
at once: lookups read etcd (authentication is rare next to requests), and ``alter`` writes every
user it touches in one transaction, compare-and-set on each key, again from the top when another
broker got there first. Config entries of a user that are not SCRAM credentials are left as they are.
"""

from __future__ import annotations

from typing import Iterable

from ..controller import zk_data
from ..controller.metadata_store import Compare, Delete, MetadataStore, Put
from .scram import ScramCredential, ScramMechanism

__all__ = ["EtcdCredentialStore"]

# Concurrent changes to the same users from other brokers: retry this many times before giving up.
_MAX_ATTEMPTS = 20


class EtcdCredentialStore:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.credentials(user).get(mechanism)

    def credentials(self, user: str) -> dict[ScramMechanism, ScramCredential]:
        found = self._store.get(zk_data.user_config_path(user))
        return {} if found is None else _credentials(user, zk_data.decode_user_config(user, found.value))

    def users(self) -> list[str]:
        users = []
        for kv in self._store.get_prefix(zk_data.USER_CONFIGS_PATH):
            user = zk_data.user_from_config_path(kv.key)
            if _credentials(user, zk_data.decode_user_config(user, kv.value)):
                users.append(user)
        return sorted(users)

    def alter(self, deletions: Iterable[tuple[str, ScramMechanism]],
              upsertions: Iterable[tuple[str, ScramMechanism, ScramCredential]]) -> None:
        deletions, upsertions = list(deletions), list(upsertions)
        users = sorted({user for user, _ in deletions} | {user for user, _, _ in upsertions})
        for _ in range(_MAX_ATTEMPTS):
            compares, operations = [], []
            for user in users:
                path = zk_data.user_config_path(user)
                found = self._store.get(path)
                config = {} if found is None else zk_data.decode_user_config(user, found.value)
                for deleted_user, mechanism in deletions:
                    if deleted_user == user:
                        config.pop(mechanism.mechanism_name, None)
                for upserted_user, mechanism, credential in upsertions:
                    if upserted_user == user:
                        config[mechanism.mechanism_name] = credential.to_kafka_string()
                compares.append(Compare(path, 0 if found is None else found.mod_revision))
                operations.append(Put(path, zk_data.encode_user_config(config)) if config else Delete(path))
            if self._store.commit(compares, operations) is not None:
                return
        raise RuntimeError(f"SCRAM credentials of {', '.join(users)}: changed concurrently {_MAX_ATTEMPTS} times "
                           f"in a row, not written")


def _credentials(user: str, config: dict[str, str]) -> dict[ScramMechanism, ScramCredential]:
    found = {}
    for name, text in config.items():
        mechanism = ScramMechanism.for_name(name)
        if mechanism is None:
            continue  # another kind of user config (quotas): not ours
        try:
            found[mechanism] = ScramCredential.from_kafka_string(text)
        except ValueError as exc:
            raise ValueError(f"{zk_data.user_config_path(user)}: {name}: {exc}") from None
    return found
