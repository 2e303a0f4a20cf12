"""What TLS and SASL cost: produce and consume throughput over SASL_SSL against PLAINTEXT on the same broker,
for seglog and for Apache Kafka in the same run.

Each broker serves a PLAINTEXT and a SASL_SSL listener: TLS from a PEM
keystore made for the run (KIP-651's ``ssl.keystore.type=PEM``, an EC P-256
key signed by a CA of the run, which the clients trust), SCRAM-SHA-512 for
user ``bench``. seglog: one ``BrokerServer`` in a process of its own, the user
in its credential store. Apache Kafka 4.x from the fetched jars
(``jvm.apache_kafka.KafkaBroker``: one KRaft broker and controller, the heap
of ``kafka-server-start.sh``), the user formatted into its metadata
(``kafka-storage.sh format --add-scram``), ``sasl.enabled.mechanisms``
SCRAM-SHA-512 and ``ScramLoginModule`` on the SASL_SSL listener; otherwise
both keep their defaults. Both run throughout, pinned to ``--broker-cpu``;
the client to ``--cpu``.

The same confluent-kafka producer and consumer settings as ``broker_bench.py``
(acks=all, ``linger.ms`` 5, librdkafka's batch size; 100-byte values with
10-byte keys, 4 partitions) produce a fixed number of records to a new topic
and read them back, through one listener of one broker at a time; brokers and
listeners take turns going first, ``--runs`` times after one warm-up, and
each figure is the best run. The figure to compare across brokers and runs is
each broker's ratio SASL_SSL / PLAINTEXT. Beside each, the CPU time of the
broker process and of the client (this process: librdkafka's threads) over
the run's wall time: 100% of one core on either side is what limits it.

Run ``python bench/security_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import confluent_kafka

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Environment, Timing, argument_parser, date_and_command, environment, log,  # noqa: E402
                          pinning, print_environment, print_markdown_header, print_markdown_row, rate)
from broker_bench import (KAFKA, KAFKA_HEAP, SEGLOG, Workload, consume_all, cpu_seconds,  # noqa: E402
                          create_topic, delete_topic, kafka_version, make_pool, produce_all, rotated)
from testbed.processes import stop_process  # noqa: E402

USER, PASSWORD = "bench", "bench-secret"
MECHANISM = "SCRAM-SHA-512"
LISTENERS = ("PLAINTEXT", "SASL_SSL")
BROKERS = (SEGLOG, KAFKA)
ACTIONS = ("produce", "consume")
START_TIMEOUT_S = 60


# --- the brokers ------------------------------------------------------------------


def tls_props(keystore: str) -> dict[str, str]:
    """Both brokers' TLS settings, Kafka's names (KIP-651): the key and its chain in one PEM file."""
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore}


def serve(log_dir: str, ports_file: str, keystore: str) -> None:
    """The seglog broker process: SASL_SSL and PLAINTEXT listeners, user ``bench``; the bound ports go to
    ``ports_file``; SIGTERM stops it."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from broker_core.security.credential_store import InMemoryCredentialStore
    from broker_core.security.scram import ScramCredential, ScramMechanism
    from broker_core.server.broker_server import BrokerServer

    store = InMemoryCredentialStore()
    store.alter((), [(USER, m, ScramCredential.from_password(m, PASSWORD)) for m in ScramMechanism])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = BrokerServer({"log.dirs": log_dir, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                           **tls_props(keystore), "sasl.enabled.mechanisms": MECHANISM,
                           "group.initial.rebalance.delay.ms": 0},
                          credential_store=store).startup()
    try:
        with open(ports_file + ".tmp", "w") as f:
            json.dump({name: server.bound_port(name) for name in LISTENERS}, f)
        os.replace(ports_file + ".tmp", ports_file)
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()


@dataclass
class SecuredBroker:
    """A started broker as the benchmark drives it: where each listener's clients connect, the process whose CPU
    counts, and how to stop it."""

    name: str
    bootstraps: dict[str, str]
    pid: int
    stop: Callable[[], None]


def start_seglog(root: str, keystore: str, cpu: int | None) -> SecuredBroker:
    ports_file = os.path.join(root, "ports.json")
    command = [sys.executable, os.path.abspath(__file__), "--serve", os.path.join(root, "seglog-logs"), ports_file,
               keystore]
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    with open(os.path.join(root, "seglog.out"), "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(ports_file):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the seglog broker did not start; see {root}/seglog.out")
        time.sleep(0.1)
    with open(ports_file) as f:
        ports = json.load(f)

    return SecuredBroker(SEGLOG, {name: f"127.0.0.1:{port}" for name, port in ports.items()}, process.pid,
                         lambda: stop_process(process, timeout_s=60))


def start_kafka(root: str, keystore: str, cpu: int | None) -> SecuredBroker:
    from jvm.apache_kafka import KafkaBroker, ScramUser

    prefix = f"listener.name.sasl_ssl.{MECHANISM.lower()}."
    kafka = KafkaBroker(os.path.join(root, "apache-kafka"), heap=KAFKA_HEAP, cpu=cpu,
                        listeners={"SASL_SSL": "SASL_SSL"}, scram_users=[ScramUser(USER, PASSWORD, MECHANISM)],
                        overrides={**tls_props(keystore), "sasl.enabled.mechanisms": MECHANISM,
                                   f"{prefix}sasl.jaas.config":
                                       "org.apache.kafka.common.security.scram.ScramLoginModule required;"}).start()
    return SecuredBroker(KAFKA, {name: kafka.bootstrap_of(name) for name in LISTENERS}, kafka.process.pid, kafka.stop)


def client_settings(listener: str, truststore: str) -> dict[str, str]:
    if listener == "PLAINTEXT":
        return {}
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": truststore, "sasl.mechanism": MECHANISM,
            "sasl.username": USER, "sasl.password": PASSWORD}


def negotiated_tls(bootstrap: str, truststore: str) -> str:
    """The TLS version and cipher a Python ``ssl`` client with OpenSSL's defaults gets from ``bootstrap``."""
    host, port = bootstrap.rsplit(":", 1)
    context = ssl.create_default_context(cafile=truststore)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            return f"{tls.version()} {tls.cipher()[0]}"


# --- measuring ---------------------------------------------------------------------


@dataclass
class Runs:
    """The timed runs of one broker, listener and action: seconds, and the broker's and the client's CPU as a
    share of one core."""

    seconds: list[float] = field(default_factory=list)
    broker_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)


def with_cpu(pid: int, action: Callable[[], float]) -> tuple[float, float, float]:
    """The seconds ``action`` reports, and the shares of one core process ``pid`` and this process used
    meanwhile."""
    broker_before, client_before, start = cpu_seconds(pid), time.process_time(), time.perf_counter()
    seconds = action()
    wall = time.perf_counter() - start
    return seconds, (cpu_seconds(pid) - broker_before) / wall, (time.process_time() - client_before) / wall


def measure(brokers: dict[str, SecuredBroker], work: Workload, runs: int, truststore: str
            ) -> dict[tuple[str, str, str], Runs]:
    """(broker, listener, action) -> its timed runs; run 0 warms up."""
    found = {(b, listener, a): Runs() for b in BROKERS for listener in LISTENERS for a in ACTIONS}
    for run in range(runs + 1):
        for name in rotated(BROKERS, run):
            broker = brokers[name]
            for listener in rotated(LISTENERS, run):
                topic = f"bench-{listener.lower()}-{run}"
                admin_bootstrap = broker.bootstraps["PLAINTEXT"]
                bootstrap, settings = broker.bootstraps[listener], client_settings(listener, truststore)
                create_topic(admin_bootstrap, topic)
                measured = {
                    "produce": with_cpu(broker.pid, lambda: produce_all(bootstrap, topic, work, **settings)),
                    "consume": with_cpu(broker.pid, lambda: consume_all(bootstrap, topic, work, **settings))}
                delete_topic(admin_bootstrap, topic)
                log(f"{'warm-up' if run == 0 else f'run {run}'} {name} {listener}: " + ", ".join(
                    f"{a} {work.bytes / s / 1e6:.1f} MB/s (broker CPU {b:.0%}, client CPU {c:.0%})"
                    for a, (s, b, c) in measured.items()))
                if run:
                    for action, (seconds, broker_cpu, client_cpu) in measured.items():
                        r = found[name, listener, action]
                        r.seconds.append(seconds)
                        r.broker_cpu.append(broker_cpu)
                        r.client_cpu.append(client_cpu)
    return found


# --- reporting ---------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    """One broker's SASL_SSL and PLAINTEXT timings of one action, and the CPU shares (medians of the runs)."""

    secured: Timing
    plain: Timing
    broker_cpu: tuple[float, float]  # SASL_SSL, PLAINTEXT
    client_cpu: tuple[float, float]

    @property
    def ratio(self) -> float:
        return self.secured.best_mb_s / self.plain.best_mb_s


def figures(found: dict[tuple[str, str, str], Runs], work: Workload) -> dict[tuple[str, str], Figure]:
    """(action, broker) -> its figure."""
    out = {}
    for action in ACTIONS:
        for name in BROKERS:
            secured, plain = found[name, "SASL_SSL", action], found[name, "PLAINTEXT", action]
            out[action, name] = Figure(
                work.timing(secured.seconds), work.timing(plain.seconds),
                (statistics.median(secured.broker_cpu), statistics.median(plain.broker_cpu)),
                (statistics.median(secured.client_cpu), statistics.median(plain.client_cpu)))
    return out


def security_environment(pinned: str, broker_pin: str, tls: dict[str, str]) -> Environment:
    from jvm.apache_kafka import java

    java_version = subprocess.run([java(), "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    return environment([
        ("pinned", f"client: {pinned}; brokers: {broker_pin}"),
        ("seglog", "BrokerServer in a process of its own, default settings, log dir in a temporary directory"),
        ("Kafka", f"Apache Kafka {kafka_version()} (KRaft, broker and controller in one JVM), {KAFKA_HEAP}, "
                  f"{java_version}, default settings, log dir in a temporary directory"),
        ("security", f"SASL_SSL: {MECHANISM}, EC P-256 PEM keystore; "
                     + "; ".join(f"{name} negotiates {tls[name]}" for name in BROKERS) + " (Python ssl client)"),
        ("client", f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), "
                   f"settings of broker_bench.py"),
    ], with_memory=False)


def cpu_pair(shares: tuple[float, float]) -> str:
    return f"{shares[0]:.0%} / {shares[1]:.0%}"


def print_table(env: Environment, found: dict[tuple[str, str], Figure], runs: int) -> None:
    print_environment(env)
    print(f"\nMB/s (10^6 bytes of keys and values a second), best of {runs} runs; ratio = SASL_SSL / PLAINTEXT; "
          f"CPU = share of one core, SASL_SSL / PLAINTEXT, median of the runs")
    for (action, name), f in found.items():
        print(f"{action:>8} {name:<7}: SASL_SSL {f.secured.best_mb_s:6.1f} MB/s ({rate(f.secured.best_rate)} rec/s), "
              f"PLAINTEXT {f.plain.best_mb_s:6.1f} MB/s ({rate(f.plain.best_rate)} rec/s), ratio {f.ratio:.2f}; "
              f"broker CPU {cpu_pair(f.broker_cpu)}, client CPU {cpu_pair(f.client_cpu)}")


def print_markdown(env: Environment, found: dict[tuple[str, str], Figure], runs: int, count: int) -> None:
    date, command = date_and_command(env)
    header = ["figure"]
    for name in BROKERS:
        header += [f"{name} SASL_SSL", f"{name} PLAINTEXT", f"{name} ratio"]
    print_markdown_header((*header, "command", "date"))
    for action in ACTIONS:
        cells = [c for name in BROKERS for f in (found[action, name],)
                 for c in (f"{f.secured.best_mb_s:.1f} MB/s", f"{f.plain.best_mb_s:.1f} MB/s", f"{f.ratio:.2f}")]
        print_markdown_row((f"{action}, 100 B values, {count:,} records, best of {runs}", *cells, f"`{command}`",
                            date))
    header = ["CPU, share of one core, SASL_SSL / PLAINTEXT"]
    for name in BROKERS:
        header += [f"{name} broker", f"client against {name}"]
    print_markdown_header(header)
    for action in ACTIONS:
        print_markdown_row((action, *(c for name in BROKERS for f in (found[action, name],)
                                      for c in (cpu_pair(f.broker_cpu), cpu_pair(f.client_cpu)))))


def main() -> int:
    parser = argument_parser(__doc__, "a smoke run: few records, one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--broker-cpu", type=int, default=1, help="the core the brokers are pinned to (default 1)")
    parser.add_argument("--serve", nargs=3, metavar=("LOG_DIR", "PORTS_FILE", "KEYSTORE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return 0
    if args.pin and args.broker_cpu == args.cpu:
        raise SystemExit(f"--broker-cpu {args.broker_cpu} is the client's core too; pick another")
    runs, count = (1, 20_000) if args.quick else (args.runs, args.records)
    pinned = pinning(args.pin, args.cpu)
    broker_cpu = args.broker_cpu if args.pin else None
    work = Workload("100 B values", 100, make_pool(100), count)
    with tempfile.TemporaryDirectory(prefix="security-bench-") as root:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from tests.broker_core.security.tls_kit import TestCa

        stores = TestCa(os.path.join(root, "ca")).server()
        keystore, truststore = str(stores.keystore), str(stores.truststore)
        brokers: dict[str, SecuredBroker] = {}
        try:
            for name, start in ((SEGLOG, start_seglog), (KAFKA, start_kafka)):
                log(f"starting {name}")
                brokers[name] = start(root, keystore, broker_cpu)
            tls = {name: negotiated_tls(b.bootstraps["SASL_SSL"], truststore) for name, b in brokers.items()}
            env = security_environment(pinned, f"core {broker_cpu}, both" if args.pin else "no", tls)
            found = figures(measure(brokers, work, runs, truststore), work)
        finally:
            for broker in brokers.values():
                broker.stop()
    print_table(env, found, runs)
    if args.markdown:
        print_markdown(env, found, runs, count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
