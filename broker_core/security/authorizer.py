"""The authorizer: may this principal, from this host, do this operation on this resource?

Kafka's ``AclAuthorizer`` decision, over the bindings of an ``AclStore``:

* a super user (``super.users``, ``User:admin;User:bob``) may do everything;
* the ACLs that govern the resource are the LITERAL ones on its name or on
  ``*`` and the PREFIXED ones on a prefix of its name; an ACL applies to the
  request when its principal is the request's (or ``User:*``), its host the
  client's address (or ``*``), and its operation the one asked (or ALL);
* an applying DENY refuses, whatever allows;
* otherwise an applying ALLOW permits — for DESCRIBE an ALLOW of READ, WRITE,
  DELETE or ALTER too, for DESCRIBE_CONFIGS one of ALTER_CONFIGS;
* a resource no ACL governs at all is permitted only with
  ``allow.everyone.if.no.acl.found=true``.

``authorizer.class.name`` turns it on: any non-empty value (Kafka's
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` or
``kafka.security.authorizer.AclAuthorizer``, say) makes ``authorizer_for``
build one; left empty, there is no authorizer and every request is allowed.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterable

from .acl import (WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AccessControlEntry, AclBinding,
                  AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType, implied_operations)
from .acl_store import AclStore
from .principal import KafkaPrincipal

if TYPE_CHECKING:
    from ..config import BrokerConfig

__all__ = ["Authorizer", "authorizer_for", "parse_super_users"]


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:bob``); ValueError for one without a type."""
    users = set()
    for part in (text or "").split(";"):
        part = part.strip()
        if not part:
            continue
        principal_type, sep, name = part.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"Invalid value {text!r} for configuration super.users: {part!r} is not TYPE:NAME "
                             f"(e.g. User:admin)")
        users.add(part)
    return frozenset(users)


class Authorizer:
    """Decides requests from the ACLs of ``store``; creates, lists and deletes them for the ACL APIs."""

    def __init__(self, store: AclStore, *, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._lock = threading.Lock()
        self._by_type: dict[ResourceType, tuple[AclBinding, ...]] = {}
        # (resource type, pattern type, name) -> the entries of that pattern: a check looks up the name, ``*``
        # and the prefixes of the name as long as a stored PREFIXED name instead of scanning every ACL.
        self._by_pattern: dict[tuple[ResourceType, PatternType, str], tuple[AccessControlEntry, ...]] = {}
        # The lengths of the PREFIXED names stored, per resource type, ascending: the prefixes worth looking up.
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._reindex()
        store.start(self._reindex)

    def _reindex(self) -> None:
        by_type: dict[ResourceType, list[AclBinding]] = {}
        by_pattern: dict[tuple[ResourceType, PatternType, str], list[AccessControlEntry]] = {}
        for binding in self.store.bindings():
            p = binding.pattern
            by_type.setdefault(p.resource_type, []).append(binding)
            by_pattern.setdefault((p.resource_type, p.pattern_type, p.name), []).append(binding.entry)
        prefix_lengths: dict[ResourceType, set[int]] = {}
        for resource_type, pattern_type, name in by_pattern:
            if pattern_type == PatternType.PREFIXED:
                prefix_lengths.setdefault(resource_type, set()).add(len(name))
        self._by_pattern = {k: tuple(e) for k, e in by_pattern.items()}
        self._prefix_lengths = {t: tuple(sorted(lengths)) for t, lengths in prefix_lengths.items()}
        self._by_type = {t: tuple(b) for t, b in by_type.items()}

    def _governing(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of every pattern that applies to the resource: its literal name, ``*``, its prefixes."""
        found = self._by_pattern
        entries = list(found.get((resource_type, PatternType.LITERAL, name), ()))
        if name != WILDCARD_RESOURCE:
            entries += found.get((resource_type, PatternType.LITERAL, WILDCARD_RESOURCE), ())
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            entries += found.get((resource_type, PatternType.PREFIXED, name[:length]), ())
        return entries

    def close(self) -> None:
        self.store.close()

    # --- deciding ------------------------------------------------------------------------

    def authorize(self, principal: KafkaPrincipal | str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        principal = str(principal)
        if principal in self.super_users:
            return True
        governing = self._governing(resource_type, name)
        if not governing:
            return self.allow_everyone_if_no_acl_found
        applying = [e for e in governing if _applies(e, principal, host)]
        if any(e.permission_type == AclPermissionType.DENY and e.operation in (operation, AclOperation.ALL)
               for e in applying):
            return False
        allowed_by = implied_operations(operation)
        return any(e.permission_type == AclPermissionType.ALLOW and e.operation in allowed_by for e in applying)

    def authorize_by_resource_type(self, principal: KafkaPrincipal | str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether some resource of ``resource_type`` allows ``operation`` (Kafka's authorizeByResourceType, which
        lets an idempotent producer with WRITE on any topic have a producer id): an ALLOW not cancelled by a
        DENY on the same pattern, on a prefix of it, or on ``*``."""
        principal = str(principal)
        if principal in self.super_users:
            return True
        bindings = self._by_type.get(resource_type, ())
        if not bindings:
            return self.allow_everyone_if_no_acl_found
        applying = [b for b in bindings if _applies(b.entry, principal, host)
                    and b.entry.operation in implied_operations(operation)]
        denied = [b.pattern for b in applying if b.entry.permission_type == AclPermissionType.DENY
                  and b.entry.operation in (operation, AclOperation.ALL)]
        if any(p.pattern_type == PatternType.LITERAL and p.name == WILDCARD_RESOURCE for p in denied):
            return False
        for b in applying:
            if b.entry.permission_type != AclPermissionType.ALLOW:
                continue
            p = b.pattern
            if not any(d.name == p.name and d.pattern_type == p.pattern_type
                       or d.pattern_type == PatternType.PREFIXED and p.name.startswith(d.name) for d in denied):
                return True
        return False

    def authorized_operations(self, principal: KafkaPrincipal | str, host: str, resource_type: ResourceType, name: str,
                              operations: Iterable[AclOperation]) -> int:
        """Kafka's authorized-operations bit field: bit ``op`` set for each of ``operations`` allowed."""
        return sum(1 << op for op in operations if self.authorize(principal, host, op, resource_type, name))

    # --- the ACL APIs -----------------------------------------------------------------------

    def create_acls(self, bindings: list[AclBinding]) -> list[ValueError | None]:
        """Store the valid ``bindings``; each one's error (None: stored), in order."""
        errors: list[ValueError | None] = []
        valid = []
        for binding in bindings:
            try:
                binding.validate()
            except ValueError as exc:
                errors.append(exc)
            else:
                errors.append(None)
                valid.append(binding)
        with self._lock:
            if valid:
                self.store.update(add=valid)
                self._reindex()
        return errors

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The stored bindings ``acl_filter`` selects, in resource order."""
        return sorted(b for b in self.store.bindings() if acl_filter.matches(b))

    def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete what each filter selects; the bindings each one deleted, in order."""
        with self._lock:
            stored = self.store.bindings()
            matched = [sorted(b for b in stored if f.matches(b)) for f in filters]
            doomed = {b for found in matched for b in found}
            if doomed:
                self.store.update(remove=doomed)
                self._reindex()
        return matched


def _applies(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return (entry.principal in (principal, WILDCARD_PRINCIPAL)) and (entry.host in (host, WILDCARD_HOST))


def authorizer_for(config: BrokerConfig, log_dirs: list[str], acl_store: AclStore | None = None
                   ) -> Authorizer | None:
    """The broker's authorizer from its settings: none when ``authorizer.class.name`` is empty; ACLs in etcd
    in ``acl_store`` when given (etcd, for a broker in a cluster), else in its log dirs. An invalid ``super.users``
    raises ``InvalidConfigurationError``."""
    from ..errors import InvalidConfigurationError
    from .acl_store import LogDirAclStore

    if not (config.authorizer_class_name or "").strip():
        return None
    try:
        super_users = parse_super_users(config.super_users)
    except ValueError as exc:
        raise InvalidConfigurationError(str(exc), config_name="super.users", value=config.super_users) from None
    store = acl_store if acl_store is not None else LogDirAclStore(log_dirs)
    return Authorizer(store, super_users=super_users,
                      allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found)
