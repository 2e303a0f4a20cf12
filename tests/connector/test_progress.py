"""Offsets behind latest per micro-batch, as Spark's Kafka source names them, against the lag the views show."""

from __future__ import annotations

import json
import logging
import time

import pytest

from connector.options import parse_options
from connector.progress import attach_lag_listener, offsets_behind_latest, source_metrics
from connector.views import view_rows
from format.log_dir import LogDirectory
from tests.connector.conftest import T0, bytes_from, produce_numbered

PYTHON_STREAM = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStreamWithTriggerAvailableNow@1f"


def figures(metrics: dict) -> tuple:
    return metrics["minOffsetsBehindLatest"], metrics["maxOffsetsBehindLatest"], metrics["avgOffsetsBehindLatest"]


def test_offsets_behind_latest_are_the_min_max_and_average_over_partitions():
    end = '{"events": {"0": 16, "1": 8}, "clicks": {"0": 5}}'
    latest = {"events": {"0": 40, "1": 20}, "clicks": {"0": 5}}
    assert offsets_behind_latest(end, latest) == {
        "minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "24", "avgOffsetsBehindLatest": "12.0"}


def test_the_average_is_written_as_java_writes_a_double():
    def avg(*behind):
        end = {"t": {str(p): 0 for p in range(len(behind))}}
        return offsets_behind_latest(end, {"t": {str(p): b for p, b in enumerate(behind)}})["avgOffsetsBehindLatest"]

    assert (avg(1, 2), avg(1, 1, 2), avg(0), avg(20_000_000), avg(12_345_678)) == (
        "1.5", "1.3333333333333333", "0.0", "2.0E7", "1.2345678E7")


def test_a_batch_without_latest_offsets_has_no_metrics():
    assert offsets_behind_latest('{"events": {"0": 3}}', None) == {}
    assert source_metrics({"description": PYTHON_STREAM, "endOffset": '{"events": {"0": 3}}',
                           "latestOffset": "null", "metrics": {}}) == {}


def test_source_metrics_compute_a_python_streams_and_keep_those_a_source_reports():
    seglog = {"description": PYTHON_STREAM, "endOffset": '{"events": {"0": 3}}',
              "latestOffset": '{"events": {"0": 10}}', "metrics": {}}
    assert figures(source_metrics(seglog)) == ("7", "7", "7.0")
    kafka = {"description": "KafkaV2[Subscribe[events]]", "endOffset": '{"events": {"0": 3}}',
             "latestOffset": '{"events": {"0": 10}}', "metrics": {"maxOffsetsBehindLatest": "6"}}
    assert source_metrics(kafka) == {"maxOffsetsBehindLatest": "6"}
    other = {"description": "MemoryStream[value#1]", "endOffset": "0", "latestOffset": "4", "metrics": {}}
    assert source_metrics(other) == {}


@pytest.mark.slow
def test_offsets_behind_latest_of_each_batch_are_the_lag_the_views_show_once_it_is_committed(spark, tmp_path,
                                                                                             caplog):
    caplog.set_level(logging.INFO, logger="connector.progress")
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 20, batch=5)
    produce_numbered(d, "events", 1, 20, start=20, batch=5)  # partition 0 holds 40 records, partition 1 holds 20
    listener = attach_lag_listener(spark)
    offsets_view = parse_options({"path": d, "view": "offsets", "groupId": "etl"})
    seen = []  # per batch: the groups view (through Spark) and the offsets view while the batch runs

    def look(batch_df, batch_id):
        before = int(time.time() * 1000)
        groups = (batch_df.sparkSession.read.format("seglog").option("path", d).option("view", "groups")
                  .option("groupId", "etl").load().orderBy("partition").collect())
        after = int(time.time() * 1000)
        seen.append((batch_id, before, after, groups, view_rows("offsets", LogDirectory(d), offsets_view)))

    query = (spark.readStream.format("seglog").option("path", d).option("subscribe", "events")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "25").option("groupId", "etl")
             .load().writeStream.foreachBatch(look).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(240)
        assert query.exception() is None
        # Listeners hear of progress after the query's own record of it.
        last = listener.wait_for(query.id, query.lastProgress["batchId"], timeout_s=60)
    finally:
        spark.streams.removeListener(listener)
    progress = [source_metrics(p["sources"][0]) for p in query.recentProgress]
    assert len(progress) == len(seen) == 3  # Spark's rule: 16 and 8 of the 60 per trigger, then the rest

    # The group commits a batch's end as the next batch is planned: what the views show while batch k runs is
    # what Spark reported for batch k - 1.
    assert figures(progress[0]) == ("12", "24", "18.0")
    for reported, (batch_id, before, after, groups, offsets) in zip(progress, seen[1:]):
        lags = [row.lag for row in groups]
        assert figures(reported) == (str(min(lags)), str(max(lags)), repr(sum(lags) / len(lags)))
        assert [(row.lag, row.lag_bytes) for row in groups] == [(row.lag, row.lag_bytes) for row in offsets]
        for row in groups:  # bytes to the byte, and the age of the record at the committed offset
            assert row.lag_bytes == bytes_from(d, f"events-{row.partition}", row.committed_offset) > 0
            stamped = T0 + row.committed_offset * 1_000
            assert before - stamped <= row.lag_ms <= after - stamped

    # After the last batch the group is caught up, as the listener's figures for it say.
    assert list(last.sources) == [progress[-1]] and figures(progress[-1]) == ("0", "0", "0.0")
    assert f"query {query.id} batch 0 source 0: offsets behind latest min 12, max 24, avg 18.0" in caplog.messages
    final = spark.read.format("seglog").option("path", d).option("view", "groups").load().collect()
    assert sorted((row.partition, row.lag, row.lag_bytes, row.lag_ms) for row in final) == [
        (0, 0, 0, None), (1, 0, 0, None)]
    by_partition = (spark.read.format("seglog").option("path", d).option("view", "offsets").option("groupId", "etl")
                    .load().orderBy("partition").collect())
    assert [(row.committed_offset, row.lag, row.lag_bytes, row.lag_ms) for row in by_partition] == [
        (40, 0, 0, None), (20, 0, 0, None)]
    assert json.loads(query.lastProgress["sources"][0]["endOffset"]) == {"events": {"0": 40, "1": 20}}
