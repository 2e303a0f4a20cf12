"""CreateAcls, DescribeAcls and DeleteAcls: the ACL admin APIs (Kafka's message JSON, v1-3, flexible from v2).

v1 added the resource pattern type (Kafka 4 no longer serves v0), v2 flexible versions, v3 the USER
resource type. The enum fields are int8 codes of Kafka's ``ResourceType``, ``PatternType``, ``AclOperation`` and
``AclPermissionType`` (``broker_core.security.acl``).
"""

from __future__ import annotations

from ..api_keys import ApiKey
from ..schema import F, api

__all__ = ["CREATE_ACLS", "DESCRIBE_ACLS", "DELETE_ACLS"]



DESCRIBE_ACLS = api(
    ApiKey.DESCRIBE_ACLS, "1-3", flexible="2+",
    request=(
        F("ResourceTypeFilter", "int8", "0+"),
        F("ResourceNameFilter", "string", "0+", nullable="0+"),
        F("PatternTypeFilter", "int8", "1+", default=3),
        F("PrincipalFilter", "string", "0+", nullable="0+"),
        F("HostFilter", "string", "0+", nullable="0+"),
        F("Operation", "int8", "0+"),
        F("PermissionType", "int8", "0+"),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("ErrorCode", "int16", "0+"),
        F("ErrorMessage", "string", "0+", nullable="0+"),
        F("Resources", "[]DescribeAclsResource", "0+", fields=(
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("PatternType", "int8", "1+", default=3),
            F("Acls", "[]AclDescription", "0+", fields=(
                F("Principal", "string", "0+"),
                F("Host", "string", "0+"),
                F("Operation", "int8", "0+"),
                F("PermissionType", "int8", "0+"),
            )),
        )),
    ),
)

CREATE_ACLS = api(
    ApiKey.CREATE_ACLS, "1-3", flexible="2+",
    request=(
        F("Creations", "[]AclCreation", "0+", fields=(
            F("ResourceType", "int8", "0+"),
            F("ResourceName", "string", "0+"),
            F("ResourcePatternType", "int8", "1+", default=3),
            F("Principal", "string", "0+"),
            F("Host", "string", "0+"),
            F("Operation", "int8", "0+"),
            F("PermissionType", "int8", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("Results", "[]AclCreationResult", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+"),
        )),
    ),
)

DELETE_ACLS = api(
    ApiKey.DELETE_ACLS, "1-3", flexible="2+",
    request=(
        F("Filters", "[]DeleteAclsFilter", "0+", fields=(
            F("ResourceTypeFilter", "int8", "0+"),
            F("ResourceNameFilter", "string", "0+", nullable="0+"),
            F("PatternTypeFilter", "int8", "1+", default=3),
            F("PrincipalFilter", "string", "0+", nullable="0+"),
            F("HostFilter", "string", "0+", nullable="0+"),
            F("Operation", "int8", "0+"),
            F("PermissionType", "int8", "0+"),
        )),
    ),
    response=(
        F("ThrottleTimeMs", "int32", "0+"),
        F("FilterResults", "[]DeleteAclsFilterResult", "0+", fields=(
            F("ErrorCode", "int16", "0+"),
            F("ErrorMessage", "string", "0+", nullable="0+"),
            F("MatchingAcls", "[]DeleteAclsMatchingAcl", "0+", fields=(
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+"),
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F("PatternType", "int8", "1+", default=3),
                F("Principal", "string", "0+"),
                F("Host", "string", "0+"),
                F("Operation", "int8", "0+"),
                F("PermissionType", "int8", "0+"),
            )),
        )),
    ),
)
