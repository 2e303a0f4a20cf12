"""A seglog topic into a Delta Lake table, each record exactly once (delta-spark).

    .venv/bin/python examples/delta_pipeline.py LOG_DIR TABLE_DIR [--topic orders] [--checkpoint DIR]

Run it as often as you like: each run streams what arrived since the last one
(``Trigger.AvailableNow``) into the table, resuming from the query's checkpoint
(``TABLE_DIR/_checkpoint`` unless ``--checkpoint`` says otherwise). Delta's sink
writes each micro-batch in one table commit that records the query's id and the
batch id, so a batch run again after a crash — written to the table, but not yet
marked done in the checkpoint — is recognised and not appended twice.

Delta Lake runs in Spark's JVM: its jars (io.delta:delta-spark_2.13 and what it
needs) are handed to Spark with ``spark.jars`` from ``.jvm/spark``, where
``make jvm`` fetches them. Any Delta reader opens the table, delta-spark or
delta-rs (``deltalake``) alike.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_session import ROOT, await_with_progress, local_spark, progress  # noqa: E402

sys.path.insert(0, ROOT)

from jvm.classpath import JarsMissingError, spark_jars  # noqa: E402

DELTA_UNAVAILABLE = 3


def with_delta(jars: str):
    """The ``configure`` hook of ``local_spark`` that gives the session Delta Lake."""
    return lambda builder: (builder.config("spark.jars", jars)
                            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                            .config("spark.sql.catalog.spark_catalog",
                                    "org.apache.spark.sql.delta.catalog.DeltaCatalog"))


def run(spark, log_dir: str, table_dir: str, checkpoint: str, topic: str = "orders",
        max_offsets_per_trigger: int = 100_000) -> None:
    """Stream ``topic`` into the Delta table at ``table_dir`` until what is there now is in."""
    events = (spark.readStream.format("seglog")
              .option("path", log_dir)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", max_offsets_per_trigger)
              .load())
    query = (events.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "topic",
                               "partition", "offset", "timestamp")
             .writeStream.format("delta")
             .outputMode("append")
             .option("checkpointLocation", checkpoint)
             .trigger(availableNow=True)
             .start(table_dir))
    progress(f"streaming {topic} from {log_dir} into the Delta table {table_dir}")
    await_with_progress(query)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("table_dir")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--checkpoint", help="the query's checkpoint (default: TABLE_DIR/_checkpoint)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    args = parser.parse_args()
    try:
        jars = spark_jars()
    except JarsMissingError as exc:
        print(f"Delta Lake's jars are missing ({exc}); run `make jvm` in the checkout to fetch them.",
              file=sys.stderr)
        return DELTA_UNAVAILABLE
    table_dir = os.path.abspath(args.table_dir)
    checkpoint = os.path.abspath(args.checkpoint or os.path.join(table_dir, "_checkpoint"))
    spark = local_spark("seglog-delta", configure=with_delta(jars))
    run(spark, os.path.abspath(args.log_dir), table_dir, checkpoint, args.topic, args.max_offsets_per_trigger)
    table = spark.read.format("delta").load(table_dir)
    version = spark.sql(f"DESCRIBE HISTORY delta.`{table_dir}` LIMIT 1").first().version
    print(f"{table.count()} rows in the Delta table {args.table_dir} (version {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
