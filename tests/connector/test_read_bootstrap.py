"""Reading through a running broker: offsets from ListOffsets; data from files or over the protocol."""

import pytest

from format.record import SimpleRecord
from tests.connector.conftest import T0, produce_events

pytestmark = pytest.mark.slow


@pytest.fixture()
def running(broker_server, tmp_path):
    produce_events(broker_server.broker)
    return broker_server, str(tmp_path / "logs")


def rows(df):
    return sorted((r.partition, r.offset, bytes(r.value).decode(), r.timestamp) for r in df.collect())


def test_bootstrap_alone_fetches_over_the_protocol(spark, running):
    server, log_dir = running
    bootstrap = server.bootstrap_servers
    over_protocol = spark.read.format("seglog").option("bootstrap", bootstrap).option("subscribe", "events") \
        .option("startingOffsets", '{"events": {"0": 5, "1": -2}}').option("endingOffsets", '{"events": {"0": -1, "1": 12}}') \
        .load()
    got = rows(over_protocol)
    assert [(p, o, v) for p, o, v, _ in got] == sorted(
        [(0, n, f"events-0-{n}") for n in range(5, 30)] + [(1, n, f"events-1-{n}") for n in range(12)])
    from_files = spark.read.format("seglog").option("path", log_dir).option("bootstrap", bootstrap) \
        .option("subscribe", "events").load()
    assert len(rows(from_files)) == 60
    by_time = spark.read.format("seglog").option("bootstrap", bootstrap).option("subscribe", "events") \
        .option("startingTimestamp", str(T0 + 25_000)).load()
    assert sorted((p, o) for p, o, _, _ in rows(by_time)) == [(p, n) for p in (0, 1) for n in range(25, 30)]


def test_streaming_through_bootstrap_sees_new_records(spark, running, tmp_path):
    server, _ = running
    seen = []
    df = spark.readStream.format("seglog").option("bootstrap", server.bootstrap_servers) \
        .option("subscribe", "events").option("startingOffsets", "earliest").load()

    def run():
        q = df.writeStream.foreachBatch(lambda b, i: seen.extend(r.offset for r in b.collect())) \
            .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
        assert q.awaitTermination(240)

    run()
    assert len(seen) == 60
    server.broker.produce("events", [SimpleRecord(b"late", None, T0)], partition=1)
    run()
    assert len(seen) == 61
