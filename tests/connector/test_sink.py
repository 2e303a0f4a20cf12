"""The seglog sink: Arrow rows to records without Spark, then batch and streaming writes through Spark."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from broker_core import Broker
from broker_core.errors import UnknownTopicOrPartitionError
from broker_core.partitioner import partition_for_key
from connector.options import SeglogOptionError
from connector.sink import SinkDataError, destinations, parse_sink_options, produce_staged, records_from_arrow
from connector.staging import STAGING_DIR, stage_batches
from format.compression import CompressionType
from format.record import Header, SimpleRecord
from format.record_batch import iter_batches
from tests.connector.conftest import T0, produce_numbered

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def make_log_dir(path, **topics: int) -> str:
    d = str(path)
    with Broker(d, background=False) as broker:
        for name, partitions in topics.items():
            broker.create_topic(name, partitions)
    return d


def read_log(log_dir: str, topic: str) -> dict[int, list]:
    """Every record of ``topic``, by partition."""
    out = {}
    with Broker(log_dir, background=False) as broker:
        for p in range(broker.partitions_for(topic)):
            records, offset = [], 0
            while True:
                fetched = broker.fetch(topic, p, offset).decoded(offset)
                if not fetched:
                    break
                records.extend(fetched)
                offset = fetched[-1].offset + 1
            out[p] = records
    return out


def all_records(log_dir: str, topic: str) -> list:
    return [r for records in read_log(log_dir, topic).values() for r in records]


# --- Arrow rows to records ------------------------------------------------------


def test_strings_become_utf8_bytes_and_binary_passes_unchanged():
    batch = pa.record_batch({"key": pa.array(["ké", None], pa.large_string()),
                             "value": pa.array([b"\x00\xff", b"v"], pa.large_binary())})
    got = records_from_arrow(batch, "t")
    assert got == {"t": [(None, SimpleRecord(b"\x00\xff", "ké".encode())), (None, SimpleRecord(b"v", None))]}


def test_null_value_is_a_tombstone_and_null_key_stays_null():
    batch = pa.record_batch({"key": pa.array([b"k", None], pa.binary()),
                             "value": pa.array([None, "x"], pa.string())})
    assert records_from_arrow(batch, "t")["t"] == [(None, SimpleRecord(None, b"k")), (None, SimpleRecord(b"x"))]


def test_headers_timestamp_and_partition_columns():
    ts = pa.array([dt.datetime(2026, 1, 1, 0, 0, 1, 999_999), None], pa.timestamp("us", tz="UTC"))
    batch = pa.record_batch({
        "value": pa.array([b"a", b"b"]),
        "partition": pa.array([2, None], pa.int32()),
        "headers": pa.array([[{"key": "h", "value": b"1"}, {"key": "n", "value": None}], None], HEADERS),
        "timestamp": ts,
    })
    assert records_from_arrow(batch, "t")["t"] == [
        (2, SimpleRecord(b"a", None, T0 + 1999, (Header("h", b"1"), Header("n", None)))),
        (None, SimpleRecord(b"b", None, None, ())),
    ]


def test_topic_column_groups_rows_and_the_option_overrides_it():
    batch = pa.record_batch({"topic": ["a", "b", "a"], "value": [b"1", b"2", b"3"]})
    assert records_from_arrow(batch, None) == {"a": [(None, SimpleRecord(b"1")), (None, SimpleRecord(b"3"))],
                                               "b": [(None, SimpleRecord(b"2"))]}
    assert list(records_from_arrow(batch, "c")) == ["c"]


def test_null_topic_in_the_column_is_refused():
    batch = pa.record_batch({"topic": pa.array(["a", None]), "value": [b"1", b"2"]})
    with pytest.raises(SinkDataError, match="column topic holds null"):
        records_from_arrow(batch, None)


def test_timestamps_before_1970_are_refused():
    batch = pa.record_batch({"value": [b"1"], "timestamp": pa.array([-1000], pa.timestamp("us", tz="UTC"))})
    with pytest.raises(SinkDataError, match="column timestamp"):
        records_from_arrow(batch, "t")


def test_destinations_give_each_topics_partition_span():
    batch = pa.record_batch({"topic": ["a", "b", "a", "c"], "value": [b""] * 4,
                             "partition": pa.array([3, None, 1, None], pa.int32())})
    assert destinations(batch, None) == {"a": (1, 3), "b": None, "c": None}
    assert destinations(batch, "t") == {"t": (1, 3)}


# --- options and schema ----------------------------------------------------------


def schema(**columns) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in columns.items()])


HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def test_options_and_columns_are_parsed(tmp_path):
    d = make_log_dir(tmp_path / "logs", t=1)
    opts = parse_sink_options({"PATH": d, "topic": "t", "compression": "zstd", "checkpointLocation": "/x"},
                              schema(value=StringType(), key=BinaryType(), topic=StringType(),
                                     partition=IntegerType(), headers=HEADERS_TYPE, extra=LongType()),
                              overwrite=False)
    assert opts.log_dir == d and opts.topic == "t" and opts.compression == CompressionType.ZSTD
    assert opts.columns == ("key", "value", "partition", "headers")  # the option overrides the topic column
    by_column = parse_sink_options({"path": f"file://{d}"}, schema(value=BinaryType(), topic=StringType()), False)
    assert by_column.topic is None and by_column.columns == ("value", "topic")


@pytest.mark.parametrize("options, columns, message", [
    ({"topic": "t"}, {"key": BinaryType()}, "column value is required"),
    ({"topic": "t"}, {"value": IntegerType()}, "column value must be binary or string, not int"),
    ({"topic": "t"}, {"value": BinaryType(), "key": LongType()}, "column key must be binary or string"),
    ({}, {"value": BinaryType()}, "give the option topic or a topic column"),
    ({}, {"value": BinaryType(), "topic": IntegerType()}, "column topic must be string"),
    ({"topic": "t"}, {"value": BinaryType(), "partition": StringType()}, "column partition must be int"),
    ({"topic": "t"}, {"value": BinaryType(), "headers": ArrayType(StringType())}, "column headers must be"),
    ({"topic": "t"}, {"value": BinaryType(), "timestamp": LongType()}, "column timestamp must be timestamp"),
    ({"topic": "t", "compression": "brotli"}, {"value": BinaryType()}, "option compression"),
    ({"subscribe": "t"}, {"value": BinaryType()}, "option subscribe is for reading"),
])
def test_bad_schema_or_options_name_the_column_or_option(tmp_path, options, columns, message):
    d = make_log_dir(tmp_path / "logs", t=1)
    with pytest.raises(SeglogOptionError, match=message):
        parse_sink_options({"path": d, **options}, schema(**columns), overwrite=False)


NO_AUTO_CREATE = {"auto.create.topics.enable": "false"}


def test_path_must_be_a_local_directory(tmp_path):
    value = schema(value=BinaryType())
    with pytest.raises(SeglogOptionError, match="option path is required"):
        parse_sink_options({"topic": "t"}, value, False)
    with pytest.raises(SeglogOptionError, match="option path is required"):
        parse_sink_options({"path": "", "topic": "t"}, value, False)
    with pytest.raises(SeglogOptionError, match="option path='s3://bucket/logs'.*local files only"):
        parse_sink_options({"path": "s3://bucket/logs", "topic": "t"}, value, False)
    with pytest.raises(SeglogOptionError, match="option path=.*does not exist"):
        parse_sink_options({"path": str(tmp_path / "missing"), "topic": "t", **NO_AUTO_CREATE}, value, False)
    # A broker creates a missing log dir, as it creates a missing topic.
    assert parse_sink_options({"path": str(tmp_path / "new"), "topic": "t"}, value, False).log_dir == \
        str(tmp_path / "new")


def test_overwrite_and_unknown_topic_are_refused_before_any_task(tmp_path):
    d = make_log_dir(tmp_path / "logs", t=1)
    with pytest.raises(SeglogOptionError, match="overwrite"):
        parse_sink_options({"path": d, "topic": "t"}, schema(value=BinaryType()), overwrite=True)
    with pytest.raises(UnknownTopicOrPartitionError,
                       match="topic 'nope' does not exist .* auto.create.topics.enable is false"):
        parse_sink_options({"path": d, "topic": "nope", **NO_AUTO_CREATE}, schema(value=BinaryType()),
                           overwrite=False)


@pytest.mark.parametrize("options, message", [
    ({"topic": "bad topic"}, "option topic"),
    ({"topic": "t", "num.partitions": "0"}, "option Invalid value 0 for configuration num.partitions"),
    ({"topic": "t", "auto.create.topics.enable": "maybe"}, "auto.create.topics.enable"),
])
def test_bad_topic_names_and_broker_settings_are_refused_naming_them(tmp_path, options, message):
    d = make_log_dir(tmp_path / "logs", t=1)
    with pytest.raises(SeglogOptionError, match=message):
        parse_sink_options({"path": d, **options}, schema(value=BinaryType()), overwrite=False)


# --- staging and producing, without Spark ------------------------------------------------


def stage(log_dir: str, *batches: pa.RecordBatch):
    columns = tuple(batches[0].schema.names)
    return stage_batches(iter(batches), os.path.join(log_dir, STAGING_DIR, "job"), columns)


def test_staged_rows_are_produced_in_order_with_the_kafka_partitioner(tmp_path):
    d = make_log_dir(tmp_path / "logs", t=4)
    first = stage(d, pa.record_batch({"key": [f"k{i}".encode() for i in range(30)],
                                      "value": [f"v{i}".encode() for i in range(30)]}))
    empty = stage_batches(iter([]), os.path.join(d, STAGING_DIR, "job"), ("key", "value"))
    second = stage(d, pa.record_batch({"key": [b"k0"], "value": [b"again"]}))
    assert (first.rows, empty.path, second.rows) == (30, None, 1)
    assert produce_staged(d, [first, empty, second], "t", CompressionType.NONE) == 31
    by_partition = read_log(d, "t")
    for p, records in by_partition.items():
        assert all(partition_for_key(r.key, 4) == p for r in records)
    k0 = [r.value for r in by_partition[partition_for_key(b"k0", 4)] if r.key == b"k0"]
    assert k0 == [b"v0", b"again"]  # task order is kept within a partition
    assert sum(len(r) for r in by_partition.values()) == 31


def test_an_unknown_partition_or_topic_writes_nothing(tmp_path):
    d = make_log_dir(tmp_path / "logs", a=2, b=1)
    ok = stage(d, pa.record_batch({"topic": ["a"], "value": [b"fine"], "partition": pa.array([0], pa.int32())}))
    bad_partition = stage(d, pa.record_batch({"topic": ["b"], "value": [b"x"],
                                              "partition": pa.array([1], pa.int32())}))
    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'b' has no partition 1"):
        produce_staged(d, [ok, bad_partition], None, CompressionType.NONE)
    bad_topic = stage(d, pa.record_batch({"topic": ["zzz"], "value": [b"x"]}))
    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'zzz' does not exist"):
        produce_staged(d, [ok, bad_topic], None, CompressionType.NONE, NO_AUTO_CREATE)
    new_topic_bad_partition = stage(d, pa.record_batch({"topic": ["new"], "value": [b"x"],
                                                        "partition": pa.array([1], pa.int32())}))
    with pytest.raises(UnknownTopicOrPartitionError, match="topic 'new' has no partition 1 \\(it has 1\\)"):
        produce_staged(d, [ok, new_topic_bad_partition], None, CompressionType.NONE)
    assert all_records(d, "a") == [] and all_records(d, "b") == []
    with Broker(d, background=False) as broker:
        assert sorted(broker.list_topics()) == ["a", "b"]  # nothing was created either


def test_a_missing_topic_is_created_with_num_partitions_as_kafka_auto_creates_topics(tmp_path):
    d = make_log_dir(tmp_path / "logs", a=1)
    rows = stage(d, pa.record_batch({"topic": ["a", "fresh", "other"], "value": [b"1", b"2", b"3"]}))
    assert produce_staged(d, [rows], None, CompressionType.NONE, {"num.partitions": "3"}) == 3
    with Broker(d, background=False) as broker:
        assert {t: broker.partitions_for(t) for t in broker.list_topics()} == {"a": 1, "fresh": 3, "other": 3}
    assert [r.value for r in all_records(d, "fresh")] == [b"2"]
    default = stage(d, pa.record_batch({"value": [b"4"]}))
    assert produce_staged(d, [default], "single", CompressionType.NONE) == 1
    with Broker(d, background=False) as broker:
        assert broker.partitions_for("single") == 1  # Kafka's default num.partitions


def test_batches_stay_under_max_message_bytes_and_use_the_codec(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("small", 1, {"max.message.bytes": 2000})
    staged = stage(d, pa.record_batch({"value": [bytes([i]) * 300 for i in range(40)]}))
    assert produce_staged(d, [staged], "small", CompressionType.GZIP) == 40
    with Broker(d, background=False) as broker:
        raw = broker.fetch("small", 0, 0, max_bytes=1 << 20).records
    batches = list(iter_batches(raw))
    assert len(batches) > 1
    assert all(b.header.compression_type == CompressionType.GZIP for b in batches)
    assert [r.value for r in all_records(d, "small")] == [bytes([i]) * 300 for i in range(40)]


# --- through Spark ---------------------------------------------------------------


@pytest.mark.slow
def test_batch_write_with_the_topic_option(spark, tmp_path):
    d = make_log_dir(tmp_path / "logs", t=3)
    rows = [(f"k{i}", f"v{i}".encode()) for i in range(40)] + [(None, b"no-key")]
    df = spark.createDataFrame(rows, "key string, value binary").repartition(3)
    df.write.format("seglog").option("path", d).option("topic", "t").mode("append").save()
    by_partition = read_log(d, "t")
    got = sorted((r.key or b"", r.value) for records in by_partition.values() for r in records)
    assert got == sorted(((k or "").encode(), v) for k, v in rows)
    assert [r.key for records in by_partition.values() for r in records if r.value == b"no-key"] == [None]
    for p, records in by_partition.items():
        assert all(partition_for_key(r.key, 3) == p for r in records if r.key is not None)
    assert not os.path.exists(os.path.join(d, STAGING_DIR))


@pytest.mark.slow
def test_the_readme_write_example_creates_its_topic_and_log_dir(spark, tmp_path):
    d = str(tmp_path / "fresh-logs")
    df = spark.createDataFrame([("alice", '{"amount": 12}')], "key string, value string")
    df.write.format("seglog").option("path", d).option("topic", "orders").mode("append").save()
    assert [(r.key, r.value) for r in all_records(d, "orders")] == [(b"alice", b'{"amount": 12}')]


@pytest.mark.slow
def test_a_write_without_append_mode_fails_naming_the_mode(spark, tmp_path):
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="ErrorIfExists.*Append"):
        df.write.format("seglog").option("path", str(tmp_path)).option("topic", "t").save()


@pytest.mark.slow
def test_batch_write_with_topic_partition_headers_and_timestamp_columns(spark, tmp_path):
    d = make_log_dir(tmp_path / "logs", a=2, b=3)
    df = spark.createDataFrame(
        [("a", 1, "x", [("h", b"1")], dt.datetime(2026, 1, 1, 0, 0, 5, tzinfo=dt.timezone.utc)),
         ("b", 2, "y", [], None),
         ("b", None, "z", None, None)],
        StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                    StructField("value", StringType()), StructField("headers", HEADERS_TYPE),
                    StructField("timestamp", TimestampType())]))
    df.write.format("seglog").option("path", d).option("compression", "lz4").mode("append").save()
    a = read_log(d, "a")
    assert [(r.value, r.headers, r.timestamp) for r in a[1]] == [(b"x", (Header("h", b"1"),), T0 + 5000)]
    assert a[0] == []
    b = read_log(d, "b")
    assert b"y" in [r.value for r in b[2]]  # z has no key and no partition: any partition will do
    assert sorted(r.value for records in b.values() for r in records) == [b"y", b"z"]


@pytest.mark.slow
def test_streaming_write_from_a_seglog_source(spark, tmp_path):
    source = str(tmp_path / "source")
    produce_numbered(source, "src", 2, 15, headers=True)
    sink = make_log_dir(tmp_path / "sink", dst=3)
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        query = (spark.readStream.format("seglog").option("path", source).option("subscribe", "src")
                 .option("startingOffsets", "earliest").option("includeHeaders", "true").load()
                 .selectExpr("key", "value", "headers")
                 .writeStream.format("seglog").option("path", sink).option("topic", "dst")
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None

    run()
    got = all_records(sink, "dst")
    assert sorted(r.value.split(b".")[0] for r in got) == sorted(
        f"src-{p}-{n}".encode() for p in range(2) for n in range(15))
    assert all(r.headers == (Header("n", r.key[1:]),) for r in got)
    produce_numbered(source, "src", 2, 5, start=15)
    run()  # the checkpoint resumes: only the new rows are written
    assert len(all_records(sink, "dst")) == 40
    assert not os.path.exists(os.path.join(sink, STAGING_DIR))


@pytest.mark.slow
@pytest.mark.parametrize("columns, options, message", [
    ("key", {"topic": "t"}, "column value is required"),
    ("value", {}, "give the option topic or a topic column"),
    ("value", {"topic": "t", "path": "s3://bucket/logs"}, "option path='s3://bucket/logs'"),
])
def test_spark_write_fails_naming_the_column_or_option(spark, tmp_path, columns, options, message):
    d = make_log_dir(tmp_path / "logs", t=1)
    df = spark.createDataFrame([("k", "v")], "key string, value string").select(columns)
    writer = df.write.format("seglog").option("path", d).mode("append")
    for k, v in options.items():
        writer = writer.option(k, v)
    with pytest.raises(Exception, match=message):
        writer.save()
