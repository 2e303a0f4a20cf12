"""Topics as Delta tables (``connector.tables``), in the test's Spark session: what the tables hold after a
sync, read by delta-spark and by delta-rs."""

from __future__ import annotations

import os

import pytest

from tests.connector.tables_kit import as_json, delta_rs_rows, produce_values, run_sync, seglog, spark_rows

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


def test_an_upsert_table_holds_the_latest_value_per_key_and_no_deleted_keys(spark, tmp_path):
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "customers")
    compacted = {"cleanup.policy": "compact"}
    produce_values(log_dir, "customers", [(b"a", as_json(name="Ann", n=1)), (b"b", as_json(name="Bob", n=1)),
                                          (b"a", as_json(name="Ann", n=2)), (b"c", as_json(name="Cy", n=1))],
                   config=compacted)
    # The first sync makes the table; the second MERGEs into it, a tombstone among its records.
    run_sync(spark, table, topic="customers", log_dir=log_dir, value_format="json", max_offsets_per_trigger=3)
    produce_values(log_dir, "customers", [(b"b", None), (b"c", as_json(name="Cy", n=2)),
                                          (b"d", as_json(name="Di", n=1)), (b"c", as_json(name="Cy", n=3)),
                                          (b"a", None), (b"a", as_json(name="Al", n=3))], first_n=4)
    run_sync(spark, table, topic="customers", log_dir=log_dir, value_format="json", max_offsets_per_trigger=3)
    expected = [(b"a", "Al", 3, 9), (b"c", "Cy", 3, 7), (b"d", "Di", 1, 6)]
    columns = ["key", "name", "n", "offset"]
    assert spark_rows(spark, table, columns) == expected
    assert delta_rs_rows(table, columns) == expected


def test_new_json_fields_become_new_columns(spark, tmp_path):
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "events")
    produce_values(log_dir, "events", [(b"1", as_json(id=1, kind="click"))])
    run_sync(spark, table, topic="events", log_dir=log_dir, value_format="json")
    produce_values(log_dir, "events", [(b"2", as_json(id=2, kind="view", page="/home", ms=1.5))], first_n=1)
    run_sync(spark, table, topic="events", log_dir=log_dir, value_format="json")
    # Delta adds new columns after the others.
    assert spark.read.format("delta").load(table).columns == ["id", "kind", "key", "topic", "partition", "offset",
                                                              "timestamp", "headers", "date", "ms", "page"]
    expected = [(1, "click", None, None), (2, "view", 1.5, "/home")]
    assert spark_rows(spark, table, ["id", "kind", "ms", "page"]) == expected
    assert delta_rs_rows(table, ["id", "kind", "ms", "page"]) == expected


def test_new_json_fields_become_new_columns_of_an_upsert_table(spark, tmp_path):
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "users")
    produce_values(log_dir, "users", [(b"u1", as_json(name="Ann"))])
    run_sync(spark, table, topic="users", log_dir=log_dir, value_format="json", mode="upsert")
    produce_values(log_dir, "users", [(b"u1", as_json(name="Ann", city="Oslo")), (b"u2", as_json(name="Bo"))],
                   first_n=1)
    run_sync(spark, table, topic="users", log_dir=log_dir, value_format="json", mode="upsert")
    expected = [(b"u1", "Ann", "Oslo"), (b"u2", "Bo", None)]
    assert spark_rows(spark, table, ["key", "name", "city"]) == expected
    assert delta_rs_rows(table, ["key", "name", "city"]) == expected


def test_records_that_do_not_decode_go_to_the_dead_letter_table_with_their_coordinates(spark, tmp_path):
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "orders")
    produce_values(log_dir, "orders", [(b"k0", as_json(id=1, qty=2)), (b"k1", b"{not json"),
                                       (b"k2", b"[1, 2]"), (b"k3", as_json(id=4, qty=1))])
    run_sync(spark, table, topic="orders", log_dir=log_dir, value_format="json")
    produce_values(log_dir, "orders", [(b"k4", as_json(id=5, qty="many")), (b"k5", as_json(id=6, qty=3))],
                   first_n=4)
    run_sync(spark, table, topic="orders", log_dir=log_dir, value_format="json")
    assert spark_rows(spark, table, ["offset", "id", "qty"]) == [(0, 1, 2), (3, 4, 1), (5, 6, 3)]
    dead = spark_rows(spark, f"{table}/_seglog/dead_letters",
                      ["topic", "partition", "offset", "key", "value", "error", "unix_millis(timestamp)"])
    from tests.connector.conftest import T0
    assert [row[:5] for row in dead] == [("orders", 0, 1, b"k1", b"{not json"), ("orders", 0, 2, b"k2", b"[1, 2]"),
                                         ("orders", 0, 4, b"k4", b'{"id": 5, "qty": "many"}')]
    assert [row[6] for row in dead] == [T0 + 86_400_000, T0 + 2 * 86_400_000, T0 + 4 * 86_400_000]
    assert dead[0][5].startswith("not valid JSON: ")
    assert dead[1][5] == "a JSON array, not an object"
    assert dead[2][5] == 'field qty: "many" is a string, the column is long'


def test_the_sync_optimizes_the_table_on_its_upkeep_schedule(spark, tmp_path):
    from deltalake import DeltaTable

    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "clicks")
    produce_values(log_dir, "clicks", [(None, f"c{n}".encode()) for n in range(12)])
    # Every batch after the first finds the interval passed: OPTIMIZE, then VACUUM of what it replaced.
    # The sync lists the table's files for VACUUM in as many tasks as the session has cores (Spark's
    # default, 10,000 tasks, made most of each VACUUM of a few files), and leaves the setting as it was.
    listing = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        run_sync(spark, table, topic="clicks", log_dir=log_dir, partition_by="none", max_offsets_per_trigger=4,
                 optimize_interval="1ms", vacuum_retain_hours=0)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert spark.conf.get(listing, None) is None
    operations = [h["operation"] for h in reversed(DeltaTable(table).history())]
    assert operations.count("OPTIMIZE") == 2 and operations[-1] != "WRITE"
    assert len(DeltaTable(table).file_uris()) == 1
    # VACUUM leaves the query's checkpoint inside the table's directory alone.
    assert sorted(os.listdir(os.path.join(table, "_seglog", "checkpoint", "commits"))) == [
        ".0.crc", ".1.crc", ".2.crc", "0", "1", "2"]
    assert spark_rows(spark, table, ["offset", "value"]) == [(n, f"c{n}".encode()) for n in range(12)]
    assert delta_rs_rows(table, ["offset", "value"]) == [(n, f"c{n}".encode()) for n in range(12)]


def test_seglog_tables_optimize_compacts_the_small_files_and_vacuums(spark, tmp_path):
    from deltalake import DeltaTable

    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "clicks")
    produce_values(log_dir, "clicks", [(None, f"c{n}".encode()) for n in range(6)])
    run_sync(spark, table, topic="clicks", log_dir=log_dir, partition_by="none", max_offsets_per_trigger=2)
    assert len(DeltaTable(table).file_uris()) == 3
    optimized = seglog("tables", "optimize", "--table", table, "--vacuum-retain", "0")
    assert optimized.returncode == 0, optimized.stderr
    assert optimized.stdout.splitlines()[0] == f"Optimized {table}: 3 files compacted into 1 (version 3)."
    assert optimized.stdout.splitlines()[1] == (f"Vacuumed {table}: 3 files no version within 0 hours needs "
                                                f"were removed.")
    assert len(DeltaTable(table).file_uris()) == 1
    assert sorted(os.listdir(os.path.join(table, "_seglog", "checkpoint", "commits"))) == [
        ".0.crc", ".1.crc", ".2.crc", "0", "1", "2"]
    assert spark_rows(spark, table, ["offset", "value"]) == [(n, f"c{n}".encode()) for n in range(6)]
    assert delta_rs_rows(table, ["offset", "value"]) == [(n, f"c{n}".encode()) for n in range(6)]


def test_a_compacted_topic_of_a_running_broker_is_upserted_and_its_group_committed_through_the_broker(
        spark, tmp_path, broker_server):
    from format.layout import TopicPartition
    from format.record import SimpleRecord

    broker = broker_server.broker
    broker.create_topic("prices", 1, {"cleanup.policy": "compact"})
    broker.produce("prices", [SimpleRecord(as_json(p=n), f"s{n % 2}".encode()) for n in range(5)], partition=0)
    table = str(tmp_path / "prices")
    run_sync(spark, table, topic="prices", bootstrap=broker_server.bootstrap_servers, value_format="json")
    assert delta_rs_rows(table, ["key", "p"]) == [(b"s0", 4), (b"s1", 3)]
    committed = broker.committed_offsets(f"seglog-tables-{table}")
    assert {tp: c.offset for tp, c in committed.items()} == {TopicPartition("prices", 0): 5}
