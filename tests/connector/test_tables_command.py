"""``seglog tables`` as a user runs it: the sync as a Spark job (spark-submit), then the table's progress in
``seglog tables list|describe`` and as the consumer group ``seglog-tables-<table>`` in ``seglog groups``."""

from __future__ import annotations

import pytest

from tests.connector.tables_kit import as_json, delta_rs_rows, produce_values, seglog

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

def lag_column(groups_describe: str) -> list[str]:
    lines = [line.split() for line in groups_describe.strip().splitlines() if line.strip()]
    lines = lines[[row[0] for row in lines].index("GROUP"):]
    header = lines[0]
    return [row[header.index("LAG")] for row in lines[1:]]


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """A compacted topic of JSON values synced by ``seglog tables sync`` (upsert, its default there)."""
    root = tmp_path_factory.mktemp("tables-command")
    log_dir, table = str(root / "logs"), str(root / "customers")
    produce_values(log_dir, "customers", [(b"a", as_json(name="Ann")), (b"b", as_json(name="Bob")),
                                          (b"a", as_json(name="Al")), (b"b", None)],
                   config={"cleanup.policy": "compact"})
    done = seglog("tables", "sync", "--table", table, "--topic", "customers", "--log-dir", log_dir,
                  "--value-format", "json", "--master", "local[2]")
    assert done.returncode == 0, done.stderr[-5000:]
    return log_dir, table


def test_seglog_tables_sync_runs_the_job_that_fills_the_table(synced):
    log_dir, table = synced
    assert delta_rs_rows(table, ["key", "name", "offset"]) == [(b"a", "Al", 2)]


def test_the_table_s_group_shows_its_lag_in_seglog_groups_describe(synced):
    log_dir, table = synced
    described = seglog("groups", "describe", "--log-dir", log_dir, "--group", f"seglog-tables-{table}")
    assert described.returncode == 0, described.stderr
    assert lag_column(described.stdout) == ["0"]
    produce_values(log_dir, "customers", [(b"c", as_json(name="Cy"))] * 3, first_n=4)
    described = seglog("groups", "describe", "--log-dir", log_dir, "--group", f"seglog-tables-{table}")
    assert lag_column(described.stdout) == ["3"]


def test_seglog_tables_list_shows_the_table_its_topic_and_rows(synced):
    log_dir, table = synced
    listed = seglog("tables", "list", "--log-dir", log_dir)
    assert listed.returncode == 0, listed.stderr
    header, row = [line.split() for line in listed.stdout.strip().splitlines()]
    assert header == ["TABLE", "TOPIC", "LAG", "VERSION", "LAST-COMMIT", "ROWS"]
    assert row[:2] == [table, "customers"] and row[5] == "1"


def test_seglog_tables_describe_shows_the_schema_and_last_commit(synced):
    log_dir, table = synced
    described = seglog("tables", "describe", "--table", table, "--log-dir", log_dir)
    assert described.returncode == 0, described.stderr
    out = described.stdout
    assert f"Table: {table}" in out and f"Group: seglog-tables-{table}" in out
    assert "Rows: 1" in out
    schema = out.split("Schema:\n")[1].split("\n\n")[0].split("\n")
    assert [line.split()[0] for line in schema] == ["name", "key", "topic", "partition", "offset", "timestamp",
                                                    "headers", "date"]


def test_seglog_tables_describe_of_a_table_not_fed_from_here_says_so(tmp_path):
    produce_values(str(tmp_path / "logs"), "t", [(b"k", b"v")])
    described = seglog("tables", "describe", "--table", str(tmp_path / "nowhere"), "--log-dir", str(tmp_path / "logs"))
    assert described.returncode == 1
    assert f"no table {tmp_path / 'nowhere'} is fed from here" in described.stderr



def test_seglog_tables_sync_with_a_bad_setting_fails_before_spark_starts_naming_it(tmp_path):
    done = seglog("tables", "sync", "--table", str(tmp_path / "t"), "--topic", "orders", "--log-dir",
                  str(tmp_path / "logs"), "--trigger", "sometimes", timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == ("seglog tables: --trigger must be one of once, available-now, "
                                   "processing-time=<interval> (e.g. processing-time=30s), not 'sometimes'")
