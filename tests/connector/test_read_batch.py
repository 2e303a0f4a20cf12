"""Batch reads through Spark: exact rows for ranges by offset and by timestamp."""

import datetime as dt
import json

import pytest
from pyspark.errors import AnalysisException, PySparkException
from py4j.protocol import Py4JJavaError

from broker_core import Broker
from connector.source import KAFKA_SCHEMA
from format.record import SimpleRecord
from tests.connector.conftest import T0, produce_numbered

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("batch") / "logs")
    produce_numbered(d, "orders", 3, 50, headers=True)
    produce_numbered(d, "audit", 1, 5)
    return d


def read(spark, log_dir, **options):
    reader = spark.read.format("seglog").option("path", log_dir)
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    return reader.load()


def rows(df):
    return sorted((r.topic, r.partition, r.offset, bytes(r.value).split(b".")[0].decode()) for r in df.collect())


def test_schema_is_sparks_kafka_schema(spark, log_dir):
    df = read(spark, log_dir, subscribe="orders")
    assert df.schema.simpleString() == spark.createDataFrame([], KAFKA_SCHEMA).schema.simpleString()
    with_headers = read(spark, log_dir, subscribe="orders", includeHeaders="true")
    assert with_headers.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"


def test_whole_topic_with_every_column(spark, log_dir):
    df = read(spark, log_dir, subscribe="orders", includeHeaders="true")
    got = df.orderBy("partition", "offset").collect()
    assert len(got) == 150
    first = got[0]
    assert (first.topic, first.partition, first.offset, bytes(first.key)) == ("orders", 0, 0, b"k0")
    assert bytes(first.value).startswith(b"orders-0-0.")
    assert first.timestamp == dt.datetime(2026, 1, 1, 0, 0, 0)
    assert first.timestampType == 0
    assert [(h.key, bytes(h.value)) for h in first.headers] == [("n", b"0")]
    assert rows(df) == sorted(("orders", p, n, f"orders-{p}-{n}") for p in range(3) for n in range(50))


def test_ranges_by_offset(spark, log_dir):
    df = read(spark, log_dir, subscribe="orders", startingOffsets={"orders": {"0": 5, "1": -2, "2": 48}},
              endingOffsets={"orders": {"0": 12, "1": 3, "2": -1}})
    want = ([("orders", 0, n, f"orders-0-{n}") for n in range(5, 12)] + [("orders", 1, n, f"orders-1-{n}")
            for n in range(3)] + [("orders", 2, n, f"orders-2-{n}") for n in (48, 49)])
    assert rows(df) == sorted(want)


def test_ranges_by_timestamp(spark, log_dir):
    df = read(spark, log_dir, assign={"orders": [1]}, startingTimestamp=str(T0 + 10_500),
              endingTimestamp=str(T0 + 20_000))
    assert [r.offset for r in df.orderBy("offset").collect()] == list(range(11, 20))
    by_partition = read(spark, log_dir, subscribe="orders",
                        startingOffsetsByTimestamp={"orders": {"0": T0 + 45_000, "1": T0, "2": -1}})
    assert rows(by_partition) == sorted([("orders", 0, n, f"orders-0-{n}") for n in range(45, 50)]
                                        + [("orders", 1, n, f"orders-1-{n}") for n in range(50)])


def test_subscribe_pattern_and_assign(spark, log_dir):
    assert read(spark, log_dir, subscribePattern="aud.*").count() == 5
    assert read(spark, log_dir, assign={"orders": [0, 2]}).select("partition").distinct().count() == 2


def test_min_partitions_and_max_records_split_tasks_without_changing_rows(spark, log_dir):
    split = read(spark, log_dir, subscribe="orders", minPartitions="12")
    assert split.rdd.getNumPartitions() >= 12
    assert rows(split) == rows(read(spark, log_dir, subscribe="orders"))
    capped = read(spark, log_dir, subscribe="orders", maxRecordsPerPartition="7")
    assert capped.rdd.getNumPartitions() >= 150 // 10  # splits snap to 10-record batches
    assert rows(capped) == rows(split)


def test_compacted_topics_and_control_batches_leave_gaps_that_are_not_errors(spark, tmp_path):
    d = str(tmp_path / "logs")
    from format.record_batch import build_batch
    with Broker(d, background=False) as broker:
        broker.create_topic("table", 1, {"cleanup.policy": "compact"})
        lg = broker.log_manager.get_log(__import__("format.layout", fromlist=["TopicPartition"]).TopicPartition(
            "table", 0))
        # What the cleaner leaves: survivors at their original offsets, holes between.
        lg.append(build_batch([SimpleRecord(b"a", b"1", T0), SimpleRecord(b"c", b"3", T0)], base_offset=0,
                              offsets=[2, 7], last_offset_delta=9), assign_offsets=False, from_client=False)
        lg.append(build_batch([SimpleRecord(b"d", b"4", T0)], base_offset=15, offsets=[15]),
                  assign_offsets=False, from_client=False)
    df = read(spark, d, subscribe="table", startingOffsets={"table": {"0": 3}})
    assert [(r.offset, bytes(r.value)) for r in df.orderBy("offset").collect()] == [(7, b"c"), (15, b"d")]


@pytest.mark.parametrize("options, named", [
    ({"subscribe": "orders", "assign": {"orders": [0]}}, "assign"),
    ({"subscribe": "orders", "startingOffsets": '{"orders": {"0": 1'}, "startingOffsets"),
    ({"assign": {"nope": [0]}}, "assign"),
    ({"assign": {"orders": [7]}}, "assign"),
    ({"subscribe": "orders", "view": "nonsense"}, "view"),
])
def test_bad_options_fail_at_load_naming_the_option(spark, log_dir, options, named):
    with pytest.raises((AnalysisException, PySparkException, Py4JJavaError)) as err:
        read(spark, log_dir, **options)
    assert named in str(err.value)
