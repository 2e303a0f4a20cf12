"""Where ACLs are kept: in the log dirs of a single broker, in etcd for a cluster.

Both keep Kafka's ZooKeeper JSON for the ACLs of one resource
(``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
"operation":"Read","host":"*"}]}``). In etcd each resource has its own key,
as Kafka's ``ZkAclStore`` has its own node: ``/kafka-acl/<Type>/<name>`` for
literal patterns and ``/kafka-acl-extended/prefixed/<Type>/<name>`` for
prefixed ones; a broker watches both prefixes and reloads on any change, so
an ACL written through one broker governs every broker. In a log dir the
resources of all patterns go to one file, ``seglog-acls.json`` (written to
every log dir: a temporary file, fsync, rename, fsync of the directory —
the topic store's way), read when the broker starts.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Callable, Iterable

from ..log.topic_store import atomic_write
from .acl import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern,
                  ResourceType)

__all__ = ["AclStore", "LogDirAclStore", "EtcdAclStore", "ACL_STORE_FILE", "LITERAL_ACL_PATH",
           "PREFIXED_ACL_PATH", "encode_resource_acls", "decode_resource_acls"]

log = logging.getLogger(__name__)

ACL_STORE_FILE = "seglog-acls.json"
LITERAL_ACL_PATH = "/kafka-acl/"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed/"

# Kafka's ZooKeeper spellings: resource types and operations in camel case, permissions capitalized.
_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
               ResourceType.TRANSACTIONAL_ID: "TransactionalId", ResourceType.DELEGATION_TOKEN: "DelegationToken",
               ResourceType.USER: "User"}
_TYPES_BY_NAME = {v: k for k, v in _TYPE_NAMES.items()}


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


def _group(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
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
    """``seglog-acls.json`` in every log dir; the newest version found wins at load."""

    def __init__(self, log_dirs: list[str]) -> None:
        self.log_dirs = list(log_dirs)
        self._lock = threading.Lock()
        self._version = 0
        self._bindings: frozenset[AclBinding] = frozenset()
        self._load()

    def _load(self) -> None:
        best: dict | None = None
        best_path = ""
        for d in self.log_dirs:
            path = os.path.join(d, ACL_STORE_FILE)
            try:
                with open(path, encoding="utf-8") as f:
                    doc = json.load(f)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                raise ValueError(f"{path}: unreadable ACLs: {exc}") from exc
            if best is None or doc.get("version", 0) > best.get("version", 0):
                best, best_path = doc, path
        if best is None:
            return
        bindings = set()
        try:
            for resource in best["resources"]:
                pattern = ResourcePattern(_TYPES_BY_NAME[resource["resourceType"]], resource["name"],
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
            bindings = (set(self._bindings) - set(remove)) | set(add)
            resources = [{"resourceType": _TYPE_NAMES[p.resource_type], "name": p.name,
                          "patternType": p.pattern_type.name, **encode_resource_acls(entries)}
                         for p, entries in sorted(_group(bindings).items())]
            text = json.dumps({"version": self._version + 1, "resources": resources}, indent=1, sort_keys=True)
            for d in self.log_dirs:
                atomic_write(os.path.join(d, ACL_STORE_FILE), text)
            self._version += 1
            self._bindings = frozenset(bindings)


def resource_path(pattern: ResourcePattern) -> str:
    root = PREFIXED_ACL_PATH if pattern.pattern_type == PatternType.PREFIXED else LITERAL_ACL_PATH
    return f"{root}{_TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def _pattern_of(key: str) -> ResourcePattern:
    pattern_type = PatternType.PREFIXED if key.startswith(PREFIXED_ACL_PATH) else PatternType.LITERAL
    rest = key[len(PREFIXED_ACL_PATH if pattern_type == PatternType.PREFIXED else LITERAL_ACL_PATH):]
    type_name, _, name = rest.partition("/")
    if type_name not in _TYPES_BY_NAME or not name:
        raise ValueError(f"{key}: not an ACL resource path")
    return ResourcePattern(_TYPES_BY_NAME[type_name], name, pattern_type)


class EtcdAclStore(AclStore):
    """Kafka's ZooKeeper ACL layout in etcd (``metadata_store``: the cluster's ``MetadataStore``)."""

    def __init__(self, metadata_store) -> None:
        self.store = metadata_store
        self._lock = threading.Lock()
        self._bindings = self._read()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watches: list = []

    def _read(self) -> frozenset[AclBinding]:
        bindings = set()
        for prefix in (LITERAL_ACL_PATH, PREFIXED_ACL_PATH):
            for kv in self.store.get_prefix(prefix):
                pattern = _pattern_of(kv.key)
                try:
                    doc = json.loads(kv.value)
                except ValueError as exc:
                    raise ValueError(f"{kv.key}: unreadable ACLs {kv.value!r}: {exc}") from None
                bindings.update(AclBinding(pattern, e) for e in decode_resource_acls(kv.key, doc))
        return frozenset(bindings)

    def bindings(self) -> frozenset[AclBinding]:
        return self._bindings

    def reload(self) -> None:
        self._bindings = self._read()

    def update(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None:
        from ..controller.metadata_store import Compare, Delete, Put

        add, remove = _group(add), _group(remove)
        with self._lock:
            for pattern in sorted(set(add) | set(remove)):
                path = resource_path(pattern)
                while True:  # compare-and-set: another broker may write the same resource
                    found = self.store.get(path)
                    current = (set() if found is None
                               else set(decode_resource_acls(path, json.loads(found.value))))
                    wanted = (current - remove.get(pattern, set())) | add.get(pattern, set())
                    if wanted == current:
                        break
                    compare = Compare(path, 0 if found is None else found.mod_revision)
                    operation = (Put(path, json.dumps(encode_resource_acls(wanted)).encode()) if wanted
                                 else Delete(path))
                    if self.store.commit([compare], [operation]) is not None:
                        break
            self.reload()

    def start(self, on_change: Callable[[], None]) -> None:
        self._watches = [self.store.watch_prefix(LITERAL_ACL_PATH), self.store.watch_prefix(PREFIXED_ACL_PATH)]
        self.reload()  # what changed before the watches began

        def follow() -> None:
            while not self._stopping.is_set():
                changed = False
                for watch in self._watches:
                    try:
                        changed |= bool(watch.poll(0.2))
                    except Exception as exc:  # etcd away: keep the ACLs known and try again
                        log.warning("watching the ACLs in etcd failed: %s", exc)
                        self._stopping.wait(1.0)
                if changed:
                    try:
                        self.reload()
                        on_change()
                    except Exception:
                        log.exception("reloading the ACLs from etcd failed")

        self._thread = threading.Thread(target=follow, name="acl-change-listener", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for watch in self._watches:
            watch.cancel()
