"""What each request must be allowed to do, as Kafka's KafkaApis checks it: one table, one mechanism.

``RULES`` gives, per API, a ``Rule`` made of:

* ``checks``: what the whole request needs (a transactional id's WRITE, a
  group's READ, the cluster's ALTER…); the first refused gives its error to
  the whole request — every item of it when it has items, else the response's
  ``error_code`` with nothing else filled in;
* ``items``: the request's list whose entries are each authorized on their own
  resource (a topic of a Produce, a group of DescribeGroups, a config
  resource…). Refused entries are taken out of the request before the handler
  sees it, and their error entries (the API's shape, no data) join the
  response the handler sends; ``all_or_nothing`` refuses the whole request as
  Kafka's AddPartitionsToTxn does;
* ``restrict``: what the handler's response must lose or gain before it leaves
  (Metadata hiding topics the principal may not describe, ListGroups keeping
  only describable groups, authorized-operations bit fields).

``authorize_request`` applies the rule: the handler runs on the filtered
request (a ``FilteredRequest``, whose ``complete`` finishes the response), or
the request is answered at once (``Decision.response``), or, for a refused
Produce with acks=0, the connection is closed as Kafka does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import (ClusterAuthorizationFailedError, GroupAuthorizationFailedError, KafkaError,
                      TopicAuthorizationFailedError, TransactionalIdAuthorizationFailedError)
from ..protocol import ApiKey, SeglogApiKey
from ..protocol import Request as KafkaRequest
from ..protocol.config_resources import RESOURCE_BROKER, RESOURCE_TOPIC
from ..protocol.messages import APIS
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import Authorizer

__all__ = ["RequestContext", "Target", "Rule", "Items", "FilteredRequest", "Decision", "RULES",
           "authorize_request", "TOPIC_OPERATIONS", "CLUSTER_OPERATIONS", "GROUP_OPERATIONS"]

ZERO_UUID = bytes(16)
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
OPERATION_NOT_ATTEMPTED = 55
RESOURCE_BROKER_LOGGER = 8
COORDINATOR_TYPE_GROUP = 0

_O = AclOperation
#: The operations Kafka reports in authorized-operations bit fields, per resource type.
TOPIC_OPERATIONS = (_O.READ, _O.WRITE, _O.CREATE, _O.DELETE, _O.ALTER, _O.DESCRIBE, _O.DESCRIBE_CONFIGS,
                    _O.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (_O.CREATE, _O.ALTER, _O.DESCRIBE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                      _O.IDEMPOTENT_WRITE, _O.CREATE_TOKENS, _O.DESCRIBE_TOKENS)
GROUP_OPERATIONS = (_O.READ, _O.DESCRIBE, _O.DELETE)


@dataclass(frozen=True)
class RequestContext:
    """Who asks (``principal``, from ``host``) and what the broker knows that a check needs."""

    authorizer: Authorizer
    principal: object
    host: str
    topic_exists: Callable[[str], bool] = lambda name: True
    topic_name: Callable[[bytes], str | None] = lambda topic_id: None
    auto_create_topics_enable: bool = True

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def operations(self, resource_type: ResourceType, name: str, operations: Sequence[AclOperation]) -> int:
        return self.authorizer.authorized_operations(self.principal, self.host, resource_type, name, operations)


@dataclass(frozen=True)
class Target:
    """One resource and the operation it needs; ``cluster_operation`` on the cluster suffices instead
    (CREATE for CreateTopics, CLUSTER_ACTION for a replica's OffsetForLeaderEpoch)."""

    resource_type: ResourceType
    name: str
    operation: AclOperation
    error: type[KafkaError]
    cluster_operation: AclOperation | None = None

    def allowed(self, ctx: RequestContext) -> bool:
        if self.cluster_operation is not None and ctx.allowed(self.cluster_operation, ResourceType.CLUSTER,
                                                              CLUSTER_NAME):
            return True
        return ctx.allowed(self.operation, self.resource_type, self.name)


# A check of the whole request: the error class refusing it, or None.
Check = Callable[[RequestContext, dict], "type[KafkaError] | None"]
Body = dict[str, Any]


@dataclass(frozen=True)
class Items:
    request_key: str
    response_key: str
    # The resources an entry needs, in the order Kafka checks them (none: not checked here); None: the entries
    # are not authorized one by one, they only carry a refusal of the whole request.
    targets: Callable[[RequestContext, Body, Any], Sequence[Target]] | None
    # The response entry of a refused request entry (error code and message, no data).
    refused: Callable[[Any, int, str], dict]
    all_or_nothing: bool = False


@dataclass(frozen=True)
class Rule:
    checks: tuple[Check, ...] = ()
    items: tuple[Items, ...] = ()
    restrict: Callable[[RequestContext, KafkaRequest, Body], Body] | None = None
    # acks=0 produce: a refusal closes the connection (there is no response to carry it).
    close_on_refusal: Callable[[Body], bool] | None = None


@dataclass(frozen=True, slots=True)
class FilteredRequest(KafkaRequest):
    """A request the handler sees with its refused entries taken out; ``complete`` finishes its response."""

    complete: Callable[[Body], Body] = field(default=lambda body: body)


@dataclass(frozen=True)
class Decision:
    request: KafkaRequest | None = None  # run the handler on this
    response: Body | None = None         # or answer this now
    close: str | None = None             # or close the connection, for this reason


def authorize_request(ctx: RequestContext, parsed: KafkaRequest) -> Decision:
    """Apply ``RULES`` to ``parsed`` for ``ctx``'s principal."""
    key, version = parsed.header.api_key, parsed.header.api_version
    rule = RULES.get(key)
    if callable(rule):
        rule = rule(version)
    if rule is None:
        return Decision(request=parsed)
    body = parsed.body
    for check in rule.checks:
        error = check(ctx, body)
        if error is None:
            continue
        message = _message(error, key)
        if rule.close_on_refusal is not None and rule.close_on_refusal(body):
            return Decision(close=message)
        response = _error_body(key, version, error.code, message)
        for items in rule.items:
            response.setdefault(items.response_key, []).extend(
                items.refused(item, error.code, message) for item in body.get(items.request_key) or ())
        return Decision(response=_restricted(rule, ctx, parsed, response))
    if not rule.items:
        return Decision(request=_with(parsed, body, rule, ctx, []))
    kept = dict(body)
    refused: list[tuple[Items, list[dict]]] = []
    for items in rule.items:
        entries = body.get(items.request_key)
        if entries is None or items.targets is None:
            continue
        allowed, denied = [], []
        for entry in entries:
            failed = next((t for t in items.targets(ctx, body, entry) if not t.allowed(ctx)), None)
            if failed is None:
                allowed.append(entry)
            else:
                denied.append(items.refused(entry, failed.error.code, _message(failed.error, key, failed.name)))
        if denied and items.all_or_nothing:
            response = _error_body(key, version, None, None)
            response[items.response_key] = denied + [items.refused(e, OPERATION_NOT_ATTEMPTED, None)
                                                     for e in allowed]
            return Decision(response=response)
        kept[items.request_key] = allowed
        if denied:
            refused.append((items, denied))
    if refused and rule.close_on_refusal is not None and rule.close_on_refusal(body):
        return Decision(close=f"{_api_name(key)} with acks=0 refused: {len(refused[0][1])} entries not authorized")
    return Decision(request=_with(parsed, kept, rule, ctx, refused))


def _with(parsed: KafkaRequest, body: Body, rule: Rule, ctx: RequestContext,
          refused: list[tuple[Items, list[dict]]]) -> KafkaRequest:
    if not refused and rule.restrict is None:
        return parsed

    def complete(response: Body) -> Body:
        response = dict(response)
        for items, entries in refused:
            response[items.response_key] = list(response.get(items.response_key) or ()) + entries
        return _restricted(rule, ctx, parsed, response)

    return FilteredRequest(parsed.header, body, complete)


def _restricted(rule: Rule, ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
    return response if rule.restrict is None else rule.restrict(ctx, parsed, response)


def _api_name(key: ApiKey | SeglogApiKey) -> str:
    return APIS[key].request.name.removesuffix("Request")


def _message(error: type[KafkaError], key: ApiKey | SeglogApiKey, name: str | None = None) -> str:
    what = f" on {name!r}" if name else ""
    return f"{_api_name(key)}: not authorized{what} ({error.kafka_error_name})"


def _error_body(key: ApiKey | SeglogApiKey, version: int, code: int | None, message: str | None) -> Body:
    """A response with only its top-level error filled in (where the version has one); every other field takes
    its default."""
    fields = {f.key: f for f in APIS[key].response.fields if version in f.versions}
    body: Body = {}
    if code is not None and "error_code" in fields:
        body["error_code"] = code
        if "error_message" in fields:
            body["error_message"] = message
    return body


# --- building blocks ----------------------------------------------------------------------


def _topic(operation: AclOperation, name_key: str = "name", **kwargs) -> Callable[..., Sequence[Target]]:
    return lambda ctx, body, item: [Target(ResourceType.TOPIC, item[name_key], operation,
                                           TopicAuthorizationFailedError, **kwargs)]


def _needs(resource_type: ResourceType, operation: AclOperation, name: Callable[[Body], str | None],
           error: type[KafkaError]) -> Check:
    """The whole request needs ``operation`` on the resource ``name(body)`` (no check when it gives None)."""

    def check(ctx: RequestContext, body: Body) -> type[KafkaError] | None:
        resource = name(body)
        if resource is None or ctx.allowed(operation, resource_type, resource):
            return None
        return error

    return check


def _cluster(operation: AclOperation) -> Check:
    return _needs(ResourceType.CLUSTER, operation, lambda body: CLUSTER_NAME, ClusterAuthorizationFailedError)


def _group(operation: AclOperation, key: str = "group_id") -> Check:
    return _needs(ResourceType.GROUP, operation, lambda body: body[key], GroupAuthorizationFailedError)


def _transactional_id(operation: AclOperation, key: str = "transactional_id") -> Check:
    return _needs(ResourceType.TRANSACTIONAL_ID, operation, lambda body: body.get(key),
                  TransactionalIdAuthorizationFailedError)


def _topic_entry(name_key: str, partitions_key: str, response_partitions_key: str,
                 partitions: Callable[[list, int], list[dict]]) -> Callable[[dict, int, str], dict]:
    """The response entry of a refused topic entry: its name, and each of its partitions with the error."""
    return lambda item, code, message: {name_key: item[name_key],
                                        response_partitions_key: partitions(item[partitions_key], code)}


# --- the rules, API by API ------------------------------------------------------------------


def _produce_error(p: dict, code: int, message: str | None) -> dict:
    return {"index": p["index"], "error_code": code, "base_offset": -1, "log_append_time_ms": -1,
            "log_start_offset": -1, "record_errors": [], "error_message": message}


_PRODUCE = Rule(
    checks=(_transactional_id(_O.WRITE),),
    items=(Items("topic_data", "responses", _topic(_O.WRITE),
                 lambda item, code, message: {"name": item["name"], "partition_responses": [
                     _produce_error(p, code, message) for p in item["partition_data"]]}),),
    close_on_refusal=lambda body: body["acks"] == 0)


def _fetch_targets(ctx: RequestContext, body: Body, item: dict) -> Sequence[Target]:
    if body.get("replica_id", -1) >= 0:  # a follower: the cluster's CLUSTER_ACTION, for every partition
        return [Target(ResourceType.CLUSTER, CLUSTER_NAME, _O.CLUSTER_ACTION, TopicAuthorizationFailedError)]
    return [Target(ResourceType.TOPIC, item["topic"], _O.READ, TopicAuthorizationFailedError)]


_FETCH = Rule(items=(Items("topics", "responses", _fetch_targets, _topic_entry(
    "topic", "partitions", "partitions", lambda parts, code: [
        {"partition_index": p["partition"], "error_code": code, "high_watermark": -1, "last_stable_offset": -1,
         "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
        for p in parts])),))

_LIST_OFFSETS = Rule(items=(Items("topics", "topics", _topic(_O.DESCRIBE), _topic_entry(
    "name", "partitions", "partitions", lambda parts, code: [
        {"partition_index": p["partition_index"], "error_code": code, "timestamp": -1, "offset": -1,
         "leader_epoch": -1} for p in parts])),))

_OFFSET_FOR_LEADER_EPOCH = Rule(items=(Items(
    "topics", "topics", _topic(_O.DESCRIBE, "topic", cluster_operation=_O.CLUSTER_ACTION), _topic_entry(
        "topic", "partitions", "partitions", lambda parts, code: [
            {"partition": p["partition"], "error_code": code, "leader_epoch": -1, "end_offset": -1}
            for p in parts])),))


# Metadata: a topic named but not describable, or missing and not creatable when it would be auto-created,
# is TOPIC_AUTHORIZATION_FAILED; listing every topic shows only the describable ones.

def _metadata_targets(ctx: RequestContext, body: Body, item: dict) -> Sequence[Target]:
    name = item.get("name")
    if name is None:
        return []  # by topic id: judged on the response, once the name is known
    targets = [Target(ResourceType.TOPIC, name, _O.DESCRIBE, TopicAuthorizationFailedError)]
    auto_create = bool(body.get("allow_auto_topic_creation", True)) and ctx.auto_create_topics_enable
    if auto_create and not ctx.topic_exists(name):
        targets.append(Target(ResourceType.TOPIC, name, _O.CREATE, TopicAuthorizationFailedError,
                              cluster_operation=_O.CREATE))
    return targets


def _refused_topic(name: str | None, code: int) -> dict:
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False, "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def _restrict_topics(listing_all: Callable[[KafkaRequest], bool]) -> Callable[..., Body]:
    """Topics the principal may not describe leave a listing of all topics and are refused when asked for (by
    id: their name is not told either); the others get their authorized operations when those were asked for."""

    def restrict(ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
        everything = listing_all(parsed)
        # Name is nullable in Metadata from v12 only; DescribeTopicPartitions always has it.
        unnamed = None if parsed.header.api_key != ApiKey.METADATA or parsed.header.api_version >= 12 else ""
        topics = []
        for topic in response.get("topics") or ():
            name = topic.get("name")
            if topic["error_code"] == 0 and name and not ctx.allowed(_O.DESCRIBE, ResourceType.TOPIC, name):
                if not everything:
                    topics.append(_refused_topic(unnamed, TopicAuthorizationFailedError.code))
                continue
            if topic.get("topic_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED) != AUTHORIZED_OPERATIONS_OMITTED:
                topic = {**topic, "topic_authorized_operations": ctx.operations(ResourceType.TOPIC, name,
                                                                                  TOPIC_OPERATIONS)}
            topics.append(topic)
        return {**response, "topics": topics}

    return restrict


def _metadata_lists_all(parsed: KafkaRequest) -> bool:
    wanted = parsed.body.get("topics")
    return wanted is None or (parsed.header.api_version == 0 and not wanted)


_METADATA = Rule(
    items=(Items("topics", "topics", _metadata_targets,
                 lambda item, code, message: _refused_topic(item.get("name"), code)),),
    restrict=_restrict_topics(_metadata_lists_all))

_DESCRIBE_TOPIC_PARTITIONS = Rule(
    items=(Items("topics", "topics", _topic(_O.DESCRIBE),
                 lambda item, code, message: _refused_topic(item["name"], code)),),
    restrict=_restrict_topics(lambda parsed: not parsed.body.get("topics")))


def _restrict_cluster_operations(ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
    if response.get("cluster_authorized_operations", AUTHORIZED_OPERATIONS_OMITTED) == AUTHORIZED_OPERATIONS_OMITTED:
        return response
    allowed = (ctx.operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
               if ctx.allowed(_O.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME) else 0)
    return {**response, "cluster_authorized_operations": allowed}


_DESCRIBE_CLUSTER = Rule(restrict=_restrict_cluster_operations)

_CREATE_TOPICS = Rule(items=(Items("topics", "topics", _topic(_O.CREATE, cluster_operation=_O.CREATE),
                                   lambda item, code, message: {
                                       "name": item["name"], "topic_id": ZERO_UUID, "error_code": code,
                                       "error_message": message, "num_partitions": -1, "replication_factor": -1,
                                       "configs": None}),))


def _delete_topic_by_id(ctx: RequestContext, body: Body, item: dict) -> Sequence[Target]:
    name = item.get("name")
    if name is None:
        name = ctx.topic_name(bytes(item.get("topic_id") or ZERO_UUID))
        if name is None:
            return []  # an unknown id: the handler answers UNKNOWN_TOPIC_ID
    return [Target(ResourceType.TOPIC, name, _O.DELETE, TopicAuthorizationFailedError)]


_DELETE_TOPICS = Rule(items=(
    Items("topic_names", "responses", lambda ctx, body, name: [
        Target(ResourceType.TOPIC, name, _O.DELETE, TopicAuthorizationFailedError)],
        lambda name, code, message: {"name": name, "topic_id": ZERO_UUID, "error_code": code,
                                     "error_message": message}),
    Items("topics", "responses", _delete_topic_by_id,
          lambda item, code, message: {"name": item.get("name"), "topic_id": bytes(item.get("topic_id") or ZERO_UUID),
                                       "error_code": code, "error_message": message}),
))

_CREATE_PARTITIONS = Rule(items=(Items("topics", "results", _topic(_O.ALTER), lambda item, code, message: {
    "name": item["name"], "error_code": code, "error_message": message}),))


def _config_targets(operation: AclOperation) -> Callable[..., Sequence[Target]]:
    def targets(ctx: RequestContext, body: Body, item: dict) -> Sequence[Target]:
        if item["resource_type"] == RESOURCE_TOPIC:
            return [Target(ResourceType.TOPIC, item["resource_name"], operation, TopicAuthorizationFailedError)]
        if item["resource_type"] in (RESOURCE_BROKER, RESOURCE_BROKER_LOGGER):
            return [Target(ResourceType.CLUSTER, CLUSTER_NAME, operation, ClusterAuthorizationFailedError)]
        return []

    return targets


def _config_refused(with_configs: bool) -> Callable[[dict, int, str], dict]:
    def refused(item: dict, code: int, message: str) -> dict:
        entry = {"error_code": code, "error_message": message, "resource_type": item["resource_type"],
                 "resource_name": item["resource_name"]}
        return {**entry, "configs": []} if with_configs else entry

    return refused


_DESCRIBE_CONFIGS = Rule(items=(Items("resources", "results", _config_targets(_O.DESCRIBE_CONFIGS),
                                      _config_refused(True)),))
_ALTER_CONFIGS = Rule(items=(Items("resources", "responses", _config_targets(_O.ALTER_CONFIGS),
                                   _config_refused(False)),))


def _init_producer_id(ctx: RequestContext, body: Body) -> type[KafkaError] | None:
    """A transactional producer needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on the cluster or
    WRITE on some topic (Kafka's KafkaApis.handleInitProducerIdRequest)."""
    if body.get("transactional_id") is not None:
        return _transactional_id(_O.WRITE)(ctx, body)
    if ctx.allowed(_O.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME) or \
            ctx.authorizer.authorize_by_resource_type(ctx.principal, ctx.host, _O.WRITE, ResourceType.TOPIC):
        return None
    return ClusterAuthorizationFailedError


def _find_coordinator_target(key_type: int, key: str) -> Target:
    if key_type == COORDINATOR_TYPE_GROUP:
        return Target(ResourceType.GROUP, key, _O.DESCRIBE, GroupAuthorizationFailedError)
    return Target(ResourceType.TRANSACTIONAL_ID, key, _O.DESCRIBE, TransactionalIdAuthorizationFailedError)


def _by_version(first: int, before: Rule, since: Rule) -> Callable[[int], Rule]:
    """``since`` from version ``first`` on, ``before`` below it (an API whose request changed shape)."""
    return lambda version: since if version >= first else before


def _find_coordinator_key(ctx: RequestContext, body: Body) -> type[KafkaError] | None:
    target = _find_coordinator_target(body.get("key_type", 0), body["key"])
    return None if target.allowed(ctx) else target.error


_FIND_COORDINATOR = _by_version(
    4, Rule(checks=(_find_coordinator_key,)),
    Rule(items=(Items("coordinator_keys", "coordinators",
                      lambda ctx, body, key: [_find_coordinator_target(body.get("key_type", 0), key)],
                      lambda key, code, message: {"key": key, "node_id": -1, "host": "", "port": -1,
                                                  "error_code": code, "error_message": message}),)))


def _offset_partitions(parts: list, code: int) -> list[dict]:
    return [{"partition_index": p["partition_index"], "error_code": code} for p in parts]


_OFFSET_COMMIT = Rule(checks=(_group(_O.READ),), items=(Items(
    "topics", "topics", _topic(_O.READ), _topic_entry("name", "partitions", "partitions", _offset_partitions)),))


def _hide_offsets(topics: list[dict], listing_all: bool, ctx: RequestContext) -> list[dict]:
    """OffsetFetch: a topic not describable leaves a listing of all the group's offsets, and answers
    TOPIC_AUTHORIZATION_FAILED with no offset when it was asked for."""
    out = []
    for topic in topics:
        if ctx.allowed(_O.DESCRIBE, ResourceType.TOPIC, topic["name"]):
            out.append(topic)
        elif not listing_all:
            out.append({**topic, "partitions": [
                {**p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
                 "error_code": TopicAuthorizationFailedError.code} for p in topic["partitions"]]})
    return out


def _restrict_offsets(ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
    return {**response, "topics": _hide_offsets(response.get("topics") or [], parsed.body.get("topics") is None,
                                                ctx)}


def _restrict_groups_offsets(ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
    asked_all = {g["group_id"]: g.get("topics") is None for g in parsed.body["groups"]}
    return {**response, "groups": [
        {**g, "topics": _hide_offsets(g.get("topics") or [], asked_all.get(g["group_id"], True), ctx)}
        for g in response.get("groups") or ()]}


_OFFSET_FETCH = _by_version(
    8, Rule(checks=(_group(_O.DESCRIBE),), restrict=_restrict_offsets),
    Rule(items=(Items("groups", "groups", lambda ctx, body, g: [
        Target(ResourceType.GROUP, g["group_id"], _O.DESCRIBE, GroupAuthorizationFailedError)],
        lambda g, code, message: {"group_id": g["group_id"], "topics": [], "error_code": code}),),
        restrict=_restrict_groups_offsets))


def _group_targets(operation: AclOperation) -> Callable[..., Sequence[Target]]:
    return lambda ctx, body, group_id: [Target(ResourceType.GROUP, group_id, operation,
                                               GroupAuthorizationFailedError)]


def _restrict_group_operations(ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
    if not parsed.body.get("include_authorized_operations"):
        return response
    return {**response, "groups": [
        {**g, "authorized_operations": ctx.operations(ResourceType.GROUP, g["group_id"], GROUP_OPERATIONS)}
        if g["error_code"] == 0 else g for g in response.get("groups") or ()]}


_DESCRIBE_GROUPS = Rule(items=(Items("groups", "groups", _group_targets(_O.DESCRIBE), lambda g, code, message: {
    "error_code": code, "group_id": g, "group_state": "", "protocol_type": "", "protocol_data": "",
    "members": []}),), restrict=_restrict_group_operations)


def _restrict_listed(response_key: str, resource_type: ResourceType, name_key: str
                     ) -> Callable[[RequestContext, KafkaRequest, Body], Body]:
    """Listing: everything with DESCRIBE on the cluster, else only what the principal may describe."""

    def restrict(ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
        if ctx.allowed(_O.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return response
        return {**response, response_key: [e for e in response.get(response_key) or ()
                                           if ctx.allowed(_O.DESCRIBE, resource_type, e[name_key])]}

    return restrict


_LIST_GROUPS = Rule(restrict=_restrict_listed("groups", ResourceType.GROUP, "group_id"))

_DELETE_GROUPS = Rule(items=(Items("groups_names", "results", _group_targets(_O.DELETE), lambda g, code, message: {
    "group_id": g, "error_code": code}),))

_OFFSET_DELETE = Rule(checks=(_group(_O.DELETE),), items=(Items(
    "topics", "topics", _topic(_O.READ), _topic_entry("name", "partitions", "partitions", _offset_partitions)),))

_JOIN_SYNC_HEARTBEAT_LEAVE = Rule(checks=(_group(_O.READ),))


# From v4 brokers verify transactions for each other.
_ADD_PARTITIONS_TO_TXN = _by_version(
    4, Rule(checks=(_transactional_id(_O.WRITE, "v3_and_below_transactional_id"),), items=(Items(
        "v3_and_below_topics", "results_by_topic_v3_and_below", _topic(_O.WRITE),
        lambda item, code, message: {"name": item["name"], "results_by_partition": [
            {"partition_index": p, "partition_error_code": code} for p in item["partitions"]]},
        all_or_nothing=True),)),
    Rule(checks=(_cluster(_O.CLUSTER_ACTION),)))


_ADD_OFFSETS_TO_TXN = Rule(checks=(_transactional_id(_O.WRITE), _group(_O.READ)))
_END_TXN = Rule(checks=(_transactional_id(_O.WRITE),))
_TXN_OFFSET_COMMIT = Rule(checks=(_transactional_id(_O.WRITE), _group(_O.READ)), items=(Items(
    "topics", "topics", _topic(_O.READ), _topic_entry("name", "partitions", "partitions", _offset_partitions)),))

_DESCRIBE_TRANSACTIONS = Rule(items=(Items(
    "transactional_ids", "transaction_states", lambda ctx, body, t: [
        Target(ResourceType.TRANSACTIONAL_ID, t, _O.DESCRIBE, TransactionalIdAuthorizationFailedError)],
    lambda t, code, message: {"error_code": code, "transactional_id": t, "transaction_state": "",
                              "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                              "producer_epoch": -1, "topics": []}),))


def _restrict_transactions(ctx: RequestContext, parsed: KafkaRequest, response: Body) -> Body:
    return {**response, "transaction_states": [
        t for t in response.get("transaction_states") or ()
        if ctx.allowed(_O.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"])]}


_LIST_TRANSACTIONS = Rule(restrict=_restrict_transactions)

_WRITE_TXN_MARKERS = Rule(checks=(_cluster(_O.CLUSTER_ACTION),), items=(Items(
    "markers", "markers", None, lambda m, code, message: {
        "producer_id": m["producer_id"], "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p, "error_code": code}
                                               for p in t["partition_indexes"]]} for t in m["topics"]]}),))

_DESCRIBE_PRODUCERS = Rule(items=(Items("topics", "topics", _topic(_O.READ), lambda item, code, message: {
    "name": item["name"], "partitions": [{"partition_index": p, "error_code": code, "error_message": message,
                                          "active_producers": []} for p in item["partition_indexes"]]}),))

_DESCRIBE_LOG_DIRS = Rule(checks=(_cluster(_O.DESCRIBE),))

# seglog's own: an outside compaction job rewrites partitions, an admin's act on the cluster.
_COMPACTION_LEASE = Rule(checks=(_cluster(_O.ALTER),))
_REPLACE_SEGMENTS = Rule(checks=(_cluster(_O.ALTER),), items=(Items(
    "topics", "topics", None, lambda t, code, message: {
        "name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code,
                                           "error_message": message} for p in t["partitions"]]}),))

_CREATE_ACLS = Rule(checks=(_cluster(_O.ALTER),), items=(Items(
    "creations", "results", None, lambda c, code, message: {
        "error_code": code, "error_message": message}),))
_DESCRIBE_ACLS = Rule(checks=(_cluster(_O.DESCRIBE),))
_DELETE_ACLS = Rule(checks=(_cluster(_O.ALTER),), items=(Items(
    "filters", "filter_results", None, lambda f, code, message: {
        "error_code": code, "error_message": message, "matching_acls": []}),))

# The user-credential APIs (KIP-554): DESCRIBE / ALTER on the cluster.
_DESCRIBE_USER_SCRAM_CREDENTIALS = Rule(checks=(_cluster(_O.DESCRIBE),))
_ALTER_USER_SCRAM_CREDENTIALS = Rule(checks=(_cluster(_O.ALTER),), items=tuple(
    Items(key, "results", None, lambda u, code, message: {
        "user": u["name"], "error_code": code, "error_message": message})
    for key in ("deletions", "upsertions")))


RULES: dict[ApiKey | SeglogApiKey, Rule | Callable[[int], Rule]] = {
    ApiKey.PRODUCE: _PRODUCE,
    ApiKey.FETCH: _FETCH,
    ApiKey.LIST_OFFSETS: _LIST_OFFSETS,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _OFFSET_FOR_LEADER_EPOCH,
    ApiKey.METADATA: _METADATA,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _DESCRIBE_TOPIC_PARTITIONS,
    ApiKey.DESCRIBE_CLUSTER: _DESCRIBE_CLUSTER,
    ApiKey.CREATE_TOPICS: _CREATE_TOPICS,
    ApiKey.DELETE_TOPICS: _DELETE_TOPICS,
    ApiKey.CREATE_PARTITIONS: _CREATE_PARTITIONS,
    ApiKey.DESCRIBE_CONFIGS: _DESCRIBE_CONFIGS,
    ApiKey.ALTER_CONFIGS: _ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _ALTER_CONFIGS,
    ApiKey.DESCRIBE_LOG_DIRS: _DESCRIBE_LOG_DIRS,
    ApiKey.INIT_PRODUCER_ID: Rule(checks=(_init_producer_id,)),
    ApiKey.FIND_COORDINATOR: _FIND_COORDINATOR,
    ApiKey.JOIN_GROUP: _JOIN_SYNC_HEARTBEAT_LEAVE,
    ApiKey.SYNC_GROUP: _JOIN_SYNC_HEARTBEAT_LEAVE,
    ApiKey.HEARTBEAT: _JOIN_SYNC_HEARTBEAT_LEAVE,
    ApiKey.LEAVE_GROUP: _JOIN_SYNC_HEARTBEAT_LEAVE,
    ApiKey.OFFSET_COMMIT: _OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH: _OFFSET_FETCH,
    ApiKey.DESCRIBE_GROUPS: _DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS: _LIST_GROUPS,
    ApiKey.DELETE_GROUPS: _DELETE_GROUPS,
    ApiKey.OFFSET_DELETE: _OFFSET_DELETE,
    ApiKey.ADD_PARTITIONS_TO_TXN: _ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN: _ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN: _END_TXN,
    ApiKey.TXN_OFFSET_COMMIT: _TXN_OFFSET_COMMIT,
    ApiKey.DESCRIBE_TRANSACTIONS: _DESCRIBE_TRANSACTIONS,
    ApiKey.LIST_TRANSACTIONS: _LIST_TRANSACTIONS,
    ApiKey.WRITE_TXN_MARKERS: _WRITE_TXN_MARKERS,
    ApiKey.DESCRIBE_PRODUCERS: _DESCRIBE_PRODUCERS,
    ApiKey.CREATE_ACLS: _CREATE_ACLS,
    ApiKey.DESCRIBE_ACLS: _DESCRIBE_ACLS,
    ApiKey.DELETE_ACLS: _DELETE_ACLS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _ALTER_USER_SCRAM_CREDENTIALS,
    SeglogApiKey.COMPACTION_LEASE: _COMPACTION_LEASE,
    SeglogApiKey.REPLACE_SEGMENTS: _REPLACE_SEGMENTS,
}
