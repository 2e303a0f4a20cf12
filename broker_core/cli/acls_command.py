"""``seglog acls add|list|remove``: Kafka's ``kafka-acls.sh``, with its flags and its output.

    seglog acls add (--log-dir D | --bootstrap H:P [--command-config FILE]) (--allow-principal P | --deny-principal P)...
                    [--allow-host H]... [--deny-host H]... [--operation OP]...
                    (--topic T | --group G | --transactional-id T | --cluster)...
                    [--resource-pattern-type literal|prefixed]
                    [--producer | --consumer]
    seglog acls list (--log-dir D | --bootstrap H:P) [resources] [--resource-pattern-type any|match|literal|prefixed]
                     [--principal P]...
    seglog acls remove (--log-dir D | --bootstrap H:P) [principals, hosts, operations] [resources]

The output is kafka-acls.sh's (``Adding ACLs for resource `...```, ``Current ACLs for resource `...```). With
``--bootstrap`` the running broker changes its ACLs (CreateAcls, DescribeAcls, DeleteAcls; every broker of
a cluster sees them); with ``--log-dir`` the ACL file of the log dirs is changed directly, which a broker reads
when it starts. As in kafka-acls.sh: hosts default to ``*``, operations to ALL, the pattern type to LITERAL;
``--producer`` is WRITE, DESCRIBE and CREATE on the topics (WRITE and DESCRIBE on a transactional id),
``--consumer`` READ and DESCRIBE on the topics and READ on the group; ``remove`` without principals removes
every ACL of the resources.
"""

from __future__ import annotations

import argparse
import sys
from itertools import groupby

from ..errors import error_for_code
from ..security.acl import (CLUSTER_NAME, WILDCARD_HOST, AccessControlEntry, AclBinding, AclBindingFilter,
                            AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType, parse_enum)
from .arguments import UsageError
from .broker_access import add_command_config_argument

__all__ = ["add_parser", "run"]


# --- where the ACLs are -------------------------------------------------------------------


class _LogDirAcls:
    """The ACL file of the log dirs, through the authorizer the broker would build over it."""

    def __init__(self, log_dirs: list[str]) -> None:
        from ..security.acl_store import LogDirAclStore
        from ..security.authorizer import Authorizer

        self.authorizer = Authorizer(LogDirAclStore(log_dirs))

    def create(self, bindings: list[AclBinding]) -> None:
        for error in self.authorizer.create_acls(bindings):
            if error is not None:
                raise ValueError(str(error))

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.authorizer.acls(acl_filter)

    def delete(self, filters: list[AclBindingFilter]) -> None:
        self.authorizer.delete_acls(filters)

    def close(self) -> None:
        self.authorizer.close()


class _RemoteAcls:
    """A running broker's ACLs, through the ACL APIs."""

    def __init__(self, bootstrap: str, command_config: str | None) -> None:
        from ..client.client_security import ClientSecurity
        from ..client.protocol_client import ProtocolClient

        self.bootstrap = bootstrap
        self.client = ProtocolClient(bootstrap, security=ClientSecurity.from_file(command_config))

    def _check(self, code: int, message: str | None, what: str) -> None:
        if code:
            raise error_for_code(code)(f"{self.bootstrap}: {what} failed: {message or error_for_code(code).__name__}")

    def create(self, bindings: list[AclBinding]) -> None:
        from ..protocol import ApiKey
        from ..server.acl_apis import binding_to_wire

        creations = []
        for b in bindings:
            wire = binding_to_wire(b)
            wire["resource_pattern_type"] = wire.pop("pattern_type")
            creations.append(wire)
        answer = self.client.send(ApiKey.CREATE_ACLS, {"creations": creations})
        for binding, result in zip(bindings, answer["results"]):
            self._check(result["error_code"], result["error_message"], f"adding {binding}")

    def describe(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        from ..protocol import ApiKey
        from ..server.acl_apis import binding_from_wire

        answer = self.client.send(ApiKey.DESCRIBE_ACLS, _filter_to_wire(acl_filter))
        self._check(answer["error_code"], answer["error_message"], "listing ACLs")
        return sorted(binding_from_wire({"resource_type": r["resource_type"], "resource_name": r["resource_name"],
                                         "resource_pattern_type": r["pattern_type"], **a})
                      for r in answer["resources"] for a in r["acls"])

    def delete(self, filters: list[AclBindingFilter]) -> None:
        from ..protocol import ApiKey

        answer = self.client.send(ApiKey.DELETE_ACLS, {"filters": [_filter_to_wire(f) for f in filters]})
        for acl_filter, result in zip(filters, answer["filter_results"]):
            self._check(result["error_code"], result["error_message"], f"removing {acl_filter}")

    def close(self) -> None:
        self.client.close()


def _filter_to_wire(f: AclBindingFilter) -> dict:
    return {"resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
            "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal, "host_filter": f.host,
            "operation": int(f.operation), "permission_type": int(f.permission_type)}


# --- the command line as kafka-acls.sh reads it -------------------------------------------------


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, t) for t in args.topic or ()]
    resources += [(ResourceType.GROUP, g) for g in args.group or ()]
    resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id or ()]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    try:
        return [parse_enum(AclOperation, op) for op in args.operation or ()] or [AclOperation.ALL]
    except ValueError as exc:
        raise UsageError(f"--operation: {exc}") from None


def _pattern_type(args: argparse.Namespace, allowed: tuple[PatternType, ...]) -> PatternType:
    try:
        pattern_type = parse_enum(PatternType, args.resource_pattern_type)
    except ValueError as exc:
        raise UsageError(f"--resource-pattern-type: {exc}") from None
    if pattern_type not in allowed:
        raise UsageError(f"--resource-pattern-type {args.resource_pattern_type} is not valid for "
                         f"{args.action} (one of {', '.join(p.name.lower() for p in allowed)})")
    return pattern_type


def _entries(args: argparse.Namespace, operations: list[AclOperation]) -> list[AccessControlEntry]:
    """An entry for each principal × host × operation, as kafka-acls.sh makes them (hosts default to ``*``)."""
    entries = []
    for permission, principals, hosts in ((AclPermissionType.ALLOW, args.allow_principal, args.allow_host),
                                          (AclPermissionType.DENY, args.deny_principal, args.deny_host)):
        for principal in principals or ():
            if ":" not in principal:
                raise UsageError(f"principal {principal!r} is not TYPE:NAME (e.g. User:alice)")
            entries += [AccessControlEntry(principal, host, operation, permission)
                        for host in hosts or [WILDCARD_HOST] for operation in operations]
    return entries


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    pattern_type = _pattern_type(args, (PatternType.LITERAL, PatternType.PREFIXED))
    resources = _resources(args)
    if args.producer or args.consumer:
        return _convenience_bindings(args, pattern_type)
    if not resources:
        raise UsageError("acls add needs a resource: --topic, --group, --transactional-id or --cluster")
    entries = _entries(args, _operations(args))
    if not entries:
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return [AclBinding(ResourcePattern(resource_type, name, pattern_type), entry)
            for resource_type, name in resources for entry in entries]


def _convenience_bindings(args: argparse.Namespace, pattern_type: PatternType) -> list[AclBinding]:
    """``--producer`` / ``--consumer`` (kafka-acls.sh's getProducerResourceFilterToAcls / ...Consumer...)."""
    o = AclOperation
    wanted: list[tuple[ResourceType, str, AclOperation]] = []
    if args.producer:
        if not args.topic:
            raise UsageError("--producer needs --topic")
        wanted += [(ResourceType.TOPIC, t, op) for t in args.topic for op in (o.WRITE, o.DESCRIBE, o.CREATE)]
        wanted += [(ResourceType.TRANSACTIONAL_ID, t, op) for t in args.transactional_id or ()
                   for op in (o.WRITE, o.DESCRIBE)]
        if args.idempotent:
            wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, o.IDEMPOTENT_WRITE))
    if args.consumer:
        if not args.topic or not args.group:
            raise UsageError("--consumer needs --topic and --group")
        wanted += [(ResourceType.TOPIC, t, op) for t in args.topic for op in (o.READ, o.DESCRIBE)]
        wanted += [(ResourceType.GROUP, g, o.READ) for g in args.group]
    entries = _entries(args, [o.ALL])
    if not entries:
        raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    bindings = []
    for resource_type, name, operation in wanted:
        pattern = ResourcePattern(resource_type, name,
                                  PatternType.LITERAL if resource_type == ResourceType.CLUSTER else pattern_type)
        for entry in entries:
            bindings.append(AclBinding(pattern, AccessControlEntry(entry.principal, entry.host, operation,
                                                                   entry.permission_type)))
    return bindings


def _filters(args: argparse.Namespace, pattern_type: PatternType) -> list[AclBindingFilter]:
    resources = _resources(args)
    if not resources:
        return [AclBindingFilter(pattern_type=pattern_type if args.action != "list" else PatternType.ANY)]
    return [AclBindingFilter(resource_type, name, pattern_type) for resource_type, name in resources]


def _resource_lines(bindings) -> list[str]:
    """kafka-acls.sh's ``Current ACLs for resource `...`:`` blocks, resources and entries in order."""
    lines = []
    for pattern, found in groupby(sorted(bindings), key=lambda b: b.pattern):
        lines.append(f"Current ACLs for resource `{pattern}`:")
        lines += [f"\t{b.entry}" for b in found]
        lines.append("")
    return lines


def _add(acls, args: argparse.Namespace) -> list[str]:
    bindings = _bindings(args)
    lines = []
    wanted = []
    for pattern, entries in groupby(sorted(set(bindings)), key=lambda b: b.pattern):
        existing = set(acls.describe(AclBindingFilter(pattern.resource_type, pattern.name, pattern.pattern_type)))
        new = []
        for binding in entries:
            if binding in existing:
                lines.append(f"Acl {binding} already exists.")
            else:
                new.append(binding)
        if new:
            lines.append(f"Adding ACLs for resource `{pattern}`: ")
            lines += [(" " if i == 0 else "") + f"\t{b.entry}" for i, b in enumerate(new)]
            lines.append("")
            wanted += new
    if wanted:
        acls.create(wanted)
    return lines


def _list(acls, args: argparse.Namespace) -> list[str]:
    pattern_type = _pattern_type(args, tuple(PatternType)[1:])
    found: set[AclBinding] = set()
    for f in _filters(args, pattern_type):
        found.update(acls.describe(f))
    if not args.principal:
        return _resource_lines(found)
    lines = []
    for principal in args.principal:
        lines.append(f"ACLs for principal `{principal}`")
        lines += _resource_lines(b for b in found if b.entry.principal == principal)
    return lines


def _remove(acls, args: argparse.Namespace) -> list[str]:
    pattern_type = _pattern_type(args, (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL,
                                        PatternType.PREFIXED))
    if not _resources(args):
        raise UsageError("acls remove needs a resource: --topic, --group, --transactional-id or --cluster")
    pattern_filters = _filters(args, pattern_type)
    entries = _entries(args, _operations(args) if args.operation else [AclOperation.ANY])
    if entries:
        filters = [AclBindingFilter(f.resource_type, f.name, f.pattern_type, e.principal, e.host, e.operation,
                                    e.permission_type) for f in pattern_filters for e in entries]
    else:
        filters = pattern_filters  # every ACL of the resources
    acls.delete(filters)
    return []


_ACTIONS = {"add": _add, "list": _list, "remove": _remove}


def run(args: argparse.Namespace) -> int:
    acls = _RemoteAcls(args.bootstrap, args.command_config) if args.bootstrap else _LogDirAcls(args.log_dir)
    try:
        lines = _ACTIONS[args.action](acls, args)
    finally:
        acls.close()
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0


def add_parser(commands) -> None:
    acls = commands.add_parser("acls", help="add, list or remove ACLs (as kafka-acls.sh)")
    acls.add_argument("action", choices=list(_ACTIONS))
    where = acls.add_mutually_exclusive_group(required=True)
    where.add_argument("--log-dir", action="append", help="a log directory of the broker (repeat for several); "
                                                          "a running broker reads its ACLs when it starts")
    where.add_argument("--bootstrap", "--bootstrap-server", metavar="HOST:PORT", help="a running broker")
    add_command_config_argument(acls)
    acls.add_argument("--allow-principal", action="append", metavar="TYPE:NAME", help="e.g. User:alice (repeatable)")
    acls.add_argument("--deny-principal", action="append", metavar="TYPE:NAME", help="(repeatable)")
    acls.add_argument("--allow-host", action="append", metavar="HOST", help="an IP address, or * (the default)")
    acls.add_argument("--deny-host", action="append", metavar="HOST", help="an IP address, or * (the default)")
    acls.add_argument("--principal", action="append", metavar="TYPE:NAME", help="list: only these principals' ACLs")
    acls.add_argument("--operation", action="append", metavar="OP",
                      help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                           "AlterConfigs, IdempotentWrite, All (repeatable; default All)")
    acls.add_argument("--topic", action="append", help="(repeatable)")
    acls.add_argument("--group", action="append", help="(repeatable)")
    acls.add_argument("--transactional-id", action="append", help="(repeatable)")
    acls.add_argument("--cluster", action="store_true", help="the cluster resource")
    acls.add_argument("--resource-pattern-type", default="literal",
                      help="literal (default) or prefixed; list and remove also take any and match")
    acls.add_argument("--producer", action="store_true", help="the ACLs a producer needs on --topic")
    acls.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    acls.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs on --topic and --group")
    acls.add_argument("--force", action="store_true", help="remove without asking (seglog never asks)")
    acls.set_defaults(run=run)
