"""Zero-copy fetch answers every client in the suite byte for byte as the copying path does.

Each client consumes a topic through a recording proxy; its Fetch requests (made full fetches outside any
session, answering at once) are then replayed against the same log on a broker with ``fetch.zero.copy.enable``
on — the broker that appended the records (slices of known-good bytes), and a broker that loaded the log from
disk, twice (its first serve reads and checks the bytes, the second sends them from the files) — and on one
with it off, and the responses compared byte for byte.
"""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey
from format.record import SimpleRecord
from format.record_batch import build_batch
from recording_proxy_kit import RecordingProxy, replay, without_session
from server_kit import create_topic, produce, start_broker
from testbed.kcat import kcat_command

TOPIC = "zero-copy"
PARTITIONS = 2
BATCHES = 20
PER_BATCH = 20
RECORDS = PARTITIONS * BATCHES * PER_BATCH
# Several segments per partition, each well above what a fetch sends from the file.
SETTINGS = {"log.segment.bytes": 150_000, "group.initial.rebalance.delay.ms": 0}


def _value(partition: int, n: int) -> bytes:
    return f"p{partition}-{n:05d}-".encode() + b"x" * 1000


def _fill(port: int) -> None:
    with ProtocolClient(f"127.0.0.1:{port}") as client:
        create_topic(client, TOPIC, PARTITIONS)
        for p in range(PARTITIONS):
            for b in range(BATCHES):
                records = [SimpleRecord(_value(p, b * PER_BATCH + i), f"k{i}".encode()) for i in range(PER_BATCH)]
                assert produce(client, TOPIC, p, build_batch(records))["error_code"] == 0


def _replayed(log_dir, frames: list[bytes], zero_copy: bool, times: int = 1) -> tuple[list[list[bytes]], int]:
    server = start_broker(log_dir, **SETTINGS, **{"fetch.zero.copy.enable": zero_copy})
    try:
        answers = [replay(server.bound_port(), frames) for _ in range(times)]
        return answers, server.socket_server.bytes_sent_from_files
    finally:
        server.shutdown()


def assert_zero_copy_answers_as_the_copying_path(tmp_path, consume, fill=_fill, records: int = RECORDS) -> None:
    log_dir = tmp_path / "logs"
    proxy = RecordingProxy()
    server = start_broker(log_dir, **SETTINGS, **{"advertised.listeners": f"PLAINTEXT://{proxy.bootstrap}"})
    try:
        proxy.start(server.bound_port())
        fill(server.bound_port())
        assert consume(proxy.bootstrap) == records
        frames = [without_session(f) for f in proxy.frames(ApiKey.FETCH)]
        assert frames
        appended = replay(server.bound_port(), frames)
        assert server.socket_server.bytes_sent_from_files > 0  # the appended bytes went out from the files
    finally:
        proxy.stop()
        server.shutdown()
    (copied,), from_files = _replayed(log_dir, frames, zero_copy=False)
    assert from_files == 0
    (loaded_first, loaded_again), from_files = _replayed(log_dir, frames, zero_copy=True, times=2)
    assert from_files > 0
    assert sum(map(len, copied)) > records * 1000  # the records are in the answers
    for n, expected in enumerate(copied):
        assert appended[n] == expected, f"fetch {n}: the appending broker's zero-copy answer differs"
        assert loaded_first[n] == expected, f"fetch {n}: the first serve of a loaded log differs"
        assert loaded_again[n] == expected, f"fetch {n}: the zero-copy answer of a loaded log differs"


def test_kafka_python_gets_the_same_bytes_with_and_without_zero_copy(tmp_path):
    from kafka import KafkaConsumer, TopicPartition

    def consume(bootstrap: str) -> int:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        try:
            count = 0
            for _ in consumer:
                count += 1
                if count == RECORDS:
                    break
            return count
        finally:
            consumer.close()

    assert_zero_copy_answers_as_the_copying_path(tmp_path, consume)


def confluent_consume(bootstrap: str, records: int, **settings) -> int:
    """Records a confluent-kafka consumer assigned every partition from the beginning reads, up to ``records``."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "zero-copy", "enable.auto.commit": False,
                         **settings})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    try:
        count = 0
        for _ in range(200):
            for message in consumer.consume(1000, timeout=0.5):
                assert message.error() is None, message.error()
                count += 1
            if count >= records:
                break
        return count
    finally:
        consumer.close()


def test_confluent_kafka_gets_the_same_bytes_with_and_without_zero_copy(tmp_path):
    def consume(bootstrap: str) -> int:
        return confluent_consume(bootstrap, RECORDS)

    assert_zero_copy_answers_as_the_copying_path(tmp_path, consume)


def test_aiokafka_gets_the_same_bytes_with_and_without_zero_copy(tmp_path):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition

    async def consume_async(bootstrap: str) -> int:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            count = 0
            for _ in range(100):
                batches = await consumer.getmany(timeout_ms=500)
                count += sum(len(messages) for messages in batches.values())
                if count >= RECORDS:
                    break
            return count
        finally:
            await consumer.stop()

    assert_zero_copy_answers_as_the_copying_path(tmp_path, lambda bootstrap: asyncio.run(consume_async(bootstrap)))


def test_the_java_console_consumer_gets_the_same_bytes_with_and_without_zero_copy(tmp_path):
    from jvm.apache_kafka import run_tool

    def consume(bootstrap: str) -> int:
        done = run_tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--topic", TOPIC,
                        "--from-beginning", "--max-messages", str(RECORDS), "--timeout-ms", "30000",
                        "--consumer-property", "enable.auto.commit=false", timeout=120)
        return sum(1 for line in done.stdout.splitlines() if line.startswith("p"))

    assert_zero_copy_answers_as_the_copying_path(tmp_path, consume)


KCAT = kcat_command()


@pytest.mark.skipif(KCAT is None, reason="kcat is not in .tools/kcat (make test fetches it with apt-get download; "
                                         "see testbed/kcat.py)")
def test_kcat_gets_the_same_bytes_with_and_without_zero_copy(tmp_path):
    def consume(bootstrap: str) -> int:
        command, env = KCAT
        done = subprocess.run([*command, "-b", bootstrap, "-C", "-t", TOPIC, "-o", "beginning", "-e", "-q"],
                              capture_output=True, text=True, env={**os.environ, **env}, timeout=120)
        return sum(1 for line in done.stdout.splitlines() if line.startswith("p"))

    assert_zero_copy_answers_as_the_copying_path(tmp_path, consume)


def test_a_read_committed_consumer_gets_the_same_bytes_and_aborted_transactions_with_and_without_zero_copy(tmp_path):
    from confluent_kafka import Producer

    committed = 2 * BATCHES * PER_BATCH

    def fill(port: int) -> None:
        with ProtocolClient(f"127.0.0.1:{port}") as client:
            create_topic(client, TOPIC, PARTITIONS)
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "transactional.id": "zero-copy",
                             "linger.ms": 5})
        producer.init_transactions(30)
        for n, outcome in enumerate(("commit", "abort", "commit")):
            producer.begin_transaction()
            for i in range(BATCHES * PER_BATCH):
                producer.produce(TOPIC, _value(i % PARTITIONS, n * 10_000 + i), partition=i % PARTITIONS)
            producer.flush(30)
            if outcome == "commit":
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)

    def consume(bootstrap: str) -> int:
        return confluent_consume(bootstrap, committed, **{"isolation.level": "read_committed"})

    assert_zero_copy_answers_as_the_copying_path(tmp_path, consume, fill, committed)
