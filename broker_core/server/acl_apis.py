"""CreateAcls, DescribeAcls and DeleteAcls: the ACL admin APIs over the broker's ``Authorizer``.

A broker without an authorizer (``authorizer.class.name`` unset) answers them with SECURITY_DISABLED, as
Kafka does. Whether the principal may use them at all (ALTER on the cluster to create and delete, DESCRIBE
to describe) is checked before, with every other API (``auth_helper.RULES``). A binding or filter Kafka
would refuse (an UNKNOWN or ANY value where one is needed, an operation the resource type does not have)
answers INVALID_REQUEST naming it; the others are applied.
"""

from __future__ import annotations

from itertools import groupby
from typing import TYPE_CHECKING

from ..errors import NONE, InvalidRequestError, SecurityDisabledError
from ..network.request_channel import Request
from ..protocol import Request as KafkaRequest
from ..security.acl import (AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                            PatternType, ResourcePattern, ResourceType)
from ..security.authorizer import Authorizer

if TYPE_CHECKING:
    from .kafka_apis import KafkaApis

__all__ = ["AclApis", "binding_from_wire", "filter_from_wire", "binding_to_wire"]

_SECURITY_DISABLED = "No Authorizer is configured on the broker"


def _enum(kind, code: int):
    try:
        return kind(code)
    except ValueError:
        return kind.UNKNOWN


def binding_from_wire(creation: dict) -> AclBinding:
    return AclBinding(
        ResourcePattern(_enum(ResourceType, creation["resource_type"]), creation["resource_name"],
                        _enum(PatternType, creation["resource_pattern_type"])),
        AccessControlEntry(creation["principal"], creation["host"], _enum(AclOperation, creation["operation"]),
                           _enum(AclPermissionType, creation["permission_type"])))


def filter_from_wire(body: dict) -> AclBindingFilter:
    return AclBindingFilter(
        _enum(ResourceType, body["resource_type_filter"]), body["resource_name_filter"],
        _enum(PatternType, body["pattern_type_filter"]), body["principal_filter"], body["host_filter"],
        _enum(AclOperation, body["operation"]), _enum(AclPermissionType, body["permission_type"]))


def binding_to_wire(binding: AclBinding) -> dict:
    """A binding as DeleteAcls' matching ACL lists it."""
    p, e = binding.pattern, binding.entry
    return {"resource_type": int(p.resource_type), "resource_name": p.name, "pattern_type": int(p.pattern_type),
            "principal": e.principal, "host": e.host, "operation": int(e.operation),
            "permission_type": int(e.permission_type)}


class AclApis:
    def __init__(self, apis: KafkaApis, authorizer: Authorizer | None) -> None:
        self.apis = apis
        self.authorizer = authorizer

    def _send(self, request: Request, parsed: KafkaRequest, body: dict) -> None:
        self.apis._send(request, parsed, body)

    def handle_create_acls_request(self, request: Request, parsed: KafkaRequest) -> None:
        creations = parsed.body["creations"]
        if self.authorizer is None:
            results = [{"error_code": SecurityDisabledError.code, "error_message": _SECURITY_DISABLED}
                       for _ in creations]
        else:
            errors = self.authorizer.create_acls([binding_from_wire(c) for c in creations])
            results = [{"error_code": NONE, "error_message": None} if error is None
                       else {"error_code": InvalidRequestError.code, "error_message": str(error)} for error in errors]
        self._send(request, parsed, {"throttle_time_ms": 0, "results": results})

    def handle_describe_acls_request(self, request: Request, parsed: KafkaRequest) -> None:
        if self.authorizer is None:
            self._send(request, parsed, {"throttle_time_ms": 0, "error_code": SecurityDisabledError.code,
                                         "error_message": _SECURITY_DISABLED, "resources": []})
            return
        acl_filter = filter_from_wire(parsed.body)
        try:
            acl_filter.validate()
        except ValueError as exc:
            self._send(request, parsed, {"throttle_time_ms": 0, "error_code": InvalidRequestError.code,
                                         "error_message": str(exc), "resources": []})
            return
        resources = []
        for pattern, bindings in groupby(self.authorizer.acls(acl_filter), key=lambda b: b.pattern):
            resources.append({"resource_type": int(pattern.resource_type), "resource_name": pattern.name,
                              "pattern_type": int(pattern.pattern_type), "acls": [
                                  {"principal": b.entry.principal, "host": b.entry.host,
                                   "operation": int(b.entry.operation),
                                   "permission_type": int(b.entry.permission_type)} for b in bindings]})
        self._send(request, parsed, {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
                                     "resources": resources})

    def handle_delete_acls_request(self, request: Request, parsed: KafkaRequest) -> None:
        filters = [filter_from_wire(f) for f in parsed.body["filters"]]
        if self.authorizer is None:
            results = [{"error_code": SecurityDisabledError.code, "error_message": _SECURITY_DISABLED,
                        "matching_acls": []} for _ in filters]
            self._send(request, parsed, {"throttle_time_ms": 0, "filter_results": results})
            return
        results: list[dict | None] = []
        valid = []
        for acl_filter in filters:
            try:
                acl_filter.validate()
            except ValueError as exc:
                results.append({"error_code": InvalidRequestError.code, "error_message": str(exc),
                                "matching_acls": []})
            else:
                results.append(None)
                valid.append(acl_filter)
        deleted = iter(self.authorizer.delete_acls(valid))
        results = [r if r is not None else {
            "error_code": NONE, "error_message": None,
            "matching_acls": [{"error_code": NONE, "error_message": None, **binding_to_wire(b)}
                              for b in next(deleted)]} for r in results]
        self._send(request, parsed, {"throttle_time_ms": 0, "filter_results": results})
