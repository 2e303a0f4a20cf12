"""``seglog transactions list|describe|describe-producers --bootstrap`` against a ``seglog broker`` whose
transactions a confluent-kafka (librdkafka) transactional producer made: what the coordinator answers over
ListTransactions, FindCoordinator and DescribeTransactions, and the partitions over DescribeProducers,
printed as kafka-transactions.sh prints it; and the group offsets the CLI's remote broker reads while a
transaction holds some."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Producer

from broker_core.cli import main
from broker_core.client.remote_broker import RemoteBroker
from format.layout import TopicPartition
import transaction_clients_kit
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
    return transaction_clients_kit.transactional_producer(bootstrap, transactional_id,
                                                          **{"transaction.timeout.ms": 45_000})


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


def test_describe_producers_through_bootstrap_shows_confluent_producers_as_the_log_dir_does(txn_server, capsys):
    bootstrap = txn_server.bootstrap_servers
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in (b"a", b"b", b"c"):
        idempotent.produce("out", value=value, partition=0)
    idempotent.flush(TIMEOUT_S)
    pending = transactional_producer(bootstrap, "cli-producers")
    pending.begin_transaction()
    pending.produce("out", value=b"d", partition=0)
    pending.flush(TIMEOUT_S)
    args = ["transactions", "describe-producers", "--topic", "out", "--partition", "0"]
    log_dir = txn_server.broker.log_manager.log_dirs[0]
    try:
        assert main([*args, "--bootstrap", bootstrap]) == 0
        header, *producers = rows(capsys.readouterr().out)
        assert header == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                          "CurrentTransactionStartOffset"]
        # The idempotent producer wrote sequences 0-2 at offsets 0-2; the transaction starts at offset 3.
        assert [[r[1], r[2], r[3], r[5]] for r in producers] == [["0", "-1", "2", "None"], ["0", "-1", "0", "3"]]
        assert main([*args, "--log-dir", log_dir]) == 0
        assert rows(capsys.readouterr().out)[1:] == producers
    finally:
        pending.abort_transaction(TIMEOUT_S)
    assert main([*args, "--bootstrap", bootstrap]) == 0
    aborted = rows(capsys.readouterr().out)[-1]
    # The ABORT marker ends the transaction, with the coordinator's epoch.
    assert [aborted[0], aborted[2], aborted[5]] == [producers[1][0], "0", "None"]


def test_describe_producers_through_bootstrap_of_an_unknown_topic_fails_naming_it(txn_server, capsys):
    assert main(["transactions", "describe-producers", "--bootstrap", txn_server.bootstrap_servers,
                 "--topic", "nowhere", "--partition", "0"]) == 1
    err = capsys.readouterr().err
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err and "nowhere-0" in err


def test_remote_committed_offsets_wait_for_an_open_transactions_offsets_and_describe_group_does_not(txn_server):
    tp = TopicPartition("out", 0)
    with RemoteBroker(txn_server.bootstrap_servers) as remote:
        remote.commit_offsets("app", {tp: 1})
        producer = txn_server.broker.producer("app-txn")
        producer.begin_transaction()
        producer.send_offsets_to_transaction("app", {tp: 4})
        # As kafka-consumer-groups.sh: the offset committed so far, at once.
        assert [r.current_offset for r in remote.describe_group("app").partitions] == [1]
        answered: list = []
        with RemoteBroker(txn_server.bootstrap_servers) as stable:
            asking = threading.Thread(target=lambda: answered.append(stable.committed_offsets("app")))
            asking.start()
            asking.join(1.0)
            assert asking.is_alive() and not answered  # UNSTABLE_OFFSET_COMMIT, asked again
            producer.commit_transaction()
            asking.join(TIMEOUT_S)
        assert {p: o.offset for p, o in answered[0].items()} == {tp: 4}
