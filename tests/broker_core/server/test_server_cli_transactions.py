"""``seglog transactions list|describe --bootstrap`` against a ``seglog broker`` whose transactions a
confluent-kafka (librdkafka) transactional producer made: what the coordinator answers over
ListTransactions, FindCoordinator and DescribeTransactions, printed as kafka-transactions.sh prints it."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from broker_core.cli import main
from server_kit import start_broker

pytestmark = pytest.mark.slow

TIMEOUT_S = 20


def rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in text.splitlines()]


@pytest.fixture()
def txn_server(tmp_path):
    server = start_broker(tmp_path / "logs", **{"transaction.state.log.num.partitions": 3,
                                                 "offsets.topic.num.partitions": 3})
    try:
        server.broker.create_topic("out", 2)
        yield server
    finally:
        server.shutdown(timeout_ms=10_000)


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                  "transaction.timeout.ms": 45_000})
    p.init_transactions(TIMEOUT_S)
    return p


def test_list_and_describe_through_bootstrap_show_a_confluent_producers_transactions(txn_server, capsys):
    bootstrap = txn_server.bootstrap_servers
    done = transactional_producer(bootstrap, "cli-committed")
    done.begin_transaction()
    done.produce("out", value=b"a", partition=0)
    done.commit_transaction(TIMEOUT_S)
    pending = transactional_producer(bootstrap, "cli-open")
    pending.begin_transaction()
    pending.produce("out", value=b"b", partition=0)
    pending.produce("out", value=b"c", partition=1)
    pending.flush(TIMEOUT_S)
    try:
        assert main(["transactions", "list", "--bootstrap", bootstrap]) == 0
        listed = rows(capsys.readouterr().out)
        assert listed[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
        assert {r[0]: r[3] for r in listed[1:]} == {"cli-committed": "CompleteCommit", "cli-open": "Ongoing"}
        assert {r[1] for r in listed[1:]} == {str(txn_server.broker.node_id)}

        assert main(["transactions", "list", "--bootstrap", bootstrap, "--state-filter", "Ongoing"]) == 0
        assert [r[0] for r in rows(capsys.readouterr().out)[1:]] == ["cli-open"]

        assert main(["transactions", "describe", "--bootstrap", bootstrap, "--transactional-id", "cli-open"]) == 0
        row = rows(capsys.readouterr().out)[1]
        producer_id = {r[0]: r[2] for r in listed[1:]}["cli-open"]
        assert row[:6] == [str(txn_server.broker.node_id), "cli-open", producer_id, "0", "Ongoing", "45000"]
        assert int(row[6]) > 0 and int(row[7]) >= 0 and row[8] == "out-0,out-1"
    finally:
        pending.abort_transaction(TIMEOUT_S)
    assert main(["transactions", "describe", "--bootstrap", bootstrap, "--transactional-id", "cli-open"]) == 0
    row = rows(capsys.readouterr().out)[1]
    assert row[4] == "CompleteAbort" and row[8] == ""


def test_describe_through_bootstrap_of_an_unknown_transactional_id_fails_naming_it(txn_server, capsys):
    assert main(["transactions", "describe", "--bootstrap", txn_server.bootstrap_servers,
                 "--transactional-id", "nobody"]) == 1
    err = capsys.readouterr().err
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err and "'nobody'" in err
