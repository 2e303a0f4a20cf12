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


@pytest.fixture(scope="module")
def log_dir_with_an_empty_topic(log_dir):
    with Broker(log_dir, background=False) as broker:
        if "empty" not in broker.list_topics():
            broker.create_topic("empty", 2, {})
    return log_dir


@pytest.mark.parametrize("options", [
    pytest.param({"subscribe": "missing"}, id="a missing topic"),
    pytest.param({"subscribePattern": "nothing-.*"}, id="a pattern matching nothing"),
    pytest.param({"subscribe": "orders", "startingTimestamp": str(T0 + 10**9)}, id="a startingTimestamp in the future"),
    pytest.param({"subscribe": "empty", "endingOffsets": {"empty": {"0": -1, "1": -1}}},
                 id="all -1 ending offsets of an empty topic"),
    pytest.param({"subscribe": "orders", "endingOffsets": {"orders": {"0": 0, "1": 0, "2": 0}}},
                 id="ending offsets at the log start"),
])
def test_spark_reads_that_select_nothing_return_zero_rows(spark, log_dir_with_an_empty_topic, options):
    df = read(spark, log_dir_with_an_empty_topic, **options)
    assert df.collect() == []
    assert df.count() == 0


_BAD_OPTIONS = [
    ({"path": "", "subscribe": "orders"}, "path is empty"),
    ({"path": "/nonexistent/seglog/logs", "subscribe": "orders"}, "option path: /nonexistent/seglog/logs"),
    ({"path": "nosuchscheme://bucket/logs", "subscribe": "orders"}, "option path="),
    ({"path": "/nonexistent/seglog/logs", "view": "offsets"}, "option path: /nonexistent/seglog/logs"),
    ({"bootstrap": "localhost", "subscribe": "orders"}, "option bootstrap must be host:port"),
    ({"kafka.bootstrap.servers": "localhost:port", "subscribe": "orders"}, "kafka.bootstrap.servers"),
    ({"subscribe": " , "}, "option subscribe names no topic"),
    ({"subscribe": "orders", "assign": {"orders": [0]}}, "subscribe and assign"),
    ({"subscribePattern": "orders["}, "option subscribePattern"),
    ({"subscribePattern": ""}, "option subscribePattern is empty"),
    ({"assign": "[0, 1]"}, "option assign"),
    ({"assign": {"orders": [-1]}}, "option assign"),
    ({"assign": {"nope": [0]}}, "option assign names topic 'nope'"),
    ({"assign": {"orders": [7]}}, "option assign names partition orders-7"),
    ({"subscribe": "orders", "startingOffsets": '{"orders": {"0": 1'}, "option startingOffsets is not valid JSON"),
    ({"subscribe": "orders", "startingOffsets": {"orders": {"0": 1, "1": 1, "2": 1, "3": 1}}},
     "option startingOffsets names orders-3"),
    ({"subscribe": "orders", "startingOffsets": {"orders": {"0": -3, "1": 1, "2": 1}}}, "option startingOffsets"),
    ({"subscribe": "orders", "startingOffsets": "sometime"}, "option startingOffsets"),
    ({"subscribe": "orders", "endingOffsets": "earliest"}, "option endingOffsets=earliest"),
    ({"subscribe": "orders", "endingOffsets": {"orders": {"0": -2, "1": -1, "2": -1}}}, "option endingOffsets"),
    ({"subscribe": "orders", "endingOffsets": {"orders": {"0": "x"}}}, "option endingOffsets"),
    ({"subscribe": "orders", "startingTimestamp": "yesterday"}, "option startingTimestamp"),
    ({"subscribe": "orders", "startingTimestamp": "-5"}, "option startingTimestamp"),
    ({"subscribe": "orders", "endingTimestamp": "tomorrow"}, "option endingTimestamp"),
    ({"subscribe": "orders", "endingOffsetsByTimestamp": {"orders": {"0": -7, "1": T0, "2": T0}}},
     "option endingOffsetsByTimestamp"),
    ({"subscribe": "orders", "startingOffsetsByTimestampStrategy": "maybe"},
     "option startingOffsetsByTimestampStrategy"),
    ({"subscribe": "orders", "startingTimestamp": "1", "startingOffsets": "earliest"},
     "startingOffsets and startingTimestamp"),
    ({"subscribe": "orders", "maxOffsetsPerTrigger": "0"}, "option maxOffsetsPerTrigger"),
    ({"subscribe": "orders", "minOffsetsPerTrigger": "ten"}, "option minOffsetsPerTrigger"),
    ({"subscribe": "orders", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
    ({"subscribe": "orders", "maxTriggerDelay": "soon"}, "option maxTriggerDelay"),
    ({"subscribe": "orders", "minPartitions": "0"}, "option minPartitions"),
    ({"subscribe": "orders", "maxRecordsPerPartition": "-1"}, "option maxRecordsPerPartition"),
    ({"subscribe": "orders", "failOnDataLoss": "maybe"}, "option failOnDataLoss"),
    ({"subscribe": "orders", "includeHeaders": "yes"}, "option includeHeaders"),
    ({"subscribe": "orders", "groupId": " "}, "option groupId is empty"),
    ({"subscribe": "orders", "startingOffsets": "group"}, "needs the option groupId"),
    ({"subscribe": "orders", "startingOffsets": "group", "groupId": "g", "autoOffsetReset": "sometimes"},
     "option autoOffsetReset must be one of earliest, latest, none"),
    ({"subscribe": "orders", "autoOffsetReset": "earliest"}, "option autoOffsetReset goes with startingOffsets=group"),
    ({"subscribe": "orders", "chunkBytes": "0"}, "option chunkBytes"),
    ({"subscribe": "orders", "isolation.level": "read_dirty"},
     "option isolation.level must be one of read_uncommitted, read_committed"),
    ({"subscribe": "orders", "isolation.level": "read_committed", "kafka.isolation.level": "read_uncommitted"},
     "options isolation.level ('read_committed') and kafka.isolation.level ('read_uncommitted') disagree"),
    ({"view": "nonsense"}, "option view"),
    ({"subscribe": "orders", "colour": "blue"}, "unknown option 'colour'"),
]


@pytest.mark.parametrize("options, message", _BAD_OPTIONS, ids=[m for _, m in _BAD_OPTIONS])
def test_every_option_error_fails_at_load_naming_the_option(spark, log_dir, options, message):
    reader = spark.read.format("seglog")
    if "path" not in options:
        reader = reader.option("path", log_dir)
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    with pytest.raises((AnalysisException, PySparkException, Py4JJavaError)) as err:
        reader.load()  # not an action: nothing has run yet
    assert message in str(err.value)
    assert "SeglogOptionError" in str(err.value)


@pytest.mark.parametrize("options, message", [
    ({"startingOffsets": "latest"}, "option startingOffsets=latest is for streaming queries only"),
    ({"startingOffsets": {"orders": {"0": -1, "1": -2, "2": -2}}}, "offset -1 (latest) of orders-0"),
    # A stream restarted from its checkpoint after partitions were added must still load.
    ({"startingOffsets": {"orders": {"0": 1, "1": 1}}}, "option startingOffsets gives no offset for orders-2"),
    ({"startingOffsetsByTimestamp": {"orders": {"0": T0}}},
     "option startingOffsetsByTimestamp gives no timestamp for orders-1"),
])
def test_batch_only_rules_fail_when_the_batch_is_planned_naming_the_option(spark, log_dir, options, message):
    df = read(spark, log_dir, subscribe="orders", **options)  # load() cannot know it is a batch
    with pytest.raises((AnalysisException, PySparkException, Py4JJavaError)) as err:
        df.count()
    assert message in str(err.value)


def test_starting_offsets_group_falls_back_as_auto_offset_reset_says(spark, log_dir):
    from format.layout import TopicPartition

    with Broker(log_dir, background=False) as broker:
        broker.commit_offsets("half-done", {TopicPartition("orders", 0): 45})
    group = {"subscribe": "orders", "startingOffsets": "group", "groupId": "half-done"}
    by_partition = lambda df: sorted((p, n) for p, n in  # noqa: E731
                                     df.groupBy("partition").count().collect())
    # Kafka's default auto.offset.reset is latest: partitions 1 and 2 have nothing committed.
    assert by_partition(read(spark, log_dir, **group)) == [(0, 5)]
    assert by_partition(read(spark, log_dir, **group, autoOffsetReset="earliest")) == [(0, 5), (1, 50), (2, 50)]
    with pytest.raises((AnalysisException, PySparkException, Py4JJavaError)) as err:
        read(spark, log_dir, **group, autoOffsetReset="none").count()
    assert "group 'half-done' has no committed offset for orders-1, orders-2" in str(err.value)
    assert "autoOffsetReset" in str(err.value)
    unknown = {**group, "groupId": "never-committed"}
    assert read(spark, log_dir, **unknown).count() == 0
    assert read(spark, log_dir, **unknown, **{"kafka.auto.offset.reset": "earliest"}).count() == 150
