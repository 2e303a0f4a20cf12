"""Benchmarks of exactly-once producing against ``seglog broker``, beside Apache Kafka in the same run.

Figures, each measured against both brokers with the same client, settings
and records (100-byte values with 10-byte keys, a new topic of 4 partitions
per figure and run; absolute rates drift on shared machines, ratios hold
better):

* produce, not idempotent: one confluent-kafka producer with the settings of
  ``broker_bench.py`` (acks=all, ``linger.ms`` 5, no compression) and
  ``enable.idempotence`` false sends the records as fast as it can; the
  clock stops when the last delivery report is in;
* produce, idempotent: the same with ``enable.idempotence`` true (a producer
  id, sequence numbers checked and kept by the broker, at most five requests
  in flight per connection);
* produce, transactions of 1,000 and of 100 records: a transactional
  producer (``transactional.id``, ``init_transactions`` before the clock
  starts) writes the records in transactions of that many records, each
  ``begin_transaction``, the records, ``commit_transaction`` (which waits for
  every record's acknowledgement and the coordinator's answer to EndTxn);
  the clock stops when the last commit returns;
* consume, read_uncommitted, of what the non-idempotent producer wrote, and
  consume, read_committed, of what the transactions of 1,000 records wrote
  (a COMMIT marker after every 1,000 records in each partition the
  transaction touched): one consumer assigned every partition from offset 0
  (settings of ``broker_bench.py``), the clock stops at the last record.

Beside each figure, the broker's CPU time over the run as a share of one
core, and its ratio to the same broker's non-idempotent (or read_uncommitted)
figure: what exactly-once costs on that broker.

The brokers are started as in ``broker_bench.py`` (``seglog broker`` with its
defaults; Apache Kafka 4.x from the fetched jars, KRaft, one broker and
controller, Kafka's defaults, so ``transaction.state.log`` topics of 50
partitions on both), each pinned to ``--broker-cpu`` and the client to
``--cpu``.

Run ``python bench/transaction_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Sequence

from confluent_kafka import Producer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (Environment, Target, Timing, argument_parser, date_and_command, log,  # noqa: E402
                          pinning, print_environment, print_header, print_markdown_header, print_markdown_row,
                          print_markdown_targets, print_targets, rate, ratio_text, scratch_directory)
from broker_bench import (CLIENT_TIMEOUT_S, KAFKA, SEGLOG, RunningBroker, Workload, broker_environment,  # noqa: E402
                          consume_all, cpu, create_topic, delete_topic, make_pool, produce_all, producer, rotated,
                          start_apache_kafka, start_broker, stop_broker, with_broker_cpu)

BROKERS = (SEGLOG, KAFKA)
PLAIN = "produce, not idempotent"
IDEMPOTENT = "produce, idempotent"
CONSUME_PLAIN = "consume, read_uncommitted"
# Records per transaction of the transactional figures.
TRANSACTION_SIZES = (1_000, 100)
# The idempotent figure must reach this share of the non-idempotent one on seglog.
IDEMPOTENCE_TARGET = 0.9
# Where each non-transactional producer sends one record before its clock starts (its producer id, metadata).
WARM_UP_TOPIC = "bench-txn-warm-up"


def transactions_figure(size: int) -> str:
    return f"produce, transactions of {size:,} records"


def consume_committed_figure(size: int) -> str:
    return f"consume, read_committed, transactions of {size:,} records"


# --- measuring ---------------------------------------------------------------------------


def produce_in_transactions(bootstrap: str, topic: str, work: Workload, size: int) -> float:
    """Seconds to produce ``work`` in transactions of ``size`` records, each committed before the next begins."""
    p: Producer = producer(bootstrap, **{"transactional.id": f"bench-{uuid.uuid4().hex}"})
    p.init_transactions(CLIENT_TIMEOUT_S)
    pool, n = work.pool, len(work.pool)
    produce, poll = p.produce, p.poll
    start = time.perf_counter()
    for first in range(0, work.count, size):
        p.begin_transaction()
        for i in range(first, min(first + size, work.count)):
            key, value = pool[i % n]
            while True:
                try:
                    produce(topic, value, key)
                    break
                except BufferError:  # the client's queue is full: let it drain
                    poll(0.005)
        p.commit_transaction(CLIENT_TIMEOUT_S)  # raises if any record of the transaction failed
    return time.perf_counter() - start


@dataclass(frozen=True)
class Figure:
    """One figure: its name, how many records it moves, the figure it is set against on the same broker, and
    how to run it on a broker whose bootstrap and topic are given (seconds)."""

    name: str
    work: Workload
    baseline: str | None
    run: Callable[[str, str], float]


def figures(work: Workload, transactional_count: dict[int, int]) -> list[list[Figure]]:
    """The figures, grouped by the topic they share: a group's first figure writes it, the rest read it."""
    def written(size: int) -> Workload:
        return Workload(work.name, work.value_size, work.pool, transactional_count[size])

    groups = [
        [Figure(PLAIN, work, None,
                lambda b, t: produce_all(b, t, work, WARM_UP_TOPIC, **{"enable.idempotence": False})),
         Figure(CONSUME_PLAIN, work, None, lambda b, t: consume_all(b, t, work))],
        [Figure(IDEMPOTENT, work, PLAIN,
                lambda b, t: produce_all(b, t, work, WARM_UP_TOPIC, **{"enable.idempotence": True}))],
    ]
    for size in TRANSACTION_SIZES:
        w = written(size)
        group = [Figure(transactions_figure(size), w, PLAIN,
                        lambda b, t, w=w, size=size: produce_in_transactions(b, t, w, size))]
        if size == max(TRANSACTION_SIZES):
            group.append(Figure(consume_committed_figure(size), w, CONSUME_PLAIN,
                                lambda b, t, w=w: consume_all(b, t, w, **{"isolation.level": "read_committed"})))
        groups.append(group)
    return groups


@dataclass(frozen=True)
class Row:
    figure: Figure
    timings: dict[str, Timing]
    cpu: dict[str, tuple[float, ...]]

    def ratio(self, peer: str) -> float:
        return self.timings[SEGLOG].best_rate / self.timings[peer].best_rate


def measure(brokers: dict[str, RunningBroker], groups: list[list[Figure]], runs: int) -> list[Row]:
    """An untimed warm-up, then ``runs`` runs in which the brokers take turns going first."""
    seconds: dict[tuple[str, str], list[float]] = {}
    shares: dict[tuple[str, str], list[float]] = {}
    for i in range(runs + 1):
        order = rotated(BROKERS, i)
        log(f"{'warm-up' if i == 0 else f'run {i} of {runs}'} ({', '.join(order)})")
        for name in order:
            broker = brokers[name]
            for g, group in enumerate(groups):
                topic = f"bench-txn-{g}-{i}"
                create_topic(broker.bootstrap, topic)
                for fig in group:
                    s, share = with_broker_cpu(broker, lambda: fig.run(broker.bootstrap, topic))
                    log(f"  {name}: {fig.name}: {rate(fig.work.count / s)} records/s (broker CPU {share:.0%})")
                    if i:
                        seconds.setdefault((fig.name, name), []).append(s)
                        shares.setdefault((fig.name, name), []).append(share)
                delete_topic(broker.bootstrap, topic)
    return [Row(fig, {n: fig.work.timing(seconds[fig.name, n]) for n in BROKERS},
                {n: tuple(shares[fig.name, n]) for n in BROKERS})
            for group in groups for fig in group]


def against_baseline(rows: Sequence[Row], row: Row, broker: str) -> float | None:
    """``row``'s best rate on ``broker`` over its baseline figure's on the same broker."""
    if row.figure.baseline is None:
        return None
    base = next(r for r in rows if r.figure.name == row.figure.baseline)
    return row.timings[broker].best_rate / base.timings[broker].best_rate


def targets(rows: Sequence[Row]) -> list[Target]:
    idempotent = next(r for r in rows if r.figure.name == IDEMPOTENT)
    ratio = against_baseline(rows, idempotent, SEGLOG)
    plain = next(r for r in rows if r.figure.name == PLAIN)
    return [Target(f"idempotent produce: seglog at least {IDEMPOTENCE_TARGET}x its non-idempotent produce",
                   f"{ratio:.2f}x ({rate(idempotent.timings[SEGLOG].best_rate)} against "
                   f"{rate(plain.timings[SEGLOG].best_rate)} records/s)", ratio >= IDEMPOTENCE_TARGET)]


# --- reporting ------------------------------------------------------------------------------


def cells(rows: Sequence[Row], row: Row, name: str) -> tuple[str, str, str]:
    """Best (median) records/s, CPU, and the ratio to the baseline figure of broker ``name``."""
    t = row.timings[name]
    return (f"{rate(t.best_rate)}; {rate(t.median_rate)}", cpu(row.cpu[name]),
            ratio_text(against_baseline(rows, row, name)))


def print_table(env: Environment, rows: Sequence[Row], runs: int) -> None:
    print_environment(env)
    print(f"\nrecords/s, best of {runs} runs; median; CPU of the broker; x base = over the same broker's "
          f"non-idempotent produce (or read_uncommitted consume)")
    print_header(f"{'figure':<56} " + " ".join(f"{name + ' records/s':>24} {'CPU':>5} {'x base':>7}"
                                               for name in BROKERS) + f" {'/Kafka':>7}")
    for row in rows:
        text = " ".join(f"{a:>24} {b:>5} {c:>7}" for a, b, c in (cells(rows, row, n) for n in BROKERS))
        print(f"{row.figure.name:<56} {text} {ratio_text(row.ratio(KAFKA)):>7}")
    print_targets(targets(rows))


def print_markdown(env: Environment, rows: Sequence[Row], runs: int) -> None:
    date, command = date_and_command(env)
    header = ["figure", "records per run"]
    for name in BROKERS:
        header += [f"{name}, records/s (best of {runs}; median)", f"{name} CPU", f"{name} / its base"]
    print_markdown_header((*header, "seglog / Kafka", "command", "date"))
    for row in rows:
        print_markdown_row((row.figure.name, f"{row.figure.work.count:,}",
                            *(c for n in BROKERS for c in cells(rows, row, n)), ratio_text(row.ratio(KAFKA)),
                            f"`{command}`", date))
    print_markdown_targets(targets(rows))


def main(argv: Sequence[str] | None = None) -> int:
    p = argument_parser(__doc__, "a smoke run: fewer records, 1 run")
    p.add_argument("--broker-cpu", type=int, default=1, help="the core both brokers are pinned to (default 1)")
    p.add_argument("--runs", type=int, help="timed runs per figure, after one warm-up (default 3, 1 with --quick)")
    p.add_argument("--records", type=int, help="records per run of the non-transactional figures and of "
                                               "transactions of 1,000 records (default 500,000); a fifth of it "
                                               "in transactions of 100 records")
    p.add_argument("--dir", default="/tmp", help="where the brokers' log dirs go (default /tmp)")
    args = p.parse_args(argv)
    runs = args.runs or (1 if args.quick else 3)
    count = args.records or (50_000 if args.quick else 500_000)
    if args.pin and args.broker_cpu == args.cpu:
        raise SystemExit(f"--broker-cpu {args.broker_cpu} is the client's core too; pick another")
    broker_cpu = args.broker_cpu if args.pin else None
    work = Workload("100-byte values", 100, make_pool(100), count)
    groups = figures(work, {1_000: count, 100: count // 5})
    with scratch_directory("seglog-transaction-bench-", args.dir) as root:
        brokers: dict[str, RunningBroker] = {}
        try:
            for name in BROKERS:
                log(f"starting {name}")
                brokers[name] = (start_apache_kafka(root, broker_cpu) if name == KAFKA
                                 else start_broker(name, root, broker_cpu))
                create_topic(brokers[name].bootstrap, WARM_UP_TOPIC)
            env = [entry for entry in broker_environment(pinning(args.pin, args.cpu),
                                                         f"core {broker_cpu}, both" if args.pin else "no", root)
                   if entry[0] not in ("Tansu", "Java client")]  # the peers this benchmark does not run
            rows = measure(brokers, groups, runs)
        finally:
            for broker in brokers.values():
                stop_broker(broker)
    print_table(env, rows, runs)
    if args.markdown:
        print_markdown(env, rows, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
