"""The ACLs of a cluster in etcd, in Kafka's ZooKeeper layout: each resource its own key,
``/kafka-acl/<Type>/<name>`` for literal patterns and ``/kafka-acl-extended/prefixed/<Type>/<name>`` for
prefixed ones, holding Kafka's JSON (``{"version":1,"acls":[...]}``). Every broker watches both prefixes and
reloads on any change, so an ACL written through one broker governs every broker at once; writes are
compare-and-set per resource, as two brokers may change the same one."""

from __future__ import annotations

import json
import logging
import threading
from typing import Callable, Iterable

from .acl import AclBinding, PatternType, ResourcePattern
from .acl_store import (RESOURCE_TYPE_NAMES, RESOURCE_TYPES_BY_NAME, AclStore, decode_resource_acls,
                        encode_resource_acls, group_by_pattern)

__all__ = ["EtcdAclStore", "LITERAL_ACL_PATH", "PREFIXED_ACL_PATH"]

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl/"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed/"


def resource_path(pattern: ResourcePattern) -> str:
    root = PREFIXED_ACL_PATH if pattern.pattern_type == PatternType.PREFIXED else LITERAL_ACL_PATH
    return f"{root}{RESOURCE_TYPE_NAMES[pattern.resource_type]}/{pattern.name}"


def _pattern_of(key: str) -> ResourcePattern:
    pattern_type = PatternType.PREFIXED if key.startswith(PREFIXED_ACL_PATH) else PatternType.LITERAL
    rest = key[len(PREFIXED_ACL_PATH if pattern_type == PatternType.PREFIXED else LITERAL_ACL_PATH):]
    type_name, _, name = rest.partition("/")
    if type_name not in RESOURCE_TYPES_BY_NAME or not name:
        raise ValueError(f"{key}: not an ACL resource path")
    return ResourcePattern(RESOURCE_TYPES_BY_NAME[type_name], name, pattern_type)


class EtcdAclStore(AclStore):
    """Kafka's ZooKeeper ACL layout in etcd (``metadata_store``: the cluster's ``controller.MetadataStore``, handed
    in by cluster mode so that security needs nothing of the controller package)."""

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
        add, remove = group_by_pattern(add), group_by_pattern(remove)
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
                    data = json.dumps(encode_resource_acls(wanted)).encode()
                    if found is None:
                        written = self.store.create(path, data) is not None
                    elif wanted:
                        written = self.store.compare_and_set(path, data, found.mod_revision) is not None
                    else:
                        written = self.store.delete(path, found.mod_revision)
                    if written:
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
