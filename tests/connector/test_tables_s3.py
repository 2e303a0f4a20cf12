"""A topic into a Delta table in an S3 bucket (SeaweedFS on loopback): ``seglog tables sync --table s3://…``
runs the Spark job with Hadoop's S3A on its classpath, the checkpoint and dead letters in the bucket too, a
second run goes on where the first stopped, and delta-rs and ``seglog tables describe`` read the table."""

from __future__ import annotations

import pytest

from connector.table_storage import delta_rs_options
from tests.connector.tables_kit import as_json, produce_values, seglog

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def bucket_rows(table: str, storage: dict, columns: list[str]) -> list[tuple]:
    from deltalake import DeltaTable

    data = DeltaTable(table, storage_options=delta_rs_options(storage)).to_pyarrow_table(columns=columns)
    return sorted(zip(*(data[c].to_pylist() for c in columns)))


def test_a_sync_into_a_table_in_a_bucket_writes_it_exactly_once_across_runs(tmp_path, s3_bucket):
    bucket, storage = s3_bucket
    # s3:// as a user writes it; Hadoop's S3A serves it as it serves s3a://.
    log_dir, table = str(tmp_path / "logs"), f"s3://{bucket}/tables/orders"
    settings = [item for name, value in storage.items() for item in ("--storage", f"{name}={value}")]
    sync = ["tables", "sync", "--table", table, "--topic", "orders", "--log-dir", log_dir, "--value-format", "json",
            "--partition-by", "none", "--master", "local[2]", *settings]
    produce_values(log_dir, "orders", [(f"k{n}".encode(), as_json(n=n)) for n in range(5)] + [(b"bad", b"{no")])
    done = seglog(*sync)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    produce_values(log_dir, "orders", [(f"k{n}".encode(), as_json(n=n, more=True)) for n in range(6, 9)], first_n=6)
    done = seglog(*sync)
    assert done.returncode == 0, done.stderr[-5000:]

    assert bucket_rows(table, storage, ["offset", "n", "more"]) == (
        [(n, n, None) for n in range(5)] + [(n, n, True) for n in range(6, 9)])
    assert bucket_rows(f"{table}/_seglog/dead_letters", storage, ["offset", "value"]) == [(5, b"{no")]
    described = seglog("tables", "describe", "--table", table, "--log-dir", log_dir, *settings)
    assert described.returncode == 0, described.stderr
    assert "Rows: 8" in described.stdout
    assert "Lag: 0" in described.stdout


def test_a_table_storage_setting_seglog_does_not_know_fails_before_spark_starts_naming_it(tmp_path):
    done = seglog("tables", "sync", "--table", "s3://b/t", "--topic", "orders", "--log-dir", str(tmp_path),
                  "--storage", "endpoint=http://127.0.0.1:1", timeout=60)
    assert done.returncode == 2
    assert "--storage endpoint: not an object store setting of a table" in done.stderr
