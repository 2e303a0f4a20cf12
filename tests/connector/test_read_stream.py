"""Streaming reads through Spark: triggers, limits, restarts, new partitions, data loss, group commits."""

import json
import os
import time

import pytest

from broker_core import Broker
from format.layout import TopicPartition
from tests.connector.conftest import T0, produce_numbered

pytestmark = pytest.mark.slow


def stream(spark, log_dir, **options):
    reader = spark.readStream.format("seglog").option("path", log_dir)
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    return reader.load()


def run_available_now(df, checkpoint, collected=None, sink_dir=None):
    """Run one availableNow query; returns the per-batch row lists it saw."""
    batches = [] if collected is None else collected

    def keep(batch_df, batch_id):
        rows = [(r.topic, r.partition, r.offset, bytes(r.value).split(b".")[0].decode()) for r in batch_df.collect()]
        batches.append(rows)
        if sink_dir:
            batch_df.write.mode("append").parquet(sink_dir)

    query = (df.writeStream.foreachBatch(keep).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(240)
    assert query.exception() is None
    return batches


def expected(topic, partitions, first, last):
    return sorted((topic, p, n, f"{topic}-{p}-{n}") for p in partitions for n in range(first, last))


def test_available_now_reads_everything_from_earliest_and_resumes_from_the_checkpoint(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 30)
    checkpoint = str(tmp_path / "ckpt")
    first = run_available_now(stream(spark, d, subscribe="events", startingOffsets="earliest"), checkpoint)
    assert sorted(r for b in first for r in b) == expected("events", (0, 1), 0, 30)
    produce_numbered(d, "events", 2, 20, start=30)
    second = run_available_now(stream(spark, d, subscribe="events", startingOffsets="earliest"), checkpoint)
    seen = sorted(r for b in second for r in b)
    assert seen == expected("events", (0, 1), 30, 50)  # nothing lost, nothing read twice


def test_starting_offsets_latest_reads_only_new_records(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 1, 10)
    checkpoint = str(tmp_path / "ckpt")
    assert [r for b in run_available_now(stream(spark, d, subscribe="events"), checkpoint) for r in b] == []
    produce_numbered(d, "events", 1, 5, start=10)
    got = sorted(r for b in run_available_now(stream(spark, d, subscribe="events"), checkpoint) for r in b)
    assert got == expected("events", (0,), 10, 15)


def test_max_offsets_per_trigger_bounds_each_batch(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 40, batch=5)
    batches = run_available_now(stream(spark, d, subscribe="events", startingOffsets="earliest",
                                       maxOffsetsPerTrigger="25"), str(tmp_path / "ckpt"))
    sizes = [len(b) for b in batches if b]
    # Spark's rule: each partition gets floor(25 * its share of the backlog) = 12 per trigger.
    assert sizes == [24, 24, 24, 8]
    assert sorted(r for b in batches for r in b) == expected("events", (0, 1), 0, 40)


def test_a_backlog_below_min_offsets_per_trigger_is_read_once_max_trigger_delay_has_passed(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 10)
    batches = []

    def keep(batch_df, batch_id):
        rows = batch_df.collect()
        if rows:
            batches.append((time.monotonic(), len(rows)))

    started = time.monotonic()
    query = (stream(spark, d, subscribe="events", startingOffsets="earliest", minOffsetsPerTrigger="1000",
                    maxTriggerDelay="3s")
             .writeStream.foreachBatch(keep).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(processingTime="200 milliseconds").start())
    try:
        deadline = started + 120
        while not batches and time.monotonic() < deadline and query.isActive:
            time.sleep(0.2)
    finally:
        query.stop()
    assert query.exception() is None
    (at, rows), = batches
    assert rows == 20 and at - started >= 3.0  # all 20 in one batch, not before the delay


def test_a_partition_added_mid_query_starts_at_earliest(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 1, 10)
    checkpoint = str(tmp_path / "ckpt")
    run_available_now(stream(spark, d, subscribe="events", startingOffsets="earliest"), checkpoint)
    with Broker(d, background=False) as broker:
        broker.create_partitions("events", 2)
    produce_numbered(d, "events", 2, 5, start=10)
    got = sorted(r for b in run_available_now(stream(spark, d, subscribe="events"), checkpoint) for r in b)
    new_partition = [("events", 1, i, f"events-1-{10 + i}") for i in range(5)]
    assert got == sorted(expected("events", (0,), 10, 15) + new_partition)


def test_a_stream_started_at_specific_offsets_restarts_after_partitions_were_added(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 1, 10)
    checkpoint = str(tmp_path / "ckpt")
    starting = {"events": {"0": 4}}
    first = run_available_now(stream(spark, d, subscribe="events", startingOffsets=starting), checkpoint)
    assert sorted(r for b in first for r in b) == expected("events", (0,), 4, 10)
    with Broker(d, background=False) as broker:
        broker.create_partitions("events", 2)
    produce_numbered(d, "events", 2, 3, start=10)
    # The same options, which no longer name every partition: the checkpoint decides, as in Spark.
    got = sorted(r for b in run_available_now(stream(spark, d, subscribe="events", startingOffsets=starting),
                                              checkpoint) for r in b)
    assert got == sorted(expected("events", (0,), 10, 13) + [("events", 1, i, f"events-1-{10 + i}")
                                                            for i in range(3)])


def test_restart_after_a_failed_batch_neither_loses_nor_duplicates(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 60, batch=7)
    checkpoint = str(tmp_path / "ckpt")
    sink = str(tmp_path / "out")
    calls = {"n": 0}

    def flaky(batch_df, batch_id):
        batch_df.write.mode("append").parquet(os.path.join(sink, f"batch={batch_id}"))
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated failure after writing batch output")

    df = stream(spark, d, subscribe="events", startingOffsets="earliest", maxOffsetsPerTrigger="40")
    query = df.writeStream.foreachBatch(flaky).option("checkpointLocation", checkpoint).trigger(
        availableNow=True).start()
    with pytest.raises(Exception):
        query.awaitTermination(240)
    query = df.writeStream.foreachBatch(flaky).option("checkpointLocation", checkpoint).trigger(
        availableNow=True).start()
    assert query.awaitTermination(240)
    out = spark.read.parquet(sink)
    # The failed batch is re-run with the same offsets and overwrites nothing it should not:
    # each batch id holds its rows once the batch id is de-duplicated, as a sink keyed on it would.
    rows = sorted({(r.batch, r.partition, r.offset) for r in out.collect()})
    offsets = sorted((p, o) for _, p, o in rows)
    assert sorted(set(offsets)) == sorted((p, n) for p in (0, 1) for n in range(60))
    per_batch = {}
    for b, p, o in rows:
        per_batch.setdefault(b, set()).add((p, o))
    assert sum(len(v) for v in per_batch.values()) == 120  # no offset in two different batches


def test_retention_under_a_running_query(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 1, 40, config={"segment.bytes": "600"})
    checkpoint = str(tmp_path / "ckpt")
    first = run_available_now(stream(spark, d, subscribe="events", startingOffsets="earliest"), checkpoint)
    assert len([r for b in first for r in b]) == 40
    produce_numbered(d, "events", 1, 40, start=40, config={"segment.bytes": "600"})
    with Broker(d, background=False) as broker:
        lg = broker.log_manager.get_log(TopicPartition("events", 0))
        lg.delete_old_segments(lambda s, nxt: nxt is not None and nxt.base_offset <= 60, "test")
        broker.log_manager.scheduler.run_all()
        start = lg.log_start_offset
    assert 40 < start <= 60
    failing = stream(spark, d, subscribe="events", startingOffsets="earliest")
    query = failing.writeStream.foreachBatch(lambda df, i: df.count()).option(
        "checkpointLocation", checkpoint).trigger(availableNow=True).start()
    with pytest.raises(Exception) as err:
        query.awaitTermination(240)
    assert "events-0" in str(err.value) and "40" in str(err.value) and "failOnDataLoss" in str(err.value)
    skipping = stream(spark, d, subscribe="events", startingOffsets="earliest", failOnDataLoss="false")
    got = sorted(r for b in run_available_now(skipping, checkpoint) for r in b)
    assert got == expected("events", (0,), start, 80)


def test_group_offsets_follow_each_run_and_start_a_new_query(spark, tmp_path):
    from broker_core.group_offsets import read_committed_offsets
    from format.fs import filesystem_for

    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 25)
    checkpoint = str(tmp_path / "ckpt")
    df = stream(spark, d, subscribe="events", startingOffsets="earliest", groupId="etl")
    run_available_now(df, checkpoint)

    def committed():
        fs, root = filesystem_for(d)
        return {tp.partition: c.offset for tp, c in read_committed_offsets(fs, root, "etl").get("etl", {}).items()}

    assert committed() == {0: 25, 1: 25}
    produce_numbered(d, "events", 2, 10, start=25)
    run_available_now(df, checkpoint)
    assert committed() == {0: 35, 1: 35}
    produce_numbered(d, "events", 2, 3, start=35)
    fresh = stream(spark, d, subscribe="events", startingOffsets="group", groupId="etl")
    got = sorted(r for b in run_available_now(fresh, str(tmp_path / "ckpt2")) for r in b)
    assert got == expected("events", (0, 1), 35, 38)


def test_a_stream_that_selects_nothing_reads_zero_rows_until_its_topic_appears(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 1, 5)
    checkpoint = str(tmp_path / "ckpt")
    df = stream(spark, d, subscribePattern="orders.*", startingOffsets="earliest")
    assert [r for b in run_available_now(df, checkpoint) for r in b] == []
    produce_numbered(d, "orders-eu", 1, 3)
    got = sorted(r for b in run_available_now(df, checkpoint) for r in b)
    assert got == expected("orders-eu", (0,), 0, 3)


def start_failing(df, checkpoint):
    """Start an availableNow query that must fail; returns its error text."""
    query = df.writeStream.foreachBatch(lambda batch, i: batch.count()).option(
        "checkpointLocation", checkpoint).trigger(availableNow=True).start()
    with pytest.raises(Exception) as err:
        query.awaitTermination(240)
    return str(err.value)


@pytest.mark.parametrize("option, value", [
    ("endingOffsets", "latest"),
    ("endingTimestamp", str(T0)),
    ("endingOffsetsByTimestamp", json.dumps({"events": {"0": T0}})),
])
def test_a_stream_with_ending_offsets_fails_naming_the_option(spark, tmp_path, option, value):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 1, 5)
    message = start_failing(stream(spark, d, subscribe="events", **{option: value}), str(tmp_path / "ckpt"))
    assert f"option {option} is for batch queries only" in message
    assert "UnboundLocalError" not in message


def test_a_stream_starting_past_a_partitions_end_follows_fail_on_data_loss(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 10)
    starting = {"events": {"0": 25, "1": -2}}
    message = start_failing(stream(spark, d, subscribe="events", startingOffsets=starting), str(tmp_path / "a"))
    assert "events-0's offset was changed from 25 to 10" in message and "failOnDataLoss" in message
    # Without failOnDataLoss the partition goes on from its log end, as Spark's Kafka source does.
    checkpoint = str(tmp_path / "b")
    df = stream(spark, d, subscribe="events", startingOffsets=starting, failOnDataLoss="false")
    assert sorted(r for b in run_available_now(df, checkpoint) for r in b) == expected("events", (1,), 0, 10)
    produce_numbered(d, "events", 2, 3, start=10)
    got = sorted(r for b in run_available_now(df, checkpoint) for r in b)
    assert got == expected("events", (0, 1), 10, 13)


def test_a_stream_from_group_offsets_of_an_unknown_group_follows_auto_offset_reset(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 10)
    group = {"subscribe": "events", "startingOffsets": "group", "groupId": "new-group"}
    message = start_failing(stream(spark, d, **group, autoOffsetReset="none"), str(tmp_path / "none"))
    assert "group 'new-group' has no committed offset for events-0, events-1" in message
    latest = run_available_now(stream(spark, d, **group), str(tmp_path / "latest"))
    assert [r for b in latest for r in b] == []  # Kafka's default: latest
    # (That query committed new-group's offsets at the log end; another new group starts over.)
    earliest = run_available_now(stream(spark, d, **{**group, "groupId": "other-group"}, autoOffsetReset="earliest"),
                                 str(tmp_path / "earliest"))
    assert sorted(r for b in earliest for r in b) == expected("events", (0, 1), 0, 10)
