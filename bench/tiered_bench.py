"""Benchmarks of tiered storage: what reading from and copying to the remote tier costs, beside the same work on
local disk, against SeaweedFS on loopback.

Figures, each beside its peer in the same run on the same records (absolute rates drift on shared machines;
ratios hold better):

* Spark: ``count()`` and ``sum(length(value))`` of ``spark.read.format("seglog")`` over a topic whose closed
  segments are only in SeaweedFS (the log dir keeps the active segment; tasks read the remote segments from S3
  themselves, no broker on the path), against the same topic wholly on local disk; rows/s;
* broker Fetch: a confluent-kafka consumer reads the offsets the remote tier holds (every partition from 0 to
  its local log start offset) from a ``seglog broker`` serving the tiered log dir (every fetch a range read of
  SeaweedFS) and from a ``seglog broker`` serving the local copy (the same offsets read from local disk);
  MB/s of keys and values;
* copying: the remote log manager (``RemoteLogManager.run_once``) copies every rolled segment of the topic to a
  fresh prefix of the bucket (metadata COPY_SEGMENT_STARTED, the ``.log``, ``.index``, ``.timeindex``,
  producer snapshot and leader-epoch checkpoint objects, metadata COPY_SEGMENT_FINISHED), against ``s3fs``'s
  ``put_file`` of the same segments' ``.log``, ``.index`` and ``.timeindex`` files one after the other;
  MB/s of the files' bytes.

Records are 100-byte JSON-like values with 10-byte keys in batches of 135 records (16,268 bytes: what fills
Kafka's default ``batch.size``), appended with ``Log.append`` from a pool of distinct batches (as in
``connector_bench.py``), in 4 partitions of ``segment.bytes`` 8 MiB (``--segment-mib``). SeaweedFS
(``weed server`` with its S3 gateway, ``testbed.seaweedfs``) keeps its data under ``--dir``. Nothing is pinned: Spark runs ``local[2]``,
the brokers and SeaweedFS beside it.

Run ``python bench/tiered_bench.py``; ``--quick`` for a smoke run, ``--markdown`` for rows to paste into
BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import confluent_kafka
import s3fs
from confluent_kafka import Consumer, TopicPartition as KafkaTopicPartition

from broker_core import Broker
from broker_core.clock import SYSTEM_CLOCK
from broker_core.log.remote import RemoteLogManager, RemoteStorageManager
from format import remote_tier
from format.layout import TopicPartition
from testbed.broker_process import BrokerProcess
from testbed.seaweedfs import SeaweedFS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (GIB, MB, MIB, Environment, Timing, argument_parser, date_and_command,  # noqa: E402
                          environment, file_system, log, print_environment, print_header, print_markdown_header,
                          print_markdown_row, rate, scratch_directory, short_of_disk, timed)
from connector_bench import BATCH_RECORDS, POOL_BATCHES, append_partitions, make_pool, spark_session  # noqa: E402

TOPIC = "bench"
PARTITIONS = 4
SEGMENT_MIB = 8
BUCKET = "seglog-bench"
TIER_PREFIX = "tier"
SCAN = "sum(length(value))"
CLIENT_TIMEOUT_S = 120
CONSUMER_SETTINGS = {"fetch.queue.backoff.ms": 10}
REMOTE = "remote tier"
LOCAL = "local disk"
SEGLOG_COPY = "remote log manager"
RAW_PUT = "s3fs put_file"


def topic_config(segment_bytes: int, tiered: bool) -> dict[str, str]:
    """The topic's config on both log dirs; the tiered one adds remote storage and a local tail of one
    segment."""
    config = {"segment.bytes": str(segment_bytes), "retention.ms": "-1"}
    if tiered:
        config.update({"remote.storage.enable": "true", "local.retention.bytes": str(segment_bytes),
                       "file.delete.delay.ms": "0"})
    return config


# --- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One figure: the tiered side (``first``) and its local peer doing the same work on the same records."""

    figure: str
    unit: str  # "rows/s" or "MB/s"
    first: str
    peer: str
    timings: dict[str, Timing]
    note: str = ""

    def value(self, who: str, best: bool = True) -> float:
        t = self.timings[who]
        if self.unit == "rows/s":
            return t.best_rate if best else t.median_rate
        return t.best_mb_s if best else t.median_mb_s

    def cell(self, who: str) -> str:
        if self.unit == "rows/s":
            return f"{rate(self.value(who))} ({rate(self.value(who, best=False))})"
        return f"{self.value(who):,.1f} ({self.value(who, best=False):,.1f})"

    @property
    def ratio(self) -> float:
        return self.value(self.first) / self.value(self.peer)


def measure(actions: dict[str, Callable[[], object]], check: Callable[[str, object], None], runs: int, name: str,
            count: int, bytes_: int, after: Callable[[str, int], None] | None = None) -> dict[str, Timing]:
    """Time each action ``runs`` times after one warm-up, the two taking turns going first; ``after(who, i)``
    runs untimed after each."""
    seconds: dict[str, list[float]] = {who: [] for who in actions}
    names = list(actions)
    for i in range(runs + 1):
        order = names[i % len(names):] + names[:i % len(names)]
        took = []
        for who in order:
            s, result = timed(actions[who])
            check(who, result)
            if after is not None:
                after(who, i)
            if i:
                seconds[who].append(s)
            took.append(f"{who} {s:.2f} s")
        log(f"  {name}: {'warm-up' if i == 0 else f'run {i} of {runs}'}: {', '.join(took)}")
    return {who: Timing(count, tuple(s), bytes_) for who, s in seconds.items()}


# --- input -----------------------------------------------------------------------------


def tiered_config(url: str, options: dict[str, str]) -> dict[str, str]:
    """The broker settings of a broker tiering to ``url`` (s3fs ``options``)."""
    return {"remote.log.storage.system.enable": "true", "remote.storage.url": url,
            **{f"remote.storage.options.{k}": v for k, v in options.items()}}


def fill(broker: Broker, config: dict[str, str], pool: Sequence[bytes], per_partition: int, timestamp_ms: int
         ) -> int:
    """Create topic ``bench`` with ``config`` and append ``per_partition`` records of pooled batches to each
    partition (``connector_bench``'s batches); returns the bytes written."""
    broker.create_topic(TOPIC, PARTITIONS, config)
    return append_partitions(broker, pool, per_partition, PARTITIONS, timestamp_ms)


def rolled_segment_files(broker: Broker) -> list[str]:
    """The ``.log``, ``.index`` and ``.timeindex`` files of every rolled segment of topic ``bench``."""
    files = []
    for p in range(PARTITIONS):
        lg = broker.log_manager.get_log(TopicPartition(TOPIC, p))
        for segment in lg.segments[:-1]:
            files += [segment.log.path, segment.offset_index.path, segment.time_index.path]
    return files


# --- the figures -------------------------------------------------------------------------


def copy_figure(broker: Broker, fs: s3fs.S3FileSystem, runs: int, segment_bytes: int) -> Row:
    """The remote log manager copying every rolled segment to a fresh prefix, against ``put_file`` of the
    segments' files to another."""
    files = rolled_segment_files(broker)
    total = sum(os.path.getsize(f) for f in files)
    segments = len(files) // 3
    if not segments:
        raise AssertionError("no rolled segments to copy: more --records or a smaller --segment-mib")
    runs_prefix = {SEGLOG_COPY: "copy", RAW_PUT: "raw"}
    attempt = {SEGLOG_COPY: 0, RAW_PUT: 0}

    def prefix(who: str) -> str:
        return f"{BUCKET}/{runs_prefix[who]}-{attempt[who]}"

    def copy() -> int:
        url = f"s3://{prefix(SEGLOG_COPY)}"
        manager = RemoteLogManager(broker.config, broker.log_manager.all_logs, RemoteStorageManager(fs, url),
                                   clock=SYSTEM_CLOCK)
        manager.run_once()
        # A copy that failed is only logged by the manager (it retries later): count what is there.
        topic_id = broker.describe_topic(TOPIC).topic_id
        return sum(1 for p in range(PARTITIONS)
                   for m in remote_tier.list_segments(fs, url, TOPIC, topic_id, p)
                   if m.state is remote_tier.RemoteLogSegmentState.COPY_SEGMENT_FINISHED)

    def put() -> int:
        target = prefix(RAW_PUT)
        for path in files:
            fs.put_file(path, f"{target}/{os.path.basename(os.path.dirname(path))}/{os.path.basename(path)}")
        return len(files) // 3

    def check(who: str, got: int) -> None:
        if got != segments:
            raise AssertionError(f"{who}: {got} segments in the remote tier, expected {segments}")

    def after(who: str, _: int) -> None:
        try:
            fs.rm(prefix(who), recursive=True)
        except FileNotFoundError:
            pass
        fs.invalidate_cache()
        attempt[who] += 1

    timings = measure({SEGLOG_COPY: copy, RAW_PUT: put}, check, runs, "copy to the remote tier", segments, total,
                      after)
    return Row(f"copy {segments} segments ({total / MIB:,.0f} MiB) to SeaweedFS", "MB/s", SEGLOG_COPY, RAW_PUT,
               timings, f"{segments} segments of {segment_bytes / MIB:g} MiB; {len(files)} files")


def spark_figures(spark, tiered_dir: str, local_dir: str, options: dict[str, str], rows: int, runs: int
                  ) -> list[Row]:
    """``format("seglog")`` over the tiered log dir (with the tier's storage options) and over the local one."""
    def frame(path: str, storage: dict[str, str]):
        reader = spark.read.format("seglog").option("path", path).option("subscribe", TOPIC)
        for k, v in storage.items():
            reader = reader.option(f"storage.{k}", v)
        return reader.load()

    frames = {REMOTE: frame(tiered_dir, options), LOCAL: frame(local_dir, {})}
    tasks = {who: df.rdd.getNumPartitions() for who, df in frames.items()}
    expected = {"count()": rows, SCAN: rows * 100}
    result = []
    for action, make in (("count()", lambda df: df.count),
                         (SCAN, lambda df: (lambda: df.selectExpr(f"{SCAN} AS s").collect()[0]["s"]))):
        def check(who: str, got, action=action) -> None:
            if got != expected[action]:
                raise AssertionError(f"{who}: {action} gave {got}, expected {expected[action]}")

        timings = measure({who: make(df) for who, df in frames.items()}, check, runs, f"Spark {action}", rows, 0)
        result.append(Row(f"Spark format(\"seglog\") {action}", "rows/s", REMOTE, LOCAL, timings,
                          f"tasks: {tasks[REMOTE]} over the tiered topic, {tasks[LOCAL]} over the local one"))
    return result


def consume_range(bootstrap: str, ends: dict[int, int]) -> tuple[int, int]:
    """Read every partition from offset 0 up to (excluding) ``ends[partition]``; returns records and bytes of
    keys and values read."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-bench", "enable.auto.commit": False,
                  "enable.partition.eof": False, **CONSUMER_SETTINGS})
    try:
        c.assign([KafkaTopicPartition(TOPIC, p, 0) for p in ends])
        left = {p: end for p, end in ends.items() if end > 0}
        got = read = 0
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while left:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{bootstrap}: read {got} records in {CLIENT_TIMEOUT_S} s; left {left}")
            for msg in c.consume(10_000, 1.0):
                if msg.error() is not None:
                    raise RuntimeError(f"{bootstrap}: consume failed: {msg.error()}")
                p, offset = msg.partition(), msg.offset()
                if p in left and offset < left[p]:
                    got += 1
                    read += len(msg.key()) + len(msg.value())
                    if offset == left[p] - 1:
                        del left[p]
                        c.pause([KafkaTopicPartition(TOPIC, p)])
    finally:
        c.close()
    return got, read


def fetch_figure(tiered: BrokerProcess, local: BrokerProcess, ends: dict[int, int], runs: int) -> Row:
    """confluent-kafka reading the offsets the remote tier holds, from both brokers."""
    records = sum(ends.values())
    bytes_read = records * 110

    def check(who: str, got: tuple[int, int]) -> None:
        if got != (records, bytes_read):
            raise AssertionError(f"{who}: read {got[0]} records ({got[1]} bytes), expected {records} "
                                 f"({bytes_read} bytes)")

    timings = measure({REMOTE: lambda: consume_range(tiered.bootstrap, ends),
                       LOCAL: lambda: consume_range(local.bootstrap, ends)}, check, runs,
                      "broker Fetch", records, bytes_read)
    return Row(f"broker Fetch of offsets 0..local log start, {records:,} records", "MB/s", REMOTE, LOCAL, timings,
               f"offsets read per partition: {', '.join(str(e) for e in ends.values())}")


# --- reporting -------------------------------------------------------------------------


def tiered_environment(spark, directory: str) -> Environment:
    import pyspark

    java = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    return environment([
        ("spark", f"pyspark {pyspark.__version__}, Java {java}, local[2], not pinned"),
        ("files", file_system(directory, with_options=False)),
        ("object store", "SeaweedFS (`weed server -s3`, testbed.seaweedfs) on loopback, "
                         f"its data on the same file system; s3fs {s3fs.__version__}"),
        ("client", f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}), "
                   + ", ".join(f"{k}={v}" for k, v in CONSUMER_SETTINGS.items())),
    ])


def print_table(env: Environment, rows: list[Row], notes: list[str], runs: int) -> None:
    print_environment(env)
    print(f"\nbest of {runs} runs (median); ratio of the best runs, tiered / peer")
    print_header(f"{'figure':<58} {'tiered':>22} {'peer':>22} {'ratio':>7}")
    for row in rows:
        print(f"{row.figure:<58} {row.first + ' ' + row.cell(row.first):>22} "
              f"{row.peer + ' ' + row.cell(row.peer):>22} {row.ratio:>6.2f}x")
        print(f"  {row.unit}; {row.note}")
    for note in notes:
        print(f"  {note}")


def print_markdown(env: Environment, rows: list[Row], runs: int) -> None:
    date, command = date_and_command(env)
    print_markdown_header(("figure", "unit", f"tiered (best of {runs}; median)", "peer (best; median)", "ratio",
                           "command", "date"))
    for row in rows:
        print_markdown_row((row.figure, row.unit, f"{row.first}: {row.cell(row.first)}",
                            f"{row.peer}: {row.cell(row.peer)}", f"{row.ratio:.2f}x", f"`{command}`", date))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argument_parser(__doc__, "a smoke run: 200,000 records, 1 run", pin=False)
    p.add_argument("--runs", type=int, help="timed runs per figure, after one warm-up (default 3, 1 with --quick)")
    p.add_argument("--records", type=int, help=f"records in the topic, over {PARTITIONS} partitions "
                                               f"(default 2,000,000)")
    p.add_argument("--segment-mib", type=float, help=f"segment.bytes in MiB (default {SEGMENT_MIB}, 1 with --quick)")
    p.add_argument("--dir", default="/tmp", help="where the log dirs and SeaweedFS's data go (default /tmp)")
    args = p.parse_args(argv)
    args.runs = args.runs or (1 if args.quick else 3)
    args.records = args.records or (200_000 if args.quick else 2_000_000)
    args.segment_bytes = int((args.segment_mib or (1 if args.quick else SEGMENT_MIB)) * MIB)
    if args.records % PARTITIONS:
        p.error(f"--records must be a multiple of {PARTITIONS}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # Two log dirs, the remote tier and one copy run's prefixes, at ~123 bytes a record.
    needed = max(GIB // 2, args.records * 123 * 5)
    short = short_of_disk(args.dir, needed)
    if short:
        log(f"{short}, fewer than the {needed / GIB:.1f} GiB this run needs")
        return 1
    with scratch_directory("seglog-tiered-bench-", args.dir) as root:
        return run_all(args, root)


def run_all(args: argparse.Namespace, root: str) -> int:
    per_partition = args.records // PARTITIONS
    tiered_dir, local_dir = os.path.join(root, "tiered"), os.path.join(root, "local")
    now_ms = int(time.time() * 1000)
    log(f"building a pool of {POOL_BATCHES} batches of {BATCH_RECORDS} records")
    pool = make_pool(POOL_BATCHES, now_ms)
    with SeaweedFS(os.path.join(root, "seaweedfs")) as store:
        options = store.storage_options
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir(BUCKET)
        url = f"s3://{BUCKET}/{TIER_PREFIX}"
        broker_config = tiered_config(url, options)
        log(f"writing {args.records:,} records over {PARTITIONS} partitions into both log dirs")
        with Broker(local_dir, background=False) as broker:
            log_bytes = fill(broker, topic_config(args.segment_bytes, tiered=False), pool, per_partition, now_ms)
        with Broker(tiered_dir, broker_config, background=False) as broker:
            fill(broker, topic_config(args.segment_bytes, tiered=True), pool, per_partition, now_ms)
            copy = copy_figure(broker, fs, args.runs, args.segment_bytes)
            log("tiering the topic: one remote log manager round, then local retention")
            broker.remote_log_manager.run_once()
            broker.log_manager.cleanup_logs()
            broker.log_manager.scheduler.run_due()
            ends = {p: broker.log_manager.get_log(TopicPartition(TOPIC, p)).local_log_start_offset
                    for p in range(PARTITIONS)}
        if not all(0 < e < per_partition for e in ends.values()):
            raise AssertionError(f"local log start offsets {ends}: the topic was not tiered")
        log(f"  local log start offsets {ends}")
        del pool
        flags = [arg for k, v in broker_config.items() for arg in ("--config", f"{k}={v}")]
        tiered, local = BrokerProcess([tiered_dir], *flags), BrokerProcess([local_dir])
        try:
            fetch = fetch_figure(tiered, local, ends, args.runs)
        finally:
            tiered.stop()
            local.stop()
        spark = spark_session("local[2]", os.path.join(root, "warehouse"))
        try:
            env = tiered_environment(spark, args.dir)
            spark_rows = spark_figures(spark, tiered_dir, local_dir, options, args.records, args.runs)
        finally:
            spark.stop()
    rows = [*spark_rows, fetch, copy]
    notes = [f"log: {log_bytes / MIB:,.0f} MiB ({log_bytes / args.records:.1f} B/record) in {PARTITIONS} "
             f"partitions of segment.bytes {args.segment_bytes / MIB:g} MiB; all but the active segment in the remote "
             f"tier only", f"{MB:.0f} bytes a MB"]
    print_table(env, rows, notes, args.runs)
    if args.markdown:
        print_markdown(env, rows, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
