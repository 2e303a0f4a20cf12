"""A batch read by time: the records of a topic stamped within a window.

    .venv/bin/python examples/batch_by_timestamp.py LOG_DIR TOPIC START_ISO END_ISO

For every partition, reading starts at the first offset whose timestamp is at
or after START and stops before the first offset at or after END — found in
the segments' time indexes, as Kafka's ListOffsets does.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spark_session import local_spark, progress  # noqa: E402


def millis(iso: str) -> int:
    stamp = dt.datetime.fromisoformat(iso)
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    return int(stamp.timestamp() * 1000)


def read_window(spark, log_dir: str, topic: str, start_ms: int, end_ms: int):
    return (spark.read.format("seglog")
            .option("path", log_dir)
            .option("subscribe", topic)
            .option("startingTimestamp", start_ms)
            .option("endingTimestamp", end_ms)
            .load())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_dir")
    parser.add_argument("topic")
    parser.add_argument("start", help="ISO timestamp, UTC unless it says otherwise")
    parser.add_argument("end")
    args = parser.parse_args()
    spark = local_spark("seglog-batch-by-timestamp")
    df = read_window(spark, os.path.abspath(args.log_dir), args.topic, millis(args.start), millis(args.end))
    progress(f"reading {args.topic} between {args.start} and {args.end}")
    df.selectExpr("partition", "offset", "timestamp", "CAST(key AS STRING) AS key",
                  "CAST(value AS STRING) AS value").orderBy("timestamp", "partition", "offset").show(20, False)
    print(f"{df.count()} records between {args.start} and {args.end}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
