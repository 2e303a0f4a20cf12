"""seglog's main job: events into an embedded log, Spark reading them into Parquet under a
consumer group, and the offsets and lag to show for it.

Run with ``make demo``. Everything lands in ``demo-data/`` (or the directory given as the
first argument): ``logs/`` in Apache Kafka's own on-disk layout, ``pipeline/`` with the
Parquet output and the query's checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from broker_core import Broker  # noqa: E402
from broker_core.cli import main as seglog  # noqa: E402
from format.record import Header, SimpleRecord  # noqa: E402
from spark_session import local_spark, progress  # noqa: E402
from streaming_to_parquet import run as run_pipeline  # noqa: E402

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
CUSTOMERS = ["alice", "bob", "carol", "dave", "erin", "frank"]


def order_events(first: int, count: int) -> list[SimpleRecord]:
    out = []
    for i in range(first, first + count):
        customer = CUSTOMERS[i % len(CUSTOMERS)]
        event = {"order_id": 10_000 + i, "customer": customer, "amount": round(5 + (i * 7.31) % 200, 2)}
        out.append(SimpleRecord(json.dumps(event).encode(), customer.encode(), T0 + i * 1000,
                                (Header("source", b"demo"),)))
    return out


def produce(log_dir: str, first: int, count: int) -> None:
    with Broker(log_dir) as broker:
        if "orders" not in broker.list_topics():
            broker.create_topic("orders", 3, {"segment.bytes": 16384})
            broker.create_topic("customers", 1, {"cleanup.policy": "compact"})
            broker.produce("customers", [SimpleRecord(json.dumps({"name": c, "tier": "gold" if i % 2 else "silver"})
                                                      .encode(), c.encode(), T0) for i, c in enumerate(CUSTOMERS)])
        events = order_events(first, count)
        for start in range(0, len(events), 50):
            broker.produce("orders", events[start:start + 50], compression="lz4")
    print(f"produced orders {first}..{first + count - 1} into {log_dir} (keyed by customer)")


def show_view(spark, log_dir: str, view: str, columns: list[str]) -> None:
    progress(f"reading the '{view}' view")
    df = spark.read.format("seglog").option("path", log_dir).option("view", view).load()
    print(f"\nview '{view}':")
    df.select(*columns).orderBy(*columns[:2]).show(truncate=False)


def main() -> int:
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "demo-data")
    log_dir, out_dir = os.path.join(root, "logs"), os.path.join(root, "pipeline")
    shutil.rmtree(log_dir, ignore_errors=True)
    shutil.rmtree(out_dir, ignore_errors=True)

    progress(f"producing order events into {log_dir}")
    produce(log_dir, 0, 600)
    print("\n$ seglog topics describe")
    seglog(["topics", "describe", "--log-dir", log_dir])

    spark = local_spark("seglog-demo")
    written = run_pipeline(spark, log_dir, out_dir)
    print(f"\nfirst run: the streaming query (availableNow, group 'orders-etl') wrote {written} rows to Parquet")
    from pyspark.sql import functions as F

    totals = spark.read.parquet(os.path.join(out_dir, "data")).groupBy("customer").agg(
        F.count("order_id").alias("orders"), F.round(F.sum("amount"), 2).alias("amount")).orderBy("customer")
    totals.show()
    show_view(spark, log_dir, "offsets", ["topic", "partition", "log_start_offset", "log_end_offset",
                                          "size_bytes", "segments"])
    show_view(spark, log_dir, "groups", ["group", "topic", "partition", "committed_offset", "log_end_offset",
                                         "lag"])

    progress("producing more order events: the group's lag grows")
    produce(log_dir, 600, 300)
    show_view(spark, log_dir, "groups", ["group", "topic", "partition", "committed_offset", "log_end_offset",
                                         "lag"])
    written = run_pipeline(spark, log_dir, out_dir)
    print(f"second run: the query resumed from its checkpoint and wrote {written} new rows "
          f"({spark.read.parquet(os.path.join(out_dir, 'data')).count()} in all)")
    show_view(spark, log_dir, "groups", ["group", "topic", "partition", "committed_offset", "log_end_offset",
                                         "lag"])
    print("$ seglog groups describe --group orders-etl")
    seglog(["groups", "describe", "--log-dir", log_dir, "--group", "orders-etl"])
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
