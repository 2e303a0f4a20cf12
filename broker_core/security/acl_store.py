"""Where ACLs are kept: ``AclStore``; in the log dirs of a single broker (``LogDirAclStore``), in etcd for a
cluster (``acl_etcd_store``).

Both keep Kafka's ZooKeeper JSON for the ACLs of one resource
(``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}``). In a log dir the
resources of all patterns go to one file, ``seglog-acls.json`` (written to
every log dir: a temporary file, fsync, rename, fsync of the directory —
the topic store's way), read when the broker starts.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Callable, Iterable

from ..log.topic_store import atomic_write, newest_copy
from .acl import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
                  ResourceType)

__all__ = ["AclStore", "LogDirAclStore", "ACL_STORE_FILE", "encode_resource_acls", "decode_resource_acls",
           "RESOURCE_TYPE_NAMES", "RESOURCE_TYPES_BY_NAME", "group_by_pattern"]

ACL_STORE_FILE = "seglog-acls.json"

# Kafka's ZooKeeper spellings: resource types and operations in camel case, permissions capitalized.
RESOURCE_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
               ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken",
               ResourceType.USER: "User"}
RESOURCE_TYPES_BY_NAME = {v: k for k, v in RESOURCE_TYPE_NAMES.items()}


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


_OPERATION_NAMES = {op: _camel(op.name) for op in AclOperation}
_OPERATIONS_BY_NAME = {v: k for k, v in _OPERATION_NAMES.items()}
_PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}
_PERMISSIONS_BY_NAME = {v: k for k, v in _PERMISSION_NAMES.items()}


def encode_resource_acls(entries: Iterable[AccessControlEntry]) -> dict:
    """The ACLs of one resource as Kafka's ZooKeeper node holds them."""
    return {"version": 1, "acls": [{"principal": e.principal, "permissionType": _PERMISSION_NAMES[e.permission_type],
                                    "operation": _OPERATION_NAMES[e.operation], "host": e.host}
                                   for e in sorted(entries)]}


def decode_resource_acls(where: str, doc: dict) -> list[AccessControlEntry]:
    """The entries of a resource node; ValueError naming ``where`` and the value at fault."""
    try:
        return [AccessControlEntry(a["principal"], a["host"], _OPERATIONS_BY_NAME[a["operation"]],
                                   _PERMISSIONS_BY_NAME[a["permissionType"]]) for a in doc["acls"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{where}: unreadable ACLs {doc!r}: missing or unknown {exc}") from None


def group_by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    return by_pattern


class AclStore:
    """The stored bindings; ``update`` adds and removes durably, ``bindings`` is what is stored now."""

    def bindings(self) -> frozenset[AclBinding]:
        raise NotImplementedError

    def update(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None:
        raise NotImplementedError

    def start(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` whenever another writer changed the ACLs (a cluster's other brokers)."""

    def close(self) -> None:
        pass


class LogDirAclStore(AclStore):
    """``seglog-acls.json`` in every log dir; the newest version found wins at load. A change is applied to what
    the file holds then, so a broker's changes and ``seglog acls --log-dir``'s do not undo each other (the
    broker reads the other's when it starts)."""

    def __init__(self, log_dirs: list[str]) -> None:
        self.log_dirs = list(log_dirs)
        self._lock = threading.Lock()
        self._version = 0
        self._bindings: frozenset[AclBinding] = frozenset()
        self._load()

    def _load(self) -> None:
        newest = newest_copy(self.log_dirs, ACL_STORE_FILE, "ACLs")
        if newest is None:
            return
        best, best_path = newest
        bindings = set()
        try:
            for resource in best["resources"]:
                pattern = ResourcePattern(RESOURCE_TYPES_BY_NAME[resource["resourceType"]], resource["name"],
                                          PatternType[resource["patternType"]])
                for entry in decode_resource_acls(f"{best_path}: {pattern}", resource):
                    bindings.add(AclBinding(pattern, entry))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{best_path}: unreadable ACLs: missing or unknown {exc}") from None
        self._version = int(best.get("version", 0))
        self._bindings = frozenset(bindings)

    def bindings(self) -> frozenset[AclBinding]:
        return self._bindings

    def update(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None:
        with self._lock:
            self._load()  # what another writer (seglog acls --log-dir) stored since
            bindings = (set(self._bindings) - set(remove)) | set(add)
            resources = [{"resourceType": RESOURCE_TYPE_NAMES[p.resource_type], "name": p.name,
                          "patternType": p.pattern_type.name, **encode_resource_acls(entries)}
                         for p, entries in sorted(group_by_pattern(bindings).items())]
            text = json.dumps({"version": self._version + 1, "resources": resources}, indent=1, sort_keys=True)
            for d in self.log_dirs:
                atomic_write(os.path.join(d, ACL_STORE_FILE), text)
            self._version += 1
            self._bindings = frozenset(bindings)
