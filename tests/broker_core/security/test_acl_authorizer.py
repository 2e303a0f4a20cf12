"""The authorizer's decisions and the ACL store, without a broker: Kafka's matching rules case by case."""

from __future__ import annotations

import json

import pytest

from broker_core.security.acl import (AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType,
                                      parse_enum)
from broker_core.security.acl_store import ACL_STORE_FILE, LogDirAclStore
from broker_core.security.authorizer import Authorizer, parse_super_users
from tests.broker_core.security.acl_kit import acl

O = AclOperation
TOPIC = ResourceType.TOPIC
ALICE = "User:alice"
HOST = "10.0.0.1"


def authorizer(tmp_path, *bindings, **kwargs) -> Authorizer:
    tmp_path.mkdir(parents=True, exist_ok=True)
    a = Authorizer(LogDirAclStore([str(tmp_path)]), **kwargs)
    assert a.create_acls(list(bindings)) == [None] * len(bindings)
    return a


def allowed(a: Authorizer, operation: AclOperation, resource_type: ResourceType, name: str, *,
            principal: str = ALICE, host: str = HOST) -> bool:
    return a.authorize(principal, host, operation, resource_type, name)


def test_a_resource_without_acls_is_refused_unless_allow_everyone_if_no_acl_found(tmp_path):
    assert not allowed(authorizer(tmp_path / "a"), O.READ, TOPIC, "orders")
    assert allowed(authorizer(tmp_path / "b", allow_everyone_if_no_acl_found=True), O.READ, TOPIC, "orders")


def test_allow_everyone_if_no_acl_found_does_not_open_a_resource_that_has_acls(tmp_path):
    a = authorizer(tmp_path, acl("Topic:orders", "Read", principal="User:bob"), allow_everyone_if_no_acl_found=True)
    assert not allowed(a, O.READ, TOPIC, "orders")
    assert allowed(a, O.READ, TOPIC, "orders", principal="User:bob")


def test_a_literal_acl_allows_its_operation_on_its_resource_only(tmp_path):
    a = authorizer(tmp_path, acl("Topic:orders", "Read", principal=ALICE))
    assert allowed(a, O.READ, TOPIC, "orders")
    assert not allowed(a, O.WRITE, TOPIC, "orders")
    assert not allowed(a, O.READ, TOPIC, "orders2")
    assert not allowed(a, O.READ, ResourceType.GROUP, "orders")
    assert not allowed(a, O.READ, TOPIC, "orders", principal="User:bob")


def test_deny_overrides_allow(tmp_path):
    a = authorizer(tmp_path, acl("Topic:*", "All", principal=ALICE),
                   acl("Topic:secret", "Write", principal=ALICE, permission="deny"))
    assert not allowed(a, O.WRITE, TOPIC, "secret")
    assert allowed(a, O.READ, TOPIC, "secret")
    assert allowed(a, O.WRITE, TOPIC, "public")


def test_a_deny_of_all_refuses_every_operation_even_describe(tmp_path):
    a = authorizer(tmp_path, acl("Topic:orders", "Read", principal=ALICE),
                   acl("Topic:orders", "All", principal=ALICE, permission="deny"))
    assert not allowed(a, O.READ, TOPIC, "orders")
    assert not allowed(a, O.DESCRIBE, TOPIC, "orders")


def test_a_prefixed_acl_covers_every_name_with_the_prefix(tmp_path):
    a = authorizer(tmp_path, acl("Topic:sales-", "Write", principal=ALICE, pattern="prefixed"))
    assert allowed(a, O.WRITE, TOPIC, "sales-eu")
    assert allowed(a, O.WRITE, TOPIC, "sales-")
    assert not allowed(a, O.WRITE, TOPIC, "sales")
    assert not allowed(a, O.WRITE, TOPIC, "presales-eu")


def test_prefixed_acls_of_several_lengths_each_govern_the_names_they_prefix(tmp_path):
    a = authorizer(tmp_path, acl("Topic:s", "Read", principal=ALICE, pattern="prefixed"),
                   acl("Topic:sales-eu-", "Write", principal=ALICE, pattern="prefixed"),
                   acl("Topic:sales-", "Delete", principal=ALICE, pattern="prefixed", permission="deny"))
    assert (allowed(a, O.READ, TOPIC, "sales-eu-1"), allowed(a, O.WRITE, TOPIC, "sales-eu-1")) == (True, True)
    assert (allowed(a, O.READ, TOPIC, "sales-e"), allowed(a, O.WRITE, TOPIC, "sales-e")) == (True, False)
    assert not allowed(a, O.DELETE, TOPIC, "sales-eu-1")
    assert not allowed(a, O.READ, TOPIC, "t")


def test_the_wildcard_resource_and_the_wildcard_principal_match_everything(tmp_path):
    a = authorizer(tmp_path, acl("Group:*", "Read", principal="User:*"))
    assert allowed(a, O.READ, ResourceType.GROUP, "any-group", principal="User:anyone")
    assert not allowed(a, O.READ, TOPIC, "any-group")


def test_read_write_delete_and_alter_imply_describe_and_alter_configs_implies_describe_configs(tmp_path):
    for i, op in enumerate((O.READ, O.WRITE, O.DELETE, O.ALTER)):
        a = authorizer(tmp_path / str(i), acl("Topic:t", op.name, principal=ALICE))
        assert allowed(a, O.DESCRIBE, TOPIC, "t"), op
        assert not allowed(a, O.DESCRIBE_CONFIGS, TOPIC, "t"), op
    a = authorizer(tmp_path / "configs", acl("Topic:t", "AlterConfigs", principal=ALICE))
    assert allowed(a, O.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not allowed(a, O.DESCRIBE, TOPIC, "t")


def test_a_denied_read_does_not_deny_describe(tmp_path):
    # Kafka: only a DENY of the operation itself (or ALL) refuses it; implications work for ALLOW only.
    a = authorizer(tmp_path, acl("Topic:t", "Describe", principal=ALICE),
                   acl("Topic:t", "Read", principal=ALICE, permission="deny"))
    assert allowed(a, O.DESCRIBE, TOPIC, "t")
    assert not allowed(a, O.READ, TOPIC, "t")


def test_an_acl_for_a_host_applies_to_that_client_address_only(tmp_path):
    a = authorizer(tmp_path, acl("Topic:t", "Read", principal=ALICE, host="10.0.0.1"),
                   acl("Topic:t", "Write", principal=ALICE),
                   acl("Topic:t", "Write", principal=ALICE, host="10.0.0.9", permission="deny"))
    assert allowed(a, O.READ, TOPIC, "t", host="10.0.0.1")
    assert not allowed(a, O.READ, TOPIC, "t", host="10.0.0.2")
    assert allowed(a, O.WRITE, TOPIC, "t", host="10.0.0.1")
    assert not allowed(a, O.WRITE, TOPIC, "t", host="10.0.0.9")


def test_super_users_may_do_everything_without_any_acl(tmp_path):
    a = authorizer(tmp_path, acl("Topic:t", "All", principal="User:admin", permission="deny"),
                   super_users=parse_super_users("User:admin;User:bob"))
    assert allowed(a, O.ALTER, ResourceType.CLUSTER, "kafka-cluster", principal="User:bob")
    assert allowed(a, O.WRITE, TOPIC, "t", principal="User:admin")
    assert not allowed(a, O.WRITE, TOPIC, "t", principal="User:carol")


def test_super_users_must_name_their_principal_type():
    with pytest.raises(ValueError, match="super.users: 'admin' is not TYPE:NAME"):
        parse_super_users("User:root;admin")


def test_write_on_some_topic_is_found_by_resource_type_unless_denied_on_the_same_pattern(tmp_path):
    a = authorizer(tmp_path, acl("Topic:logs-", "Write", principal=ALICE, pattern="prefixed"))
    assert a.authorize_by_resource_type(ALICE, HOST, O.WRITE, TOPIC)
    assert not a.authorize_by_resource_type("User:bob", HOST, O.WRITE, TOPIC)
    a.create_acls([acl("Topic:logs-", "Write", principal=ALICE, pattern="prefixed", permission="deny")])
    assert not a.authorize_by_resource_type(ALICE, HOST, O.WRITE, TOPIC)


def test_authorized_operations_is_a_bit_per_allowed_operation(tmp_path):
    a = authorizer(tmp_path, acl("Topic:t", "Read", principal=ALICE))
    bits = a.authorized_operations(ALICE, HOST, TOPIC, "t", (O.READ, O.WRITE, O.DESCRIBE))
    assert bits == (1 << O.READ) | (1 << O.DESCRIBE)


@pytest.mark.parametrize("binding, message", [
    (acl("Cluster", "Read"), "operation READ does not apply to resource type CLUSTER"),
    (acl("Topic:t", "Read", principal="alice"), "invalid principal 'alice'"),
    (acl("Topic:t", "Read", pattern="match"), "pattern type MATCH cannot be stored"),
    (acl("Topic:t", "Any"), "operation ANY cannot be stored"),
    (acl("Group:g", "Write"), "operation WRITE does not apply to resource type GROUP"),
])
def test_an_acl_kafka_would_refuse_is_refused_with_the_binding_named(tmp_path, binding, message):
    a = authorizer(tmp_path)
    (error,) = a.create_acls([binding])
    assert message in str(error) and str(binding.pattern) in str(error)
    assert a.acls(AclBindingFilter()) == []


def test_filters_select_by_any_literal_prefixed_and_match(tmp_path):
    literal, star = acl("Topic:sales-eu", "Read"), acl("Topic:*", "Describe")
    prefixed, other = acl("Topic:sales-", "Write", pattern="prefixed"), acl("Topic:hr", "Read")
    group = acl("Group:sales-eu", "Read")
    a = authorizer(tmp_path, literal, star, prefixed, other, group)
    assert set(a.acls(AclBindingFilter())) == {literal, star, prefixed, other, group}
    assert a.acls(AclBindingFilter(TOPIC, "sales-eu", PatternType.LITERAL)) == [literal]
    assert a.acls(AclBindingFilter(TOPIC, None, PatternType.PREFIXED)) == [prefixed]
    assert set(a.acls(AclBindingFilter(TOPIC, "sales-eu", PatternType.MATCH))) == {literal, star, prefixed}
    assert set(a.acls(AclBindingFilter(ResourceType.ANY, "sales-eu", PatternType.ANY))) == {literal, group}
    assert a.acls(AclBindingFilter(principal="User:ANONYMOUS", operation=O.WRITE)) == [prefixed]
    assert a.acls(AclBindingFilter(permission_type=AclPermissionType.DENY)) == []


def test_delete_removes_what_each_filter_selects_and_says_what(tmp_path):
    keep, doomed = acl("Topic:a", "Read"), acl("Topic:b", "Read")
    a = authorizer(tmp_path, keep, doomed)
    assert a.delete_acls([AclBindingFilter(TOPIC, "b", PatternType.ANY), AclBindingFilter(TOPIC, "zzz")]) == [
        [doomed], []]
    assert a.acls(AclBindingFilter()) == [keep]


def test_acls_are_read_back_from_every_log_dir_after_a_restart_newest_version_winning(tmp_path):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    for d in dirs:
        (tmp_path / d).mkdir()
    first = LogDirAclStore(dirs)
    first.update(add=[acl("Topic:a", "Read")])
    first.update(add=[acl("Topic:b", "Write", pattern="prefixed")])
    # An older copy in one dir (a crash between the two renames) loses to the newer one.
    (tmp_path / "d2" / ACL_STORE_FILE).write_text(json.dumps({"version": 1, "resources": []}))
    assert LogDirAclStore(dirs).bindings() == {acl("Topic:a", "Read"), acl("Topic:b", "Write", pattern="prefixed")}


def test_the_acl_file_holds_kafkas_zookeeper_json_per_resource(tmp_path):
    LogDirAclStore([str(tmp_path)]).update(add=[acl("Topic:orders", "DescribeConfigs", principal=ALICE)])
    doc = json.loads((tmp_path / ACL_STORE_FILE).read_text())
    assert doc["resources"] == [{"resourceType": "Topic", "name": "orders", "patternType": "LITERAL", "version": 1,
                                 "acls": [{"principal": ALICE, "permissionType": "Allow",
                                           "operation": "DescribeConfigs", "host": "*"}]}]


def test_an_unreadable_acl_file_names_itself(tmp_path):
    (tmp_path / ACL_STORE_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=f"{ACL_STORE_FILE}: unreadable ACLs"):
        LogDirAclStore([str(tmp_path)])


def test_operations_are_read_as_kafka_acls_sh_writes_them():
    assert parse_enum(AclOperation, "DescribeConfigs") is O.DESCRIBE_CONFIGS
    assert parse_enum(AclOperation, "idempotent_write") is O.IDEMPOTENT_WRITE
    with pytest.raises(ValueError, match="unknown operation 'Fly'"):
        parse_enum(AclOperation, "Fly")


def test_two_writers_of_one_log_dir_keep_each_others_acls(tmp_path):
    broker, command = LogDirAclStore([str(tmp_path)]), LogDirAclStore([str(tmp_path)])
    command.update(add=[acl("Topic:a", "Read")])
    broker.update(add=[acl("Topic:b", "Read")])
    assert LogDirAclStore([str(tmp_path)]).bindings() == {acl("Topic:a", "Read"), acl("Topic:b", "Read")}


def test_decisions_among_many_acls_agree_with_reading_every_acl_that_matches(tmp_path):
    # The authorizer looks ACLs up by name, ``*`` and prefix; the reference reads every ACL through a MATCH filter.
    import random

    rng = random.Random(18)
    names = ["a", "ab", "abc", "abd", "b", "ba", "*"]
    bindings = {acl(f"Topic:{rng.choice(names)}", rng.choice(["Read", "Write", "All", "Describe"]),
                    principal=rng.choice([ALICE, "User:bob", "User:*"]), host=rng.choice(["*", HOST, "10.0.0.2"]),
                    pattern="literal" if rng.random() < 0.5 else "prefixed",
                    permission="deny" if rng.random() < 0.2 else "allow") for _ in range(300)}
    bindings = {b for b in bindings if not (b.pattern.name == "*" and b.pattern.pattern_type == PatternType.PREFIXED)}
    a = authorizer(tmp_path, *bindings)
    for name in ("a", "abc", "abz", "b", "bad", "c"):
        matching = [b.entry for b in a.acls(AclBindingFilter(TOPIC, name, PatternType.MATCH))]
        for operation in (O.READ, O.WRITE, O.DESCRIBE):
            applying = [e for e in matching if e.principal in (ALICE, "User:*") and e.host in (HOST, "*")]
            denied = any(e.permission_type == AclPermissionType.DENY and e.operation in (operation, O.ALL)
                         for e in applying)
            allowed_by = {operation, O.ALL} | ({O.READ, O.WRITE, O.DELETE, O.ALTER} if operation == O.DESCRIBE
                                                else set())
            expected = bool(matching) and not denied and any(
                e.permission_type == AclPermissionType.ALLOW and e.operation in allowed_by for e in applying)
            assert allowed(a, operation, TOPIC, name) == expected, (name, operation)
