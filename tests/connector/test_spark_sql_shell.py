"""``seglog sql`` runs the real ``spark-sql`` shell on examples/inspect.sql, from a
directory outside the checkout, with no virtualenv activated and no SPARK_HOME.

It checks what a user at a shell relies on: Spark finds the ``seglog`` source
by itself (``pyspark_seglog``), ``-d logdir=...`` reaches the SQL file, the
views print exact rows under a header line, spark_conf/ keeps the output quiet
and in UTC, and the shell leaves nothing in the working directory.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from broker_core import Broker
from broker_core.clock import MockTime
from format.layout import TopicPartition
from tests.connector.conftest import T0, bytes_from, produce_numbered
from tests.shell_kit import VENV_BIN, run_to_end, user_environment

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SEGLOG = os.path.join(VENV_BIN, "seglog")
TIMEOUT_S = 240
# What the shell leaves in its working directory unless told otherwise.
SHELL_LITTER = ("metastore_db", "derby.log", "spark-warehouse")


def run_seglog_sql(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``seglog sql`` in a shell where the virtualenv is not active: its bin/ is not on PATH, no SPARK_HOME."""
    return run_to_end([SEGLOG, "sql", "--conf", "spark.ui.enabled=false", *arguments], cwd,
                      user_environment(venv_active=False), TIMEOUT_S)


def result_tables(stdout: str) -> list[tuple[tuple[str, ...], list[tuple[str, ...]]]]:
    """(header, rows) of each result the shell printed with hive.cli.print.header=true."""
    tables: list[tuple[tuple[str, ...], list[tuple[str, ...]]]] = []
    current: list[tuple[str, ...]] | None = None
    width = 0
    for line in stdout.splitlines():
        fields = tuple(line.split("\t"))
        if fields == ("Response code",):  # what a CREATE VIEW prints
            current = None
        elif current is None or len(fields) != width:
            current, width = [], len(fields)
            tables.append((fields, current))
        else:
            current.append(fields)
    return tables


def log_bytes(log_dir: str, partition_dir: str) -> int:
    d = os.path.join(log_dir, partition_dir)
    return sum(os.path.getsize(os.path.join(d, name)) for name in os.listdir(d) if name.endswith(".log"))


@pytest.fixture(scope="module")
def shell_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark_sql")
    log_dir = str(root / "logs")
    produce_numbered(log_dir, "orders", 2, 25, config={"segment.bytes": 1024})
    produce_numbered(log_dir, "clicks", 1, 7)
    with Broker(log_dir, background=False, clock=MockTime(current_time_ms=T0 + 60_000)) as broker:
        broker.commit_offsets("etl", {TopicPartition("orders", 0): 10, TopicPartition("orders", 1): 25})
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    result = run_seglog_sql(["-d", f"logdir={log_dir}", "-f", str(REPO / "examples" / "inspect.sql")], elsewhere)
    assert result.returncode == 0, f"seglog sql failed:\n{result.stderr[-5000:]}"
    return log_dir, result, result_tables(result.stdout), sorted(os.listdir(elsewhere))


def test_offsets_view_prints_each_partitions_offsets(shell_run):
    log_dir, _, tables, _ = shell_run
    header, rows = tables[0]
    assert header == ("topic", "partition", "log_start_offset", "log_end_offset", "high_watermark",
                      "last_stable_offset", "size_bytes", "segments", "first_timestamp", "last_timestamp",
                      "committed_offset", "lag", "lag_bytes", "lag_ms")
    assert [row[:4] for row in rows] == [("clicks", "0", "0", "7"), ("orders", "0", "0", "25"),
                                         ("orders", "1", "0", "25")]
    # One broker, no transaction: the high watermark and the LSO are the log end.
    assert [row[4:6] for row in rows] == [("7", "7"), ("25", "25"), ("25", "25")]
    assert [int(row[6]) for row in rows] == [log_bytes(log_dir, d) for d in ("clicks-0", "orders-0", "orders-1")]
    # Timestamps print in UTC (spark-defaults.conf sets the session time zone).
    assert rows[0][8:10] == ("2026-01-01 00:00:00", "2026-01-01 00:00:06")
    assert rows[1][8:10] == ("2026-01-01 00:00:00", "2026-01-01 00:00:24")
    assert {row[10:] for row in rows} == {("NULL",) * 4}  # no groupId option: no group's lag


def test_groups_view_prints_lag(shell_run):
    log_dir, _, tables, _ = shell_run
    header, rows = tables[1]
    assert header == ("group", "topic", "partition", "committed_offset", "log_end_offset", "lag", "lag_bytes",
                      "lag_ms", "commit_time")
    assert [row[:7] + row[8:] for row in rows] == [
        ("etl", "orders", "0", "10", "25", "15", str(bytes_from(log_dir, "orders-0", 10)), "2026-01-01 00:01:00"),
        ("etl", "orders", "1", "25", "25", "0", "0", "2026-01-01 00:01:00")]
    # The age of the record at offset 10 when the shell ran; none waits on a caught-up partition.
    assert T0 + 10_000 + int(rows[0][7]) <= int(time.time() * 1000) and rows[1][7] == "NULL"


def test_segments_view_prints_every_segment(shell_run):
    log_dir, _, tables, _ = shell_run
    header, rows = tables[2]
    assert header[:4] == ("topic", "partition", "base_offset", "next_offset")
    assert header[-3:] == ("active", "tier", "location")
    orders_0 = sorted(int(name[:20]) for name in os.listdir(os.path.join(log_dir, "orders-0"))
                      if name.endswith(".log"))
    assert [int(row[2]) for row in rows if row[:2] == ("orders", "0")] == orders_0
    assert [row[-3:-1] for row in rows if row[:2] == ("orders", "0")] == (
        [("false", "local")] * (len(orders_0) - 1) + [("true", "local")])


def test_totals_per_topic(shell_run):
    _, _, tables, _ = shell_run
    header, rows = tables[3]
    assert header[:3] == ("topic", "partitions", "retained_offsets")
    assert [row[:3] for row in rows] == [("clicks", "1", "7"), ("orders", "2", "50")]


def test_shell_output_is_quiet_and_leaves_nothing_in_the_working_directory(shell_run):
    _, result, tables, left_behind = shell_run
    assert len(tables) == 4
    # spark_conf/log4j2.properties is in effect, not Spark's default profile.
    assert "Using Spark's default log4j profile" not in result.stderr
    assert "NativeCodeLoader" not in result.stderr and " INFO " not in result.stderr
    assert left_behind == []


def test_a_kept_metastore_goes_where_it_is_told(tmp_path):
    kept = tmp_path / "metastore"
    result = run_seglog_sql(["--metastore", str(kept), "-e", "SELECT 1 AS one"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result_tables(result.stdout)[0] == (("one",), [("1",)])
    assert {"metastore_db", "derby.log"} <= set(os.listdir(kept))
    assert not any((tmp_path / name).exists() for name in SHELL_LITTER)
