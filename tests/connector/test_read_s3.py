"""The same reads from an S3 bucket (SeaweedFS on loopback) as from the local directory."""

import json
import os

import pytest

from format.fs import filesystem_for
from tests.connector.conftest import T0, produce_numbered

pytestmark = pytest.mark.slow


def rows(df):
    return sorted((r.topic, r.partition, r.offset, bytes(r.key), bytes(r.value), r.timestamp,
                   tuple((h.key, bytes(h.value)) for h in r.headers or ())) for r in df.collect())


def test_s3_reads_return_the_same_rows_as_local_reads(spark, tmp_path, s3_bucket):
    bucket, creds = s3_bucket
    local = str(tmp_path / "logs")
    produce_numbered(local, "orders", 3, 40, headers=True, config={"segment.bytes": "2000"})
    fs, root = filesystem_for(f"s3://{bucket}/logs", creds)
    for dirpath, _, files in os.walk(local):
        for name in files:
            path = os.path.join(dirpath, name)
            fs.put_file(path, f"{root}/{os.path.relpath(path, local)}")
    s3_options = {f"storage.{k}": v for k, v in creds.items()}

    def read(path, extra=None, **options):
        reader = spark.read.format("seglog").option("path", path).option("subscribe", "orders") \
            .option("includeHeaders", "true")
        for k, v in {**options, **(extra or {})}.items():
            reader = reader.option(k, v)
        return reader.load()

    whole_local = rows(read(local))
    assert len(whole_local) == 120
    assert rows(read(f"s3://{bucket}/logs", s3_options)) == whole_local
    ranged = dict(startingOffsets=json.dumps({"orders": {"0": 7, "1": -2, "2": 30}}),
                  endingOffsets=json.dumps({"orders": {"0": 33, "1": 4, "2": -1}}), minPartitions="6")
    assert rows(read(f"s3://{bucket}/logs", s3_options, **ranged)) == rows(read(local, **ranged))
    by_time = dict(startingTimestamp=str(T0 + 25_000))
    assert rows(read(f"s3://{bucket}/logs", s3_options, **by_time)) == rows(read(local, **by_time))


def test_a_read_committed_read_from_s3_returns_exactly_the_committed_records(spark, tmp_path, s3_bucket):
    from broker_core import Broker
    from tests.broker_core.transactions_kit import TransactionalWriter, write_mixed_transactions

    bucket, creds = s3_bucket
    local = str(tmp_path / "logs")
    with Broker(local, background=False) as broker:
        broker.create_topic("txns", 1, {"segment.bytes": "700"})
        writer = write_mixed_transactions(TransactionalWriter(broker, "txns"))
        committed = writer.committed_values()
        # Copied while the owner runs: the open transaction has no snapshot after it, only its batches.
        fs, root = filesystem_for(f"s3://{bucket}/txn-logs", creds)
        for dirpath, _, files in os.walk(local):
            for name in files:
                path = os.path.join(dirpath, name)
                fs.put_file(path, f"{root}/{os.path.relpath(path, local)}")
    df = spark.read.format("seglog").option("path", f"s3://{bucket}/txn-logs").option("subscribe", "txns") \
        .option("isolation.level", "read_committed").options(**{f"storage.{k}": v for k, v in creds.items()}).load()
    assert [bytes(r.value).decode() for r in df.orderBy("offset").collect()] == committed
