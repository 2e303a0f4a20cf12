"""The broker's SCRAM credential store: etcd's ``/config/users`` in cluster mode, else the log dirs' file."""

from __future__ import annotations

from typing import Iterable

from ..controller.credential_etcd import EtcdCredentialStore
from ..controller.metadata_store import MetadataStore
from ..security.credential_file import FileCredentialStore
from ..security.credential_store import CredentialStore

__all__ = ["open_credential_store"]


def open_credential_store(log_dirs: Iterable[str], metadata_store: MetadataStore | None = None) -> CredentialStore:
    if metadata_store is not None:
        return EtcdCredentialStore(metadata_store)
    return FileCredentialStore(list(log_dirs))
