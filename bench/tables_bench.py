"""Benchmark of topics as Delta tables: rows/s from a topic into a Delta table, ``seglog tables sync``
(``connector.tables.sync``) beside a hand-written Spark job doing the same from Apache Kafka.

The same records (``connector_bench``'s pooled 100-byte JSON events with 10-byte
keys, in 16 KiB batches) are in a seglog log dir and, produced batch for batch,
in Apache Kafka (one KRaft broker, ``jvm.apache_kafka``). Each figure is one
``Trigger.AvailableNow`` streaming query from the first offset to the end into a
fresh, unpartitioned Delta table, timed from ``start()`` to its end:

* append (``--value-format raw``): every record a row. The hand-written job is
  ``format("kafka")`` → ``writeStream.format("delta")`` of the same columns;
* append (``--value-format json``): the JSON fields as columns. The hand-written
  job parses with ``from_json`` and a schema given up front (no inference, no
  dead-letter check);
* upsert (``--mode upsert``, raw values): the latest value per key MERGEd. The
  hand-written job is ``foreachBatch`` with the same window and MERGE.

Both paths run in one ``local[2]`` session, alternately (which goes first
alternates too, so neither always pays the session's warm-up), ``--runs`` times;
the median is reported. ``maxOffsetsPerTrigger`` is the same for both.

Run ``python bench/tables_bench.py`` (``--records``, ``--runs``, ``--quick``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from typing import Callable, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import environment, log, print_environment, rate, scratch_directory, timed  # noqa: E402
from connector_bench import PARTITIONS, POOL_BATCHES, TOPIC, make_pool, produce_log, write_log  # noqa: E402

from jvm.apache_kafka import KafkaBroker  # noqa: E402
from jvm.classpath import spark_jars  # noqa: E402

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
EVENT_SCHEMA = "user long, event string, page string, s string"


def spark_session(master: str, warehouse: str):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("seglog-tables-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.memory", "4g").config("spark.jars", spark_jars())
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.warehouse.dir", warehouse).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def seglog_job(spark, log_dir: str, table: str, per_trigger: int, value_format: str, mode: str):
    from connector import tables

    return tables.sync(spark, table, topic=TOPIC, log_dir=log_dir, value_format=value_format, mode=mode,
                       partition_by="none", max_offsets_per_trigger=per_trigger)


def kafka_job(spark, bootstrap: str, table: str, per_trigger: int, value_format: str, mode: str):
    """The streaming job a user writes by hand from Spark's Kafka source into Delta."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    records = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", TOPIC).option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", str(per_trigger)).load())
    if value_format == "json":
        parsed = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA)
        records = records.select(parsed.alias("v"), *COLUMNS).select("v.*", *COLUMNS).drop("value")
    else:
        records = records.select(*COLUMNS)
    checkpoint = table + "/_checkpoint"
    if mode == "append":
        writer = records.writeStream.format("delta").option("checkpointLocation", checkpoint)
        return writer.trigger(availableNow=True).start(table)

    def upsert(batch, batch_id: int) -> None:
        newest = Window.partitionBy("topic", "key").orderBy(F.col("offset").desc())
        latest = batch.withColumn("r", F.row_number().over(newest)).where("r = 1").drop("r")
        if not DeltaTable.isDeltaTable(spark, table):
            latest.write.format("delta").option("txnAppId", "bench").option("txnVersion", batch_id).save(table)
            return
        (DeltaTable.forPath(spark, table).alias("t").merge(latest.alias("s"), "t.topic = s.topic AND t.key = s.key")
         .whenMatchedDelete("s.value IS NULL").whenMatchedUpdateAll().whenNotMatchedInsertAll("s.value IS NOT NULL")
         .execute())

    return (records.writeStream.foreachBatch(upsert).option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start())


def run_to_end(start: Callable[[], object]) -> None:
    query = start()
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(query.exception())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--per-trigger", type=int, default=500_000, help="maxOffsetsPerTrigger of both jobs")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", help="where the scratch directory goes (default: the system's temporary folder)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100,000 records, one run")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.runs, args.per_trigger = 100_000, 1, 50_000
    per_partition = args.records // PARTITIONS
    with scratch_directory("seglog-tables-bench-", args.dir) as root:
        log_dir = os.path.join(root, "logs")
        now_ms = int(time.time() * 1000)
        pool = make_pool(POOL_BATCHES, now_ms)
        log(f"writing {args.records:,} records over {PARTITIONS} partitions")
        write_log(log_dir, pool, per_partition, PARTITIONS, now_ms)
        with KafkaBroker(os.path.join(root, "apache-kafka"), heap="-Xmx1G") as kafka:
            log("producing the same batches into Apache Kafka")
            produce_log(kafka.bootstrap, pool, per_partition, PARTITIONS, now_ms)
            spark = spark_session(args.master, os.path.join(root, "warehouse"))
            try:
                cases = [("append", "raw"), ("append", "json"), ("upsert", "raw")]
                results: dict[tuple[str, str, str], list[float]] = {}
                for run in range(args.runs):
                    for mode, value_format in cases:
                        for who in ("seglog", "kafka") if run % 2 == 0 else ("kafka", "seglog"):
                            table = os.path.join(root, f"{who}-{mode}-{value_format}-{run}")
                            if who == "seglog":
                                start = lambda: seglog_job(spark, log_dir, table, args.per_trigger,  # noqa: E731
                                                           value_format, mode)
                            else:
                                start = lambda: kafka_job(spark, kafka.bootstrap, table,  # noqa: E731
                                                          args.per_trigger, value_format, mode)
                            seconds, _ = timed(lambda: run_to_end(start))
                            results.setdefault((mode, value_format, who), []).append(seconds)
                            log(f"  run {run}: {who} {mode} {value_format}: {args.records / seconds:,.0f} rows/s")
                            shutil.rmtree(table, ignore_errors=True)
                env = environment([("Spark", f"{spark.version} {args.master}"), ("records", f"{args.records:,}"),
                                   ("maxOffsetsPerTrigger", f"{args.per_trigger:,}")])
            finally:
                spark.stop()
    print_environment(env)
    print(f"{'case':<28} {'seglog tables sync':>20} {'format(kafka) job':>20} {'seglog/kafka':>13}")
    for mode, value_format in cases:
        ours = statistics.median(results[(mode, value_format, "seglog")])
        theirs = statistics.median(results[(mode, value_format, "kafka")])
        print(f"{mode + ' ' + value_format:<28} {rate(args.records / ours) + ' rows/s':>20} "
              f"{rate(args.records / theirs) + ' rows/s':>20} "
              f"{theirs / ours:>12.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
