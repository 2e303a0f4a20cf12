"""Kafka's Java consumer (through its console consumer) on ``seglog broker`` while a transaction holds
group offsets: it asks OffsetFetch with ``require_stable``, is answered UNSTABLE_OFFSET_COMMIT and
asks again, so it starts where the transaction committed, once it has."""

from __future__ import annotations

import subprocess
import time

from broker_core.client.remote_broker import RemoteBroker
from format.layout import TopicPartition
from jvm.apache_kafka import TOOLS, java_command

TIMEOUT_S = 60


def test_the_java_consumer_joining_while_offsets_are_pending_starts_where_the_transaction_committed(broker_server):
    broker = broker_server.broker
    bootstrap = broker_server.bootstrap_servers
    broker.create_topic("in", 1)
    broker.produce("in", [b"%d" % i for i in range(10)], partition=0)  # each value is its offset
    tp = TopicPartition("in", 0)
    with RemoteBroker(bootstrap) as remote:
        remote.commit_offsets("stable", {tp: 2})
        producer = broker.producer("stable-0")
        producer.begin_transaction()
        producer.send_offsets_to_transaction("stable", {tp: 5})
        consumer = subprocess.Popen(java_command(TOOLS["kafka-console-consumer.sh"], [
            "--bootstrap-server", bootstrap, "--topic", "in", "--group", "stable",
            "--isolation-level", "read_committed", "--max-messages", "1", "--timeout-ms", str(TIMEOUT_S * 1000)]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + TIMEOUT_S
            while (remote.describe_group("stable").state != "Stable" and consumer.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.2)
            time.sleep(3)  # time to read the offset before the transaction (2), were it answered
            assert consumer.poll() is None, f"it did not wait for the transaction: {consumer.communicate()}"
            producer.commit_transaction()
            out, err = consumer.communicate(timeout=TIMEOUT_S)
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.wait()
    assert consumer.returncode == 0, err
    assert [line for line in out.splitlines() if line.strip()] == ["5"]
