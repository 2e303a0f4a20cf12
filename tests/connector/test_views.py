"""The inspection views: exact rows from the plain functions, then the same rows through Spark."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
from dataclasses import astuple

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException, PySparkException

from broker_core import Broker
from broker_core.clock import MockTime
from connector.options import parse_options
from connector.views import (GroupRow, OffsetsRow, SegmentRow, groups_rows, offsets_rows, partition_filter,
                             segments_rows, view_rows, view_schema)
from format import layout
from format.layout import TopicPartition
from format.log_dir import LogDirectory
from format.record import SimpleRecord
from tests.broker_core.offsets_kit import commit_in_transaction, end_transaction
from tests.broker_core.server.server_kit import committed_offsets, start_broker
from tests.connector.conftest import T0, bytes_from, hold_high_watermarks, produce_numbered

COMMIT_TIME = T0 + 60_000
NOW = T0 + 3_600_000  # the clock the lag columns are measured with


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory) -> str:
    d = str(tmp_path_factory.mktemp("views") / "logs")
    produce_numbered(d, "orders", 2, 25, config={"segment.bytes": 1024})
    produce_numbered(d, "clicks", 1, 7)
    with Broker(d, background=False, clock=MockTime(current_time_ms=COMMIT_TIME)) as broker:
        broker.commit_offsets("etl", {TopicPartition("orders", 0): 10, TopicPartition("orders", 1): 25})
        broker.commit_offsets("audit", {TopicPartition("clicks", 0): 3, TopicPartition("gone", 0): 4})
    return d


def log_files(log_dir: str, partition_dir: str) -> list[tuple[int, int]]:
    """(base offset, size) of each ``.log`` file, as the file system reports them."""
    d = os.path.join(log_dir, partition_dir)
    return sorted((layout.offset_from_file_name(name), os.path.getsize(os.path.join(d, name)))
                  for name in os.listdir(d) if name.endswith(".log"))


def at(ms: int | None) -> dt.datetime | None:
    """How Spark returns a timestamp in a UTC session: naive, in UTC."""
    return None if ms is None else dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)


def as_spark(row) -> tuple:
    return tuple(at(v) if name.endswith(("timestamp", "_time")) else v
                 for name, v in zip(row.__dataclass_fields__, astuple(row)))


# --- offsets ---------------------------------------------------------------------------------------


def test_offsets_rows_give_each_partitions_offsets_size_segments_and_time_range(log_dir):
    orders = {p: log_files(log_dir, f"orders-{p}") for p in range(2)}
    assert all(len(files) > 1 for files in orders.values())  # segment.bytes rolled the partitions
    assert offsets_rows(LogDirectory(log_dir)) == [
        OffsetsRow("clicks", 0, 0, 7, 7, 7, sum(size for _, size in log_files(log_dir, "clicks-0")), 1, T0, T0 + 6_000),
        OffsetsRow("orders", 0, 0, 25, 25, 25, sum(size for _, size in orders[0]), len(orders[0]), T0, T0 + 24_000),
        OffsetsRow("orders", 1, 0, 25, 25, 25, sum(size for _, size in orders[1]), len(orders[1]), T0, T0 + 24_000),
    ]


def test_offsets_leave_out_internal_topics_unless_a_topic_option_names_them(log_dir):
    assert any(name.startswith("__consumer_offsets-") for name in os.listdir(log_dir))
    assert {row.topic for row in offsets_rows(LogDirectory(log_dir))} == {"clicks", "orders"}
    named = partition_filter(parse_options({"path": log_dir, "view": "offsets", "subscribe": "__consumer_offsets"}))
    rows = offsets_rows(LogDirectory(log_dir), named)
    assert rows and {row.topic for row in rows} == {"__consumer_offsets"}
    assert sum(row.log_end_offset for row in rows) == 4  # two commits of two offsets each


def test_a_topic_option_narrows_the_view(log_dir):
    only = partition_filter(parse_options({"path": log_dir, "view": "offsets", "assign": '{"orders": [1]}'}))
    assert [(row.topic, row.partition) for row in offsets_rows(LogDirectory(log_dir), only)] == [("orders", 1)]


def test_offsets_start_at_the_checkpointed_log_start_offset_inside_a_batch(tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 1, 25, batch=10)
    with open(os.path.join(d, layout.LOG_START_OFFSET_CHECKPOINT_FILE), "w") as f:
        f.write("0\n1\norders 0 5\n")  # as after DeleteRecords up to offset 5
    [row] = offsets_rows(LogDirectory(d))
    assert (row.log_start_offset, row.log_end_offset, row.first_timestamp) == (5, 25, T0 + 5_000)


def test_offsets_after_retention_deleted_the_first_segment(tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 1, 25, config={"segment.bytes": 1024})
    (first, _), (second, _), *_ = log_files(d, "orders-0")
    for name in os.listdir(os.path.join(d, "orders-0")):
        if name.startswith(layout.filename_prefix_from_offset(first)):
            os.remove(os.path.join(d, "orders-0", name))
    remaining = log_files(d, "orders-0")
    assert offsets_rows(LogDirectory(d)) == [
        OffsetsRow("orders", 0, second, 25, 25, 25, sum(size for _, size in remaining), len(remaining),
                   T0 + second * 1_000, T0 + 24_000)]


def test_last_timestamp_is_the_largest_not_the_last_written(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("late", 1)
        broker.produce("late", [SimpleRecord(b"a", None, T0 + 100_000), SimpleRecord(b"b", None, T0 + 5_000)])
        broker.produce("late", [SimpleRecord(b"c", None, T0 + 50_000)])
    [row] = offsets_rows(LogDirectory(d))
    assert (row.first_timestamp, row.last_timestamp) == (T0 + 100_000, T0 + 100_000)
    [segment] = segments_rows(LogDirectory(d))
    assert (segment.first_timestamp, segment.last_timestamp) == (T0 + 100_000, T0 + 100_000)


def test_log_append_time_topics_show_the_brokers_append_time(tmp_path):
    d = str(tmp_path / "logs")
    appended = T0 + 3_600_000
    with Broker(d, background=False, clock=MockTime(current_time_ms=appended)) as broker:
        broker.create_topic("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
        broker.produce("stamped", [SimpleRecord(b"x", None, T0), SimpleRecord(b"y", None, T0 + 1_000)])
    [row] = offsets_rows(LogDirectory(d))
    assert (row.first_timestamp, row.last_timestamp) == (appended, appended)


def test_an_empty_partition_has_offsets_but_no_timestamps(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("empty", 1)
    assert offsets_rows(LogDirectory(d)) == [OffsetsRow("empty", 0, 0, 0, 0, 0, 0, 1, None, None)]
    assert segments_rows(LogDirectory(d)) == [
        SegmentRow("empty", 0, 0, 0, 0, None, None, True, "local",
                   "file://" + os.path.join(d, "empty-0", layout.log_file_name(0)))]


def test_views_read_a_directory_its_broker_is_still_writing(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("live", 1)
        for n in range(30):  # one record per batch: more batches than the sparse indexes record
            broker.produce("live", [SimpleRecord(b"v" * 200, None, T0 + n * 1_000)])
        [row] = offsets_rows(LogDirectory(d))
        assert (row.log_end_offset, row.first_timestamp, row.last_timestamp) == (30, T0, T0 + 29_000)
        assert row.size_bytes == sum(size for _, size in log_files(d, "live-0"))


def test_a_directory_that_does_not_exist_has_no_rows(tmp_path):
    directory = LogDirectory(str(tmp_path / "missing"))
    assert offsets_rows(directory) == [] and segments_rows(directory) == [] and groups_rows(directory) == []


# --- segments --------------------------------------------------------------------------------------


def test_segments_rows_give_each_segments_offsets_size_and_time_range(log_dir):
    rows = [row for row in segments_rows(LogDirectory(log_dir)) if row.topic == "orders" and row.partition == 0]
    files = log_files(log_dir, "orders-0")
    assert [(r.base_offset, r.size_bytes) for r in rows] == files
    assert [r.next_offset for r in rows] == [base for base, _ in files[1:]] + [25]
    assert [(r.first_timestamp, r.last_timestamp) for r in rows] == [
        (T0 + r.base_offset * 1_000, T0 + (r.next_offset - 1) * 1_000) for r in rows]
    assert [r.active for r in rows] == [False] * (len(rows) - 1) + [True]


def test_segments_rows_are_in_topic_partition_and_offset_order(log_dir):
    rows = segments_rows(LogDirectory(log_dir))
    assert [(r.topic, r.partition, r.base_offset) for r in rows] == sorted(
        [("clicks", 0, 0)] + [("orders", p, base) for p in range(2) for base, _ in log_files(log_dir, f"orders-{p}")])
    assert rows[0] == SegmentRow("clicks", 0, 0, 7, log_files(log_dir, "clicks-0")[0][1], T0, T0 + 6_000, True,
                                 "local", "file://" + os.path.join(log_dir, "clicks-0", layout.log_file_name(0)))


# --- groups ----------------------------------------------------------------------------------------


def test_groups_rows_give_committed_offset_log_end_and_lag_in_offsets_bytes_and_time(log_dir):
    assert len(log_files(log_dir, "orders-0")) > 1  # the bytes behind span segments
    assert groups_rows(LogDirectory(log_dir), clock=MockTime(current_time_ms=NOW)) == [
        GroupRow("audit", "clicks", 0, 3, 7, 4, bytes_from(log_dir, "clicks-0", 3), NOW - (T0 + 3_000), COMMIT_TIME),
        # no such partition in the directory
        GroupRow("audit", "gone", 0, 4, None, None, None, None, COMMIT_TIME),
        GroupRow("etl", "orders", 0, 10, 25, 15, bytes_from(log_dir, "orders-0", 10), NOW - (T0 + 10_000),
                 COMMIT_TIME),
        GroupRow("etl", "orders", 1, 25, 25, 0, 0, None, COMMIT_TIME),  # caught up: no record is waiting
    ]


def test_byte_lag_counts_from_the_batch_holding_the_committed_offset(tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 1, 30, batch=10, config={"segment.bytes": 1024})
    with Broker(d, background=False, clock=MockTime(current_time_ms=COMMIT_TIME)) as broker:
        broker.commit_offsets("etl", {TopicPartition("orders", 0): 15})
    [row] = groups_rows(LogDirectory(d), clock=MockTime(current_time_ms=NOW))
    # Offsets 10 to 19 are one batch: a consumer at 15 fetches all of it again.
    assert row.lag_bytes == bytes_from(d, "orders-0", 10) > bytes_from(d, "orders-0", 20)
    assert (row.lag, row.lag_ms) == (15, NOW - (T0 + 15_000))


def test_time_lag_is_the_age_of_the_record_at_the_committed_offset_by_the_clock(log_dir):
    ages = []
    for now in (NOW, NOW + 90_000):
        rows = groups_rows(LogDirectory(log_dir), "etl", clock=MockTime(current_time_ms=now))
        ages.append([row.lag_ms for row in rows])
    assert ages == [[NOW - (T0 + 10_000), None], [NOW + 90_000 - (T0 + 10_000), None]]


def test_a_group_behind_the_log_start_lags_by_what_the_log_still_holds(tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 1, 25, batch=10)
    with Broker(d, background=False, clock=MockTime(current_time_ms=COMMIT_TIME)) as broker:
        broker.commit_offsets("etl", {TopicPartition("orders", 0): 2})
    with open(os.path.join(d, layout.LOG_START_OFFSET_CHECKPOINT_FILE), "w") as f:
        f.write("0\n1\norders 0 20\n")  # as after DeleteRecords up to offset 20
    [row] = groups_rows(LogDirectory(d), clock=MockTime(current_time_ms=NOW))
    assert (row.lag, row.lag_bytes, row.lag_ms) == (23, bytes_from(d, "orders-0", 20), NOW - (T0 + 20_000))


def test_offsets_rows_with_a_group_give_its_lag_per_partition(log_dir):
    options = parse_options({"path": log_dir, "view": "offsets", "groupId": "etl"})
    rows = view_rows("offsets", LogDirectory(log_dir), options, clock=MockTime(current_time_ms=NOW))
    assert [(r.topic, r.partition, r.committed_offset, r.lag, r.lag_bytes, r.lag_ms) for r in rows] == [
        ("clicks", 0, None, None, None, None),  # the group has no offset there
        ("orders", 0, 10, 15, bytes_from(log_dir, "orders-0", 10), NOW - (T0 + 10_000)),
        ("orders", 1, 25, 0, 0, None),
    ]
    groups = groups_rows(LogDirectory(log_dir), "etl", clock=MockTime(current_time_ms=NOW))
    assert [(r.lag, r.lag_bytes, r.lag_ms) for r in rows[1:]] == [(g.lag, g.lag_bytes, g.lag_ms) for g in groups]


def test_groups_rows_narrow_to_one_group(log_dir):
    assert [(r.group, r.partition, r.lag) for r in groups_rows(LogDirectory(log_dir), "etl")] == [
        ("etl", 0, 15), ("etl", 1, 0)]


def test_group_id_and_topic_options_narrow_the_groups_view(log_dir):
    options = parse_options({"path": log_dir, "view": "groups", "groupId": "audit", "subscribe": "clicks"})
    assert view_rows("groups", LogDirectory(log_dir), options, clock=MockTime(current_time_ms=NOW)) == [
        GroupRow("audit", "clicks", 0, 3, 7, 4, bytes_from(log_dir, "clicks-0", 3), NOW - (T0 + 3_000), COMMIT_TIME)]


def test_groups_rows_follow_a_later_commit(tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 1, 20)
    with Broker(d, background=False, clock=MockTime(current_time_ms=COMMIT_TIME)) as broker:
        broker.commit_offsets("etl", {TopicPartition("orders", 0): 5})
    with Broker(d, background=False, clock=MockTime(current_time_ms=COMMIT_TIME + 1_000)) as broker:
        broker.commit_offsets("etl", {TopicPartition("orders", 0): 18})
    assert groups_rows(LogDirectory(d), clock=MockTime(current_time_ms=NOW)) == [
        GroupRow("etl", "orders", 0, 18, 20, 2, bytes_from(d, "orders-0", 18), NOW - (T0 + 18_000), COMMIT_TIME + 1_000)]


# --- through Spark ---------------------------------------------------------------------------------


def load(spark, log_dir: str, view: str, **options):
    reader = spark.read.format("seglog").option("path", log_dir).option("view", view)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


@pytest.mark.slow
def test_offsets_view_through_spark(spark, log_dir):
    df = load(spark, log_dir, "offsets")
    assert df.schema.simpleString() == ("struct<topic:string,partition:int,log_start_offset:bigint,"
                                        "log_end_offset:bigint,high_watermark:bigint,last_stable_offset:bigint,"
                                        "size_bytes:bigint,segments:int,first_timestamp:timestamp,"
                                        "last_timestamp:timestamp,committed_offset:bigint,lag:bigint,"
                                        "lag_bytes:bigint,lag_ms:bigint>")
    got = [tuple(r) for r in df.orderBy("topic", "partition").collect()]
    assert got == [as_spark(row) for row in offsets_rows(LogDirectory(log_dir))]
    # Without the option groupId the lag columns are null.
    assert got[0] == ("clicks", 0, 0, 7, 7, 7, got[0][6], 1, dt.datetime(2026, 1, 1),
                      dt.datetime(2026, 1, 1, 0, 0, 6), None, None, None, None)


@pytest.mark.slow
def test_segments_view_through_spark(spark, log_dir):
    df = load(spark, log_dir, "segments", subscribe="orders")
    assert df.schema.simpleString() == ("struct<topic:string,partition:int,base_offset:bigint,next_offset:bigint,"
                                        "size_bytes:bigint,first_timestamp:timestamp,last_timestamp:timestamp,"
                                        "active:boolean,tier:string,location:string>")
    got = [tuple(r) for r in df.orderBy("topic", "partition", "base_offset").collect()]
    want = [as_spark(row) for row in segments_rows(LogDirectory(log_dir)) if row.topic == "orders"]
    assert got == want and len(got) > 2


@pytest.mark.slow
def test_groups_view_through_a_temporary_view_in_sql(spark, log_dir):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW seglog_groups USING seglog "
              f"OPTIONS (path '{log_dir}', view 'groups')")
    df = spark.sql("SELECT * FROM seglog_groups WHERE lag > 0 ORDER BY `group`, topic, partition")
    assert df.schema.simpleString() == ("struct<group:string,topic:string,partition:int,committed_offset:bigint,"
                                        "log_end_offset:bigint,lag:bigint,lag_bytes:bigint,lag_ms:bigint,"
                                        "commit_time:timestamp>")
    before = int(time.time() * 1000)
    rows = df.collect()
    after = int(time.time() * 1000)
    assert [tuple(v for k, v in r.asDict().items() if k != "lag_ms") for r in rows] == [
        ("audit", "clicks", 0, 3, 7, 4, bytes_from(log_dir, "clicks-0", 3), at(COMMIT_TIME)),
        ("etl", "orders", 0, 10, 25, 15, bytes_from(log_dir, "orders-0", 10), at(COMMIT_TIME)),
    ]
    # The age of the record at the committed offset, by the clock when the view was read.
    assert [before - stamped <= r.lag_ms <= after - stamped for r, stamped in zip(rows, (T0 + 3_000, T0 + 10_000))] \
        == [True, True]


@pytest.mark.slow
def test_offsets_view_through_a_temporary_view_in_sql(spark, log_dir):
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW seglog_offsets USING seglog "
              f"OPTIONS (path '{log_dir}', view 'offsets')")
    got = spark.sql("SELECT topic, sum(log_end_offset - log_start_offset) AS n FROM seglog_offsets "
                    "GROUP BY topic ORDER BY topic").collect()
    assert [tuple(r) for r in got] == [("clicks", 7), ("orders", 50)]


@pytest.mark.slow
def test_a_plain_commit_between_a_transactions_offsets_and_its_marker_reads_alike_everywhere(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 2, 20)
    orders_0, orders_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    with Broker(d, {"offsets.topic.num.partitions": 3}, background=False,
                clock=MockTime(current_time_ms=COMMIT_TIME)) as broker:
        broker.commit_offsets("etl", {orders_0: 2, orders_1: 2})
        commit_in_transaction(broker, "etl", {orders_0: 15, orders_1: 15}, producer_id=1)
        broker.commit_offsets("etl", {orders_0: 9})
        end_transaction(broker, "etl", 1)
    # Kafka's answer: at the COMMIT marker a transaction's offset replaces only an older record, by log
    # offset; orders-0's plain commit came after the transaction's record and stands.
    want = {0: (9, 20, 11), 1: (15, 20, 5)}  # partition: (committed offset, log end offset, lag)

    server = start_broker(d)  # its group coordinator replays __consumer_offsets as it starts
    try:
        assert committed_offsets(server.bootstrap_servers, "etl", "orders") == {p: c for p, (c, _, _) in want.items()}
    finally:
        server.shutdown()

    seglog = os.path.join(os.path.dirname(sys.executable), "seglog")
    described = subprocess.run([seglog, "groups", "describe", "--log-dir", d, "--group", "etl"],
                               capture_output=True, text=True, timeout=60)
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith("etl ")]
    assert {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows} == want

    view = load(spark, d, "groups").collect()
    assert {r.partition: (r.committed_offset, r.log_end_offset, r.lag) for r in view} == want


@pytest.mark.slow
def test_a_view_of_a_directory_without_groups_is_empty(spark, tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 1, 3)
    assert load(spark, d, "groups").collect() == []


@pytest.mark.slow
def test_an_unknown_view_fails_at_load_naming_the_option(spark, log_dir):
    with pytest.raises((AnalysisException, PySparkException, Py4JJavaError)) as err:
        load(spark, log_dir, "lag")
    assert "option view" in str(err.value) and "offsets, groups, segments" in str(err.value)


def test_view_schema_quotes_the_sql_keywords():
    assert view_schema("groups").startswith("`group` string, `topic` string, `partition` int")
    with pytest.raises(ValueError, match="option view"):
        view_schema("lag")


def test_groups_rows_of_a_replicated_log_dir_measure_lag_from_the_high_watermark(tmp_path):
    # As kafka-consumer-groups.sh: a consumer can read up to the high watermark, not the log end.
    d = str(tmp_path / "logs")
    produce_numbered(d, "orders", 1, 20)
    with Broker(d, background=False, clock=MockTime(current_time_ms=COMMIT_TIME)) as broker:
        broker.commit_offsets("etl", {TopicPartition("orders", 0): 5})
    offsets_partitions = [tp for tp in LogDirectory(d).partitions(include_internal=True) if tp.topic != "orders"]
    hold_high_watermarks(d, {TopicPartition("orders", 0): 12,
                             **{tp: LogDirectory(d).describe(tp).log_end_offset for tp in offsets_partitions}})
    # Bytes up to the batch holding the high watermark: that batch (offsets 10 to 19), which it cuts, is not counted.
    assert groups_rows(LogDirectory(d), clock=MockTime(current_time_ms=NOW)) == [
        GroupRow("etl", "orders", 0, 5, 12, 7, bytes_from(d, "orders-0", 5) - bytes_from(d, "orders-0", 12),
                 NOW - (T0 + 5_000), COMMIT_TIME)]
