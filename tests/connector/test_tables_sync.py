"""Topics as Delta tables (``connector.tables``), in the test's Spark session: what the tables hold after a
sync, read by delta-spark and by delta-rs."""

from __future__ import annotations

import pytest

from tests.connector.tables_kit import as_json, delta_rs_rows, produce_values, run_sync, spark_rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_an_append_table_holds_every_record_of_the_topic(spark, tmp_path):
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "orders")
    for p in range(2):
        produce_values(log_dir, "orders", [(f"k{n}".encode(), f"v{p}-{n}".encode()) for n in range(25)],
                       partition=p, partitions=2)
    run_sync(spark, table, topic="orders", log_dir=log_dir, max_offsets_per_trigger=20)
    expected = sorted((p, n, f"k{n}".encode(), f"v{p}-{n}".encode()) for p in range(2) for n in range(25))
    columns = ["partition", "offset", "key", "value"]
    assert spark_rows(spark, table, columns) == expected
    assert delta_rs_rows(table, columns) == expected
