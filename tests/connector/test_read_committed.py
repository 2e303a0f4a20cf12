"""isolation.level through Spark: read_committed batch and streaming reads return exactly the committed
records, from the files (across segments, compressed batches) and over the protocol."""

import json

import pytest

from broker_core import Broker
from format.layout import TopicPartition
from format.log_dir import LogDirectory
from tests.broker_core.server.server_kit import start_broker
from tests.broker_core.transactions_kit import TransactionalWriter, write_mixed_transactions
from tests.connector.test_read_stream import run_available_now, stream

pytestmark = pytest.mark.slow

CODECS = {0: "none", 1: "zstd"}


def write_topic(broker: Broker) -> dict[int, TransactionalWriter]:
    broker.create_topic("txns", 2, {"segment.bytes": "700"})
    return {p: write_mixed_transactions(TransactionalWriter(broker, "txns", p, codec), rounds=4)
            for p, codec in CODECS.items()}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("read-committed") / "logs")
    with Broker(d, background=False) as broker:
        writers = write_topic(broker)
        committed = {p: w.committed_values() for p, w in writers.items()}
        data = {p: w.data_values() for p, w in writers.items()}
        stable = {p: w.last_stable_offset for p, w in writers.items()}
    return d, committed, data, stable


def read(spark, source: dict, **options):
    reader = spark.read.format("seglog")
    for k, v in {**source, "subscribe": "txns", **options}.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    return reader.load()


def values_by_partition(rows) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {0: [], 1: []}
    for partition, offset, value in sorted(rows):
        out[partition].append(value)
    return out


def collected(df) -> dict[int, list[str]]:
    return values_by_partition((r.partition, r.offset, bytes(r.value).decode()) for r in df.collect())


@pytest.mark.parametrize("option", ["isolation.level", "kafka.isolation.level"])
def test_a_read_committed_batch_read_returns_exactly_the_committed_records(spark, written, option):
    log_dir, committed, _, _ = written
    got = collected(read(spark, {"path": log_dir}, **{option: "read_committed"}))
    assert got == committed
    assert all("aborted" not in v and "open" not in v for vs in got.values() for v in vs)


def test_the_topic_spans_segments_and_compressed_batches(written):
    log_dir, _, _, _ = written
    assert all(len(LogDirectory(log_dir).segments(TopicPartition("txns", p))) > 3 for p in CODECS)


@pytest.mark.parametrize("options", [{}, {"isolation.level": "read_uncommitted"}])
def test_read_uncommitted_returns_every_data_record_and_no_control_record(spark, written, options):
    log_dir, _, data, _ = written
    df = read(spark, {"path": log_dir}, **options)
    assert collected(df) == data
    # Markers take offsets but give no row: every row's value is one the producers wrote.
    assert df.count() == sum(len(v) for v in data.values())


def test_read_committed_ending_offsets_past_the_last_stable_offset_stop_there(spark, written):
    log_dir, committed, _, stable = written
    ending = {"txns": {str(p): stable[p] + 5 for p in CODECS}}
    got = collected(read(spark, {"path": log_dir}, **{"isolation.level": "read_committed", "endingOffsets": ending}))
    assert got == committed


def test_the_offsets_view_gives_the_last_stable_offset(spark, written):
    log_dir, _, _, stable = written
    view = spark.read.format("seglog").option("path", log_dir).option("view", "offsets").load()
    got = {r.partition: (r.last_stable_offset, r.log_end_offset) for r in view.collect() if r.topic == "txns"}
    assert {p: lso for p, (lso, _) in got.items()} == stable
    assert all(lso < end for lso, end in got.values())


def test_a_read_committed_stream_reads_the_committed_records_then_the_rest_once_the_open_transaction_ends(
        spark, tmp_path):
    log_dir = str(tmp_path / "logs")
    checkpoint = str(tmp_path / "ckpt")
    with Broker(log_dir, background=False) as broker:
        writers = write_topic(broker)
        first_expected = {p: w.committed_values() for p, w in writers.items()}
        stable = {p: w.last_stable_offset for p, w in writers.items()}

    def run():
        df = stream(spark, log_dir, subscribe="txns", startingOffsets="earliest",
                    **{"isolation.level": "read_committed"})
        return values_by_partition((p, o, v) for batch in run_available_now(df, checkpoint) for _, p, o, v in batch)

    assert run() == first_expected
    offsets = sorted((f for f in (tmp_path / "ckpt" / "offsets").iterdir() if f.name.isdigit()),
                     key=lambda f: int(f.name))
    assert json.loads(offsets[-1].read_text().splitlines()[-1]) == {"txns": {str(p): stable[p] for p in CODECS}}
    with Broker(log_dir, background=False) as broker:
        for w in writers.values():
            w.broker = broker
            w.end(5, commit=True)
        rest = {p: [v for v in w.committed_values() if v not in first_expected[p]] for p, w in writers.items()}
    assert all(rest.values())
    assert run() == rest  # the open transaction, then what came after it: nothing twice


@pytest.fixture()
def running(tmp_path):
    server = start_broker(tmp_path / "served")
    try:
        writers = write_topic(server.broker)
        yield server, writers, str(tmp_path / "served")
    finally:
        server.shutdown()


def test_read_committed_over_the_protocol_returns_what_the_files_return(spark, running, tmp_path):
    server, writers, log_dir = running
    committed = {p: w.committed_values() for p, w in writers.items()}
    over_protocol = {"bootstrap": server.bootstrap_servers}
    assert collected(read(spark, over_protocol, **{"kafka.isolation.level": "read_committed"})) == committed
    assert collected(read(spark, {"path": log_dir}, **{"isolation.level": "read_committed"})) == committed
    assert collected(read(spark, over_protocol)) == {p: w.data_values() for p, w in writers.items()}
    df = spark.readStream.format("seglog").option("bootstrap", server.bootstrap_servers) \
        .option("subscribe", "txns").option("startingOffsets", "earliest") \
        .option("isolation.level", "read_committed").load()
    batches = run_available_now(df, str(tmp_path / "ckpt"))
    assert values_by_partition((p, o, v) for batch in batches for _, p, o, v in batch) == committed


def test_a_read_committed_stream_starting_past_the_last_stable_offset_waits_without_data_loss(spark, written,
                                                                                             tmp_path):
    log_dir, _, _, stable = written
    starting = {"txns": {str(p): stable[p] + 1 for p in CODECS}}  # inside the log, past the LSO
    df = stream(spark, log_dir, subscribe="txns", startingOffsets=starting, **{"isolation.level": "read_committed"})
    batches = run_available_now(df, str(tmp_path / "ckpt"))  # failOnDataLoss is true: no error
    assert [row for batch in batches for row in batch] == []
