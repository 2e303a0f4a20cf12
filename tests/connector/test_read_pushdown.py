"""Filter pushdown through Spark: the same rows with and without it, for spark.read, SQL views and
``now() - INTERVAL``, what ``EXPLAIN`` shows, and out-of-order CreateTime stamps. (Bytes read are
counted in tests/connector/test_pushdown.py, where the reader runs in the test's process.)"""

import io
import time
from contextlib import contextmanager, redirect_stdout

import pytest

from broker_core import Broker
from format.record import SimpleRecord
from tests.connector.conftest import T0, produce_numbered

pytestmark = pytest.mark.slow

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


@contextmanager
def pushdown(spark, enabled: bool):
    before = spark.conf.get(PUSHDOWN)
    spark.conf.set(PUSHDOWN, str(enabled).lower())
    try:
        yield
    finally:
        spark.conf.set(PUSHDOWN, before)


def rows(df):
    return sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in df.collect())


def both_ways(spark, sql, view: str):
    """The rows of ``sql`` with filter pushdown, and without, each over ``view`` made afresh: Spark 4.2 keeps
    the read a relation planned with pushed filters for its later queries that push none."""
    out = []
    for enabled in (True, False):
        with pushdown(spark, enabled):
            spark.sql(view)
            out.append(rows(spark.sql(sql)))
    return out


def explained(spark, sql, view: str) -> str:
    with pushdown(spark, True):
        spark.sql(view)
        return spark.sql(f"EXPLAIN FORMATTED {sql}").collect()[0][0]


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pushdown") / "logs")
    produce_numbered(d, "orders", 3, 300, value_size=100, config={"segment.bytes": 16 * 1024})
    produce_numbered(d, "audit", 1, 20)
    return d


def test_queries_return_the_same_rows_with_and_without_pushdown_and_explain_shows_what_was_pushed(spark, log_dir):
    view = f"CREATE OR REPLACE TEMPORARY VIEW everything USING seglog OPTIONS (path '{log_dir}', subscribePattern '.*')"
    queries = {
        "and": "SELECT * FROM everything WHERE topic = 'orders' AND partition IN (0, 2) AND `offset` >= 100 "
               "AND `offset` < 200 AND timestamp > TIMESTAMP '2026-01-01 00:02:30'",
        "or": "SELECT * FROM everything WHERE partition = 1 OR `offset` < 5",
        "timestamps": "SELECT * FROM everything WHERE timestamp >= TIMESTAMP '2026-01-01 00:04:45' "
                      "AND timestamp <= TIMESTAMP '2026-01-01 00:04:50.5'",
        "offsets": "SELECT * FROM everything WHERE `offset` IN (3, 250) AND topic < 'b' OR `offset` = 299",
        "key": "SELECT * FROM everything WHERE key = CAST('k42' AS BINARY) AND partition > 0",
        "nothing": "SELECT * FROM everything WHERE partition = 7",
    }
    counts = {}
    for name, sql in queries.items():
        pushed, unpushed = both_ways(spark, sql, view)
        assert pushed == unpushed, name
        counts[name] = len(pushed)
    assert counts == {"and": 2 * 49, "or": 300 + 3 * 5, "timestamps": 3 * 6, "offsets": 1 + 3, "key": 2,
                      "nothing": 0}
    plan = explained(spark, queries["and"], view)
    assert "PushedFilters: [EqualTo(topic,orders), In(partition, [0,2]), GreaterThanOrEqual(offset,100), " \
           "LessThan(offset,200), GreaterThan(timestamp,2026-01-01 00:02:30.0)]" in plan
    assert "PushedFilters: [" not in explained(spark, queries["or"], view)
    through_read, plans = [], []
    for enabled in (True, False):
        with pushdown(spark, enabled):
            df = spark.read.format("seglog").option("path", log_dir).option("subscribe", "orders").load()
            df = df.where("partition = 2 AND offset >= 290 AND timestamp < '2026-01-01 00:04:55'")
            through_read.append(rows(df))
            with redirect_stdout(io.StringIO()) as printed:
                df.explain("formatted")
            plans.append(printed.getvalue())
    assert through_read[0] == through_read[1] and [o for _, _, o, _ in through_read[0]] == list(range(290, 295))
    assert "PushedFilters: [EqualTo(partition,2), GreaterThanOrEqual(offset,290), LessThan(timestamp," in plans[0]
    assert "PushedFilters" not in plans[1]
    # Without the setting (Spark's default) nothing is pushed, so a view queried again reads it all.
    spark.sql(view)
    assert len(rows(spark.sql(queries["and"]))) == 2 * 49
    assert len(rows(spark.sql("SELECT * FROM everything"))) == 3 * 300 + 20


def test_a_sql_view_reads_the_last_hour_with_now_minus_an_interval(spark, tmp_path):
    log_dir = str(tmp_path / "logs")
    now_ms = int(time.time() * 1000)
    with Broker(log_dir, background=False) as broker:
        broker.create_topic("clicks", 2, {"segment.bytes": 16 * 1024})
        for minutes_ago in range(179, -1, -1):  # one record a minute for 3 hours, 30 s off each minute
            stamp = now_ms - minutes_ago * 60_000 - 30_000
            for p in range(2):
                broker.produce("clicks", [SimpleRecord(b"c" * 100, None, stamp)], partition=p)
    view = f"CREATE OR REPLACE TEMPORARY VIEW clicks USING seglog OPTIONS (path '{log_dir}', subscribe 'clicks')"
    sql = "SELECT * FROM clicks WHERE timestamp > now() - INTERVAL 1 HOUR"
    pushed, unpushed = both_ways(spark, sql, view)
    assert pushed == unpushed
    assert len(pushed) == 2 * 60
    assert {offset for _, _, offset, _ in pushed} == set(range(120, 180))
    assert "PushedFilters: [GreaterThan(timestamp," in explained(spark, sql, view)


def test_create_time_stamps_out_of_order_and_log_append_time_return_the_same_rows(spark, tmp_path):
    log_dir = str(tmp_path / "logs")
    stamps = [T0 + s * 1000 for s in (10, 20, 30, 40, 15, 50, 60, 5, 70)]
    with Broker(log_dir, background=False) as broker:
        broker.create_topic("late", 1, {})
        broker.create_topic("appended", 1, {"message.timestamp.type": "LogAppendTime"})
        for n, stamp in enumerate(stamps):
            broker.produce("late", [SimpleRecord(f"v{n}".encode(), None, stamp)], partition=0)
            broker.produce("appended", [SimpleRecord(f"a{n}".encode(), None, stamp)], partition=0)
    view = f"CREATE OR REPLACE TEMPORARY VIEW stamped USING seglog OPTIONS (path '{log_dir}', subscribePattern '.*')"
    late = {}
    for name, where in {"at or after 15 s": "timestamp >= TIMESTAMP '2026-01-01 00:00:15'",
                        "before 16 s": "timestamp < TIMESTAMP '2026-01-01 00:00:16'",
                        "at 5 s": "timestamp = TIMESTAMP '2026-01-01 00:00:05'"}.items():
        pushed, unpushed = both_ways(spark, f"SELECT * FROM stamped WHERE topic = 'late' AND {where}", view)
        assert pushed == unpushed, name
        late[name] = [offset for _, _, offset, _ in pushed]
    assert late == {"at or after 15 s": [1, 2, 3, 4, 5, 6, 8], "before 16 s": [0, 4, 7], "at 5 s": [7]}
    appended_sql = "SELECT * FROM stamped WHERE topic = 'appended' AND timestamp <= now()"
    pushed, unpushed = both_ways(spark, appended_sql, view)
    assert pushed == unpushed and len(pushed) == len(stamps)
