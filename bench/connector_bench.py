"""Benchmarks of the Spark connector end to end: rows/s of Spark reading a log through ``format("seglog")``.

Figures, each beside its peers in the same run on the same rows (absolute
rates drift on shared machines; ratios hold better):

* ``count()``, ``sum(length(value))`` (a full scan: every value reaches the
  JVM) and a write to Parquet of ``spark.read.format("seglog")`` over a topic
  of 8 partitions, then the same with ``minPartitions=16``;
* the ceiling: a Python data source defined here whose reader yields
  pre-built ``pyarrow.RecordBatch`` es of the same rows with the seglog
  schema, so no decoding at all: what Spark's Python data source path itself
  costs (planning in a Python worker, Arrow IPC from the Python workers to the
  JVM, Arrow to rows). It has as many partitions as the seglog read has tasks;
* Spark reading the same rows from Parquet (written once from the log,
  outside the timing). Its ``count()`` may read row-group metadata only, so
  ``sum(length(value))`` is the figure that scans;
* Spark's own Kafka source (``format("kafka")``, its jars handed over with
  ``spark.jars``) reading the same records over the Kafka protocol, from
  Apache Kafka and from ``seglog broker``: how fast a topic becomes a
  DataFrame the way Spark users read it today. ``seglog broker`` serves the
  very log dir ``format("seglog")`` reads; Apache Kafka (one KRaft broker
  and controller, its log dir beside the others) gets the same batches through
  Produce requests, so both hold the same records in the same batches. Both
  run beside Spark, unpinned, as a broker on the same host would. For
  ``count()`` and the Parquet write only (the scan adds nothing the count does
  not already pay: the Kafka source hands over every record either way).

Records are 100-byte JSON-like values with 10-byte keys, in batches of 135
records (16,268 bytes: what fills Kafka's default ``batch.size``), appended
with ``Log.append`` from a pool of distinct batches (more distinct values than
a Parquet dictionary page holds, so Parquet stores them plainly, as real
events). Spark runs ``local[2]`` (both cores; nothing is pinned).

Run ``python bench/connector_bench.py``; ``--quick`` for a smoke run,
``--markdown`` for rows to paste into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from broker_core import Broker
from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey
from connector.planning import OffsetRange
from connector.reading import read_range
from format.arrow import decode_to_arrow, kafka_schema
from format.layout import TopicPartition
from format.log_dir import LogDirectory
from format.record import SimpleRecord
from format.record_batch import build_batch, set_base_offset
from jvm.apache_kafka import KafkaBroker
from jvm.classpath import spark_jars

# Spark's Python workers unpickle the ceiling data source below by value, as part of
# __main__. It must not use anything from bench_common: that would be pickled by
# reference, and the workers cannot import bench_common (bench/ is not on their path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (GIB, MIB, VALUE_SIZE, Environment, Target, Timing, argument_parser,  # noqa: E402
                          date_and_command, environment, event_record, file_system, log, print_environment,
                          print_header, print_markdown_header, print_markdown_row, print_markdown_targets,
                          print_targets, rate, ratio_cell, ratio_text, scratch_directory, short_of_disk, timed)
from broker_bench import broker_command, create_topic, start_broker, stop_broker  # noqa: E402

# The most such records a batch of Kafka's default batch.size (16384 bytes) holds.
BATCH_RECORDS = 135
# 256 distinct batches: 34,560 distinct values (3.5 MB), more than a 1 MiB Parquet
# dictionary page holds, so Parquet's dictionary encoding falls back to plain.
POOL_BATCHES = 256
TOPIC = "bench"
PARTITIONS = 8
MIN_PARTITIONS = 16
CEILING_BATCH_ROWS = 10_000
# Spark's Kafka source columns, as connector.source declares them.
KAFKA_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
                "timestampType int")
SCAN = "sum(length(value))"
# UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: a new topic's leaders not ready yet.
RETRIABLE_PRODUCE_ERRORS = (3, 5, 6)
# The log, Apache Kafka's copy of it, a Parquet copy and a written copy, for 10,000,000 records.
MIN_FREE_BYTES = 10 * GIB


# --- the ceiling: a Python data source that only hands Spark pre-built Arrow batches ---------


class CeilingPartition(InputPartition):
    def __init__(self, partition: int, rows: int):
        super().__init__(partition)
        self.partition = partition
        self.rows = rows


class CeilingReader(DataSourceReader):
    def __init__(self, path: str, rows: int, partitions: int):
        self.path, self.rows, self.partitions_count = path, rows, partitions

    def partitions(self):
        share, extra = divmod(self.rows, self.partitions_count)
        return [CeilingPartition(p, share + (p < extra)) for p in range(self.partitions_count)]

    def read(self, partition: CeilingPartition) -> Iterator[pa.RecordBatch]:
        # Built once per task, in a few milliseconds: compact batches of the log's rows
        # (the pool's Arrow form), with this task's partition number.
        with pa.OSFile(self.path, "rb") as f:
            pool = pa.ipc.open_file(f).read_all()
        batches = []
        for batch in pool.to_batches():
            column = pa.array(np.full(batch.num_rows, partition.partition, dtype=np.int32))
            batches.append(batch.set_column(batch.schema.get_field_index("partition"), "partition", column))
        left, i = partition.rows, 0
        while left > 0:
            batch = batches[i % len(batches)]
            if batch.num_rows > left:
                batch = batch.slice(0, left)
            yield batch
            left -= batch.num_rows
            i += 1


class CeilingSource(DataSource):
    """``format("seglog_ceiling")``: options path (an Arrow IPC file of rows), rows, partitions."""

    @classmethod
    def name(cls) -> str:
        return "seglog_ceiling"

    def schema(self):
        return KAFKA_SCHEMA

    def reader(self, schema):
        return CeilingReader(self.options["path"], int(self.options["rows"]), int(self.options["partitions"]))


# --- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One figure: seglog, the ceiling and Parquet doing the same action on the same rows."""

    figure: str
    tasks: dict[str, int]
    timings: dict[str, Timing]

    def ratio(self, peer: str) -> float | None:
        """seglog's best rate over ``peer``'s; None where ``peer`` did not take part."""
        if peer not in self.timings:
            return None
        return self.timings["seglog"].best_rate / self.timings[peer].best_rate

    def run_ratio(self, peer: str) -> float | None:
        """The median over the runs of seglog's rate over ``peer``'s in the same run (``Timing.run_ratio``)."""
        return None if peer not in self.timings else self.timings["seglog"].run_ratio(self.timings[peer])

    def ratio_cell(self, peer: str) -> str:
        return ratio_cell(self.ratio(peer), self.run_ratio(peer))


KAFKA_FROM_KAFKA = "kafka: Kafka"
KAFKA_FROM_SEGLOG = "kafka: seglog broker"
SOURCES = ("seglog", "ceiling", "parquet", KAFKA_FROM_KAFKA, KAFKA_FROM_SEGLOG)
# The sources through Spark's Kafka source, and the figures they take part in.
KAFKA_SOURCES = (KAFKA_FROM_KAFKA, KAFKA_FROM_SEGLOG)
KAFKA_FIGURES = ("count()", "write Parquet")


# --- environment -----------------------------------------------------------------------


def spark_environment(spark, directory: str, master: str) -> Environment:
    import pyspark

    java = spark.sparkContext._jvm.java.lang.System.getProperty("java.version")
    return environment([
        ("spark", f"pyspark {pyspark.__version__}, Java {java}, {master}, not pinned"),
        ("files", file_system(directory, with_options=False)),
        ("page cache", "warm: the log and the Parquet copy are read once before timing"),
        ("libraries", f"numpy {np.__version__}, pyarrow {pa.__version__}"),
        ("brokers", "Apache Kafka (KRaft, one JVM, -Xmx1G, default settings) and seglog broker (defaults), "
                    "both unpinned beside Spark; Spark's Kafka source from spark.jars, default options"),
    ])


# --- input -----------------------------------------------------------------------------


def make_records(count: int, timestamp_ms: int, rng: random.Random) -> list[SimpleRecord]:
    """Small JSON events padded to 100 bytes, keyed by user, CreateTime around ``timestamp_ms``."""
    return [event_record(rng, timestamp_ms + i) for i in range(count)]


def make_pool(batches: int, timestamp_ms: int, seed: int = 42) -> tuple[bytes, ...]:
    rng = random.Random(seed)
    return tuple(build_batch(make_records(BATCH_RECORDS, timestamp_ms, rng)) for _ in range(batches))


def partition_batches(pool: Sequence[bytes], per_partition: int, partition: int, timestamp_ms: int
                      ) -> Iterator[bytes]:
    """The batches of partition ``partition``: the pool's, cycled from the partition's number, then a shorter
    one for the remainder; ``per_partition`` records in all."""
    full, tail = divmod(per_partition, BATCH_RECORDS)
    for i in range(full):
        yield pool[(i + partition) % len(pool)]
    if tail:
        yield build_batch(make_records(tail, timestamp_ms, random.Random(7)))


def write_log(log_dir: str, pool: Sequence[bytes], per_partition: int, partitions: int, timestamp_ms: int) -> int:
    """Fill topic ``bench`` with ``per_partition`` records in each partition; returns bytes written.

    One ``Log.append`` per 16 KiB batch, as produce requests bring them, without
    building a record in the loop: the log assigns offsets to the pooled batches.
    """
    with Broker(log_dir, background=False) as broker:
        broker.create_topic(TOPIC, partitions)
        return append_partitions(broker, pool, per_partition, partitions, timestamp_ms)


def append_partitions(broker: Broker, pool: Sequence[bytes], per_partition: int, partitions: int,
                      timestamp_ms: int) -> int:
    """Append ``per_partition`` records of pooled batches to each partition of topic ``bench``, flushed;
    returns the bytes its logs hold."""
    written = 0
    for p in range(partitions):
        log = broker.log_manager.get_log(TopicPartition(TOPIC, p))
        for batch in partition_batches(pool, per_partition, p, timestamp_ms):
            log.append(batch)
        if log.log_end_offset != per_partition:
            raise AssertionError(f"{log}: log end offset {log.log_end_offset}, expected {per_partition}")
        log.flush()
        written += log.size
    return written


def produce_log(bootstrap: str, pool: Sequence[bytes], per_partition: int, partitions: int,
                timestamp_ms: int, timeout_s: float = 60.0) -> None:
    """Create topic ``bench`` on the broker at ``bootstrap`` and produce into it the batches ``write_log``
    appends, batch for batch (acks=1): the same records in the same batches.

    Kafka takes one batch per partition in a Produce request, so each request carries the next batch of
    every partition. A partition whose leader is not ready yet (a new topic) gets its batch again.
    """
    create_topic(bootstrap, TOPIC, partitions)
    streams = [partition_batches(pool, per_partition, p, timestamp_ms) for p in range(partitions)]
    pending: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout_s
    with ProtocolClient(bootstrap, timeout_s=120) as client:
        while True:
            for p, stream in enumerate(streams):
                if p not in pending and (batch := next(stream, None)) is not None:
                    pending[p] = batch
            if not pending:
                return
            response = client.send(ApiKey.PRODUCE, {
                "transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": [{
                    "name": TOPIC, "partition_data": [{"index": p, "records": b} for p, b in pending.items()]}]})
            for result in response["responses"][0]["partition_responses"]:
                code = result["error_code"]
                if code == 0:
                    del pending[result["index"]]
                elif code not in RETRIABLE_PRODUCE_ERRORS or time.monotonic() > deadline:
                    raise RuntimeError(f"{bootstrap}: producing to {TOPIC}-{result['index']} failed with error "
                                       f"code {code} ({result['error_message']})")
            if pending and all(p in pending for p in range(partitions)):
                time.sleep(0.1)  # nothing went through: wait for the leaders


def write_ceiling_rows(path: str, pool: Sequence[bytes], batch_rows: int) -> int:
    """The pool's records as Arrow, in compact batches of exactly ``batch_rows`` rows; returns the batch count."""
    laid = bytearray(b"".join(pool))
    position, offset = 0, 0
    for batch in pool:
        set_base_offset(laid, position, offset)
        position += len(batch)
        offset += BATCH_RECORDS
    rows = decode_to_arrow(bytes(laid), topic=TOPIC, partition=0)
    count = rows.num_rows // batch_rows
    if count == 0:
        raise ValueError(f"the pool holds {rows.num_rows} rows, fewer than one batch of {batch_rows}")
    table = pa.Table.from_batches([rows]).slice(0, count * batch_rows)
    with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, kafka_schema()) as writer:
        writer.write_table(table, max_chunksize=batch_rows)
    return count


# --- measuring -------------------------------------------------------------------------


def measure(actions: dict[str, Callable[[], object]], check: Callable[[str, object], None], rows: int,
            runs: int, name: str, log) -> dict[str, Timing]:
    """Time each source's action ``runs`` times after one warm-up, rotating which goes first."""
    seconds: dict[str, list[float]] = {who: [] for who in actions}
    names = list(actions)
    for i in range(runs + 1):
        order = names[i % len(names):] + names[:i % len(names)]
        took = []
        for who in order:
            s, result = timed(actions[who])
            check(who, result)
            if i:
                seconds[who].append(s)
            took.append(f"{who} {s:.2f} s")
        log(f"  {name}: {'warm-up' if i == 0 else f'run {i} of {runs}'}: {', '.join(took)}")
    return {who: Timing(rows, tuple(s)) for who, s in seconds.items()}


def decode_alone(log_dir: str, per_partition: int) -> Timing:
    """``connector.reading.read_range`` over partition 0 in this process, without Spark: the
    Python side of one task (listing, reading 4 MiB chunks, decoding to Arrow)."""
    directory = LogDirectory(log_dir)
    r = OffsetRange(TOPIC, 0, 0, per_partition)

    def run() -> int:
        return sum(b.num_rows for b in read_range(directory, r, include_headers=False, fail_on_data_loss=True,
                                                  chunk_bytes=4 * MIB))

    got = run()
    if got != per_partition:
        raise AssertionError(f"read_range gave {got} rows, expected {per_partition}")
    seconds = []
    for _ in range(5):
        s, _ = timed(run)
        seconds.append(s)
    return Timing(per_partition, tuple(seconds))


def spark_session(master: str, warehouse: str, *, app: str = "seglog-connector-bench", driver_memory: str = "4g",
                  with_kafka_source: bool = True):
    """The benchmarks' Spark session; ``with_kafka_source`` gives it Spark's Kafka source jars."""
    # Spark's Python workers must run this interpreter (the one with seglog installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", driver_memory)
               .config("spark.sql.warehouse.dir", warehouse)
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}"))
    if with_kafka_source:
        builder = builder.config("spark.jars", spark_jars())
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def kafka_source(spark, bootstrap: str, min_partitions: int | None):
    """Spark's own Kafka source over topic ``bench`` of the broker at ``bootstrap``, from start to end."""
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
              .option("startingOffsets", "earliest").option("endingOffsets", "latest"))
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    return reader.load()


def figures(spark, root: str, log_dir: str, parquet_dir: str, ceiling_path: str, bootstraps: dict[str, str],
            rows: int, runs: int, log) -> list[Row]:
    """Every figure; ``bootstraps`` maps each of ``KAFKA_SOURCES`` to the broker it reads from."""
    out_dir = os.path.join(root, "out")
    expected_sum = rows * VALUE_SIZE

    def check_count(who: str, got) -> None:
        if got != rows:
            raise AssertionError(f"{who}: count() gave {got}, expected {rows}")

    def check_sum(who: str, got) -> None:
        if got != expected_sum:
            raise AssertionError(f"{who}: {SCAN} gave {got}, expected {expected_sum}")

    written = set()

    def check_written(who: str, _) -> None:
        if who not in written:  # once per source: reading it back costs a full scan
            got = spark.read.parquet(out_dir).count()
            if got != rows:
                raise AssertionError(f"{who}: the Parquet write holds {got} rows, expected {rows}")
            written.add(who)

    result = []
    for tasks_wanted, min_partitions in ((PARTITIONS, None), (MIN_PARTITIONS, MIN_PARTITIONS)):
        reader = spark.read.format("seglog").option("path", log_dir).option("subscribe", TOPIC)
        if min_partitions:
            reader = reader.option("minPartitions", str(min_partitions))
        frames = {
            "seglog": reader.load(),
            "ceiling": (spark.read.format(CeilingSource.name()).option("path", ceiling_path)
                        .option("rows", str(rows)).option("partitions", str(tasks_wanted)).load()),
            "parquet": spark.read.parquet(parquet_dir),
            **{who: kafka_source(spark, bootstraps[who], min_partitions) for who in KAFKA_SOURCES},
        }
        tasks = {who: df.rdd.getNumPartitions() for who, df in frames.items()}
        label = f"{tasks['seglog']} tasks" + (f" (minPartitions={min_partitions})" if min_partitions else "")
        log(f"{label}: tasks {tasks}")
        for action, make, check in (
                ("count()", lambda df: df.count, check_count),
                (SCAN, lambda df: (lambda: df.selectExpr(f"{SCAN} AS s").collect()[0]["s"]), check_sum),
                ("write Parquet", lambda df: (lambda: df.write.mode("overwrite").parquet(out_dir)),
                 check_written)):
            name = f"{action}, {label}"
            taking_part = {who: df for who, df in frames.items()
                           if who not in KAFKA_SOURCES or action in KAFKA_FIGURES}
            timings = measure({who: make(df) for who, df in taking_part.items()}, check, rows, runs, name, log)
            result.append(Row(name, tasks, timings))
        shutil.rmtree(out_dir, ignore_errors=True)
    return result


# --- reporting -------------------------------------------------------------------------


def targets(rows: list[Row]) -> list[Target]:
    """The issues' targets: seglog's count() and sum(length(value)) at least 0.75x the ceiling's, and seglog at
    least 1.5x Spark's Kafka source over Apache Kafka on count() and on writing Parquet."""
    found = [Target(f"{row.figure}: seglog at least 0.75x the ceiling",
                    f"{row.ratio('ceiling'):.2f}x ({rate(row.timings['seglog'].best_rate)} against "
                    f"{rate(row.timings['ceiling'].best_rate)} rows/s); median of the runs' ratios "
                    f"{ratio_text(row.run_ratio('ceiling'))}", row.ratio("ceiling") >= 0.75)
             for row in rows if row.figure.startswith(("count()", "sum(length(value))"))]
    for row in rows:
        ratio = row.ratio(KAFKA_FROM_KAFKA)
        if ratio is not None:
            found.append(Target(f"{row.figure}: seglog at least 1.5x Spark's Kafka source over Apache Kafka",
                                f"{ratio:.2f}x ({rate(row.timings['seglog'].best_rate)} against "
                                f"{rate(row.timings[KAFKA_FROM_KAFKA].best_rate)} rows/s)", ratio >= 1.5))
    return found


PEERS = SOURCES[1:]


def print_table(env: Environment, rows: list[Row], alone: Timing | None, notes: list[str], runs: int) -> None:
    print_environment(env)
    print(f"\nrows/s, best of {runs} runs (median); ratios, seglog / each peer: of the best runs; the median of "
          f"the runs' ratios (seglog's rate over the peer's in the same run)")
    print_header(f"{'figure':<48} " + " ".join(f"{who:>20}" for who in SOURCES) + " "
                 + " ".join(f"{'/' + who:>13}" for who in ("ceiling", "parquet", "kafka:K", "kafka:s")))
    for row in rows:
        cells = [f"{rate(t.best_rate)} ({rate(t.median_rate)})" if t else "-"
                 for t in (row.timings.get(w) for w in SOURCES)]
        print(f"{row.figure:<48} " + " ".join(f"{c:>20}" for c in cells) + " "
              + " ".join(f"{row.ratio_cell(w):>13}" for w in PEERS))
    print(f"  kafka:K = Spark's Kafka source over Apache Kafka ({KAFKA_FROM_KAFKA}); "
          f"kafka:s = over seglog broker ({KAFKA_FROM_SEGLOG})")
    for row in rows:
        if not row.figure.startswith("count()"):
            continue
        print(f"  {row.figure}: tasks " + ", ".join(f"{w} {row.tasks[w]}" for w in SOURCES) + "; best "
              + ", ".join(f"{w} {min(row.timings[w].seconds):.2f} s" for w in SOURCES))
    for note in notes:
        print(f"  {note}")
    if alone is not None:
        print(f"  read_range alone, partition 0, no Spark, one thread: {rate(alone.best_rate)} rows/s "
              f"({rate(alone.median_rate)}), best of {len(alone.seconds)}")
    print_targets(targets(rows))


def print_markdown(env: Environment, rows: list[Row], runs: int) -> None:
    date, command = date_and_command(env)
    print_markdown_header(("figure", f"seglog, rows/s (best of {runs}; median)", "ceiling, rows/s", "Parquet, rows/s",
                           "Spark's Kafka source over Apache Kafka, rows/s",
                           "Spark's Kafka source over seglog broker, rows/s",
                           *(f"seglog / {peer} (best; median of the runs' ratios)" for peer in
                             ("ceiling", "Parquet", "Kafka source over Kafka", "Kafka source over seglog broker")),
                           "command", "date"))
    for row in rows:
        cells = [f"{rate(t.best_rate)}; {rate(t.median_rate)}" if t else "-"
                 for t in (row.timings.get(w) for w in SOURCES)]
        print_markdown_row((row.figure, *cells, *(row.ratio_cell(w) for w in PEERS), f"`{command}`", date))
    print_markdown_targets(targets(rows))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argument_parser(__doc__, "a smoke run: 500,000 records, 2 runs", pin=False)
    p.add_argument("--runs", type=int, help="timed runs per figure, after one warm-up (default 5, 2 with --quick)")
    p.add_argument("--records", type=int, help="records in the topic, over 8 partitions (default 10,000,000)")
    p.add_argument("--ceiling-batch-rows", type=int, default=CEILING_BATCH_ROWS,
                   help=f"rows per Arrow batch the ceiling yields (default {CEILING_BATCH_ROWS:,})")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--dir", default="/tmp", help="where the temporary log and Parquet files go (default /tmp)")
    args = p.parse_args(argv)
    args.runs = args.runs or (2 if args.quick else 5)
    args.records = args.records or (500_000 if args.quick else 10_000_000)
    if args.records % PARTITIONS:
        p.error(f"--records must be a multiple of {PARTITIONS}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    needed = max(MIN_FREE_BYTES // 10, MIN_FREE_BYTES * args.records // 10_000_000)
    short = short_of_disk(args.dir, needed)
    if short:
        log(f"{short}, fewer than the {needed / GIB:.1f} GiB this run needs (the log, Apache Kafka's copy, a "
            f"Parquet copy and a written copy)")
        return 1
    with scratch_directory("seglog-connector-bench-", args.dir) as root:
        return run_all(args, root)


@contextlib.contextmanager
def brokers_serving(root: str, log_dir: str, pool: Sequence[bytes], per_partition: int, timestamp_ms: int
                    ) -> Iterator[dict[str, str]]:
    """``seglog broker`` on ``log_dir`` and Apache Kafka holding the same batches; yields the bootstrap of
    each of ``KAFKA_SOURCES``."""
    with contextlib.ExitStack() as stack:
        log("starting seglog broker on the log dir")
        seglog = start_broker("seglog", root, None,
                              command=lambda name, port, _: broker_command(name, port, log_dir))
        stack.callback(stop_broker, seglog)
        log("starting Apache Kafka")
        kafka = stack.enter_context(KafkaBroker(os.path.join(root, "apache-kafka"), heap="-Xmx1G"))
        log("producing the same batches into Apache Kafka")
        s, _ = timed(lambda: produce_log(kafka.bootstrap, pool, per_partition, PARTITIONS, timestamp_ms))
        log(f"  {s:.1f} s")
        yield {KAFKA_FROM_KAFKA: kafka.bootstrap, KAFKA_FROM_SEGLOG: seglog.bootstrap}


def run_all(args: argparse.Namespace, root: str) -> int:
    """All figures, with Spark, in the scratch directory ``root``."""
    log_dir = os.path.join(root, "logs")
    parquet_dir = os.path.join(root, "parquet")
    ceiling_path = os.path.join(root, "ceiling.arrow")
    per_partition = args.records // PARTITIONS
    now_ms = int(time.time() * 1000)
    log(f"building a pool of {POOL_BATCHES} batches of {BATCH_RECORDS} records")
    pool = make_pool(POOL_BATCHES, now_ms)
    log(f"writing {args.records:,} records over {PARTITIONS} partitions with Log.append")
    s, log_bytes = timed(lambda: write_log(log_dir, pool, per_partition, PARTITIONS, now_ms))
    log(f"  {log_bytes / MIB:,.0f} MiB in {s:.1f} s")
    ceiling_batches = write_ceiling_rows(ceiling_path, pool, args.ceiling_batch_rows)
    with brokers_serving(root, log_dir, pool, per_partition, now_ms) as bootstraps:
        del pool
        log("reading partition 0 with read_range alone (no Spark)")
        alone = decode_alone(log_dir, per_partition)
        # Spark stops before the brokers do: its Kafka consumers would otherwise retry them.
        spark = spark_session(args.master, os.path.join(root, "warehouse"))
        try:
            spark.dataSource.register(CeilingSource)
            env = spark_environment(spark, args.dir, args.master)
            log("writing the Parquet copy from the log (untimed)")
            (spark.read.format("seglog").option("path", log_dir).option("subscribe", TOPIC).load()
             .write.parquet(parquet_dir))
            parquet_bytes = sum(os.path.getsize(os.path.join(parquet_dir, n)) for n in os.listdir(parquet_dir))
            rows = figures(spark, root, log_dir, parquet_dir, ceiling_path, bootstraps, args.records, args.runs,
                           log)
        finally:
            spark.stop()
    notes = [f"log: {log_bytes / MIB:,.0f} MiB ({log_bytes / args.records:.1f} B/record) in {PARTITIONS} "
             f"partitions; Parquet copy: {parquet_bytes / MIB:,.0f} MiB",
             f"ceiling: {ceiling_batches} distinct Arrow batches of {args.ceiling_batch_rows:,} rows, "
             f"cycled; seglog yields one batch per 4 MiB chunk (~{4 * MIB * args.records // log_bytes:,} "
             f"rows)"]
    print_table(env, rows, alone, notes, args.runs)
    if args.markdown:
        print_markdown(env, rows, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
