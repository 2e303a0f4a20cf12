"""Spark reading a tiered log dir: the older segments only in S3 (SeaweedFS on loopback), the tail on disk."""

import json

import pytest
from pyspark.errors import PySparkException

from format.fs import filesystem_for
from tests.connector.conftest import T0
from tests.connector.test_read_stream import expected, run_available_now
from tests.format.tiered_log_kit import ORDERS_PER_PARTITION, recopy_overlapping, tiered_orders

pytestmark = pytest.mark.slow

PER_PARTITION = ORDERS_PER_PARTITION


@pytest.fixture()
def tiered(tmp_path, s3_bucket):
    log_dir, url, creds, tiers = tiered_orders(tmp_path, s3_bucket)
    return log_dir, url, {f"storage.{k}": v for k, v in creds.items()}, tiers


def read(spark, log_dir, options, **more):
    reader = spark.read.format("seglog").option("path", log_dir).option("subscribe", "orders")
    for k, v in {**options, **more}.items():
        reader = reader.option(k, v)
    return reader.load()


def rows(df):
    return [(r.topic, r.partition, r.offset, bytes(r.value).split(b".")[0].decode())
            for r in df.orderBy("partition", "offset").collect()]


def test_a_batch_read_returns_every_record_of_both_tiers_in_order_once(spark, tiered):
    log_dir, url, options, tiers = tiered
    got = rows(read(spark, log_dir, options, minPartitions="5"))
    assert got == expected("orders", range(2), 0, PER_PARTITION)


def test_a_remote_segment_overlapping_the_one_before_is_read_once_by_every_task(spark, tiered, s3_bucket):
    log_dir, url, options, tiers = tiered
    recopy_overlapping(url, s3_bucket[1], tiers[1].finished[0], tiers[1].finished[1])
    got = rows(read(spark, log_dir, options, minPartitions="9"))
    assert got == expected("orders", range(2), 0, PER_PARTITION)


def test_the_segments_view_lists_remote_segments_as_s3_objects_below_the_local_ones(spark, tiered):
    log_dir, url, options, tiers = tiered
    view = read(spark, log_dir, options, view="segments").orderBy("partition", "base_offset").collect()
    for p in range(2):
        listed = [r for r in view if r.partition == p]
        remote = [r for r in listed if r.tier == "remote"]
        both = {m.base_offset for m in tiers[p].in_both_tiers}
        assert [(r.base_offset, r.next_offset) for r in remote] == [
            (m.base_offset, m.end_offset + 1) for m in tiers[p].finished if m.base_offset not in both]
        assert all(r.location.startswith(f"{url}/orders-") and r.location.endswith(".log") for r in remote)
        assert [r.tier for r in listed] == ["remote"] * len(remote) + ["local"] * (len(listed) - len(remote))
        assert all(r.location.startswith("file://") for r in listed if r.tier == "local")
        assert listed[len(remote)].base_offset in both  # in both tiers: the local copy is read


def test_earliest_is_the_earliest_offset_of_either_tier(spark, tiered):
    log_dir, url, options, tiers = tiered
    offsets = read(spark, log_dir, options, view="offsets").orderBy("partition").collect()
    assert [(r.log_start_offset, r.log_end_offset) for r in offsets] == [(0, PER_PARTITION)] * 2
    ranged = rows(read(spark, log_dir, options, startingOffsets=json.dumps({"orders": {"0": -2, "1": 37}}),
                       endingOffsets=json.dumps({"orders": {"0": 15, "1": -1}})))
    assert ranged == expected("orders", [0], 0, 15) + expected("orders", [1], 37, PER_PARTITION)
    by_time = rows(read(spark, log_dir, options, startingTimestamp=str(T0 + 23_000)))
    assert by_time == expected("orders", range(2), 23, PER_PARTITION)  # found in the remote time indexes


def test_a_stream_reads_both_tiers_in_one_trigger(spark, tiered, tmp_path):
    log_dir, url, options, tiers = tiered
    reader = spark.readStream.format("seglog").option("path", log_dir).option("subscribe", "orders") \
        .option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, v)
    batches = run_available_now(reader.load(), str(tmp_path / "ckpt"))
    got = [row for batch in batches for row in batch]
    assert sorted(got) == expected("orders", range(2), 0, PER_PARTITION)
    assert len(got) == len(set(got))


def test_a_remote_tier_named_by_option_is_read_when_the_log_dir_does_not_name_it(spark, tiered):
    log_dir, url, options, tiers = tiered
    import os

    os.remove(os.path.join(log_dir, "remote-tier.properties"))
    assert rows(read(spark, log_dir, options))[0][2] > 0  # without the tier only the local tail is there
    got = rows(read(spark, log_dir, options, **{"remote.storage.url": url}))
    assert got == expected("orders", range(2), 0, PER_PARTITION)


def test_a_missing_remote_object_fails_naming_it_unless_fail_on_data_loss_is_false(spark, tiered):
    log_dir, url, options, tiers = tiered
    lost = tiers[0].finished[1]
    bucket_fs, _ = filesystem_for(url, {k[len("storage."):]: v for k, v in options.items()})
    from format import remote_tier

    obj = remote_tier.segment_object(url, lost, ".log")
    bucket_fs.rm(filesystem_for(obj)[1])
    with pytest.raises(PySparkException) as failure:
        read(spark, log_dir, options).collect()
    assert obj in str(failure.value)
    got = rows(read(spark, log_dir, options, failOnDataLoss="false"))
    gone = set(range(lost.base_offset, lost.end_offset + 1))
    assert got == [r for r in expected("orders", range(2), 0, PER_PARTITION) if not (r[1] == 0 and r[2] in gone)]


def test_a_remote_tier_that_cannot_be_opened_fails_at_load_naming_the_option(spark, tiered):
    log_dir, url, options, tiers = tiered
    with pytest.raises(PySparkException, match="remote.storage.url"):
        read(spark, log_dir, options, **{"remote.storage.url": "nosuchscheme://bucket/tier"})
    with pytest.raises(PySparkException, match="remote.storage.url"):
        read(spark, log_dir, options, **{"remote.storage.url": "bucket-without-a-scheme"})
