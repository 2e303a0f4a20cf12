"""ACLs for authenticated principals: on a SASL_PLAINTEXT listener alice and bob (SCRAM-SHA-512) are
``User:alice`` and ``User:bob`` to the authorizer, each allowed only what their ACLs say, beside a super user."""

from __future__ import annotations

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from broker_core.server.broker_server import BrokerServer
from tests.broker_core.cli_kit import run
from tests.broker_core.security.acl_kit import AUTHORIZER, acl, seed_acls
from tests.broker_core.security.sasl_kit import credentials_for
from tests.broker_core.server.test_server_authorization import produce_one

USERS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}


def as_user(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": USERS[user]}


def test_each_authenticated_principal_gets_what_its_acls_allow_and_no_more(tmp_path):
    log_dir = tmp_path / "logs"
    seed_acls(log_dir, acl("Topic:orders", "Write", principal="User:alice"),
              acl("Topic:orders", "Write", principal="User:bob", permission="deny"),
              acl("Topic:audit", "Write", principal="User:*"))
    server = BrokerServer({"log.dirs": str(log_dir), "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                           "num.network.threads": 2, "num.io.threads": 4, "super.users": "User:admin",
                           **AUTHORIZER}, credential_store=credentials_for(USERS)).startup()
    try:
        for name in ("orders", "audit", "ops"):
            server.broker.create_topic(name, 1)
        bootstrap = server.bootstrap_servers
        assert produce_one(bootstrap, "orders", **as_user("alice")) is None
        assert produce_one(bootstrap, "orders", **as_user("bob")).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert produce_one(bootstrap, "audit", **as_user("bob")) is None  # User:* matches bob
        assert produce_one(bootstrap, "ops", **as_user("alice")).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert produce_one(bootstrap, "ops", **as_user("admin")) is None  # the super user
        listed = {user: set(AdminClient({"bootstrap.servers": bootstrap, **as_user(user)}).list_topics(
            timeout=10).topics) for user in USERS}
        assert listed == {"alice": {"orders", "audit"}, "bob": {"audit"}, "admin": {"orders", "audit", "ops"}}
        assert [server.broker.list_offsets(t, 0, "latest").offset for t in ("orders", "audit", "ops")] == [1, 1, 1]
    finally:
        server.shutdown(timeout_ms=10_000)


def test_seglog_acls_manages_acls_as_an_authenticated_admin_through_a_command_config(tmp_path):
    log_dir = tmp_path / "logs"
    seed_acls(log_dir, acl("Cluster", "Alter", principal="User:admin"), acl("Cluster", "Describe",
                                                                            principal="User:admin"))
    server = BrokerServer({"log.dirs": str(log_dir), "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                           "num.network.threads": 2, "num.io.threads": 4, **AUTHORIZER},
                          credential_store=credentials_for(USERS)).startup()
    try:
        server.broker.create_topic("orders", 1)
        bootstrap = server.bootstrap_servers
        configs = {}
        for user in ("admin", "alice"):
            configs[user] = tmp_path / f"{user}.properties"
            configs[user].write_text(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="{user}" password="{USERS[user]}";\n')
        code, _, err = run("acls", "add", "--bootstrap", bootstrap, "--command-config", str(configs["alice"]),
                           "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
        assert code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err  # alice may not grant herself anything
        assert produce_one(bootstrap, "orders", **as_user("alice")).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        code, out, err = run("acls", "add", "--bootstrap", bootstrap, "--command-config", str(configs["admin"]),
                             "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
        assert code == 0, err
        assert produce_one(bootstrap, "orders", **as_user("alice")) is None
    finally:
        server.shutdown(timeout_ms=10_000)
