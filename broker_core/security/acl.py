"""Kafka's ACL model as pure values: resource patterns, access control entries, bindings and their filters.

The enums carry Kafka's wire codes (``org.apache.kafka.common.acl.AclOperation``,
``AclPermissionType``, ``org.apache.kafka.common.resource.ResourceType``,
``PatternType``). A binding is a ``ResourcePattern`` (type, name, LITERAL or
PREFIXED; the LITERAL name ``*`` stands for every resource of the type) and an
``AccessControlEntry`` (principal, host, operation, ALLOW or DENY). A filter
(``AclBindingFilter``) selects bindings as DescribeAcls and DeleteAcls do:
ANY matches every value; pattern type MATCH matches every pattern that
applies to the named resource (the literal name, ``*``, and the prefixes).

Which operations imply which (READ, WRITE, DELETE and ALTER imply DESCRIBE;
ALTER_CONFIGS implies DESCRIBE_CONFIGS) is ``implied_operations``; deciding
a request is the authorizer's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["supported_operations", "AclOperation", "AclPermissionType", "ResourceType", "PatternType",
           "ResourcePattern",
           "AccessControlEntry", "AclBinding", "AclBindingFilter", "WILDCARD_RESOURCE", "WILDCARD_HOST",
           "WILDCARD_PRINCIPAL", "CLUSTER_NAME", "implied_operations", "parse_enum"]

#: The LITERAL resource name that matches every resource of its type.
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
#: The one CLUSTER resource's name.
CLUSTER_NAME = "kafka-cluster"


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


_E = type[enum.IntEnum]


# What the enums are called in messages for people.
_KIND_NAMES = {AclOperation: "operation", AclPermissionType: "permission type", ResourceType: "resource type",
               PatternType: "resource pattern type"}


def parse_enum(kind: _E, text: str) -> enum.IntEnum:
    """``Read``, ``read``, ``DescribeConfigs``, ``describe_configs`` → the member, as Kafka's tools accept them.
    Raises ValueError naming the kind and the text."""
    wanted = text.replace("_", "").replace("-", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted:
            return member
    known = ", ".join(m.name for m in kind if m.name not in ("UNKNOWN",))
    raise ValueError(f"unknown {_KIND_NAMES.get(kind, kind.__name__)} {text!r} (one of {known})")


# Kafka's AclEntry.supportedOperations: what an ACL on each resource type may name.
_SUPPORTED = {
    ResourceType.TOPIC: {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS},
    ResourceType.GROUP: {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE},
    ResourceType.CLUSTER: {AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE},
    ResourceType.TRANSACTIONAL_ID: {AclOperation.DESCRIBE, AclOperation.WRITE},
    ResourceType.DELEGATION_TOKEN: {AclOperation.DESCRIBE},
    ResourceType.USER: {AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS},
}


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """The operations an ACL on ``resource_type`` may name (ALL aside)."""
    return frozenset(_SUPPORTED.get(resource_type, ()))


# The operations whose ALLOW also allows another, besides itself and ALL.
_ALSO_ALLOWED_BY = {
    AclOperation.DESCRIBE: {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER},
    AclOperation.DESCRIBE_CONFIGS: {AclOperation.ALTER_CONFIGS},
}
_IMPLIED = {op: frozenset({op, AclOperation.ALL, *_ALSO_ALLOWED_BY.get(op, ())}) for op in AclOperation}


def implied_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW also allows ``operation`` (itself and ALL included), as Kafka's authorizer
    reads them: DESCRIBE is allowed by READ, WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS."""
    return _IMPLIED[operation]


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def validate(self) -> None:
        """Refuse what Kafka refuses to store (ValueError naming the binding and the value)."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"{self}: resource type {p.resource_type.name} cannot be stored")
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(f"{self}: pattern type {p.pattern_type.name} cannot be stored "
                             f"(LITERAL or PREFIXED)")
        if not p.name:
            raise ValueError(f"{self}: the resource name is empty")
        if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
            raise ValueError(f"{self}: the cluster resource is named {CLUSTER_NAME!r}, not {p.name!r}")
        if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"{self}: operation {e.operation.name} cannot be stored")
        if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise ValueError(f"{self}: permission type {e.permission_type.name} cannot be stored")
        if e.operation != AclOperation.ALL and e.operation not in supported_operations(p.resource_type):
            raise ValueError(f"{self}: operation {e.operation.name} does not apply to resource type "
                             f"{p.resource_type.name}")
        principal_type, sep, name = e.principal.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"{self}: invalid principal {e.principal!r} (expected TYPE:NAME, e.g. User:alice)")
        if not e.host:
            raise ValueError(f"{self}: the host is empty (use * for every host)")

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True)
class AclBindingFilter:
    """DescribeAcls' and DeleteAcls' selection; ``None`` strings match any value."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            # Every pattern that governs the named resource (Kafka's ResourcePatternFilter MATCH).
            if self.name is None:
                return True
            if pattern.pattern_type == PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD_RESOURCE)
            return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(pattern.name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != pattern.pattern_type:
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type))

    def validate(self) -> None:
        """Refuse a filter Kafka refuses (UNKNOWN values)."""
        for value in (self.resource_type, self.pattern_type, self.operation, self.permission_type):
            if value.name == "UNKNOWN":
                raise ValueError(f"{self}: a filter cannot name UNKNOWN ({type(value).__name__})")
