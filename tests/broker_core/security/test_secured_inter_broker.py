"""A cluster whose brokers reach each other over SASL_SSL only: replica fetchers authenticate with SCRAM-SHA-512
as the brokers' user, through TLS with the brokers' own truststore; with an authorizer, that user needs
CLUSTER_ACTION on the cluster (or ``super.users``) to replicate, as in Kafka."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer

from broker_core.controller.credential_etcd import EtcdCredentialStore
from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
from broker_core.errors import TopicAuthorizationFailedError
from broker_core.protocol import ApiKey
from broker_core.client.client_security import ClientSecurity as SeglogClientSecurity
from broker_core.client.protocol_client import ProtocolClient
from broker_core.security.acl_etcd_store import EtcdAclStore
from broker_core.security.scram import ScramCredential, ScramMechanism
from tests.broker_core.cluster.cluster_kit import ClusterKit
from tests.broker_core.cluster.test_coordinator_failover import INTERNAL_TOPICS, wait_for_coordinator
from tests.broker_core.security.acl_kit import AUTHORIZER, acl
from tests.broker_core.security.sasl_listener_kit import seglog_security
from tests.broker_core.security.secure_clients_kit import ClientSecurity
from tests.broker_core.security.tls_kit import server_ssl_props
from tests.broker_core.server.transaction_clients_kit import transactional_producer

pytestmark = pytest.mark.slow

USERS = {"broker": "broker-secret", "admin": "admin-secret", "alice": "alice-secret"}
SCRAM = ScramMechanism.SCRAM_SHA_512
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";'
TIMEOUT_S = 30


def _seed(connect: str, *bindings) -> None:
    """The users (SCRAM-SHA-512) and ``bindings`` in the cluster's etcd, as ``seglog users|acls add`` keep them."""
    store = EtcdMetadataStore(parse_etcd_connect(connect))
    try:
        EtcdCredentialStore(store).alter((), [(user, SCRAM, ScramCredential.from_password(SCRAM, password))
                                              for user, password in USERS.items()])
        if bindings:
            EtcdAclStore(store).update(add=bindings)
    finally:
        store.close()


def _sasl_ssl_cluster(tmp_path, connect: str, server_stores, *, client_user: str, super_users: str,
                      **props: str) -> ClusterKit:
    """Three brokers whose only listener, INTERNAL, is SASL_SSL with SCRAM-SHA-512; the kit's own client
    authenticates as ``client_user``."""
    kit = ClusterKit(tmp_path, connect, listener="INTERNAL",
                     security=seglog_security(server_stores, user=client_user, password=USERS[client_user]),
                     **{"listener.security.protocol.map": "INTERNAL:SASL_SSL", "inter.broker.listener.name": "INTERNAL",
                        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                        "listener.name.internal.scram-sha-512.sasl.jaas.config": JAAS,
                        "super.users": super_users, **AUTHORIZER, **server_ssl_props(server_stores), **props})
    kit.start_all()
    return kit


def _alice(server_stores) -> dict:
    return ClientSecurity("SASL_SSL", cafile=str(server_stores.truststore), sasl_mechanism="SCRAM-SHA-512",
                          username="alice", password=USERS["alice"]).confluent()


def _produce(kit: ClusterKit, settings: dict, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": kit.bootstrap, "acks": "all", **settings})
    failures: list = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, msg: err is not None and failures.append(err))
    assert producer.flush(TIMEOUT_S * 2) == 0, "records left unsent"
    assert failures == []


def _consume(kit: ClusterKit, settings: dict, topic: str, count: int, **config) -> list[bytes]:
    """Up to ``count`` values the group ``readers`` reads from its committed offsets on, committed after."""
    consumer = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": "readers", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **settings, **config})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
        if values:
            consumer.commit(asynchronous=False)
        return values
    finally:
        consumer.close()


def test_a_sasl_ssl_only_cluster_replicates_with_acks_all_and_fails_over_for_a_confluent_kafka_client(
        tmp_path, etcd_server, server_stores):
    connect = etcd_server.connect("/seglog")
    _seed(connect, acl("Topic:orders", "All", principal="User:alice"),
          acl("Group:readers", "All", principal="User:alice"))
    kit = _sasl_ssl_cluster(tmp_path, connect, server_stores, client_user="broker", super_users="User:broker")
    try:
        assert kit.create_topic("orders")["error_code"] == 0
        leader = kit.wait_for_isr("orders", (1, 2, 3)).leader
        alice = _alice(server_stores)
        before = [b"before-%d" % i for i in range(100)]
        _produce(kit, alice, "orders", before)
        assert _consume(kit, alice, "orders", 100) == before  # the group's offsets, replicated three times too

        kit.kill(leader)
        survivors = tuple(n for n in (1, 2, 3) if n != leader)
        assert kit.wait_for_isr("orders", survivors).leader != leader
        after = [b"after-%d" % i for i in range(100)]
        _produce(kit, alice, "orders", after)  # acks=all: both survivors have them (min.insync.replicas=2)
        assert _consume(kit, alice, "orders", 100) == after  # from the offset committed before the kill

        kit.start(leader)  # the restarted broker catches up over SASL_SSL and rejoins the ISR
        kit.wait_for_isr("orders", (1, 2, 3))
    finally:
        kit.close()


def test_transaction_markers_reach_the_partition_leaders_on_other_brokers_over_sasl_ssl(
        tmp_path, etcd_server, server_stores):
    connect = etcd_server.connect("/seglog")
    _seed(connect, *(acl(resource, "All", principal="User:alice")
                     for resource in ("Topic:payments", "Group:readers", "TransactionalId:spread")))
    kit = _sasl_ssl_cluster(tmp_path, connect, server_stores, client_user="broker", super_users="User:broker",
                            **INTERNAL_TOPICS)
    try:
        assert kit.create_topic("payments", partitions=3)["error_code"] == 0
        leaders = {kit.wait_for_isr("payments", (1, 2, 3), p).leader for p in range(3)}
        coordinator = wait_for_coordinator(kit, "spread", 1)
        assert leaders - {coordinator}, "some markers must travel to another broker"
        alice = _alice(server_stores)
        producer = transactional_producer(kit.bootstrap, "spread", **alice)
        committed = []
        for n, commit in ((1, True), (2, False), (3, True)):
            producer.begin_transaction()
            values = [b"txn-%d-p%d" % (n, p) for p in range(3)]
            for p, value in enumerate(values):
                producer.produce("payments", value=value, partition=p)
            assert producer.flush(TIMEOUT_S) == 0
            if commit:
                producer.commit_transaction(TIMEOUT_S)
                committed += values
            else:
                producer.abort_transaction(TIMEOUT_S)
        # read_committed reads up to each partition's last stable offset: there only once its leader has the
        # COMMIT marker; the aborted records never show.
        read = _consume(kit, alice, "payments", len(committed), **{"isolation.level": "read_committed"})
        assert sorted(read) == sorted(committed)
    finally:
        kit.close()


def test_an_ssl_cluster_requiring_client_certificates_replicates_as_the_subject_of_the_brokers_certificate(
        tmp_path, etcd_server, server_stores):
    # The brokers show their keystore's certificate as clients too; its subject is their principal.
    kit = ClusterKit(tmp_path, etcd_server.connect("/seglog"), listener="INTERNAL",
                     security=SeglogClientSecurity.from_props({
                         "security.protocol": "SSL", "ssl.truststore.location": str(server_stores.truststore),
                         "ssl.keystore.location": str(server_stores.keystore),
                         "ssl.key.password": server_stores.key_password}),
                     **{"listener.security.protocol.map": "INTERNAL:SSL", "ssl.client.auth": "required",
                        "super.users": "User:CN=localhost,O=seglog", **AUTHORIZER, **server_ssl_props(server_stores)})
    kit.start_all()
    try:
        assert kit.create_topic("orders")["error_code"] == 0
        kit.wait_for_isr("orders", (1, 2, 3))
        # acks=all with min.insync.replicas=2: answered only once the followers fetched the records.
        settings = ClientSecurity("SSL", cafile=str(server_stores.truststore),
                                  certfile=str(server_stores.certificate), keyfile=str(server_stores.key),
                                  key_password=server_stores.key_password).confluent()
        _produce(kit, {**settings, "message.timeout.ms": 20_000}, "orders", [b"replicated-%d" % i for i in range(10)])
        kit.wait_for_isr("orders", (1, 2, 3))
    finally:
        kit.close()


def _follower_fetch(kit: ClusterKit, server_stores, leader: int, follower: int) -> int:
    """A Fetch as replica ``follower``, authenticated as the brokers' user: the partition's error code."""
    security = seglog_security(server_stores, user="broker", password=USERS["broker"])
    with ProtocolClient(f"127.0.0.1:{kit.ports[leader]}", timeout_s=30, security=security) as client:
        response = client.send(ApiKey.FETCH, {
            "replica_id": follower, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": "orders", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                           "fetch_offset": 0, "last_fetched_epoch": -1,
                                                           "log_start_offset": -1,
                                                           "partition_max_bytes": 1 << 20}]}]}, version=12)
    return response["responses"][0]["partitions"][0]["error_code"]


def test_brokers_whose_user_lacks_cluster_action_cannot_replicate_until_the_acl_is_added(
        tmp_path, etcd_server, server_stores):
    connect = etcd_server.connect("/seglog")
    _seed(connect, acl("Topic:orders", "All", principal="User:alice"),
          acl("Group:readers", "All", principal="User:alice"))
    kit = _sasl_ssl_cluster(tmp_path, connect, server_stores, client_user="admin", super_users="User:admin")
    try:
        assert kit.create_topic("orders", configs={"min.insync.replicas": "1"})["error_code"] == 0
        leader = kit.wait_until(lambda: max(getattr(kit.partition("orders"), "leader", -1), 0), "orders has a leader")
        follower = next(n for n in (1, 2, 3) if n != leader)
        _produce(kit, _alice(server_stores), "orders", [b"unreplicated-%d" % i for i in range(10)])
        # The followers are refused (Kafka answers a follower's Fetch without CLUSTER_ACTION so), fall behind
        # and leave the ISR: the partition is under-replicated.
        assert _follower_fetch(kit, server_stores, leader, follower) == TopicAuthorizationFailedError.code
        view = kit.wait_for_isr("orders", (leader,))
        assert view.replicas != view.isr

        _seed(connect, acl("Cluster", "ClusterAction", principal="User:broker"))
        kit.wait_for_isr("orders", (1, 2, 3))
        assert _follower_fetch(kit, server_stores, leader, follower) == 0
    finally:
        kit.close()
