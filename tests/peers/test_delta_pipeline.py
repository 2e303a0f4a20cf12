"""examples/delta_pipeline.py as a user runs it: a seglog topic streamed into a Delta Lake table by
delta-spark, run again after more records arrived and after a lost checkpoint commit, each record
in the table exactly once as delta-spark and delta-rs (``deltalake``) read it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from tests.connector.conftest import T0, produce_numbered
from tests.shell_kit import run_to_end, user_environment

# Three runs of the example, each a fresh JVM, under one module fixture chain.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "delta_pipeline.py"
PARTITIONS = 2
TIMEOUT_S = 600


def run_pipeline(log_dir: Path, table: Path, *extra: str, env: dict | None = None):
    """The example run to its end as a user runs it (a fresh JVM each time); its exit checked by the caller."""
    return run_to_end([sys.executable, str(EXAMPLE), str(log_dir), str(table), "--max-offsets-per-trigger", "40",
                       *extra], log_dir.parent, env or user_environment(venv_active=False), TIMEOUT_S)


def expected_rows(per_partition: int) -> list[tuple]:
    """What produce_numbered wrote: (partition, offset, key, value, timestamp ms) of each record."""
    return [(p, n, f"k{n}".encode(), f"orders-{p}-{n}".encode() + b"." * 20, T0 + n * 1000)
            for p in range(PARTITIONS) for n in range(per_partition)]


def read_with_delta_spark(spark, table: Path) -> list[tuple]:
    df = spark.read.format("delta").load(str(table)).selectExpr(
        "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts")
    return sorted(tuple(r) for r in df.collect())


def read_with_delta_rs(table: Path) -> list[tuple]:
    data = DeltaTable(str(table)).to_pyarrow_table()
    millis = pc.divide(data["timestamp"].cast("int64"), 1000).to_pylist()  # microseconds since the epoch
    return sorted(zip(data["partition"].to_pylist(), data["offset"].to_pylist(), data["key"].to_pylist(),
                      data["value"].to_pylist(), millis))


def check_run(result) -> None:
    assert result.returncode == 0, f"the Delta pipeline failed:\n{result.stderr[-5000:]}"
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """A log dir with topic orders and the Delta table the example streams it into."""
    root = tmp_path_factory.mktemp("delta-pipeline")
    return root / "logs", root / "orders-table"


@pytest.fixture(scope="module")
def after_restart(spark, pipeline):
    """Two runs of the example, 30 then 55 records per partition in the topic: the table as
    delta-spark and delta-rs read it after each run, and the second run's output."""
    log_dir, table = pipeline
    produce_numbered(str(log_dir), "orders", PARTITIONS, 30)
    check_run(run_pipeline(log_dir, table))
    first = read_with_delta_spark(spark, table), read_with_delta_rs(table)
    produce_numbered(str(log_dir), "orders", PARTITIONS, 25, start=30)
    second_run = run_pipeline(log_dir, table)
    check_run(second_run)
    return first, (read_with_delta_spark(spark, table), read_with_delta_rs(table)), second_run


def test_the_delta_pipeline_writes_each_record_once_and_again_after_a_restart(after_restart):
    first, second, second_run = after_restart
    assert first[0] == first[1] == expected_rows(30)
    assert second[0] == second[1] == expected_rows(55)
    assert "110 rows in the Delta table" in second_run.stdout


@pytest.fixture(scope="module")
def after_replay(spark, pipeline, after_restart):
    """The last micro-batch marked not done in the checkpoint, as if the query had died between
    Delta's commit and the checkpoint's; five more records per partition; the example run again."""
    log_dir, table = pipeline
    commits = table / "_seglog" / "checkpoint" / "commits"
    last = max(int(name) for name in os.listdir(commits) if name.isdigit())
    os.remove(commits / str(last))
    os.remove(commits / f".{last}.crc")  # Hadoop's checksum of the commit file goes with it
    versions_before = DeltaTable(str(table)).version()
    produce_numbered(str(log_dir), "orders", PARTITIONS, 5, start=55)
    check_run(run_pipeline(log_dir, table))
    history = DeltaTable(str(table)).history()
    return last, versions_before, history, read_with_delta_spark(spark, table), read_with_delta_rs(table)


def test_a_micro_batch_replayed_after_a_lost_checkpoint_commit_is_not_appended_twice(after_replay):
    replayed, versions_before, history, from_spark, from_rs = after_replay
    assert from_spark == from_rs == expected_rows(60)
    # Delta knew the replayed batch by the query's id and the batch id: only the new records made a commit.
    assert max(h["version"] for h in history) == versions_before + 1


def test_the_delta_pipeline_without_its_jars_says_to_run_make_jvm(tmp_path):
    empty = tmp_path / "no-jars"
    (empty / "spark").mkdir(parents=True)
    env = user_environment(venv_active=False)
    env["SEGLOG_JVM_DIR"] = str(empty)
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    result = run_pipeline(log_dir, tmp_path / "table", env=env)
    assert result.returncode == 3
    assert "make jvm" in result.stderr and str(empty / "spark") in result.stderr
    assert not (tmp_path / "table").exists()
