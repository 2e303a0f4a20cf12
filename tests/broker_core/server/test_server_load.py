"""Fifty clients at once against a ``seglog broker`` process: a bounded load, with nothing lost.

25 producers and 25 consumers — each a client of its own with its own
connection, most of them confluent-kafka, a fifth kafka-python — run for
``SEGLOG_LOAD_SECONDS`` (default 60) against a broker started as a process,
as a user starts it. Producers, idempotent as Kafka's clients are by default,
send at a fixed pace to every partition of one topic (acks=all) and keep what
each acknowledgement says: partition and offset. A retried request is therefore
written once, and each record read must have been acknowledged at its offset.
Consumers, one per partition, read from offset 0 while the producers run.
When time is up the producers flush, the consumers read up to the last
acknowledged offset, and every acknowledged record must have been read at its
offset with the value that was sent; no client may have seen an error, the
broker must have held at least 50 connections at once, and it must shut down
cleanly, having logged no error.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey
from testbed.processes import stop_process

LOAD_SECONDS = float(os.environ.get("SEGLOG_LOAD_SECONDS", "60"))
TOPIC = "load"
PARTITIONS = 25
CONFLUENT_PRODUCERS = 20
KAFKA_PYTHON_PRODUCERS = 5
KAFKA_PYTHON_CONSUMERS = 5  # the other PARTITIONS - 5 consumers are confluent-kafka
# Records a second, per producer: 25 x 30 = 750 records/s, 75 kB/s of values. Sent one or two to a
# request, to consumers that each fetch as soon as a record arrives, that is well below what the broker
# keeps up with on two slow cores (about 1,000 to 1,500 a second), so acknowledgements do not fall behind.
RECORDS_PER_SECOND = 30
VALUE_SIZE = 100
MIN_CONNECTIONS = 50
# After the load: how long producers may take to flush and consumers to catch up.
DRAIN_S = 60
STARTED = re.compile(r"started \(cluster \S+\) on PLAINTEXT://127\.0\.0\.1:(\d+)")

# serial: fifty clients at a fixed pace load the machine; other tests beside them would slow both.
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.timeout(int(LOAD_SECONDS) + 300)]


def record_value(producer_id: int, seq: int) -> bytes:
    return struct.pack(">II", producer_id, seq) + bytes(VALUE_SIZE - 8)


def record_id(value: bytes) -> int:
    """The (producer id, sequence number) a value carries, as one int."""
    producer_id, seq = struct.unpack_from(">II", value)
    return producer_id << 32 | seq


@dataclass
class Tally:
    """What the clients saw, gathered from their threads (list appends are atomic)."""

    problems: list[str] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)  # per producer
    acked: list[tuple[int, int, int]] = field(default_factory=list)  # (partition, offset, record id)
    # partition -> record ids by offset
    consumed: dict[int, list[int]] = field(default_factory=lambda: {p: [] for p in range(PARTITIONS)})


# --- the broker process -------------------------------------------------------------


def start_broker_process(log_dir, log_file) -> tuple[subprocess.Popen, int]:
    """``seglog broker`` on an ephemeral loopback port; its log goes to ``log_file``."""
    out = open(log_file, "w")
    proc = subprocess.Popen([sys.executable, "-m", "broker_core.cli", "broker", "--log-dir", str(log_dir),
                             "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-level", "WARNING"],
                            stdout=out, stderr=subprocess.STDOUT, text=True)
    out.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        match = STARTED.search(open(log_file).read())
        if match:
            return proc, int(match[1])
        time.sleep(0.05)
    proc.kill()
    proc.wait(10)
    raise AssertionError(f"the broker did not start (exit {proc.returncode}): {open(log_file).read()}")


def established_connections(port: int) -> int:
    """Connections the broker's side of ``port`` holds, from the kernel's table (ESTABLISHED is 01)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                        count += 1
        except FileNotFoundError:
            pass
    return count


# --- producers ------------------------------------------------------------------------


def paced(stop: threading.Event, rate: float):
    """Yields 0, 1, 2, ... at ``rate`` per second until ``stop`` is set."""
    interval = 1 / rate
    next_at = time.monotonic()
    seq = 0
    while not stop.is_set():
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(min(delay, 0.05))
            continue
        yield seq
        seq += 1
        next_at += interval


def confluent_producer(bootstrap: str, producer_id: int, stop: threading.Event, tally: Tally) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True,
                         "client.id": f"load-producer-{producer_id}",
                         "error_cb": lambda e: tally.problems.append(f"producer {producer_id}: {e}")})

    def on_delivery(err, msg) -> None:
        if err is not None:
            tally.problems.append(f"producer {producer_id}: delivery failed: {err}")
        else:
            tally.acked.append((msg.partition(), msg.offset(), record_id(msg.value())))

    sent = 0
    try:
        for seq in paced(stop, RECORDS_PER_SECOND):
            producer.produce(TOPIC, record_value(producer_id, seq), partition=(producer_id + seq) % PARTITIONS,
                             on_delivery=on_delivery)
            sent += 1
            producer.poll(0)
        left = producer.flush(DRAIN_S)
        if left:
            tally.problems.append(f"producer {producer_id}: {left} records unacknowledged after {DRAIN_S} s")
    finally:
        tally.sent.append(sent)
        producer.close()


def kafka_python_producer(bootstrap: str, producer_id: int, stop: threading.Event, tally: Tally) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=30_000,
                             client_id=f"load-producer-{producer_id}")

    def on_error(exc: BaseException) -> None:
        tally.problems.append(f"producer {producer_id}: {exc!r}")

    sent = 0
    try:
        for seq in paced(stop, RECORDS_PER_SECOND):
            value = record_value(producer_id, seq)
            future = producer.send(TOPIC, value=value, partition=(producer_id + seq) % PARTITIONS)
            rid = record_id(value)
            future.add_callback(lambda md, rid=rid: tally.acked.append((md.partition, md.offset, rid)))
            future.add_errback(on_error)
            sent += 1
        producer.flush(timeout=DRAIN_S)
    except Exception as exc:
        tally.problems.append(f"producer {producer_id}: {exc!r}")
    finally:
        tally.sent.append(sent)
        producer.close(timeout=DRAIN_S)


# --- consumers --------------------------------------------------------------------------


def consume(partition: int, got: list[int], tally: Tally, value: bytes, offset: int) -> None:
    if offset != len(got):
        tally.problems.append(f"partition {partition}: read offset {offset}, expected {len(got)}")
        return
    got.append(record_id(value))


def confluent_consumer(bootstrap: str, partition: int, done: threading.Event, tally: Tally) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "load", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "enable.partition.eof": False,
                         "client.id": f"load-consumer-{partition}",
                         "error_cb": lambda e: tally.problems.append(f"consumer {partition}: {e}")})
    got = tally.consumed[partition]
    try:
        consumer.assign([ConfluentTopicPartition(TOPIC, partition, 0)])
        while not done.is_set():
            for msg in consumer.consume(500, 0.1):
                if msg.error() is not None:
                    tally.problems.append(f"consumer {partition}: {msg.error()}")
                else:
                    consume(partition, got, tally, msg.value(), msg.offset())
    finally:
        consumer.close()


def kafka_python_consumer(bootstrap: str, partition: int, done: threading.Event, tally: Tally) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_wait_ms=100, request_timeout_ms=30_000,
                             client_id=f"load-consumer-{partition}")
    got = tally.consumed[partition]
    tp = TopicPartition(TOPIC, partition)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        while not done.is_set():
            for record in consumer.poll(timeout_ms=100).get(tp, []):
                consume(partition, got, tally, record.value, record.offset)
    except Exception as exc:
        tally.problems.append(f"consumer {partition}: {exc!r}")
    finally:
        consumer.close()


# --- the test -----------------------------------------------------------------------------


def test_fifty_clients_produce_and_consume_without_errors_and_every_acknowledged_record_is_read(tmp_path):
    broker, port = start_broker_process(tmp_path / "logs", tmp_path / "broker.log")
    bootstrap = f"127.0.0.1:{port}"
    stop_producing, stop_consuming = threading.Event(), threading.Event()
    tally = Tally()
    threads: list[threading.Thread] = []
    try:
        with ProtocolClient(bootstrap, timeout_s=30) as client:
            created = client.send(ApiKey.CREATE_TOPICS, {"topics": [{
                "name": TOPIC, "num_partitions": PARTITIONS, "replication_factor": 1, "assignments": [],
                "configs": []}], "timeout_ms": 5000})
        assert created["topics"][0]["error_code"] == 0
        for partition in range(PARTITIONS):
            run = kafka_python_consumer if partition < KAFKA_PYTHON_CONSUMERS else confluent_consumer
            threads.append(threading.Thread(target=run, args=(bootstrap, partition, stop_consuming, tally),
                                            name=f"consumer-{partition}", daemon=True))
        producers = []
        for producer_id in range(CONFLUENT_PRODUCERS + KAFKA_PYTHON_PRODUCERS):
            run = kafka_python_producer if producer_id < KAFKA_PYTHON_PRODUCERS else confluent_producer
            producers.append(threading.Thread(target=run, args=(bootstrap, producer_id, stop_producing, tally),
                                              name=f"producer-{producer_id}", daemon=True))
        threads += producers
        started = time.monotonic()
        for thread in threads:
            thread.start()

        most_connections = 0
        while time.monotonic() - started < LOAD_SECONDS:
            most_connections = max(most_connections, established_connections(port))
            assert broker.poll() is None, "the broker exited under load"
            time.sleep(0.5)
        stop_producing.set()
        for thread in producers:
            thread.join(DRAIN_S + 10)
        load_s = time.monotonic() - started
        flush_s = load_s - LOAD_SECONDS

        # Read up to the last acknowledged offset of every partition.
        end_offsets = [0] * PARTITIONS
        for partition, offset, _ in tally.acked:
            end_offsets[partition] = max(end_offsets[partition], offset + 1)
        deadline = time.monotonic() + DRAIN_S
        while (any(len(tally.consumed[p]) < end_offsets[p] for p in range(PARTITIONS))
               and time.monotonic() < deadline and not tally.problems):
            time.sleep(0.1)
    finally:
        stop_producing.set()
        stop_consuming.set()
        for thread in threads:
            thread.join(DRAIN_S)
        stop_process(broker, timeout_s=60)

    broker_log = (tmp_path / "broker.log").read_text()
    sent = sum(tally.sent)
    print(f"\nload: {LOAD_SECONDS:.0f} s, {sent:,} records sent ({sent / LOAD_SECONDS:,.0f}/s), "
          f"the last acknowledged {flush_s:.1f} s after the load, "
          f"{len(tally.acked):,} acknowledged, {sum(len(c) for c in tally.consumed.values()):,} read; "
          f"at most {most_connections} connections at once")
    assert not tally.problems, tally.problems[:20]
    assert not any(t.is_alive() for t in threads), "a client thread did not finish"
    assert len(tally.sent) == CONFLUENT_PRODUCERS + KAFKA_PYTHON_PRODUCERS
    assert most_connections >= MIN_CONNECTIONS
    assert len(tally.acked) == sent, f"{sent - len(tally.acked)} records were never acknowledged"
    # The load was really applied (on a machine busy with other work the pace may slip).
    assert sent >= 0.5 * LOAD_SECONDS * RECORDS_PER_SECOND * len(tally.sent), "the producers fell far behind pace"
    mismatched = [(p, o) for p, o, rid in tally.acked
                  if o >= len(tally.consumed[p]) or tally.consumed[p][o] != rid]
    assert not mismatched, f"{len(mismatched)} acknowledged records not read as sent, e.g. {mismatched[:10]}"
    # Nothing but acknowledged records was read, and offsets have no gaps: each is acknowledged once.
    acked_at = {(p, o) for p, o, _ in tally.acked}
    assert len(acked_at) == len(tally.acked), "an offset was acknowledged twice"
    unacked = [(p, o, divmod(tally.consumed[p][o], 1 << 32)) for p in range(PARTITIONS)
               for o in range(len(tally.consumed[p])) if (p, o) not in acked_at]
    assert not unacked, (f"{len(unacked)} records read were never acknowledged at their offset, e.g. "
                         f"(partition, offset, (producer, sequence)) {unacked[:10]}")
    assert broker.returncode == 0, broker_log[-2000:]
    assert "ERROR" not in broker_log and "Traceback" not in broker_log, broker_log[-2000:]
