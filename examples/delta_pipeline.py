"""A seglog topic into a Delta Lake table (delta-spark).

    .venv/bin/python examples/delta_pipeline.py LOG_DIR TABLE_DIR [--topic orders]

This needs the delta-spark package and the Delta jars for this Spark version.
delta-spark's current releases pin pyspark at or below 4.2, so seglog's
environment (pyspark 4.3) does not install it; where delta-spark and its jars
are present the pipeline runs, and where they are not it says so and exits
with status 3 without touching anything.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_session import await_with_progress, local_spark, progress  # noqa: E402

DELTA_UNAVAILABLE = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("table_dir")
    parser.add_argument("--topic", default="orders")
    args = parser.parse_args()
    try:
        from delta import configure_spark_with_delta_pip  # noqa: F401
    except ImportError:
        print("Delta Lake is not installed here: delta-spark (and its jars) is needed for this example. "
              "Its releases require pyspark <= 4.2 while seglog uses pyspark 4.3; install a matching "
              "delta-spark where one exists.", file=sys.stderr)
        return DELTA_UNAVAILABLE
    spark = local_spark("seglog-delta", configure=lambda builder: configure_spark_with_delta_pip(
        builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")))
    events = (spark.readStream.format("seglog").option("path", os.path.abspath(args.log_dir))
              .option("subscribe", args.topic).option("startingOffsets", "earliest").load())
    query = (events.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition",
                               "offset", "timestamp")
             .writeStream.format("delta").option("checkpointLocation", os.path.join(args.table_dir, "_checkpoint"))
             .trigger(availableNow=True).start(os.path.abspath(args.table_dir)))
    progress(f"streaming {args.topic} into the Delta table {args.table_dir}")
    await_with_progress(query)
    print(f"{spark.read.format('delta').load(os.path.abspath(args.table_dir)).count()} rows in the Delta table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
