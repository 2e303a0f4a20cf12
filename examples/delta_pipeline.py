"""A seglog topic into a Delta Lake table, each record exactly once (``connector.tables``, delta-spark).

    .venv/bin/python examples/delta_pipeline.py LOG_DIR TABLE_DIR [--topic orders] [--value-format json]
                                                [--mode append|upsert] [--checkpoint DIR]

Run it as often as you like: each run streams what arrived since the last one
(``Trigger.AvailableNow``) into the table, resuming from the query's checkpoint
(``TABLE_DIR/_seglog/checkpoint`` unless ``--checkpoint`` says otherwise). It is
``seglog tables sync`` as a Python program: ``connector.tables.sync`` writes each
micro-batch with Delta's idempotent writes (the query's id and the batch id), so a
batch run again after a crash — written to the table, but not yet marked done in
the checkpoint — is recognised and not written twice; the consumer group
``seglog-tables-TABLE_DIR`` shows how far the table is.

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


def run(spark, log_dir: str, table_dir: str, checkpoint: str | None = None, topic: str = "orders",
        max_offsets_per_trigger: int = 100_000, value_format: str = "raw", mode: str | None = None) -> None:
    """Stream ``topic`` into the Delta table at ``table_dir`` until what is there now is in."""
    from connector import tables

    query = tables.sync(spark, table_dir, topic=topic, log_dir=log_dir, checkpoint=checkpoint,
                        value_format=value_format, mode=mode, max_offsets_per_trigger=max_offsets_per_trigger)
    progress(f"streaming {topic} from {log_dir} into the Delta table {table_dir}")
    await_with_progress(query)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("table_dir")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--checkpoint", help="the query's checkpoint (default: TABLE_DIR/_seglog/checkpoint)")
    parser.add_argument("--value-format", default="raw", help="raw, json or json-schema=FILE (default raw)")
    parser.add_argument("--mode", choices=("append", "upsert"), help="default: upsert for a compacted topic")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    args = parser.parse_args()
    try:
        jars = spark_jars()
    except JarsMissingError as exc:
        print(f"Delta Lake's jars are missing ({exc}); run `make jvm` in the checkout to fetch them.",
              file=sys.stderr)
        return DELTA_UNAVAILABLE
    table_dir = os.path.abspath(args.table_dir)
    checkpoint = os.path.abspath(args.checkpoint) if args.checkpoint else None
    spark = local_spark("seglog-delta", configure=with_delta(jars))
    run(spark, os.path.abspath(args.log_dir), table_dir, checkpoint, args.topic, args.max_offsets_per_trigger,
        args.value_format, args.mode)
    table = spark.read.format("delta").load(table_dir)
    version = spark.sql(f"DESCRIBE HISTORY delta.`{table_dir}` LIMIT 1").first().version
    print(f"{table.count()} rows in the Delta table {args.table_dir} (version {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
