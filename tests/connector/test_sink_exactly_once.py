"""The exactly-once streaming sink: one transaction per micro-batch with its batch id, across driver crashes."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from broker_core import Broker
from broker_core.client.remote_broker import RemoteBroker
from broker_core.errors import MessageTooLargeError
from broker_core.server.broker_server import BrokerServer
from connector.options import SeglogOptionError
from connector.sink import produce_staged
from connector.sink_transaction import SinkTransaction, committed_batch_id, query_transaction
from connector.staging import stage_batches
from format.compression import CompressionType
from format.record_batch import iter_batches
from tests.broker_core.server.server_kit import start_broker
from tests.connector.conftest import produce_numbered
from tests.connector.driver_kit import PER_TRIGGER, ROWS, expected, kill_driver_at, run_query
from tests.connector.test_read_stream import run_available_now
from tests.connector.test_sink import make_log_dir


def read_values(log_dir: str, topic: str, isolation_level: str) -> Counter:
    """How often each value is in ``topic``, as a reader at ``isolation_level`` sees it."""
    seen: Counter = Counter()
    with Broker(log_dir, background=False) as broker:
        for p in range(broker.partitions_for(topic)):
            offset = 0
            while True:
                result = broker.fetch(topic, p, offset, isolation_level=isolation_level)
                batches = list(iter_batches(result.records))
                if not batches:
                    break
                seen.update(r.value.split(b".")[0] for r in result.decoded(offset))
                offset = batches[-1].header.next_offset
    return seen


def committed_batch(log_dir: str, group_id: str) -> int | None:
    with Broker(log_dir, background=False) as broker:
        return committed_batch_id(broker.committed_offsets(group_id))


# --- naming and replays, without Spark ---------------------------------------------------------


def test_the_transactional_id_derives_from_the_checkpoint_location_and_is_stable(tmp_path):
    first = query_transaction({"checkpointlocation": str(tmp_path / "cp")})
    assert first == query_transaction({"checkpointlocation": f"file://{tmp_path}/cp/"})
    assert first.transactional_id.startswith("seglog-sink-") and first.group_id == first.transactional_id
    assert query_transaction({"checkpointlocation": str(tmp_path / "other")}) != first
    assert query_transaction({"transactional.id": "orders-sink"}) == SinkTransaction("orders-sink", "orders-sink")
    with pytest.raises(SeglogOptionError, match="checkpointLocation"):
        query_transaction({})


def _stage(tmp_path, values: list[str]):
    batch = pa.record_batch({"value": pa.array(values, pa.string())})
    return [stage_batches([batch], str(tmp_path / "staging"), ["value"])]


def test_a_replayed_micro_batch_whose_transaction_committed_is_not_written_again(tmp_path):
    d = make_log_dir(tmp_path / "logs", out=2)
    txn = SinkTransaction("query-a", "query-a")
    staged = _stage(tmp_path, [f"v{n}" for n in range(5)])
    assert produce_staged(d, staged, "out", CompressionType.NONE, transaction=txn.with_batch(0)) == 5
    assert produce_staged(d, staged, "out", CompressionType.NONE, transaction=txn.with_batch(0)) == 0
    assert committed_batch(d, "query-a") == 0
    later = _stage(tmp_path, ["w0"])
    assert produce_staged(d, later, "out", CompressionType.NONE, transaction=txn.with_batch(1)) == 1
    assert committed_batch(d, "query-a") == 1
    values = read_values(d, "out", "read_committed")
    assert values == Counter({**{f"v{n}".encode(): 1 for n in range(5)}, b"w0": 1})


def test_a_batch_write_with_a_transactional_id_commits_its_rows_together(tmp_path):
    d = make_log_dir(tmp_path / "logs", out=1)
    staged = _stage(tmp_path, ["a", "b"])
    assert produce_staged(d, staged, "out", CompressionType.NONE, transaction=SinkTransaction("batch", "batch")) == 2
    assert read_values(d, "out", "read_committed") == Counter({b"a": 1, b"b": 1})
    assert committed_batch(d, "batch") is None  # a batch write has no batch id to commit


def fail_midway(tmp_path, transaction: SinkTransaction | None) -> str:
    """A batch write whose second partition's record is over max.message.bytes, after the first partition's
    records were appended; returns the log dir."""
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("out", 2, {"max.message.bytes": "1000"})
    rows = pa.record_batch({"value": pa.array([b"a", b"b", b"x" * 5000]),
                            "partition": pa.array([0, 0, 1], pa.int32())})
    staged = [stage_batches([rows], str(tmp_path / "staging"), ["value", "partition"])]
    with pytest.raises(MessageTooLargeError, match="larger than max.message.bytes 1000"):
        produce_staged(d, staged, "out", CompressionType.NONE, transaction=transaction)
    return d


def test_a_batch_write_that_fails_midway_leaves_what_it_appended(tmp_path):
    d = fail_midway(tmp_path, None)
    assert read_values(d, "out", "read_committed") == Counter({b"a": 1, b"b": 1})  # at least once


def test_a_batch_write_with_a_transactional_id_that_fails_midway_leaves_nothing_for_read_committed_readers(
        tmp_path):
    d = fail_midway(tmp_path, SinkTransaction("batch", "batch"))
    assert read_values(d, "out", "read_committed") == Counter()
    assert read_values(d, "out", "read_uncommitted") == Counter({b"a": 1, b"b": 1})  # appended, then aborted


# --- a driver killed mid-commit, restarted from its checkpoint ----------------------------------

@pytest.mark.slow
def test_a_driver_killed_before_the_transaction_commits_leaves_every_row_once_after_the_restart(spark, tmp_path):
    source, sink = str(tmp_path / "source"), str(tmp_path / "sink")
    checkpoint, marker = str(tmp_path / "checkpoint"), str(tmp_path / "paused")
    produce_numbered(source, "src", 1, ROWS)
    make_log_dir(sink, dst=2)
    kill_driver_at("before-commit", source, sink, checkpoint, marker)
    # The first micro-batch is in the log, in a transaction that never committed.
    assert sum(read_values(sink, "dst", "read_uncommitted").values()) == PER_TRIGGER
    assert read_values(sink, "dst", "read_committed") == Counter()

    run_query(spark, source, sink, checkpoint)

    assert read_values(sink, "dst", "read_committed") == expected()
    uncommitted = read_values(sink, "dst", "read_uncommitted")
    assert sum(uncommitted.values()) == ROWS + PER_TRIGGER  # the aborted attempt stays, invisible when committed
    group = query_transaction({"checkpointlocation": checkpoint}).group_id
    assert committed_batch(sink, group) == ROWS // PER_TRIGGER - 1


@pytest.mark.slow
def test_a_driver_killed_after_the_transaction_committed_does_not_write_the_replayed_batch_again(spark, tmp_path):
    source, sink = str(tmp_path / "source"), str(tmp_path / "sink")
    checkpoint, marker = str(tmp_path / "checkpoint"), str(tmp_path / "paused")
    produce_numbered(source, "src", 1, ROWS)
    make_log_dir(sink, dst=2)
    kill_driver_at("after-commit", source, sink, checkpoint, marker)
    group = query_transaction({"checkpointlocation": checkpoint}).group_id
    assert committed_batch(sink, group) == 0
    assert sum(read_values(sink, "dst", "read_committed").values()) == PER_TRIGGER

    run_query(spark, source, sink, checkpoint)  # Spark replays micro-batch 0: its commit was never logged

    assert read_values(sink, "dst", "read_committed") == expected()
    assert read_values(sink, "dst", "read_uncommitted") == expected()  # nothing was written twice
    assert committed_batch(sink, group) == ROWS // PER_TRIGGER - 1


# --- through a running broker that owns the log dir ----------------------------------------------


@pytest.fixture()
def running(tmp_path):
    log_dir = tmp_path / "logs"
    server = BrokerServer({"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0",
                           "num.network.threads": 2, "num.io.threads": 2}).startup()
    try:
        server.broker.create_topic("out", 2)
        yield server, str(log_dir)
    finally:
        server.shutdown()


def served_values(broker, topic: str, isolation_level: str) -> Counter:
    seen: Counter = Counter()
    for p in range(broker.partitions_for(topic)):
        offset = 0
        while True:
            result = broker.fetch(topic, p, offset, isolation_level=isolation_level)
            batches = list(iter_batches(result.records))
            if not batches:
                break
            seen.update(r.value for r in result.decoded(offset))
            offset = batches[-1].header.next_offset
    return seen


def test_a_micro_batch_through_a_running_broker_is_written_once_after_a_crash_left_it_open(running, tmp_path):
    server, log_dir = running
    txn = SinkTransaction("query-b", "query-b")
    staged = _stage(tmp_path, ["a", "b", "c"])
    with RemoteBroker(server.bootstrap_servers) as remote:  # a crashed run: written, never committed
        zombie = remote.producer(txn.transactional_id)
        zombie.begin_transaction()
        zombie.produce("out", [b"a", b"b", b"c"])
    assert produce_staged(log_dir, staged, "out", CompressionType.NONE, transaction=txn.with_batch(0),
                          bootstrap=server.bootstrap_servers) == 3
    assert produce_staged(log_dir, staged, "out", CompressionType.NONE, transaction=txn.with_batch(0),
                          bootstrap=server.bootstrap_servers) == 0
    assert served_values(server.broker, "out", "read_committed") == Counter({b"a": 1, b"b": 1, b"c": 1})
    assert served_values(server.broker, "out", "read_uncommitted") == Counter({b"a": 2, b"b": 2, b"c": 2})
    with RemoteBroker(server.bootstrap_servers) as remote:
        assert committed_batch_id(remote.committed_offsets("query-b")) == 0


@pytest.mark.slow
def test_streaming_write_into_a_log_dir_a_running_broker_owns_goes_through_bootstrap(spark, running, tmp_path):
    server, log_dir = running
    source = str(tmp_path / "source")
    produce_numbered(source, "src", 1, ROWS)
    query = (spark.readStream.format("seglog").option("path", source).option("subscribe", "src")
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load()
             .selectExpr("key", "value")
             .writeStream.format("seglog").option("path", log_dir).option("topic", "out")
             .option("kafka.bootstrap.servers", server.bootstrap_servers)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    values = served_values(server.broker, "out", "read_committed")
    assert Counter({v.split(b".")[0]: n for v, n in values.items()}) == expected()


# --- Spark reading what a query killed before its first commit and then restarted wrote ------------

READ_COMMITTED = {"isolation.level": "read_committed"}


@pytest.fixture(scope="module", params=["files", "protocol"])
def restarted(request, spark, tmp_path_factory):
    """Where Spark reads topic dst after the query was killed before its first commit and restarted: the
    log dir's files (``path``), or the running broker that owned the log dir throughout (``bootstrap``)."""
    base = tmp_path_factory.mktemp(f"restarted-{request.param}")
    source, sink = str(base / "source"), str(base / "sink")
    checkpoint, marker = str(base / "checkpoint"), str(base / "paused")
    produce_numbered(source, "src", 1, ROWS)
    server, options = None, {}
    if request.param == "protocol":
        server = start_broker(sink)
        server.broker.create_topic("dst", 2)
        options = {"kafka.bootstrap.servers": server.bootstrap_servers}
    else:
        make_log_dir(sink, dst=2)
    try:
        kill_driver_at("before-commit", source, sink, checkpoint, marker, **options)
        run_query(spark, source, sink, checkpoint, **options)
        yield {"path": sink} if server is None else {"bootstrap": server.bootstrap_servers}
    finally:
        if server is not None:
            server.shutdown()


def read_dst(reader, location: dict[str, str], **options: str):
    for name, value in {**location, "subscribe": "dst", **options}.items():
        reader = reader.option(name, value)
    return reader.load()


def row_values(df) -> Counter:
    return Counter(bytes(r.value).split(b".")[0] for r in df.collect())


@pytest.mark.slow
def test_a_read_committed_batch_read_of_the_restarted_querys_topic_returns_every_row_once(spark, restarted):
    assert row_values(read_dst(spark.read.format("seglog"), restarted, **READ_COMMITTED)) == expected()


@pytest.mark.slow
def test_a_read_committed_stream_of_the_restarted_querys_topic_returns_every_row_once(spark, restarted, tmp_path):
    df = read_dst(spark.readStream.format("seglog"), restarted, startingOffsets="earliest", **READ_COMMITTED)
    batches = run_available_now(df, str(tmp_path / "checkpoint"))
    assert Counter(value.encode() for batch in batches for _, _, _, value in batch) == expected()


@pytest.mark.slow
def test_read_uncommitted_also_returns_the_rows_of_the_aborted_first_attempt(spark, restarted):
    aborted = expected(PER_TRIGGER)  # micro-batch 0: src-0-0 … src-0-9, written, then aborted by the restart
    got = row_values(read_dst(spark.read.format("seglog"), restarted, **{"isolation.level": "read_uncommitted"}))
    assert got == expected() + aborted
