"""Log compaction: the broker's cleaner on one thread against the Spark compaction job on local[2].

Input: one compacted topic of ``--partitions`` partitions (8) holding at least
``--gib`` GiB (2) of records over ``--keys`` distinct keys (1,000,000), each key
written about as often as any other, spread over partitions by Kafka's
partitioner (murmur2 of the key). Records are 100-byte JSON-like values with
10-byte keys, CreateTime, uncompressed, in batches of 135 (16 KiB, Kafka's
default ``batch.size``); ``segment.bytes`` is 64 MiB and every partition is
rolled, so everything but an empty active segment is dirty and cleanable.
The input is generated once into ``--data`` and copied afresh for every run.

Figures, in the same run on copies of the same bytes, both warm (the input
was just copied, so it sits in the page cache):

* the broker's cleaner: ``LogCleaner.compact`` of an embedded broker, one
  cleaner thread, the default 128 MiB dedupe buffer (every partition's keys
  fit in one round), from the first read to the last replaced file deleted;
* the Spark job: ``connector.compaction_job.run_compaction`` on a
  ``local[2]`` session already started (its start-up is reported apart), from
  planning to the last replaced file deleted: two stages and the swap.

MB/s is the topic's bytes before compaction (10^6 bytes) over wall-clock
seconds. Both cleaners must leave byte-identical segment files; the run
checks it. ``--quick`` is a smoke run on 64 MiB; ``--markdown`` prints rows
for BENCHMARKS.md.
"""

from __future__ import annotations

import filecmp
import json
import os
import random
import re
import shutil
import statistics
import sys
import time
from typing import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (GIB, MB, MIB, Target, argument_parser, date_and_command,  # noqa: E402
                          environment, file_system, log, print_environment, print_markdown_header,
                          print_markdown_row, print_markdown_targets, print_targets, short_of_disk,
                          tree_cpu_seconds)

from broker_core import Broker  # noqa: E402
from broker_core.clock import MockTime  # noqa: E402
from broker_core.partitioner import partition_for_key  # noqa: E402
from format.layout import TopicPartition  # noqa: E402
from format.record import SimpleRecord  # noqa: E402
from format.record_batch import build_batch  # noqa: E402

TOPIC = "bench"
BATCH_RECORDS = 135
T0 = 1_767_225_600_000
TARGET_RATIO = 1.5


def value_pool(rng: random.Random, size: int = 4096) -> list[bytes]:
    out = []
    for i in range(size):
        head = f'{{"order":{rng.randrange(10**7)},"status":"{rng.choice(["new", "paid", "sent", "done"])}","s":"'
        out.append((head + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=100 - len(head) - 2))
                    + '"}').encode())
    return out


def generate(directory: str, total_bytes: int, keys: int, partitions: int, segment_bytes: int, seed: int = 7) -> dict:
    """Write the input topic; returns its description (what ``--data`` is reused for)."""
    rng = random.Random(seed)
    key_bytes = [b"k-%08d" % i for i in range(keys)]
    by_partition: list[list[bytes]] = [[] for _ in range(partitions)]
    for key in key_bytes:
        by_partition[partition_for_key(key, partitions)].append(key)
    values = value_pool(rng)
    clock = MockTime(current_time_ms=T0)
    records = 0
    started = time.monotonic()
    with Broker(directory, clock=clock, background=False) as broker:
        broker.create_topic(TOPIC, partitions, {"cleanup.policy": "compact", "segment.bytes": segment_bytes})
        per_partition = total_bytes // partitions
        for p in range(partitions):
            lg = broker.log_manager.get_log(TopicPartition(TOPIC, p))
            mine = by_partition[p]
            # Every key of the partition once, in a random order, round after round: all keys present,
            # each written about equally often.
            order: list[bytes] = []
            while lg.size < per_partition:
                if len(order) < BATCH_RECORDS:
                    shuffled = mine[:]
                    rng.shuffle(shuffled)
                    order = shuffled + order
                batch = [SimpleRecord(values[rng.randrange(len(values))], order.pop(), clock.milliseconds())
                         for _ in range(BATCH_RECORDS)]
                lg.append(build_batch(batch))
                records += BATCH_RECORDS
                clock.sleep(1)
            lg.roll()
            log(f"  partition {p}: {lg.size / MIB:,.0f} MiB, {len(lg.segments)} segments "
                f"({time.monotonic() - started:.0f} s)")
        size = sum(broker.log_manager.get_log(TopicPartition(TOPIC, p)).size for p in range(partitions))
    return {"bytes": size, "records": records, "keys": keys, "partitions": partitions,
            "segment_bytes": segment_bytes, "now_ms": clock.milliseconds() + 1000}


def input_dir(args) -> tuple[str, dict]:
    directory = os.path.join(args.data, "input")
    manifest = os.path.join(args.data, "input.json")
    wanted = {"min_bytes": args.bytes, "keys": args.keys, "partitions": args.partitions,
              "segment_bytes": args.segment_mib * MIB}
    if os.path.exists(manifest):
        with open(manifest) as f:
            found = json.load(f)
        if found.get("wanted") == wanted and os.path.isdir(directory):
            log(f"reusing the input in {directory}")
            return directory, found["input"]
    shutil.rmtree(directory, ignore_errors=True)
    log(f"generating {args.bytes / GIB:.2f} GiB over {args.keys:,} keys in {args.partitions} partitions ...")
    described = generate(directory, args.bytes, args.keys, args.partitions, args.segment_mib * MIB)
    with open(manifest, "w") as f:
        json.dump({"wanted": wanted, "input": described}, f)
    return directory, described


def fresh_copy(source: str, target: str) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)


def dir_bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(directory) for n in names
               if n.endswith(".log"))


def run_broker(directory: str, now_ms: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds of the broker's cleaner compacting the topic."""
    with Broker(directory, clock=MockTime(current_time_ms=now_ms), background=False) as broker:
        cleaner = broker.log_manager.cleaner
        start, cpu = time.perf_counter(), time.process_time()
        results = cleaner.compact([TOPIC])
        broker.log_manager.scheduler.run_all()  # the replaced files, deleted
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert results and not any(r.error for r in results), results
    return elapsed, cpu


def start_spark(master: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    start = time.perf_counter()
    spark = (SparkSession.builder.master(master).appName("seglog-compaction-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.memory", "4g")
             .config("spark.driver.extraJavaOptions",
                     f"-Dlog4j2.configurationFile={os.path.join(root, 'spark_conf', 'log4j2.properties')}")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark, time.perf_counter() - start


def run_spark(spark, directory: str, now_ms: int) -> tuple[float, float, float]:
    """Wall-clock seconds of the job, CPU seconds of the Spark process tree (JVM and Python workers,
    the driver's own Python apart) and CPU seconds inside the job's Python tasks."""
    from connector.compaction_job import run_compaction

    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    task_cpu = []

    def out(line: str) -> None:
        log("  " + line)
        found = re.search(r"\(([0-9.]+) s of task CPU\)", line)
        if found:
            task_cpu.append(float(found.group(1)))

    cpu0 = tree_cpu_seconds(jvm)
    start = time.perf_counter()
    reports = run_compaction(spark, directory, [TOPIC], now_ms=now_ms, out=out)
    elapsed = time.perf_counter() - start
    assert reports
    return elapsed, tree_cpu_seconds(jvm) - cpu0, sum(task_cpu)


def identical(a: str, b: str) -> tuple[bool, int]:
    names = sorted(os.path.relpath(os.path.join(d, n), a) for d, _, ns in os.walk(a) for n in ns
                   if n.endswith((".log", ".index", ".timeindex", ".txnindex")))
    other = sorted(os.path.relpath(os.path.join(d, n), b) for d, _, ns in os.walk(b) for n in ns
                   if n.endswith((".log", ".index", ".timeindex", ".txnindex")))
    if names != other:
        return False, len(names)
    return all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names), len(names)


def main(argv: Sequence[str] | None = None) -> int:
    p = argument_parser(__doc__, "a smoke run: 64 MiB over 50,000 keys", pin=False)
    p.add_argument("--gib", type=float, default=2.0, help="input size in GiB (default 2)")
    p.add_argument("--keys", type=int, default=1_000_000, help="distinct keys (default 1,000,000)")
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--segment-mib", type=int, default=64, help="segment.bytes of the topic, MiB (default 64)")
    p.add_argument("--runs", type=int, default=1, help="timed runs of each cleaner (default 1)")
    p.add_argument("--master", default="local[2]", help="the Spark master (default local[2])")
    p.add_argument("--data", default="/tmp/seglog-compaction-bench", help="where input and copies go")
    args = p.parse_args(argv)
    if args.quick:
        args.gib, args.keys, args.segment_mib = 64 / 1024, 50_000, 4
    args.bytes = int(args.gib * GIB)
    os.makedirs(args.data, exist_ok=True)
    short = short_of_disk(args.data, 4 * args.bytes)
    if short:
        log(f"not enough disk for the input and two copies: {short}")
        return 2
    source, described = input_dir(args)
    now_ms = described["now_ms"]
    broker_copy, spark_copy = os.path.join(args.data, "broker"), os.path.join(args.data, "spark")
    spark, spark_startup = start_spark(args.master)
    broker_s, spark_s = [], []
    broker_cpu, spark_cpu, spark_task_cpu = [], [], []
    load_before = os.getloadavg()[0]
    after_broker = 0
    same, files = False, 0
    try:
        for run in range(args.runs):
            # Alternate which cleaner goes first, so neither always meets the other's writeback.
            for which in (("broker", "spark") if run % 2 == 0 else ("spark", "broker")):
                target = broker_copy if which == "broker" else spark_copy
                fresh_copy(source, target)
                log(f"run {run + 1}/{args.runs}: {which} ...")
                if which == "broker":
                    wall, cpu = run_broker(target, now_ms)
                    broker_s.append(wall)
                    broker_cpu.append(cpu)
                    after_broker = dir_bytes(target)
                    log(f"  broker's cleaner: {wall:.1f} s ({cpu:.1f} s CPU)")
                else:
                    wall, cpu, task_cpu = run_spark(spark, target, now_ms)
                    spark_s.append(wall)
                    spark_cpu.append(cpu)
                    spark_task_cpu.append(task_cpu)
                    log(f"  Spark job: {wall:.1f} s ({cpu:.1f} s CPU in JVM and workers, {task_cpu:.1f} s in tasks)")
            same, files = identical(broker_copy, spark_copy)
            if not same:
                log("the two cleaners left different files")
                return 1
    finally:
        spark.stop()
    before = described["bytes"]
    broker_rate = before / min(broker_s) / MB
    spark_rate = before / min(spark_s) / MB
    ratio = spark_rate / broker_rate
    env = environment([("input", f"{before / GIB:.2f} GiB, {described['records']:,} records, "
                                 f"{described['keys']:,} keys, {described['partitions']} partitions, "
                                 f"{described['segment_bytes'] // MIB} MiB segments"),
                       ("spark", f"{args.master}, session start-up {spark_startup:.1f} s (not in the figures)"),
                       ("load", f"1-minute load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after "
                                f"(other work on the machine takes cores from the Spark job first)"),
                       ("files", file_system(args.data))])
    print_environment(env)
    print()
    print(f"broker's cleaner, 1 thread : {broker_rate:8.1f} MB/s  best {min(broker_s):.1f} s "
          f"(median {statistics.median(broker_s):.1f} s)")
    print(f"Spark job, {args.master:<16}: {spark_rate:8.1f} MB/s  best {min(spark_s):.1f} s "
          f"(median {statistics.median(spark_s):.1f} s)")
    print(f"ratio Spark / broker       : {ratio:8.2f}x")
    best_b, best_s = broker_s.index(min(broker_s)), spark_s.index(min(spark_s))
    print(f"CPU seconds                : broker {broker_cpu[best_b]:.1f}; Spark {spark_cpu[best_s]:.1f} "
          f"(JVM and Python workers), of which {spark_task_cpu[best_s]:.1f} in the job's task functions")
    print(f"size                       : {before:,} -> {after_broker:,} bytes "
          f"({100 * (1 - after_broker / before):.1f}% smaller); the two outputs identical: {same} ({files} files)")
    found = [Target(f"Spark job on {args.master} at least {TARGET_RATIO}x the single-threaded broker cleaner",
                    f"{ratio:.2f}x", ratio >= TARGET_RATIO)]
    print_targets(found)
    if args.markdown:
        day, command = date_and_command(env)
        print_markdown_header(("figure", "broker's cleaner (1 thread)", f"Spark job ({args.master})", "ratio",
                               "size before -> after", "command", "date"))
        print_markdown_row((f"compaction, {before / GIB:.2f} GiB, {described['keys']:,} keys, "
                            f"{described['partitions']} partitions",
                            f"{broker_rate:,.1f} MB/s ({min(broker_s):.1f} s; {statistics.median(broker_s):.1f} s)",
                            f"{spark_rate:,.1f} MB/s ({min(spark_s):.1f} s; {statistics.median(spark_s):.1f} s)",
                            f"{ratio:.2f}x",
                            f"{before / MB:,.0f} -> {after_broker / MB:,.0f} MB "
                            f"(-{100 * (1 - after_broker / before):.1f}%)", f"`{command}`", day))
        print_markdown_targets(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
