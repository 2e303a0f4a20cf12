"""Kafka's own ``kafka-acls.sh`` (Kafka 4.3's AclCommand, through the Admin client) against a seglog broker with
the authorizer on: it adds, lists and removes ACLs, they take effect for clients at once, and ``seglog acls``
lists them line for line as kafka-acls.sh does."""

from __future__ import annotations

from confluent_kafka import KafkaError

from broker_core.cli import main as seglog
from jvm.apache_kafka import run_tool
from tests.broker_core.security.acl_kit import acl
from tests.broker_core.server.test_server_authorization import produce_one, secured


def acls_tool(bootstrap: str, *args: str) -> list[str]:
    done = run_tool("kafka-acls.sh", "--bootstrap-server", bootstrap, *args)
    assert done.returncode == 0, \
        f"kafka-acls.sh {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return [line for line in done.stdout.splitlines() if "WARN" not in line]


def seglog_acls(capsys, *args: str) -> list[str]:
    assert seglog(["acls", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_kafka_acls_adds_lists_and_removes_acls_on_seglog_and_clients_feel_them(tmp_path, capsys):
    # User:ANONYMOUS (every client here) may manage ACLs (ALTER and DESCRIBE on the cluster), nothing more.
    with secured(tmp_path, acl("Cluster", "Alter"), acl("Cluster", "Describe"), acl("Topic:orders-", "Describe",
                                                                                     pattern="prefixed"),
                 topics=("orders-eu", "payments")) as server:
        bootstrap = server.bootstrap_servers
        assert produce_one(bootstrap, "orders-eu").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        added = acls_tool(bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Write",
                          "--topic", "orders-", "--resource-pattern-type", "prefixed")
        assert added == ["Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders-, "
                         "patternType=PREFIXED)`: ",
                         " \t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)", ""]
        assert produce_one(bootstrap, "orders-eu") is None
        acls_tool(bootstrap, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.1.2.3", "--operation",
                  "Read", "--group", "billing")
        listed = acls_tool(bootstrap, "--list")
        # The same lines; Kafka prints its resources in hash order.
        assert sorted(seglog_acls(capsys, "list", "--bootstrap", bootstrap)) == sorted(listed)
        assert "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)`:" \
            in listed
        assert "\t(principal=User:mallory, host=10.1.2.3, operation=READ, permissionType=DENY)" in listed
        acls_tool(bootstrap, "--remove", "--force", "--allow-principal", "User:ANONYMOUS", "--operation", "Write",
                  "--topic", "orders-", "--resource-pattern-type", "prefixed")
        assert produce_one(bootstrap, "orders-eu").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert "\t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)" not in acls_tool(
            bootstrap, "--list", "--topic", "orders-", "--resource-pattern-type", "prefixed")


def test_kafka_acls_lists_what_seglog_acls_added(tmp_path, capsys):
    with secured(tmp_path, **{"super.users": "User:ANONYMOUS"}, topics=()) as server:
        bootstrap = server.bootstrap_servers
        seglog_acls(capsys, "add", "--bootstrap", bootstrap, "--consumer", "--allow-principal", "User:alice",
                    "--topic", "clicks", "--group", "reporting")
        assert sorted(acls_tool(bootstrap, "--list", "--principal", "User:alice")) == sorted(seglog_acls(
            capsys, "list", "--bootstrap", bootstrap, "--principal", "User:alice"))
        listed = acls_tool(bootstrap, "--list", "--topic", "clicks")
        assert sorted(listed) == sorted(["Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=clicks, "
                                         "patternType=LITERAL)`:",
                                         "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
                                         "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
                                         ""])
