"""Where the CPU of a ``format("seglog")`` scan goes, beside the ceiling, in one Spark session.

``count()`` and ``sum(length(value))`` over the topic of ``connector_bench``
(8 partitions, 135-record batches of 100-byte values), read by
``format("seglog")`` and by the ceiling (the same rows as pre-built Arrow
batches, ``connector_bench.CeilingSource``), taking turns. For each run: the
wall time, and the CPU time per row of the Spark JVM and of the Python
processes under it (its Python workers, from ``/proc``). Unlike wall time,
the CPU split holds up on a machine other work loads: the JVM's share is the
same for both sources, and the difference in the Python workers' share is
what decoding costs. Also ``connector.reading.read_range`` over partition 0
in this process, CPU time per row (``time.process_time``).

Run ``python bench/connector_cpu_bench.py`` (``--records``, ``--runs``) from
the checkout to measure: Spark's Python workers import ``connector`` and
``format`` from the directory Spark starts in, ahead of ``PYTHONPATH``. They
import the ceiling from this directory: the script puts ``bench/`` on their
``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(os.path.abspath(__file__)),
                                                          os.environ.get("PYTHONPATH")]))
import connector_bench as cb  # noqa: E402
from bench_common import MIB, descendants, git_revision, log, process_table, scratch_directory  # noqa: E402

from connector.planning import OffsetRange  # noqa: E402
from connector.reading import read_range  # noqa: E402
from format.log_dir import LogDirectory  # noqa: E402

ACTIONS = {"count()": lambda df: df.count(),
           cb.SCAN: lambda df: df.selectExpr(f"{cb.SCAN} AS s").collect()[0]["s"]}


def process_cpu() -> tuple[float, float]:
    """CPU seconds so far of the Spark JVM under this process and of the Python processes under it
    (with what their finished children used)."""
    table = process_table()
    jvm = python = 0.0
    for pid in descendants(table, os.getpid()):
        process = table[pid]
        if process.command == "java":
            jvm += process.own_s
        else:
            python += process.own_s + process.reaped_s
    return jvm, python


def read_range_cpu(log_dir: str, per_partition: int, runs: int) -> list[float]:
    directory = LogDirectory(log_dir)
    r = OffsetRange(cb.TOPIC, 0, 0, per_partition)

    def run() -> int:
        return sum(b.num_rows for b in read_range(directory, r, include_headers=False, fail_on_data_loss=True,
                                                  chunk_bytes=4 * MIB))

    run()
    out = []
    for _ in range(runs):
        start = time.process_time()
        run()
        out.append((time.process_time() - start) / per_partition * 1e9)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=2_000_000, help="records over 8 partitions (default 2,000,000)")
    p.add_argument("--runs", type=int, default=5, help="timed runs per figure after one warm-up (default 5)")
    p.add_argument("--dir", default="/tmp", help="where the temporary log goes (default /tmp)")
    args = p.parse_args(argv)
    with scratch_directory("seglog-connector-cpu-bench-", args.dir) as root:
        log_dir, ceiling_path = os.path.join(root, "logs"), os.path.join(root, "ceiling.arrow")
        now_ms = int(time.time() * 1000)
        pool = cb.make_pool(cb.POOL_BATCHES, now_ms)
        cb.write_log(log_dir, pool, args.records // cb.PARTITIONS, cb.PARTITIONS, now_ms)
        cb.write_ceiling_rows(ceiling_path, pool, cb.CEILING_BATCH_ROWS)
        alone = read_range_cpu(log_dir, args.records // cb.PARTITIONS, args.runs)
        spark = cb.spark_session("local[2]", os.path.join(root, "warehouse"))
        try:
            spark.dataSource.register(cb.CeilingSource)
            frames = {"seglog": spark.read.format("seglog").option("path", log_dir).option("subscribe", cb.TOPIC)
                      .load(),
                      "ceiling": spark.read.format(cb.CeilingSource.name()).option("path", ceiling_path)
                      .option("rows", str(args.records)).option("partitions", str(cb.PARTITIONS)).load()}
            print(f"revision {git_revision()}, {args.records:,} records, {args.runs} runs, load average at start "
                  f"{os.getloadavg()[0]:.1f}")
            print(f"read_range alone, partition 0: {min(alone):.0f} ns/row of CPU (median "
                  f"{statistics.median(alone):.0f})")
            for action, act in ACTIONS.items():
                wall = {who: [] for who in frames}
                cpu = {who: [] for who in frames}
                for i in range(args.runs + 1):
                    for who in (list(frames) if i % 2 else list(reversed(frames))):
                        before, start = process_cpu(), time.perf_counter()
                        act(frames[who])
                        took, after = time.perf_counter() - start, process_cpu()
                        if i:
                            wall[who].append(took)
                            cpu[who].append(tuple((a - b) / args.records * 1e6 for a, b in zip(after, before)))
                    log(f"  {action}: run {i} of {args.runs}")
                ratio = min(wall["ceiling"]) / min(wall["seglog"])
                split = "; ".join(f"{who} JVM {statistics.median(c[0] for c in cpu[who]):.2f}, Python "
                                  f"{statistics.median(c[1] for c in cpu[who]):.2f} us/row" for who in frames)
                print(f"{action}: seglog / ceiling {ratio:.2f}x (best wall {min(wall['seglog']):.2f} s against "
                      f"{min(wall['ceiling']):.2f} s); CPU, median: {split}; load average "
                      f"{os.getloadavg()[0]:.1f}")
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
