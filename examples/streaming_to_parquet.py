"""A streaming pipeline: a seglog topic into Parquet, with a checkpoint and a consumer group.

    .venv/bin/python examples/streaming_to_parquet.py LOG_DIR OUT_DIR [--topic orders] [--group orders-etl]

Run it as often as you like: each run reads what arrived since the last one
(``Trigger.AvailableNow``), resumes from its checkpoint, and commits the group's
offsets into the log dir so ``seglog groups describe`` shows the pipeline's lag.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_session import await_with_progress, local_spark, progress  # noqa: E402


def run(spark, log_dir: str, out_dir: str, topic: str = "orders", group: str = "orders-etl") -> int:
    """Run the pipeline once (availableNow); returns how many rows it wrote."""
    from pyspark.sql import functions as F

    events = (spark.readStream.format("seglog")
              .option("path", log_dir)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("groupId", group)
              .option("maxOffsetsPerTrigger", 100_000)
              .load())
    parsed = events.select(
        F.col("key").cast("string").alias("customer"),
        F.get_json_object(F.col("value").cast("string"), "$.order_id").cast("long").alias("order_id"),
        F.get_json_object(F.col("value").cast("string"), "$.amount").cast("double").alias("amount"),
        "partition", "offset", "timestamp")
    before = _count(spark, os.path.join(out_dir, "data"))
    query = (parsed.writeStream.format("parquet")
             .option("path", os.path.join(out_dir, "data"))
             .option("checkpointLocation", os.path.join(out_dir, "checkpoint"))
             .trigger(availableNow=True)
             .start())
    progress(f"streaming {topic} from {log_dir} into {out_dir}/data (group {group})")
    await_with_progress(query)
    return _count(spark, os.path.join(out_dir, "data")) - before


def _count(spark, path: str) -> int:
    if not os.path.exists(os.path.join(path, "_spark_metadata")):
        return 0
    return spark.read.parquet(path).count()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--group", default="orders-etl")
    args = parser.parse_args()
    spark = local_spark("seglog-streaming-to-parquet")
    written = run(spark, os.path.abspath(args.log_dir), os.path.abspath(args.out_dir), args.topic, args.group)
    print(f"wrote {written} rows to {args.out_dir}/data")
    return 0


if __name__ == "__main__":
    sys.exit(main())
