"""A local Spark session for the connector tests, and helpers to fill log dirs."""

from __future__ import annotations

import os
import sys

import pytest

from broker_core import Broker
from format.record import Header, SimpleRecord

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    # Spark's Python workers must run this interpreter (the one with seglog installed).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = (SparkSession.builder.master("local[2]").appName("seglog-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.warehouse.dir", str(warehouse))
               .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def produce_numbered(log_dir: str, topic: str, partitions: int, per_partition: int, *, start: int = 0,
                     batch: int = 10, value_size: int = 20, headers: bool = False, config=None) -> None:
    """Records whose value starts with "<topic>-<partition>-<n>" and whose timestamp is T0 + n seconds."""
    with Broker(log_dir, background=False) as broker:
        if topic not in broker.list_topics():
            broker.create_topic(topic, partitions, config or {})
        for p in range(partitions):
            for first in range(start, start + per_partition, batch):
                records = [SimpleRecord(f"{topic}-{p}-{n}".encode() + b"." * value_size, f"k{n}".encode(),
                                        T0 + n * 1000, (Header("n", str(n).encode()),) if headers else ())
                           for n in range(first, min(first + batch, start + per_partition))]
                broker.produce(topic, records, partition=p)
