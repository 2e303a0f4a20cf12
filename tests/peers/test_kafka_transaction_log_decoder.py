"""Kafka's ``kafka-dump-log.sh --transaction-log-decoder`` reads the ``__transaction_state`` records
seglog's transaction coordinator writes: the transactional id, producer id and epoch, timeout, state
and partitions of each change."""

from __future__ import annotations

import glob
import os

from broker_core import Broker
from tests.peers.dump_log_kit import kafka_dump_log


def test_kafka_transaction_log_decoder_reads_every_state_seglog_coordinator_wrote(tmp_path):
    logs = tmp_path / "logs"
    with Broker(str(logs), {"transaction.state.log.num.partitions": 1}) as broker:
        broker.create_topic("orders", 2)
        with broker.transaction("orders-writer", transaction_timeout_ms=30_000) as txn:
            txn.produce("orders", [b"one"], partition=0)
            txn.produce("orders", [b"two"], partition=1)
    files = glob.glob(os.path.join(logs, "__transaction_state-0", "*.log"))
    dumped, stderr = kafka_dump_log(files, "--transaction-log-decoder")
    lines = [line for f in files for line in dumped[f].lines if "orders-writer" in line]
    # Kafka prints the state's id: Empty 0, Ongoing 1 (once per partition added), PrepareCommit 2,
    # CompleteCommit 4.
    states = [int(line.split('"transactionStatus":')[1].split(",")[0]) for line in lines]
    assert states == [0, 1, 1, 2, 4], (lines, stderr)
    assert all('"producerId":0,"producerEpoch":0,"transactionTimeoutMs":30000' in line for line in lines), lines
    assert '"transactionPartitions":null' in lines[0], lines[0]
    assert '"transactionPartitions":[{"topic":"orders","partitionIds":[0]}]' in lines[1], lines[1]
    assert '"transactionPartitions":[{"topic":"orders","partitionIds":[0,1]}]' in lines[3], lines[3]
    assert '"transactionPartitions":[]' in lines[4], lines[4]
    assert "Exception" not in stderr, stderr
