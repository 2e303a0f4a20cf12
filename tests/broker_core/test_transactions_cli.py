"""``seglog transactions list|describe --log-dir`` and ``seglog dump`` of ``__transaction_state`` and
``.snapshot`` files, over transactions made by the embedded broker."""

from __future__ import annotations

import glob
import json
import os
import time

import pytest

from broker_core import Broker
from broker_core.cli import main

SMALL = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}


def rows(text: str) -> list[list[str]]:
    """The cells of kafka-transactions.sh's table: every cell followed by a tab, padded with spaces."""
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in text.splitlines()]


@pytest.fixture()
def log_dir(tmp_path):
    """A committed transaction ``etl`` over two partitions and a group, and ``open`` left ongoing."""
    path = str(tmp_path / "logs")
    with Broker(path, SMALL) as broker:
        broker.create_topic("orders", 2)
        with broker.transaction("etl", transaction_timeout_ms=30_000) as txn:
            txn.produce("orders", [b"one"], partition=0)
            txn.produce("orders", [b"two"], partition=1)
        ongoing = broker.producer("open")
        ongoing.begin_transaction()
        ongoing.produce("orders", [b"pending"], partition=1)
        broker.producer().produce("orders", [b"idempotent"], partition=0)
    return path


def test_list_from_the_log_dir_prints_every_transactional_id_with_its_producer_and_state(log_dir, capsys):
    assert main(["transactions", "list", "--log-dir", log_dir]) == 0
    assert rows(capsys.readouterr().out) == [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                                             ["etl", "0", "0", "CompleteCommit"],
                                             ["open", "0", "1", "Ongoing"]]


def test_list_filters_by_state_and_producer_id_as_list_transactions_does(log_dir, capsys):
    assert main(["transactions", "list", "--log-dir", log_dir, "--state-filter", "Ongoing"]) == 0
    assert [r[0] for r in rows(capsys.readouterr().out)[1:]] == ["open"]
    assert main(["transactions", "list", "--log-dir", log_dir, "--producer-id-filter", "0"]) == 0
    assert [r[0] for r in rows(capsys.readouterr().out)[1:]] == ["etl"]
    assert main(["transactions", "list", "--log-dir", log_dir, "--transactional-id-pattern", "e.*"]) == 0
    assert [r[0] for r in rows(capsys.readouterr().out)[1:]] == ["etl"]


def test_describe_from_the_log_dir_prints_kafka_transactions_columns(log_dir, capsys):
    before = int(time.time() * 1000)
    assert main(["transactions", "describe", "--log-dir", log_dir, "--transactional-id", "open"]) == 0
    header, row = rows(capsys.readouterr().out)
    assert header == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                      "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                      "TopicPartitions"]
    assert row[:6] == ["0", "open", "1", "0", "Ongoing", "60000"]
    start, duration = int(row[6]), int(row[7])
    assert start <= before and 0 <= duration < 120_000
    assert row[8] == "orders-1"


def test_describe_of_a_completed_transaction_has_no_partitions(log_dir, capsys):
    assert main(["transactions", "describe", "--log-dir", log_dir, "--transactional-id", "etl"]) == 0
    row = rows(capsys.readouterr().out)[1]
    assert row[:6] == ["0", "etl", "0", "0", "CompleteCommit", "30000"] and row[8] == ""


def test_describe_of_an_unknown_transactional_id_fails_naming_it(log_dir, capsys):
    assert main(["transactions", "describe", "--log-dir", log_dir, "--transactional-id", "nope"]) == 1
    err = capsys.readouterr().err
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err and "'nope'" in err and "NotFoundError" not in err


def test_transactions_from_the_log_dir_write_nothing_and_work_beside_its_owner(log_dir, capsys):
    before = {p: os.path.getmtime(p) for p in glob.glob(os.path.join(log_dir, "**", "*"), recursive=True)}
    with Broker(log_dir, SMALL) as owner:
        owner.transaction_coordinator  # loaded: the ongoing transaction is still open
        assert main(["transactions", "list", "--log-dir", log_dir, "--state-filter", "Ongoing"]) == 0
        assert [r[0] for r in rows(capsys.readouterr().out)[1:]] == ["open"]
    after = {p: os.path.getmtime(p) for p in before if os.path.exists(p)}
    txn_log = glob.glob(os.path.join(log_dir, "__transaction_state-0", "*.log"))[0]
    assert after[txn_log] == before[txn_log]


def test_dump_decodes_transaction_state_records_as_the_transaction_log_decoder(log_dir, capsys):
    segment = glob.glob(os.path.join(log_dir, "__transaction_state-0", "*.log"))[0]
    assert main(["dump", segment]) == 0
    records = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| offset:")]
    decoded = [(json.loads(line.split(" key: ")[1].split(" payload: ")[0]),
                json.loads(line.split(" payload: ")[1])) for line in records]
    assert [k["data"]["transactionalId"] for k, _ in decoded] == ["etl"] * 5 + ["open"] * 2
    # Empty, Ongoing (per partition added), PrepareCommit, CompleteCommit; then the open one.
    assert [v["data"]["transactionStatus"] for _, v in decoded] == [0, 1, 1, 2, 4, 0, 1]
    assert decoded[2][1]["data"]["transactionPartitions"] == [{"topic": "orders", "partitionIds": [0, 1]}]
    assert decoded[0][1]["data"]["transactionPartitions"] is None
    assert all(k["type"] == "0" and v["version"] == "0" for k, v in decoded)
    assert decoded[-1][1]["data"]["producerId"] == 1 and decoded[-1][1]["data"]["transactionTimeoutMs"] == 60000


def test_dump_prints_each_producer_of_a_snapshot_file(log_dir, capsys):
    snapshot = glob.glob(os.path.join(log_dir, "orders-1", "*.snapshot"))[0]
    assert main(["dump", snapshot]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Dumping {snapshot}"
    by_producer = {int(line.split()[1]): line for line in lines[1:]}
    assert sorted(by_producer) == [0, 1]
    # etl (producer 0) committed: no open transaction; its batch is offset 0, its marker offset 1.
    assert "coordinatorEpoch: 0 currentTxnFirstOffset: OptionalLong.empty" in by_producer[0]
    assert "firstSequence: 0 lastSequence: 0 lastOffset: 0 offsetDelta: 0" in by_producer[0]
    # open (producer 1) is still in its transaction, which starts at offset 2.
    assert "currentTxnFirstOffset: OptionalLong[2]" in by_producer[1]
    assert "lastOffset: 2" in by_producer[1]


def test_dump_of_a_corrupt_snapshot_names_the_file_and_fails(log_dir, capsys):
    snapshot = glob.glob(os.path.join(log_dir, "orders-1", "*.snapshot"))[0]
    with open(snapshot, "r+b") as f:
        f.seek(12)
        f.write(b"\xff")
    assert main(["dump", snapshot]) == 1
    out = capsys.readouterr().out
    assert "Found corruption" in out and snapshot in out and "CRC" in out


PRODUCER_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                    "CurrentTransactionStartOffset"]


def test_describe_producers_from_the_log_dir_prints_each_producer_of_the_partition(log_dir, capsys):
    assert main(["transactions", "describe-producers", "--log-dir", log_dir, "--topic", "orders",
                 "--partition", "1"]) == 0
    header, *producers = rows(capsys.readouterr().out)
    assert header == PRODUCER_HEADERS
    # etl (producer 0) committed with coordinator epoch 0; open (producer 1) is in its transaction from offset 2.
    assert [[r[0], r[1], r[2], r[3], r[5]] for r in producers] == [["0", "0", "0", "0", "None"],
                                                                 ["1", "0", "-1", "0", "2"]]
    assert all(0 < int(r[4]) <= time.time() * 1000 for r in producers)


def test_describe_producers_lists_an_idempotent_producer_without_a_transaction(log_dir, capsys):
    assert main(["transactions", "describe-producers", "--log-dir", log_dir, "--topic", "orders",
                 "--partition", "0"]) == 0
    producers = rows(capsys.readouterr().out)[1:]
    assert [[r[0], r[1], r[2], r[3], r[5]] for r in producers] == [["0", "0", "0", "0", "None"],
                                                                 ["2", "0", "-1", "0", "None"]]


def test_describe_producers_from_the_log_dir_beside_its_owner_sees_what_it_appended_since_its_last_snapshot(
        log_dir, capsys):
    with Broker(log_dir, SMALL) as owner:
        owner.producer().produce("orders", [b"a", b"b", b"c"], partition=1)
        assert main(["transactions", "describe-producers", "--log-dir", log_dir, "--topic", "orders",
                     "--partition", "1"]) == 0
        newest = rows(capsys.readouterr().out)[-1]
        # The restarted owner hands out ids from its next block of a thousand.
        assert [newest[0], newest[1], newest[2], newest[3], newest[5]] == ["1000", "0", "-1", "2", "None"]
        assert [[p.producer_id, p.last_sequence] for p in owner.describe_producers("orders", 1)] == [
            [0, 0], [1, 0], [1000, 2]]


def test_describe_producers_of_a_partition_the_topic_does_not_have_fails_naming_it(log_dir, capsys):
    assert main(["transactions", "describe-producers", "--log-dir", log_dir, "--topic", "orders",
                 "--partition", "7"]) == 1
    err = capsys.readouterr().err
    assert "UNKNOWN_TOPIC_OR_PARTITION" in err and "orders-7" in err


def test_describe_producers_needs_a_topic_and_a_partition(log_dir, capsys):
    assert main(["transactions", "describe-producers", "--log-dir", log_dir, "--topic", "orders"]) == 2
    assert "--topic and --partition" in capsys.readouterr().err
