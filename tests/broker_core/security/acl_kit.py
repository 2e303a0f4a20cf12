"""ACLs written as kafka-acls.sh prints them, for tests: ``acl("Topic:orders", "Read")``,
``acl("Topic:orders-", "Write", pattern="prefixed", permission="deny")``; and a log dir seeded with
them before a broker starts."""

from __future__ import annotations

from broker_core.security.acl import (CLUSTER_NAME, AccessControlEntry, AclBinding, AclOperation, AclPermissionType,
                                      PatternType, ResourcePattern, ResourceType, parse_enum)
from broker_core.security.acl_store import LogDirAclStore

ANONYMOUS = "User:ANONYMOUS"
#: The broker settings that turn the authorizer on, with no super user.
AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}


def acl(resource: str, operation: str, *, principal: str = ANONYMOUS, host: str = "*", pattern: str = "literal",
        permission: str = "allow") -> AclBinding:
    """``resource`` is ``Type:name`` (``Topic:orders``, ``Group:g``, ``TransactionalId:t``) or ``Cluster``."""
    if resource == "Cluster":
        resource_type, name = ResourceType.CLUSTER, CLUSTER_NAME
    else:
        type_name, _, name = resource.partition(":")
        resource_type = parse_enum(ResourceType, type_name)
    return AclBinding(ResourcePattern(resource_type, name, parse_enum(PatternType, pattern)),
                      AccessControlEntry(principal, host, parse_enum(AclOperation, operation),
                                         parse_enum(AclPermissionType, permission)))


def seed_acls(log_dir, *bindings: AclBinding) -> None:
    """Store ``bindings`` in ``log_dir`` as a broker would (it reads them when it starts)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    LogDirAclStore([str(log_dir)]).update(add=bindings)
