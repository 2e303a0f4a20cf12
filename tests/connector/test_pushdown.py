"""Filter pushdown without Spark: the bounds pushed filters set (``connector.pushdown``), and the reader Spark
pushes them to (``PushdownBatchReader``) reading a real log dir, through its own calls (pushFilters,
partitions, read) and its byte counter, in the test's process."""

import datetime as dt

import pytest
from pyspark.sql.datasource import (EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNull, LessThan,
                                    LessThanOrEqual, Not, StringStartsWith)

from broker_core import Broker
from broker_core.clock import MockTime
from connector.options import parse_options
from connector.pushdown import ReadBounds, push_filters
from connector.source import PUSHDOWN_WORKER, PushdownBatchReader, SeglogBatchReader, SeglogDataSource
from format.record import SimpleRecord
from tests.connector.conftest import T0, produce_events, produce_numbered

UTC = dt.timezone.utc
SMALL_SEGMENTS = {"segment.bytes": 16 * 1024, "index.interval.bytes": 512}


def at(ms: int, micros: int = 0) -> dt.datetime:
    """The Spark timestamp of a record stamped ``ms``, plus ``micros``."""
    return dt.datetime.fromtimestamp(ms / 1000, UTC) + dt.timedelta(microseconds=micros)


# --- the bounds -------------------------------------------------------------------------------------------

def test_equal_and_in_on_topic_and_partition_choose_partitions_and_spark_need_not_check_them():
    filters = [In(("topic",), ("orders", "audit")), EqualTo(("topic",), "orders"), In(("partition",), (0, 2)),
               GreaterThanOrEqual(("partition",), 1)]
    bounds, remaining = push_filters(filters)
    assert remaining == []
    assert bounds.topics == {"orders"} and bounds.partitions == {0, 2} and bounds.from_partition == 1
    from format.layout import TopicPartition as TP
    assert [bounds.selects(tp) for tp in (TP("orders", 0), TP("orders", 2), TP("audit", 2))] == [False, True, False]


def test_topic_comparisons_select_by_name_order():
    from format.layout import TopicPartition as TP
    bounds, remaining = push_filters([GreaterThan(("topic",), "b"), LessThanOrEqual(("topic",), "orders"),
                                      GreaterThanOrEqual(("topic",), "audit")])
    assert remaining == []
    assert [bounds.selects(TP(t, 0)) for t in ("audit", "b", "ba", "orders", "ordersx")] == [
        False, False, True, True, False]


def test_offset_comparisons_bound_ranges_exactly_and_in_reads_from_least_to_greatest():
    cases = [(GreaterThan(("offset",), 9), (10, None)), (GreaterThanOrEqual(("offset",), 9), (9, None)),
             (LessThan(("offset",), 9), (None, 9)), (LessThanOrEqual(("offset",), 9), (None, 10)),
             (EqualTo(("offset",), 9), (9, 10)), (EqualNullSafe(("offset",), 9), (9, 10))]
    for f, (low, high) in cases:
        bounds, remaining = push_filters([f])
        assert (bounds.from_offset, bounds.until_offset, remaining) == (low, high, []), f
    in_filter = In(("offset",), (30, 4, 12))
    bounds, remaining = push_filters([in_filter])
    assert (bounds.from_offset, bounds.until_offset) == (4, 31)
    assert remaining == [in_filter]  # offsets between the named ones are read: Spark drops them


def test_timestamp_comparisons_become_millisecond_bounds_and_only_in_is_left_to_spark():
    t = T0 + 5_000
    cases = [(GreaterThan(("timestamp",), at(t)), (t + 1, None)),
             (GreaterThan(("timestamp",), at(t, 500)), (t + 1, None)),
             (GreaterThanOrEqual(("timestamp",), at(t)), (t, None)),
             (GreaterThanOrEqual(("timestamp",), at(t, 500)), (t + 1, None)),
             (LessThan(("timestamp",), at(t)), (None, t - 1)),
             (LessThan(("timestamp",), at(t, 500)), (None, t)),
             (LessThanOrEqual(("timestamp",), at(t, 500)), (None, t)),
             (EqualTo(("timestamp",), at(t)), (t, t)),
             (In(("timestamp",), (at(t + 9), at(t), at(t, 1))), (t, t + 9))]
    for f, (low, high) in cases:
        bounds, remaining = push_filters([f])
        assert (bounds.min_timestamp, bounds.max_timestamp) == (low, high), f
        assert remaining == ([f] if isinstance(f, In) else []), f
    assert push_filters([EqualTo(("timestamp",), at(t, 500))])[0].is_empty  # no millisecond stamp equals it


def test_filters_anded_together_narrow_each_other_and_contradictions_are_empty():
    bounds, _ = push_filters([GreaterThan(("offset",), 5), GreaterThan(("offset",), 7), LessThan(("offset",), 20),
                              LessThan(("offset",), 30), GreaterThanOrEqual(("timestamp",), at(T0)),
                              LessThanOrEqual(("timestamp",), at(T0 + 10))])
    assert (bounds.from_offset, bounds.until_offset, bounds.min_timestamp, bounds.max_timestamp) == (
        8, 20, T0, T0 + 10)
    assert not bounds.is_empty
    for contradiction in ([EqualTo(("partition",), 1), EqualTo(("partition",), 2)],
                          [GreaterThan(("offset",), 9), LessThan(("offset",), 3)],
                          [GreaterThan(("timestamp",), at(T0)), LessThan(("timestamp",), at(T0))],
                          [EqualTo(("key",), b"a"), EqualTo(("key",), b"b")]):
        assert push_filters(contradiction)[0].is_empty, contradiction


def test_filters_on_other_columns_negations_and_values_of_other_types_are_left_to_spark():
    filters = [EqualTo(("value",), b"x"), Not(EqualTo(("partition",), 1)), IsNull(("key",)),
               StringStartsWith(("topic",), "ord"), EqualTo(("timestamp",), dt.datetime(2026, 1, 1)),
               GreaterThan(("offset",), 2.5), EqualTo(("partition",), True), EqualTo(("headers", "key"), "n")]
    bounds, remaining = push_filters(filters)
    assert all(r is f for r, f in zip(remaining, filters)) and len(remaining) == len(filters)
    assert bounds == ReadBounds() and bounds.is_unbounded


def test_key_equality_is_pushed():
    f = EqualTo(("key",), bytearray(b"k7"))
    bounds, remaining = push_filters([f])
    assert bounds.keys == {b"k7"} and remaining == []


# --- the reader, on a real log dir ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    """orders: 3 partitions of 300 records each stamped T0 + n s, in small segments; audit: 1 partition."""
    d = str(tmp_path_factory.mktemp("pushdown") / "logs")
    produce_numbered(d, "orders", 3, 300, value_size=100, config=SMALL_SEGMENTS)
    produce_numbered(d, "audit", 1, 20, config=SMALL_SEGMENTS)
    return d


def read_all(log_dir, filters=(), reader_class=PushdownBatchReader, **options):
    """(rows, filters left to Spark, bytes read) of a batch read of ``log_dir`` through the reader's own calls."""
    reader = reader_class(parse_options({"path": log_dir, "subscribePattern": ".*", **options}))
    remaining = list(reader.pushFilters(list(filters))) if filters else []
    rows = [row for p in reader.partitions() for batch in reader.read(p) for row in batch.to_pylist()]
    return rows, remaining, reader.counter.bytes_read


def holds(f, row) -> bool:
    """A pushed filter evaluated on a row, as Spark evaluates it."""
    value = row[f.attribute[0]]
    want = f.value
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return value == want
    if isinstance(f, In):
        return value in want
    return {GreaterThan: value > want if value is not None else False,
            GreaterThanOrEqual: value >= want if value is not None else False,
            LessThan: value < want if value is not None else False,
            LessThanOrEqual: value <= want if value is not None else False}[type(f)]


def key_of(row):
    return row["topic"], row["partition"], row["offset"]


OPERATOR_CASES = {
    "topic =": [EqualTo(("topic",), "audit")],
    "topic IN": [In(("topic",), ("audit", "missing"))],
    "topic <": [LessThan(("topic",), "b")],
    "partition =": [EqualTo(("partition",), 2)],
    "partition IN": [In(("partition",), (1, 5))],
    "partition >": [GreaterThan(("partition",), 1)],
    "partition <=": [LessThanOrEqual(("partition",), 0)],
    "offset =": [EqualTo(("offset",), 123)],
    "offset <": [LessThan(("offset",), 40)],
    "offset <=": [LessThanOrEqual(("offset",), 40)],
    "offset >": [GreaterThan(("offset",), 250)],
    "offset >=": [GreaterThanOrEqual(("offset",), 250)],
    "offset IN": [In(("offset",), (200, 210, 290))],
    "timestamp >": [GreaterThan(("timestamp",), at(T0 + 280_000))],
    "timestamp >=": [GreaterThanOrEqual(("timestamp",), at(T0 + 280_000))],
    "timestamp =": [EqualTo(("timestamp",), at(T0 + 290_000))],
    "timestamp IN": [In(("timestamp",), (at(T0 + 270_000), at(T0 + 290_000)))],
    "AND of several": [EqualTo(("topic",), "orders"), In(("partition",), (0, 1)),
                       GreaterThanOrEqual(("offset",), 100), LessThan(("offset",), 200),
                       GreaterThan(("timestamp",), at(T0 + 150_000)), EqualTo(("key",), b"k160")],
}


@pytest.mark.parametrize("filters", list(OPERATOR_CASES.values()), ids=list(OPERATOR_CASES))
def test_every_pushed_operator_reads_fewer_bytes_and_returns_the_same_rows(log_dir, filters):
    everything, _, all_bytes = read_all(log_dir, reader_class=SeglogBatchReader)
    pushed, remaining, pushed_bytes = read_all(log_dir, filters)
    want = sorted(key_of(r) for r in everything if all(holds(f, r) for f in filters))
    assert want, "the case selects some rows"
    # Spark applies the filters left to it; those taken must already hold for every row read.
    assert sorted(key_of(r) for r in pushed if all(holds(f, r) for f in remaining)) == want
    taken = [f for f in filters if not any(f is r for r in remaining)]
    assert all(holds(f, r) for f in taken for r in pushed)
    assert pushed_bytes < all_bytes


def test_timestamp_upper_bounds_of_a_create_time_topic_read_to_the_end_and_return_the_same_rows(log_dir):
    filters = [LessThan(("timestamp",), at(T0 + 20_000)), LessThanOrEqual(("timestamp",), at(T0 + 20_000))]
    everything, _, all_bytes = read_all(log_dir, reader_class=SeglogBatchReader)
    pushed, remaining, pushed_bytes = read_all(log_dir, filters)
    assert remaining == []
    want = sorted(key_of(r) for r in everything if all(holds(f, r) for f in filters))
    assert sorted(key_of(r) for r in pushed) == want
    assert len(want) == 20 * 3 + 20
    assert pushed_bytes == all_bytes  # CreateTime: a later record may be stamped earlier


def test_bounds_that_exclude_everything_plan_no_tasks(log_dir):
    for filters in ([EqualTo(("topic",), "missing")], [EqualTo(("partition",), 1), EqualTo(("partition",), 2)],
                    [GreaterThan(("offset",), 10_000)], [GreaterThan(("timestamp",), at(T0 + 10_000_000))],
                    [EqualTo(("timestamp",), at(T0, 1))]):
        reader = PushdownBatchReader(parse_options({"path": log_dir, "subscribePattern": ".*"}))
        reader.pushFilters(filters)
        assert reader.partitions() == [], filters


def test_pushed_ranges_still_split_into_tasks_by_max_records_per_partition(log_dir):
    reader = PushdownBatchReader(parse_options({"path": log_dir, "subscribe": "orders",
                                                "maxRecordsPerPartition": "25"}))
    reader.pushFilters([EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), 200)])
    ranges = [p.offset_range for p in reader.partitions()]
    assert ranges[0].from_offset == 200 and ranges[-1].until_offset == 300
    assert {(r.topic, r.partition) for r in ranges} == {("orders", 0)} and len(ranges) >= 4


def test_create_time_stamps_out_of_order_within_a_partition_are_still_returned(tmp_path):
    log_dir = str(tmp_path / "logs")
    stamps = [T0 + s * 1000 for s in (10, 20, 30, 40, 15, 50, 60, 5, 70)]  # 15 after 40; 5 after 60
    with Broker(log_dir, background=False) as broker:
        broker.create_topic("late", 1, {})
        for n, stamp in enumerate(stamps):
            broker.produce("late", [SimpleRecord(f"v{n}".encode(), f"k{n}".encode(), stamp)], partition=0)
    cases = [[GreaterThanOrEqual(("timestamp",), at(T0 + 15_000))],
             [LessThan(("timestamp",), at(T0 + 16_000))],
             [GreaterThan(("timestamp",), at(T0 + 12_000)), LessThanOrEqual(("timestamp",), at(T0 + 30_000))],
             [EqualTo(("timestamp",), at(T0 + 5_000))]]
    everything, _, _ = read_all(log_dir, reader_class=SeglogBatchReader)
    for filters in cases:
        pushed, remaining, _ = read_all(log_dir, filters)
        want = sorted(r["offset"] for r in everything if all(holds(f, r) for f in filters))
        assert remaining == [] and sorted(r["offset"] for r in pushed) == want, filters
    assert [r["offset"] for r in read_all(log_dir, cases[0])[0]] == [1, 2, 3, 4, 5, 6, 8]
    assert [r["offset"] for r in read_all(log_dir, cases[1])[0]] == [0, 4, 7]  # 15 s and 5 s, after later ones


def test_log_append_time_topics_start_and_stop_where_the_stamps_say(tmp_path):
    log_dir = str(tmp_path / "logs")
    clock = MockTime(current_time_ms=T0)
    with Broker(log_dir, background=False, clock=clock) as broker:
        broker.create_topic("appended", 2, {"message.timestamp.type": "LogAppendTime", **SMALL_SEGMENTS})
        for n in range(200):
            clock.sleep(1000)
            for p in range(2):
                broker.produce("appended", [SimpleRecord(b"v" * 100, f"k{n}".encode(), 0)], partition=p)
    filters = [GreaterThan(("timestamp",), at(T0 + 100_000)), LessThanOrEqual(("timestamp",), at(T0 + 120_000))]
    everything, _, all_bytes = read_all(log_dir, reader_class=SeglogBatchReader)
    pushed, remaining, pushed_bytes = read_all(log_dir, filters)
    assert {r["timestampType"] for r in everything} == {1}
    assert remaining == []
    want = sorted(key_of(r) for r in everything if all(holds(f, r) for f in filters))
    assert len(want) == 2 * 20
    assert sorted(key_of(r) for r in pushed) == want  # exact: nothing read outside the bounds
    # A read goes on to the end of its chunk: 20% of the records, under half the bytes.
    assert pushed_bytes * 2 < all_bytes


def test_key_equality_drops_rows_only_once_decoded(log_dir):
    f = EqualTo(("key",), b"k42")
    pushed, remaining, pushed_bytes = read_all(log_dir, [f])
    everything, _, all_bytes = read_all(log_dir, reader_class=SeglogBatchReader)
    assert remaining == []
    assert sorted(key_of(r) for r in pushed) == [("orders", p, 42) for p in range(3)]
    assert pushed_bytes == all_bytes  # every batch is looked at


def test_the_data_source_takes_filters_only_when_spark_plans_with_pushdown(log_dir):
    """Outside Spark's pushdown planning worker the reader takes no filters, so Spark plans it with
    spark.sql.python.filterPushdown.enabled false too."""
    reader = SeglogDataSource({"path": log_dir, "subscribe": "orders"}).reader(None)
    assert type(reader) is SeglogBatchReader
    assert "pushFilters" not in vars(SeglogBatchReader) and "pushFilters" in vars(PushdownBatchReader)


def test_the_data_source_takes_filters_when_spark_s_pushdown_worker_makes_the_reader(log_dir):
    """Called from code of Spark's pushdown worker module (its spec's name, as when Spark runs it), however
    deep below it, the data source makes the reader that takes filters."""
    import importlib.machinery

    worker = {"__name__": "__main__", "__spec__": importlib.machinery.ModuleSpec(PUSHDOWN_WORKER, None),
              "make": lambda: SeglogDataSource({"path": log_dir, "subscribe": "orders"}).reader(None)}
    exec(compile("def plan():\n    return make()\n", "data_source_pushdown_filters.py", "exec"), worker)
    assert type(worker["plan"]()) is PushdownBatchReader


@pytest.mark.slow
def test_timestamp_bounds_find_their_start_in_the_remote_tier(tmp_path, s3_bucket):
    from tests.format.tiered_log_kit import ORDERS_PER_PARTITION, tiered_orders

    log_dir, _, creds, _ = tiered_orders(tmp_path, s3_bucket)
    storage = {f"storage.{k}": v for k, v in creds.items()}
    # CreateTime: the start is found in the time indexes (the remote ones first); the upper bound runs on.
    filters = [GreaterThanOrEqual(("timestamp",), at(T0 + 150_000)), LessThan(("timestamp",), at(T0 + 180_000))]
    everything, _, all_bytes = read_all(log_dir, reader_class=SeglogBatchReader, **storage)
    pushed, remaining, pushed_bytes = read_all(log_dir, filters, **storage)
    assert len(everything) == 2 * ORDERS_PER_PARTITION
    assert remaining == []
    assert sorted(key_of(r) for r in pushed) == [("orders", p, n) for p in range(2) for n in range(150, 180)]
    assert pushed_bytes * 2 < all_bytes


@pytest.mark.slow
def test_pushed_filters_narrow_reads_over_the_protocol_too(broker_server):
    produce_events(broker_server.broker)
    reader = PushdownBatchReader(parse_options({"bootstrap": broker_server.bootstrap_servers,
                                                "subscribe": "events"}))
    filters = [EqualTo(("partition",), 1), GreaterThan(("timestamp",), at(T0 + 21_000)),
               LessThanOrEqual(("timestamp",), at(T0 + 25_000)), In(("key",), (b"k23", b"k24"))]
    remaining = list(reader.pushFilters(filters))
    ranges = [p.offset_range for p in reader.partitions()]
    assert [(r.partition, r.from_offset, r.until_offset) for r in ranges] == [(1, 22, 30)]  # CreateTime: runs on
    rows = [row for p in reader.partitions() for batch in reader.read(p) for row in batch.to_pylist()]
    assert remaining == filters[3:]
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(1, n) for n in range(22, 26)]
    # The fetches counted: fewer bytes than the same reader fetches with nothing pushed.
    unpushed = SeglogBatchReader(parse_options({"bootstrap": broker_server.bootstrap_servers, "subscribe": "events"}))
    for p in unpushed.partitions():
        list(unpushed.read(p))
    assert 0 < reader.counter.bytes_read < unpushed.counter.bytes_read


def test_the_reader_sent_to_the_tasks_carries_no_planning_state_and_still_reads(log_dir):
    import pickle

    reader = SeglogDataSource({"path": log_dir, "subscribe": "orders"}).reader(None)
    partitions = reader.partitions()
    shipped = pickle.loads(pickle.dumps(reader))
    assert not {"_planner", "_infos", "_start", "_end"} & set(vars(shipped))
    rows = sum(batch.num_rows for p in partitions for batch in reader.read(p))
    assert sum(batch.num_rows for p in partitions for batch in shipped.read(p)) == rows > 0


def test_rows_are_kept_by_timestamp_and_a_batch_wholly_inside_the_bounds_is_kept_as_it_is():
    from connector.partition_read import keep_rows
    from format.arrow import decode_to_arrow
    from format.record_batch import build_batch

    batch = decode_to_arrow(build_batch([SimpleRecord(b"v%d" % i, b"k", T0 + i) for i in range(10)]),
                            topic="t", partition=0)
    assert keep_rows(ReadBounds(min_timestamp=T0, max_timestamp=T0 + 9), batch) is batch
    assert keep_rows(ReadBounds(min_timestamp=T0 + 3), batch).column("offset").to_pylist() == list(range(3, 10))
    assert keep_rows(ReadBounds(max_timestamp=T0 + 3), batch).column("offset").to_pylist() == list(range(4))
    assert keep_rows(ReadBounds(min_timestamp=T0 + 20), batch).num_rows == 0
    assert keep_rows(ReadBounds(min_timestamp=T0, keys=frozenset({b"x"})), batch).num_rows == 0
