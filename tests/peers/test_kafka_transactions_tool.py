"""Kafka's ``kafka-transactions.sh`` and ``seglog transactions`` on the same ``seglog broker``: the same
table, cell for cell (the duration, which runs on, apart)."""

from __future__ import annotations

from broker_core.cli import main
from jvm.apache_kafka import run_tool

DURATION = 7  # TransactionDurationMs: now minus the start, read at two different moments


def table(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines() if not line.startswith(("WARN", "Warning"))]


def test_seglog_transactions_prints_what_kafka_transactions_prints(broker_server, capsys):
    broker = broker_server.broker
    broker.create_topic("orders", 2)
    with broker.transaction("etl", transaction_timeout_ms=30_000) as txn:
        txn.produce("orders", [b"one"], partition=0)
    ongoing = broker.producer("open")
    ongoing.begin_transaction()
    ongoing.produce("orders", [b"two"], partition=0)
    ongoing.produce("orders", [b"three"], partition=1)
    bootstrap = broker_server.bootstrap_servers
    for args in (["list"], ["describe", "--transactional-id", "open"], ["describe", "--transactional-id", "etl"]):
        kafka = run_tool("kafka-transactions.sh", "--bootstrap-server", bootstrap, *args)
        assert kafka.returncode == 0, kafka.stderr
        assert main(["transactions", *args, "--bootstrap", bootstrap]) == 0
        ours, theirs = table(capsys.readouterr().out), table(kafka.stdout)
        if args[0] == "describe":
            for row in ours + theirs:
                row[DURATION] = "<duration>"
        assert ours == theirs, (args, ours, theirs)


def test_seglog_describe_producers_prints_what_kafka_transactions_describe_producers_prints(broker_server, capsys):
    broker = broker_server.broker
    broker.create_topic("orders", 2)
    with broker.transaction("etl") as txn:
        txn.produce("orders", [b"one", b"two"], partition=0)
    broker.producer().produce("orders", [b"idempotent"], partition=0)
    ongoing = broker.producer("open")
    ongoing.begin_transaction()
    ongoing.produce("orders", [b"three"], partition=0)
    ongoing.produce("orders", [b"four"], partition=1)
    bootstrap = broker_server.bootstrap_servers
    log_dir = broker.log_manager.log_dirs[0]
    for partition, producers in ((0, 3), (1, 1)):
        args = ["describe-producers", "--topic", "orders", "--partition", str(partition)]
        kafka = run_tool("kafka-transactions.sh", "--bootstrap-server", bootstrap, *args)
        assert kafka.returncode == 0, kafka.stderr
        theirs = table(kafka.stdout)
        assert len(theirs) == 1 + producers, theirs
        # Through the broker, and from its log dir beside it: the state rebuilt from the files.
        for where in (["--bootstrap", bootstrap], ["--log-dir", log_dir]):
            assert main(["transactions", *args, *where]) == 0
            assert table(capsys.readouterr().out) == theirs, (partition, where)
