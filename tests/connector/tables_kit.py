"""Topics as Delta tables in tests: records produced with chosen keys and values, a sync run to its end in
the test's Spark session, and the table as delta-spark and delta-rs (``deltalake``) read it."""

from __future__ import annotations

import json
from typing import Sequence

from broker_core import Broker
from format.record import SimpleRecord

from tests.connector.conftest import T0


def produce_values(log_dir: str, topic: str, records: Sequence[tuple[bytes | None, bytes | None]], *,
                   partition: int = 0, partitions: int = 1, config: dict | None = None, first_n: int = 0) -> None:
    """(key, value) records into ``topic``'s ``partition``, the n-th with timestamp T0 + n days (so they
    fall on different dates); the topic is created with ``partitions`` and ``config`` if missing."""
    with Broker(log_dir, background=False) as broker:
        if topic not in broker.list_topics():
            broker.create_topic(topic, partitions, config or {})
        broker.produce(topic, [SimpleRecord(value, key, T0 + (first_n + n) * 86_400_000)
                               for n, (key, value) in enumerate(records)], partition=partition)


def as_json(**fields) -> bytes:
    return json.dumps(fields).encode()


def run_sync(spark, table: str, **settings) -> None:
    """A sync from ``connector.tables`` run until its trigger (available-now unless given) is done."""
    from connector import tables

    query = tables.sync(spark, table, **settings)
    query.awaitTermination()
    assert query.exception() is None, query.exception()


def spark_rows(spark, table: str, columns: Sequence[str]) -> list[tuple]:
    """The table's rows (``columns`` of each), sorted, as delta-spark reads them."""
    return sorted(tuple(r) for r in spark.read.format("delta").load(table).selectExpr(*columns).collect())


def delta_rs_rows(table: str, columns: Sequence[str]) -> list[tuple]:
    """The same, as delta-rs reads the table."""
    from deltalake import DeltaTable

    data = DeltaTable(table).to_pyarrow_table(columns=list(columns))
    return sorted(zip(*(data[c].to_pylist() for c in columns)))
