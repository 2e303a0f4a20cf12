"""The authorizer in a running broker, through real clients (confluent-kafka, kafka-python) on a PLAINTEXT
listener, where every connection is User:ANONYMOUS: each API without the ACL it needs answers Kafka's error code
and shows no data, while a witness — the same kind of client doing what the ACLs allow — keeps working."""

from __future__ import annotations

import contextlib
import socket

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding as CkAclBinding, AclBindingFilter as CkAclBindingFilter,
                                   AclOperation as CkAclOperation, AclPermissionType as CkAclPermissionType,
                                   AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic,
                                   ResourcePatternType as CkPatternType, ResourceType as CkResourceType)

from broker_core.client.protocol_client import ProtocolClient
from broker_core.errors import (NONE, ClusterAuthorizationFailedError, SecurityDisabledError,
                                TransactionalIdAuthorizationFailedError)
from broker_core.protocol import ApiKey, SeglogApiKey, encode_request, parse_response
from tests.broker_core.security.acl_kit import ANONYMOUS, AUTHORIZER, acl, seed_acls
from tests.broker_core.server.server_kit import read_frame, start_broker

TOPIC_AUTH = KafkaError.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTH = KafkaError.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTH = KafkaError.CLUSTER_AUTHORIZATION_FAILED


@contextlib.contextmanager
def secured(tmp_path, *bindings, topics=("granted", "secret"), **props):
    """A broker with the authorizer on, ``bindings`` stored before it starts and ``topics`` created."""
    log_dir = tmp_path / "logs"
    seed_acls(log_dir, *bindings)
    server = start_broker(log_dir, **{**AUTHORIZER, **props})
    try:
        for name in topics:
            server.broker.create_topic(name, 1)
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


def produce_one(bootstrap: str, topic: str, value: bytes = b"v", **config) -> KafkaError | None:
    """Produce one record; its delivery error (None: delivered)."""
    outcome = []
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, "retries": 0,
                  "topic.metadata.refresh.interval.ms": 1000, **config})
    p.produce(topic, value, on_delivery=lambda err, msg: outcome.append(err))
    p.flush(15)
    assert outcome, f"no delivery report for {topic}"
    return outcome[0]


def log_end(server, topic: str) -> int:
    return server.broker.list_offsets(topic, 0, "latest").offset


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def error_code_of(future) -> int:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=15)
    return raised.value.args[0].code()


# --- Produce, Fetch, Metadata ---------------------------------------------------------------------


def test_produce_without_write_on_the_topic_is_refused_and_appends_nothing(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Write"), acl("Topic:secret", "Describe")) as server:
        bootstrap = server.bootstrap_servers
        assert produce_one(bootstrap, "secret").code() == TOPIC_AUTH
        assert produce_one(bootstrap, "granted") is None  # the witness
        assert (log_end(server, "secret"), log_end(server, "granted")) == (0, 1)


def test_fetch_without_read_on_the_topic_is_refused_and_returns_no_records(tmp_path):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import TopicAuthorizationFailedError as KpTopicAuthorizationFailed

    with secured(tmp_path, acl("Topic:granted", "Read"), acl("Topic:secret", "Describe")) as server:
        server.broker.produce("secret", [b"hidden"], partition=0)
        server.broker.produce("granted", [b"shown"], partition=0)
        consumer = KafkaConsumer(bootstrap_servers=server.bootstrap_servers, enable_auto_commit=False,
                                 consumer_timeout_ms=3000)
        try:
            consumer.assign([KpTopicPartition("secret", 0)])
            consumer.seek(KpTopicPartition("secret", 0), 0)
            with pytest.raises(KpTopicAuthorizationFailed):
                consumer.poll(timeout_ms=3000)
            consumer.assign([KpTopicPartition("granted", 0)])  # the witness, on the same connection
            consumer.seek(KpTopicPartition("granted", 0), 0)
            assert [r.value for r in consumer] == [b"shown"]
        finally:
            consumer.close()


def test_metadata_hides_the_topics_the_principal_may_not_describe(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Read"), topics=("granted", "secret", "hr-salaries")) as server:
        listed = admin(server.bootstrap_servers).list_topics(timeout=10)
        assert set(listed.topics) == {"granted"}
        asked = admin(server.bootstrap_servers).list_topics("secret", timeout=10)
        assert asked.topics["secret"].error.code() == TOPIC_AUTH
        assert asked.topics["secret"].partitions == {}


def test_a_topic_asked_for_by_name_that_does_not_exist_is_not_auto_created_without_create(tmp_path):
    with secured(tmp_path, acl("Topic:*", "Describe"), topics=()) as server:
        with ProtocolClient(server.bootstrap_servers) as client:
            answer = client.send(ApiKey.METADATA, {"topics": [{"name": "fresh"}], "allow_auto_topic_creation": True})
        assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("fresh", TOPIC_AUTH)]
        assert server.broker.topics.get("fresh") is None


def test_deny_overrides_allow(tmp_path):
    with secured(tmp_path, acl("Topic:*", "All"), acl("Topic:secret", "Write", permission="deny")) as server:
        bootstrap = server.bootstrap_servers
        assert produce_one(bootstrap, "secret").code() == TOPIC_AUTH
        assert produce_one(bootstrap, "granted") is None
        # Only WRITE is denied: the topic is still listed (DESCRIBE comes from ALL).
        assert "secret" in admin(bootstrap).list_topics(timeout=10).topics


def test_a_prefixed_acl_grants_the_topics_with_the_prefix_and_no_other(tmp_path):
    with secured(tmp_path, acl("Topic:sales-", "Write", pattern="prefixed"),
                 topics=("sales-eu", "sales-us", "salesforce")) as server:
        bootstrap = server.bootstrap_servers
        assert produce_one(bootstrap, "sales-eu") is None
        assert produce_one(bootstrap, "sales-us") is None
        assert produce_one(bootstrap, "salesforce").code() == TOPIC_AUTH
        assert set(admin(bootstrap).list_topics(timeout=10).topics) == {"sales-eu", "sales-us"}


def test_an_acl_for_another_host_does_not_apply_to_this_client(tmp_path):
    # The clients connect from 127.0.0.1; an ALLOW for another address grants them nothing.
    with secured(tmp_path, acl("Topic:granted", "Write", host="127.0.0.1"),
                 acl("Topic:secret", "Write", host="10.9.9.9"), acl("Topic:secret", "Describe")) as server:
        assert produce_one(server.bootstrap_servers, "secret").code() == TOPIC_AUTH
        assert produce_one(server.bootstrap_servers, "granted") is None


def test_a_super_user_may_do_everything_without_any_acl(tmp_path):
    with secured(tmp_path, **{"super.users": f"User:admin;{ANONYMOUS}"}) as server:
        assert produce_one(server.bootstrap_servers, "secret") is None
        assert set(admin(server.bootstrap_servers).list_topics(timeout=10).topics) >= {"granted", "secret"}


def test_allow_everyone_if_no_acl_found_opens_only_the_resources_without_acls(tmp_path):
    with secured(tmp_path, acl("Topic:secret", "Read", principal="User:bob"),
                 **{"allow.everyone.if.no.acl.found": "true"}) as server:
        assert produce_one(server.bootstrap_servers, "granted") is None
        assert produce_one(server.bootstrap_servers, "secret").code() == TOPIC_AUTH


# --- Groups -----------------------------------------------------------------------------------------


def consume_in_group(bootstrap: str, topic: str, group: str) -> list[bytes] | KafkaError:
    """Subscribe in ``group`` and read what there is; the first error the consumer reports instead."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "session.timeout.ms": 6000, "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        values = []
        for _ in range(40):
            msg = c.poll(0.5)
            if msg is None:
                if values:
                    break
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return msg.error()
            values.append(msg.value())
        c.commit(asynchronous=False)
        return values
    finally:
        c.close()


def test_a_consumer_group_without_read_on_the_group_is_refused_with_group_authorization_failed(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Read"), acl("Group:allowed", "Read")) as server:
        server.broker.produce("granted", [b"one"], partition=0)
        bootstrap = server.bootstrap_servers
        refused = consume_in_group(bootstrap, "granted", "forbidden")
        assert isinstance(refused, KafkaError) and refused.code() == GROUP_AUTH
        assert consume_in_group(bootstrap, "granted", "allowed") == [b"one"]  # the witness


def test_group_admin_apis_need_describe_and_delete_on_the_group(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Read"), acl("Group:allowed", "Read"),
                 acl("Group:allowed", "Delete"), acl("Group:hidden", "Read", principal="User:bob")) as server:
        server.broker.produce("granted", [b"one"], partition=0)
        bootstrap = server.bootstrap_servers
        assert consume_in_group(bootstrap, "granted", "allowed") == [b"one"]
        with ProtocolClient(bootstrap) as client:
            listed = client.send(ApiKey.LIST_GROUPS, {})
            described = client.send(ApiKey.DESCRIBE_GROUPS, {"groups": ["allowed", "hidden"],
                                                             "include_authorized_operations": True})
            offsets = client.send(ApiKey.OFFSET_FETCH, {"group_id": "hidden", "topics": None}, version=7)
            deleted = client.send(ApiKey.DELETE_GROUPS, {"groups_names": ["hidden", "allowed"]})
        assert [g["group_id"] for g in listed["groups"]] == ["allowed"]
        by_group = {g["group_id"]: g for g in described["groups"]}
        assert by_group["hidden"]["error_code"] == GROUP_AUTH and by_group["hidden"]["members"] == []
        assert by_group["allowed"]["error_code"] == NONE
        assert by_group["allowed"]["authorized_operations"] == (1 << 3) | (1 << 8) | (1 << 6)  # READ DESCRIBE DELETE
        assert (offsets["error_code"], offsets["topics"]) == (GROUP_AUTH, [])
        assert {r["group_id"]: r["error_code"] for r in deleted["results"]} == {"hidden": GROUP_AUTH, "allowed": NONE}


def test_offsets_of_topics_the_principal_may_not_describe_are_not_shown(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Read"), acl("Topic:secret", "Read"), acl("Group:g", "Read"),
                 acl("Cluster", "Alter")) as server:
        bootstrap = server.bootstrap_servers
        server.broker.produce("granted", [b"a"], partition=0)
        server.broker.produce("secret", [b"b"], partition=0)
        with ProtocolClient(bootstrap) as client:
            answer = client.send(ApiKey.OFFSET_COMMIT, {"group_id": "g", "generation_id_or_member_epoch": -1,
                                                        "member_id": "", "topics": [
                {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                            "committed_metadata": ""}]} for t in ("granted", "secret")]})
            assert [p["error_code"] for t in answer["topics"] for p in t["partitions"]] == [NONE, NONE]
        # The READ on secret is taken away: its committed offset disappears from what the group shows.
        a = admin(bootstrap)
        (deleted,) = a.delete_acls([CkAclBindingFilter(
            CkResourceType.TOPIC, "secret", CkPatternType.LITERAL, None, None, CkAclOperation.ANY,
            CkAclPermissionType.ANY)]).values()
        assert len(deleted.result(timeout=15)) == 1
        with ProtocolClient(bootstrap) as client:
            everything = client.send(ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": None}, version=7)
            named = client.send(ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": [
                {"name": "secret", "partition_indexes": [0]}]}, version=7)
        assert [t["name"] for t in everything["topics"]] == ["granted"]
        (topic,) = named["topics"]
        assert [(p["error_code"], p["committed_offset"]) for p in topic["partitions"]] == [(TOPIC_AUTH, -1)]


# --- Topics and configs --------------------------------------------------------------------------


def test_topic_admin_apis_need_create_delete_alter_and_config_acls(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "All"), acl("Topic:secret", "Describe")) as server:
        a = admin(server.bootstrap_servers)
        assert error_code_of(a.create_topics([NewTopic("new-one", 1, 1)])["new-one"]) == TOPIC_AUTH
        assert error_code_of(a.delete_topics(["secret"])["secret"]) == TOPIC_AUTH
        assert error_code_of(a.create_partitions([NewPartitions("secret", 2)])["secret"]) == TOPIC_AUTH
        secret = ConfigResource(ConfigResource.Type.TOPIC, "secret")
        assert error_code_of(a.describe_configs([secret])[secret]) == TOPIC_AUTH
        retention = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        assert error_code_of(a.incremental_alter_configs([ConfigResource(
            ConfigResource.Type.TOPIC, "secret", incremental_configs=[retention])])[secret]) == TOPIC_AUTH
        broker = ConfigResource(ConfigResource.Type.BROKER, "0")
        assert error_code_of(a.describe_configs([broker])[broker]) == CLUSTER_AUTH
        assert server.broker.topics.get("new-one") is None
        assert server.broker.topics.get("secret").partitions == 1
        assert "retention.ms" not in server.broker.topics.get("secret").config
        # The witnesses: the same calls on the topic the principal has ALL on.
        a.create_partitions([NewPartitions("granted", 2)])["granted"].result(timeout=15)
        granted = ConfigResource(ConfigResource.Type.TOPIC, "granted")
        assert "retention.ms" in a.describe_configs([granted])[granted].result(timeout=15)
        a.delete_topics(["granted"])["granted"].result(timeout=15)
        assert server.broker.topics.get("granted") is None


def test_create_topics_is_allowed_by_create_on_the_cluster(tmp_path):
    with secured(tmp_path, acl("Cluster", "Create"), topics=()) as server:
        a = admin(server.bootstrap_servers)
        a.create_topics([NewTopic("made", 1, 1)])["made"].result(timeout=15)
        assert server.broker.topics.get("made") is not None


# --- Cluster-level APIs -----------------------------------------------------------------------------


def test_cluster_apis_without_the_cluster_acl_answer_cluster_authorization_failed(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Read")) as server:
        with ProtocolClient(server.bootstrap_servers) as client:
            log_dirs = client.send(ApiKey.DESCRIBE_LOG_DIRS, {"topics": None})
            lease = client.send(SeglogApiKey.COMPACTION_LEASE, {"lease_id": "x", "operation": 0, "lease_ms": 1000,
                                                                "topics": [{"name": "granted", "partitions": [0]}]},
                                version=0)
            created = client.send(ApiKey.CREATE_ACLS, {"creations": [{
                "resource_type": 2, "resource_name": "secret", "resource_pattern_type": 3, "principal": ANONYMOUS,
                "host": "*", "operation": 3, "permission_type": 3}]})
            described = client.send(ApiKey.DESCRIBE_ACLS, {
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
            cluster = client.send(ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": True})
        assert (log_dirs["error_code"], log_dirs["results"]) == (ClusterAuthorizationFailedError.code, [])
        assert (lease["error_code"], lease["topics"]) == (ClusterAuthorizationFailedError.code, [])
        assert [r["error_code"] for r in created["results"]] == [ClusterAuthorizationFailedError.code]
        assert (described["error_code"], described["resources"]) == (ClusterAuthorizationFailedError.code, [])
        # DescribeCluster is answered (clients need it), with no operation allowed on the cluster.
        assert (cluster["error_code"], cluster["cluster_authorized_operations"]) == (NONE, 0)
        with ProtocolClient(server.bootstrap_servers) as client:
            # The witness: what the principal may do still works on the same connection.
            (granted,) = client.send(ApiKey.METADATA, {"topics": [{"name": "granted"}]})["topics"]
        assert granted["error_code"] == NONE


def test_acls_created_and_deleted_through_the_admin_api_take_effect_at_once(tmp_path):
    with secured(tmp_path, acl("Cluster", "Alter"), acl("Cluster", "Describe"), acl("Topic:secret", "Describe")) \
            as server:
        bootstrap = server.bootstrap_servers
        assert produce_one(bootstrap, "secret").code() == TOPIC_AUTH
        a = admin(bootstrap)
        write = CkAclBinding(CkResourceType.TOPIC, "secret", CkPatternType.LITERAL, ANONYMOUS, "*",
                             CkAclOperation.WRITE, CkAclPermissionType.ALLOW)
        for future in a.create_acls([write]).values():
            future.result(timeout=15)
        assert produce_one(bootstrap, "secret") is None
        any_write = CkAclBindingFilter(CkResourceType.ANY, None, CkPatternType.ANY, None, None, CkAclOperation.WRITE,
                                       CkAclPermissionType.ANY)
        assert a.describe_acls(any_write).result(timeout=15) == [write]
        (deleted,) = a.delete_acls([any_write]).values()
        assert deleted.result(timeout=15) == [write]
        assert produce_one(bootstrap, "secret").code() == TOPIC_AUTH
        assert log_end(server, "secret") == 1


def test_acls_survive_a_broker_restart(tmp_path):
    with secured(tmp_path, acl("Cluster", "Alter")) as server:
        write = CkAclBinding(CkResourceType.TOPIC, "granted", CkPatternType.LITERAL, ANONYMOUS, "*",
                             CkAclOperation.WRITE, CkAclPermissionType.ALLOW)
        a = admin(server.bootstrap_servers)
        for future in a.create_acls([write]).values():
            future.result(timeout=15)
    server = start_broker(tmp_path / "logs", **AUTHORIZER)
    try:
        assert produce_one(server.bootstrap_servers, "granted") is None
        assert produce_one(server.bootstrap_servers, "secret").code() == TOPIC_AUTH
    finally:
        server.shutdown(timeout_ms=10_000)


def test_acl_apis_answer_security_disabled_without_an_authorizer(broker_server):
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import SecurityDisabledError as KpSecurityDisabled

    a = admin(broker_server.bootstrap_servers)
    binding = CkAclBinding(CkResourceType.TOPIC, "t", CkPatternType.LITERAL, ANONYMOUS, "*", CkAclOperation.READ,
                           CkAclPermissionType.ALLOW)
    (created,) = a.create_acls([binding]).values()
    assert error_code_of(created) == SecurityDisabledError.code
    kp = KafkaAdminClient(bootstrap_servers=broker_server.bootstrap_servers)
    try:
        with pytest.raises(KpSecurityDisabled):
            kp.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY, ResourcePatternFilter(
                KpResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        kp.close()
    assert produce_one(broker_server.bootstrap_servers, "open") is None  # with no authorizer, everything is allowed


# --- Transactions and idempotence ---------------------------------------------------------------------


def test_a_transactional_producer_without_write_on_its_transactional_id_is_refused(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Write"), acl("TransactionalId:allowed", "Write"),
                 acl("TransactionalId:allowed", "Describe")) as server:
        bootstrap = server.bootstrap_servers
        refused = Producer({"bootstrap.servers": bootstrap, "transactional.id": "forbidden"})
        with pytest.raises(KafkaException) as raised:
            refused.init_transactions(15)
        assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        witness = Producer({"bootstrap.servers": bootstrap, "transactional.id": "allowed"})
        witness.init_transactions(15)
        witness.begin_transaction()
        witness.produce("granted", b"in-txn")
        witness.commit_transaction(15)
        assert log_end(server, "granted") == 2  # the record and the commit marker


def test_an_idempotent_producer_needs_idempotent_write_on_the_cluster_or_write_on_a_topic(tmp_path):
    with secured(tmp_path, acl("Topic:secret", "Describe")) as server:
        with ProtocolClient(server.bootstrap_servers) as client:
            body = {"transactional_id": None, "transaction_timeout_ms": 60000}
            assert client.send(ApiKey.INIT_PRODUCER_ID, body)["error_code"] == ClusterAuthorizationFailedError.code
            server.apis.authorizer.create_acls([acl("Topic:granted", "Write")])
            assert client.send(ApiKey.INIT_PRODUCER_ID, body)["error_code"] == NONE


def test_transaction_apis_answer_transactional_id_authorization_failed_with_no_state_shown(tmp_path):
    with secured(tmp_path, acl("Topic:granted", "Write"), acl("TransactionalId:mine", "Write")) as server:
        with ProtocolClient(server.bootstrap_servers) as client:
            described = client.send(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ["theirs"]})
            found = client.send(ApiKey.FIND_COORDINATOR, {"key": "theirs", "key_type": 1}, version=3)
            ended = client.send(ApiKey.END_TXN, {"transactional_id": "theirs", "producer_id": 1, "producer_epoch": 0,
                                                 "committed": True})
        (state,) = described["transaction_states"]
        assert (state["error_code"], state["producer_id"]) == (TransactionalIdAuthorizationFailedError.code, -1)
        assert found["error_code"] == TransactionalIdAuthorizationFailedError.code
        assert ended["error_code"] == TransactionalIdAuthorizationFailedError.code


# --- Host matching from another loopback address ------------------------------------------------------


def send_from(source: str, port: int, api_key: ApiKey, body: dict, version: int) -> dict:
    """One request from a socket bound to ``source`` (another loopback address than the clients')."""
    with socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0)) as sock:
        sock.sendall(encode_request(api_key, version, 1, "host-test", body))
        _correlation_id, body = parse_response(api_key, version, read_frame(sock))
        return body


def test_a_deny_for_one_client_address_refuses_that_address_only(tmp_path):
    with secured(tmp_path, acl("Topic:*", "Describe"), acl("Topic:secret", "Describe", host="127.0.0.2",
                                                             permission="deny")) as server:
        port = server.bound_port()
        body = {"topics": [{"name": "secret"}], "allow_auto_topic_creation": False}
        (far,) = send_from("127.0.0.2", port, ApiKey.METADATA, body, 9)["topics"]
        (near,) = send_from("127.0.0.1", port, ApiKey.METADATA, body, 9)["topics"]
        assert (far["error_code"], far["partitions"]) == (TOPIC_AUTH, [])
        assert (near["error_code"], len(near["partitions"])) == (NONE, 1)


def test_a_super_users_value_without_principal_types_stops_the_broker_from_starting(tmp_path):
    from broker_core.errors import InvalidConfigurationError

    with pytest.raises(InvalidConfigurationError, match="super.users: 'admin' is not TYPE:NAME"):
        start_broker(tmp_path / "logs", **AUTHORIZER, **{"super.users": "User:root;admin"})
