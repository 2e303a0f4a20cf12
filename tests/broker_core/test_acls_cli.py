"""``seglog acls add|list|remove`` as a user runs it, with kafka-acls.sh's flags: on a log dir a broker then
starts with, and on a running broker through ``--bootstrap``."""

from __future__ import annotations

from confluent_kafka import KafkaError

from tests.broker_core.cli_kit import run
from tests.broker_core.security.acl_kit import AUTHORIZER, acl
from tests.broker_core.server.server_kit import start_broker
from tests.broker_core.server.test_server_authorization import produce_one, secured

READ_ORDERS = "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"


def acls(*args: str) -> list[str]:
    code, out, err = run("acls", *args)
    assert code == 0, err
    return out.splitlines()


def test_acls_added_to_a_log_dir_govern_the_broker_that_starts_on_it(tmp_path):
    log_dir = str(tmp_path / "logs")
    (tmp_path / "logs").mkdir()
    assert acls("add", "--log-dir", log_dir, "--allow-principal", "User:ANONYMOUS", "--operation", "Write",
                "--topic", "granted") == [
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=granted, patternType=LITERAL)`: ",
        " \t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)", ""]
    server = start_broker(log_dir, **AUTHORIZER)
    try:
        server.broker.create_topic("granted", 1)
        server.broker.create_topic("secret", 1)
        assert produce_one(server.bootstrap_servers, "granted") is None
        assert produce_one(server.bootstrap_servers, "secret").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        server.shutdown(timeout_ms=10_000)


def test_acls_lists_and_removes_on_a_log_dir_with_prefixed_patterns_and_several_operations(tmp_path):
    log_dir = str(tmp_path)
    acls("add", "--log-dir", log_dir, "--allow-principal", "User:alice", "--operation", "Read", "--operation",
         "Describe", "--topic", "orders-", "--resource-pattern-type", "prefixed")
    acls("add", "--log-dir", log_dir, "--deny-principal", "User:bob", "--deny-host", "10.0.0.7", "--cluster",
         "--operation", "Alter")
    assert acls("list", "--log-dir", log_dir) == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)`:",
        READ_ORDERS, "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)", "",
        "Current ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)`:",
        "\t(principal=User:bob, host=10.0.0.7, operation=ALTER, permissionType=DENY)", ""]
    # A literal listing of the name does not show the prefixed pattern; match does.
    assert acls("list", "--log-dir", log_dir, "--topic", "orders-") == []
    assert acls("list", "--log-dir", log_dir, "--topic", "orders-eu", "--resource-pattern-type", "match")[1] == \
        READ_ORDERS
    acls("remove", "--log-dir", log_dir, "--allow-principal", "User:alice", "--operation", "Describe", "--topic",
         "orders-", "--resource-pattern-type", "prefixed", "--force")
    assert acls("list", "--log-dir", log_dir, "--topic", "orders-", "--resource-pattern-type", "prefixed")[1:] == [
        READ_ORDERS, ""]
    acls("remove", "--log-dir", log_dir, "--cluster", "--force")
    assert acls("list", "--log-dir", log_dir, "--cluster") == []


def test_acls_through_a_running_broker_take_effect_at_once(tmp_path):
    with secured(tmp_path, acl("Cluster", "Alter"), acl("Cluster", "Describe"), acl("Topic:secret", "Describe")) \
            as server:
        bootstrap = server.bootstrap_servers
        assert produce_one(bootstrap, "secret").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        added = acls("add", "--bootstrap", bootstrap, "--producer", "--allow-principal", "User:ANONYMOUS", "--topic",
                     "secret")
        assert added[0] == ("Acl (pattern=ResourcePattern(resourceType=TOPIC, name=secret, patternType=LITERAL), "
                            "entry=(principal=User:ANONYMOUS, host=*, operation=DESCRIBE, permissionType=ALLOW)) "
                            "already exists.")
        assert produce_one(bootstrap, "secret") is None
        assert {line.split("operation=")[1].split(",")[0] for line in acls(
            "list", "--bootstrap", bootstrap, "--topic", "secret") if "operation=" in line} == {
            "WRITE", "DESCRIBE", "CREATE"}
        acls("remove", "--bootstrap", bootstrap, "--topic", "secret", "--force")
        assert produce_one(bootstrap, "secret").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_refuses_what_kafka_refuses_with_a_message_for_people(tmp_path):
    code, _, err = run("acls", "add", "--log-dir", str(tmp_path), "--allow-principal", "User:alice", "--operation",
                       "Fly", "--topic", "t")
    assert (code, err.strip()) == (2, "seglog acls: --operation: unknown operation 'Fly' (one of ANY, ALL, READ, "
                                      "WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, "
                                      "ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS)")
    code, _, err = run("acls", "add", "--log-dir", str(tmp_path), "--allow-principal", "User:alice", "--operation",
                       "Read", "--cluster")
    assert code == 1 and "operation READ does not apply to resource type CLUSTER" in err
    code, _, err = run("acls", "add", "--log-dir", str(tmp_path), "--topic", "t")
    assert (code, err.strip()) == (2, "seglog acls: You must specify one of: --allow-principal, --deny-principal "
                                      "when trying to add ACLs.")


def test_acls_against_a_broker_without_an_authorizer_says_security_is_disabled(broker_server):
    code, _, err = run("acls", "list", "--bootstrap", broker_server.bootstrap_servers)
    assert code == 1 and "No Authorizer is configured on the broker" in err
