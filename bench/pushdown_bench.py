"""Benchmark of filter pushdown in the Spark connector: a query selecting the last 5% of a topic by
``timestamp``, with ``spark.sql.python.filterPushdown.enabled`` true and false.

One topic of 4 partitions (``--records`` records, 20,000,000 by default; 100-byte JSON-like values, 10-byte
keys, batches of 135 records as in the connector benchmark; CreateTime stamps rising by one second a batch),
read through a temporary view ``USING seglog``:

    SELECT count(*), sum(length(value)) FROM bench WHERE timestamp >= TIMESTAMP '<cut>'

where ``<cut>`` is the stamp of the first batch of the last 5% of each partition. With pushdown each task
starts at the first offset whose largest timestamp so far reaches the cut (the time index); without it,
every record is read, decoded and handed to Spark, which drops 95% of them. The view is made afresh before
each run, untimed (Spark 4.2 keeps the read a relation planned with pushed filters for its later queries);
the timing is the query's: its planning (a Python worker resolving the offsets and, with pushdown, taking
the filters) and its tasks.

A third query, with pushdown, filters on a partition the topic does not have (``partition = 4``): it reads
nothing, so what it takes is what every query pays whatever it reads (planning, scheduling the stages, the
final aggregation), the floor under the pushed query's time.

Figures per mode: wall-clock seconds (best of ``--runs`` after a warm-up; median beside it) and the CPU
seconds of the whole process tree (this driver, Spark's JVM, its Python workers: utime + stime from
``/proc``, children's included), which a busy machine disturbs far less than wall time. Also the bytes of
segment files each of the three queries reads, counted by the reader itself (``SeglogBatchReader.counter``) in this
process, without Spark; the one on a partition the topic lacks must read no byte and return no row.

Run ``python bench/pushdown_bench.py``; ``--quick`` for a smoke run, ``--markdown`` for rows to paste into
BENCHMARKS.md.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Sequence

from broker_core import Broker
from connector.options import parse_options
from connector.source import PushdownBatchReader, SeglogBatchReader
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from connector_bench import spark_session  # noqa: E402
from bench_common import (MIB, Target, argument_parser, date_and_command, environment,  # noqa: E402
                          event_record, log, print_environment, print_header, print_markdown_header,
                          print_markdown_row, print_markdown_targets, print_targets, scratch_directory, timed,
                          tree_cpu_seconds)

TOPIC = "bench"
PARTITIONS = 4
BATCH_RECORDS = 135
POOL_RECORDS = 34_560
T_START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
TAIL = 0.05
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
TARGET_SPEEDUP = 10.0
NOTHING = "reads nothing"


@dataclass(frozen=True)
class Figure:
    mode: str
    wall: tuple[float, ...]
    cpu: tuple[float, ...]
    rows: int


def write_log(log_dir: str, per_partition: int) -> tuple[int, int]:
    """Fill ``TOPIC``; returns (bytes written, the cut: the stamp of the first batch of the last 5%)."""
    rng = random.Random(42)
    pool = [event_record(rng, 0) for _ in range(POOL_RECORDS)]
    batches = -(-per_partition // BATCH_RECORDS)
    cut_batch = int(batches * (1 - TAIL))
    written = 0
    with Broker(log_dir, background=False) as broker:
        broker.create_topic(TOPIC, PARTITIONS, {})
        for p in range(PARTITIONS):
            log_ = broker.log_manager.get_log(TopicPartition(TOPIC, p))
            for b in range(batches):
                first = b * BATCH_RECORDS
                stamp = T_START + b * 1000
                start = first + p * 7919  # each partition its own run through the pool
                records = [SimpleRecord(pool[(start + i) % POOL_RECORDS].value,
                                        pool[(start + i) % POOL_RECORDS].key, stamp + i)
                           for i in range(min(BATCH_RECORDS, per_partition - first))]
                log_.append(build_batch(records))
            log_.flush()
            written += log_.size
    return written, T_START + cut_batch * 1000


def measure(spark, log_dir: str, cut_ms: int, runs: int) -> list[Figure]:
    """Both modes, warmed up, then taking turns run after run (so that neither gets the warmer JVM); and,
    with pushdown, a query whose filter leaves nothing to read: what any query costs, whatever it reads."""
    cut = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(cut_ms / 1000))
    select = "SELECT count(*) AS n, sum(length(value)) AS bytes FROM bench WHERE "
    tail = f"timestamp >= TIMESTAMP '{cut}'"
    modes = (("pushdown", True, tail), ("no pushdown", False, tail), (NOTHING, True, f"partition = {PARTITIONS}"))

    def view(pushdown: bool) -> None:
        spark.conf.set(PUSHDOWN, str(pushdown).lower())
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW bench USING seglog OPTIONS (path '{log_dir}', "
                  f"subscribe '{TOPIC}')")

    def run(where: str) -> int:
        return spark.sql(select + where).collect()[0].n

    for _, pushdown, where in modes:  # warm-up: Python workers started, the JVM's code compiled, page cache
        view(pushdown)
        run(where)
    wall = {m: [] for m, _, _ in modes}
    cpu = {m: [] for m, _, _ in modes}
    rows = {}
    for _ in range(runs):
        for mode, pushdown, where in modes:
            log(f"  {mode}: {PUSHDOWN}={str(pushdown).lower()}, WHERE {where}")
            view(pushdown)  # untimed: the view, and its schema worker, are not the query
            before = tree_cpu_seconds(os.getpid())
            seconds, rows[mode] = timed(lambda: run(where))
            cpu[mode].append(tree_cpu_seconds(os.getpid()) - before)
            wall[mode].append(seconds)
    return [Figure(m, tuple(wall[m]), tuple(cpu[m]), rows[m]) for m, _, _ in modes]


def bytes_read(log_dir: str, filters: list | None) -> tuple[int, int]:
    """(rows, bytes of segment files) a reader reads in this process: one taking ``filters``, or, given
    None, one Spark pushes nothing to."""
    options = parse_options({"path": log_dir, "subscribe": TOPIC})
    reader = SeglogBatchReader(options) if filters is None else PushdownBatchReader(options)
    if filters is not None:
        reader.pushFilters(filters)
    rows = sum(batch.num_rows for p in reader.partitions() for batch in reader.read(p))
    return rows, reader.counter.bytes_read


def main(argv: Sequence[str] | None = None) -> int:
    p = argument_parser(__doc__, "200,000 records and 2 runs", pin=False)
    p.add_argument("--records", type=int, default=20_000_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--dir", default=None, help="where the scratch log dir goes (default: the temporary folder)")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.runs = 200_000, 2
    with scratch_directory("seglog-pushdown-bench-", args.dir) as root:
        log_dir = os.path.join(root, "logs")
        log(f"writing {args.records:,} records over {PARTITIONS} partitions")
        s, (log_bytes, cut_ms) = timed(lambda: write_log(log_dir, args.records // PARTITIONS))
        log(f"  {log_bytes / MIB:,.0f} MiB in {s:.1f} s")
        log("counting the bytes each way reads (in this process)")
        cut = GreaterThanOrEqual(("timestamp",), dt.datetime.fromtimestamp(cut_ms / 1000, dt.timezone.utc))
        counted = {mode: bytes_read(log_dir, filters)
                   for mode, filters in (("pushdown", [cut]), ("no pushdown", None),
                                         (NOTHING, [EqualTo(("partition",), PARTITIONS)]))}
        spark = spark_session(args.master, os.path.join(root, "warehouse"), app="seglog-pushdown-bench",
                              driver_memory="2g", with_kafka_source=False)
        try:
            env = environment([("spark", f"{spark.version}, {args.master}"),
                               ("log", f"{args.records:,} records, {log_bytes / MIB:,.0f} MiB, {PARTITIONS} "
                                       f"partitions")])
            log("measuring")
            figures = measure(spark, log_dir, cut_ms, args.runs)
        finally:
            spark.stop()
    report(env, figures, counted, args)
    return 0


def report(env, figures: list[Figure], counted: dict[str, tuple[int, int]], args) -> None:
    pushed, full, nothing = figures
    if pushed.rows != full.rows:
        raise AssertionError(f"pushdown returned {pushed.rows} rows, without it {full.rows}")
    if nothing.rows or counted[NOTHING][1]:
        raise AssertionError(f"the query on partition {PARTITIONS} returned {nothing.rows} rows, its reader "
                             f"read {counted[NOTHING][1]} bytes: it was to read nothing")
    speedup = min(full.wall) / min(pushed.wall)
    cpu_speedup = min(full.cpu) / min(pushed.cpu)
    found = [Target(f"last {TAIL:.0%} by timestamp, pushdown >= {TARGET_SPEEDUP:.0f}x faster (wall)",
                    f"{speedup:.1f}x", speedup >= TARGET_SPEEDUP),
             Target("the same, CPU seconds of the process tree", f"{cpu_speedup:.1f}x",
                    cpu_speedup >= TARGET_SPEEDUP)]
    print_environment(env)
    print()
    print_header(f"{'mode':<13} {'rows':>10} {'wall s best':>12} {'median':>8} {'CPU s best':>11} {'median':>8} "
                 f"{'segment bytes read':>19}")
    for f in figures:
        print(f"{f.mode:<13} {f.rows:>10,} {min(f.wall):>12.2f} {statistics.median(f.wall):>8.2f} "
              f"{min(f.cpu):>11.2f} {statistics.median(f.cpu):>8.2f} {counted[f.mode][1] / MIB:>15,.1f} MiB")
    print_targets(found)
    if args.markdown:
        day, command = date_and_command(env)
        print_markdown_header(("query", "pushdown (best; median)", "no pushdown (best; median)", "ratio", "command",
                               "date"))
        print_markdown_row((f"last {TAIL:.0%} by `timestamp`, {pushed.rows:,} rows: wall s",
                            f"{min(pushed.wall):.2f} ({statistics.median(pushed.wall):.2f})",
                            f"{min(full.wall):.2f} ({statistics.median(full.wall):.2f})", f"{speedup:.1f}x",
                            f"`{command}`", day))
        print_markdown_row(("the same: CPU s of driver, JVM and Python workers",
                            f"{min(pushed.cpu):.2f} ({statistics.median(pushed.cpu):.2f})",
                            f"{min(full.cpu):.2f} ({statistics.median(full.cpu):.2f})", f"{cpu_speedup:.1f}x",
                            f"`{command}`", day))
        print_markdown_row(("segment bytes read (the reader's counter)",
                            f"{counted['pushdown'][1] / MIB:,.1f} MiB",
                            f"{counted['no pushdown'][1] / MIB:,.1f} MiB",
                            f"{counted['no pushdown'][1] / max(1, counted['pushdown'][1]):.1f}x",
                            f"`{command}`", day))
        print_markdown_row((f"a pushed query that reads nothing (`partition = {PARTITIONS}`): wall s; CPU s",
                            f"{min(nothing.wall):.2f} ({statistics.median(nothing.wall):.2f}); "
                            f"{min(nothing.cpu):.2f} ({statistics.median(nothing.cpu):.2f})", "-",
                            f"{min(nothing.wall) / min(pushed.wall):.0%} of the pushed query's wall, "
                            f"{min(nothing.cpu) / min(pushed.cpu):.0%} of its CPU", f"`{command}`", day))
        print_markdown_targets(found)


if __name__ == "__main__":
    sys.exit(main())
