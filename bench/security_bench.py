"""What TLS and SASL cost: produce and consume throughput over SASL_SSL against PLAINTEXT, on the same broker.

One ``seglog broker`` (a process of its own, pinned to ``--broker-cpu``)
serves a PLAINTEXT and a SASL_SSL listener (TLS from a PEM keystore made for
the run, SCRAM-SHA-512 for user ``bench``). The same confluent-kafka producer
and consumer settings as ``broker_bench.py`` (acks=all, ``linger.ms`` 5,
librdkafka's batch size; 100-byte values with 10-byte keys, 4 partitions)
produce a fixed number of records and read them back through each listener;
the listeners take turns going first, ``--runs`` times after one warm-up,
and each figure is the best run. The ratio SASL_SSL / PLAINTEXT is the
figure to compare across runs.

Apache Kafka is not measured here: its SASL_SSL needs SCRAM users formatted
into KRaft's metadata, which ``jvm.apache_kafka.KafkaBroker`` does not do yet.

Run ``python bench/security_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (argument_parser, date_and_command, environment, log, pinning,  # noqa: E402
                          print_environment, print_markdown_header, print_markdown_row, rate)
from broker_bench import Workload, consume_all, create_topic, delete_topic, make_pool, produce_all  # noqa: E402

USER, PASSWORD = "bench", "bench-secret"
LISTENERS = ("PLAINTEXT", "SASL_SSL")
START_TIMEOUT_S = 60


def serve(log_dir: str, ports_file: str, stores_dir: str) -> None:
    """The broker process: SASL_SSL and PLAINTEXT listeners, user ``bench``; the bound ports go to
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
                           "ssl.keystore.type": "PEM", "ssl.keystore.location": f"{stores_dir}/broker.keystore.pem",
                           "sasl.enabled.mechanisms": "SCRAM-SHA-512", "group.initial.rebalance.delay.ms": 0},
                          credential_store=store).startup()
    try:
        with open(ports_file + ".tmp", "w") as f:
            json.dump({name: server.bound_port(name) for name in LISTENERS}, f)
        os.replace(ports_file + ".tmp", ports_file)
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()


def start_broker(root: str, stores_dir: str, cpu: int | None) -> tuple[subprocess.Popen, dict[str, int]]:
    ports_file = os.path.join(root, "ports.json")
    command = [sys.executable, os.path.abspath(__file__), "--serve", os.path.join(root, "logs"), ports_file,
               stores_dir]
    if cpu is not None:
        command = ["taskset", "-c", str(cpu), *command]
    out = open(os.path.join(root, "broker.out"), "wb")
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(ports_file):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"the broker did not start; see {root}/broker.out")
        time.sleep(0.1)
    with open(ports_file) as f:
        return process, json.load(f)


def client_settings(listener: str, truststore: str) -> dict[str, str]:
    if listener == "PLAINTEXT":
        return {}
    return {"security.protocol": "SASL_SSL", "ssl.ca.location": truststore, "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER, "sasl.password": PASSWORD}


def main() -> int:
    parser = argument_parser(__doc__, "a smoke run: few records, one run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--broker-cpu", type=int, default=1, help="the core the broker is pinned to (default 1)")
    parser.add_argument("--serve", nargs=3, metavar=("LOG_DIR", "PORTS_FILE", "STORES_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return 0
    runs, count = (1, 20_000) if args.quick else (args.runs, args.records)
    env = environment([("pinning", pinning(args.pin, args.cpu))], with_memory=False)
    if args.pin:
        os.sched_setaffinity(0, {args.cpu})
    work = Workload("100 B values", 100, make_pool(100), count)
    with tempfile.TemporaryDirectory(prefix="security-bench-") as root:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from tests.broker_core.security.tls_kit import TestCa

        stores = TestCa(os.path.join(root, "ca")).server()
        process, ports = start_broker(root, os.path.join(root, "ca"), args.broker_cpu if args.pin else None)
        try:
            bootstraps = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
            seconds: dict[tuple[str, str], list[float]] = {}
            for run in range(runs + 1):  # run 0 warms up
                order = LISTENERS if run % 2 == 0 else tuple(reversed(LISTENERS))
                for listener in order:
                    topic = f"bench-{listener.lower()}-{run}"
                    create_topic(bootstraps["PLAINTEXT"], topic)
                    settings = client_settings(listener, str(stores.truststore))
                    produced = produce_all(bootstraps[listener], topic, work, **settings)
                    consumed = consume_all(bootstraps[listener], topic, work, **settings)
                    delete_topic(bootstraps["PLAINTEXT"], topic)
                    log(f"run {run} {listener}: produce {produced:.2f} s, consume {consumed:.2f} s")
                    if run:
                        seconds.setdefault((listener, "produce"), []).append(produced)
                        seconds.setdefault((listener, "consume"), []).append(consumed)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    print_environment(env)
    print()
    rows = []
    for action in ("produce", "consume"):
        plain = work.timing(seconds[("PLAINTEXT", action)])
        secured = work.timing(seconds[("SASL_SSL", action)])
        rows.append((action, secured, plain))
        print(f"{action:>8}: SASL_SSL {secured.best_mb_s:.1f} MB/s ({rate(secured.best_rate)} rec/s), "
              f"PLAINTEXT {plain.best_mb_s:.1f} MB/s ({rate(plain.best_rate)} rec/s), "
              f"ratio {secured.best_mb_s / plain.best_mb_s:.2f}")
    if args.markdown:
        date, command = date_and_command(env)
        print_markdown_header(["figure", "SASL_SSL", "PLAINTEXT", "ratio", "command", "date"])
        for action, secured, plain in rows:
            print_markdown_row([f"{action}, 100 B values, {count:,} records", f"{secured.best_mb_s:.1f} MB/s",
                                f"{plain.best_mb_s:.1f} MB/s", f"{secured.best_mb_s / plain.best_mb_s:.2f}",
                                f"`{command}`", date])
    return 0


if __name__ == "__main__":
    sys.exit(main())
