"""Kafka's own DumpLogSegments (``kafka-dump-log.sh``) reads the files seglog writes — segments of
every codec with keys, headers and nulls, their ``.index`` and ``.timeindex``, segments seglog's
cleaner rewrote, the ``__consumer_offsets`` records of seglog's group coordinator and of the
embedded broker, and a ``.txnindex`` — with no error and the records seglog wrote."""

from __future__ import annotations

import glob
import os
import time

import pytest

from broker_core import Broker
from broker_core.cli import main
from broker_core.clock import MockTime
from format.layout import TopicPartition
from format.record import Header, SimpleRecord
from tests.broker_core.cleaner_kit import Produced, end_transaction, open_log, produce
from tests.broker_core.log_dir_kit import read_partition
from tests.broker_core.server.server_kit import start_broker
from tests.peers.dump_log_kit import as_text, kafka_dump_log

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
T0 = 1_750_000_000_000
# Small segments and a dense index: several segments per partition, several index entries per segment.
SMALL_SEGMENTS = {"segment.bytes": 1500, "index.interval.bytes": 100}
BATCHES = 12


def records_for(codec: str, batch: int) -> list[SimpleRecord]:
    """Ten records per batch: keys, headers (one with a null value), a null key and a null value."""
    out = []
    for i in range(10):
        n = batch * 10 + i
        key = None if i == 3 else f"{codec}-key-{n}".encode()
        value = None if i == 7 else f"{codec}-value-{n}".encode()
        headers = (Header("trace", f"t{n}".encode()), Header("empty", None)) if i % 2 == 0 else ()
        out.append(SimpleRecord(value, key, T0 + n, headers))
    return out


@pytest.fixture(scope="module")
def seglog_dir(tmp_path_factory) -> str:
    """A log dir the embedded broker wrote: a topic per codec, a compacted topic its cleaner cleaned,
    offsets committed by the embedded broker."""
    d = str(tmp_path_factory.mktemp("seglog-written") / "logs")
    with Broker(d, background=False) as broker:
        for codec in CODECS:
            broker.create_topic(f"codec-{codec}", 1, SMALL_SEGMENTS)
            for b in range(BATCHES):
                broker.produce(f"codec-{codec}", records_for(codec, b), partition=0, compression=codec)
        broker.create_topic("table", 1, {"cleanup.policy": "compact", "segment.bytes": 1024,
                                         "min.cleanable.dirty.ratio": 0.01, "min.compaction.lag.ms": 0,
                                         "index.interval.bytes": 100})
        for round_ in range(8):
            broker.produce("table", [SimpleRecord(None if round_ == 7 and k < 2 else f"v{round_}-{k}".encode(),
                                                  f"row-{k}".encode(), T0 + round_) for k in range(8)], partition=0)
        broker.commit_offsets("embedded-group", {TopicPartition("codec-none", 0): 42}, "done-to-42")
    assert main(["compact", "--log-dir", d, "--topic", "table", "--reporting-interval", "0"]) == 0
    return d


def segment_files(log_dir: str, topic: str, suffix: str = ".log") -> list[str]:
    return sorted(glob.glob(os.path.join(log_dir, f"{topic}-0", f"*{suffix}")))


def seglog_records(log_dir: str, topic: str) -> list[tuple[int, int, str | None, str | None, tuple[str, ...]]]:
    with Broker(log_dir, read_only=True) as broker:
        records = read_partition(broker, topic, 0)
    return [(r.offset, r.timestamp, as_text(r.key), as_text(r.value), tuple(h.key for h in r.headers))
            for r in records]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_dump_log_reads_every_record_seglog_wrote_with_codec(seglog_dir, codec):
    files = segment_files(seglog_dir, f"codec-{codec}")
    assert len(files) > 1, "the topic should span several segments"
    dumped, stderr = kafka_dump_log(files, "--deep-iteration", "--print-data-log")
    assert set(dumped) == set(files), stderr
    batches = [b for f in files for b in dumped[f].batches]
    assert all(b.is_valid for b in batches)
    assert {b.codec for b in batches} == {codec}
    read = [(r.offset, r.timestamp, r.key, r.value, r.header_keys) for f in files for r in dumped[f].records]
    written = [(n, r.timestamp, as_text(r.key), as_text(r.value), tuple(h.key for h in r.headers))
               for n, r in enumerate(r for b in range(BATCHES) for r in records_for(codec, b))]
    assert read == written


def test_kafka_verify_index_only_finds_no_mismatch_in_seglog_offset_and_time_indexes(seglog_dir):
    indexes = [f for codec in CODECS + ["table"] for suffix in (".index", ".timeindex")
               for f in segment_files(seglog_dir, f"codec-{codec}" if codec != "table" else "table", suffix)]
    for codec in CODECS:
        assert any(os.path.getsize(f) > 0 for f in segment_files(seglog_dir, f"codec-{codec}", ".index")), codec
    dumped, stderr = kafka_dump_log(indexes, "--verify-index-only")
    assert set(dumped) == set(indexes)
    assert "mismatch" not in stderr.lower() and "out of order" not in stderr.lower(), stderr


def test_kafka_index_sanity_check_passes_every_seglog_index(seglog_dir):
    indexes = [f for topic in [f"codec-{c}" for c in CODECS] + ["table"] for suffix in (".index", ".timeindex")
               for f in segment_files(seglog_dir, topic, suffix)]
    dumped, stderr = kafka_dump_log(indexes, "--index-sanity-check")
    for path in indexes:
        verdict = " ".join(dumped[path].lines)
        assert "passed sanity check" in verdict or "is empty" in verdict, (path, verdict, stderr)


def test_kafka_dump_log_reads_the_segments_seglog_cleaner_compacted(seglog_dir):
    files = segment_files(seglog_dir, "table")
    assert not glob.glob(os.path.join(seglog_dir, "table-0", "*.cleaned")) and not glob.glob(
        os.path.join(seglog_dir, "table-0", "*.swap"))
    dumped, stderr = kafka_dump_log(files, "--deep-iteration", "--print-data-log")
    assert all(b.is_valid for f in files for b in dumped[f].batches), stderr
    read = [(r.offset, r.timestamp, r.key, r.value, r.header_keys) for f in files for r in dumped[f].records]
    assert read == seglog_records(seglog_dir, "table")
    assert len(read) < 64, "the cleaner should have removed superseded records"
    latest = {key: value for _, _, key, value, _ in read}
    assert latest == {f"row-{k}": (None if k < 2 else f"v7-{k}") for k in range(8)}


def test_kafka_offsets_decoder_reads_offsets_the_embedded_broker_committed(seglog_dir):
    files = glob.glob(os.path.join(seglog_dir, "__consumer_offsets-*", "*.log"))
    dumped, stderr = kafka_dump_log(files, "--offsets-decoder")
    lines = [line for f in files for line in dumped[f].lines if line.startswith("| offset:")]
    (commit,) = [line for line in lines if '"group":"embedded-group"' in line]
    assert '"topic":"codec-none","partition":0' in commit
    assert '"offset":42' in commit and '"metadata":"done-to-42"' in commit, commit


@pytest.fixture(scope="module")
def coordinator_dir(tmp_path_factory) -> str:
    """A log dir where seglog's group coordinator stored a confluent-kafka consumer group's
    generation and commits."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    d = tmp_path_factory.mktemp("seglog-coordinator") / "logs"
    server = start_broker(d)
    try:
        bootstrap = server.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("clicks", 2)]).values():
            future.result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(20):
            producer.produce("clicks", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "click-counter",
                             "client.id": "counter-1", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["clicks"])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 20 and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 20
        consumer.commit(asynchronous=False)
        consumer.close()
    finally:
        server.shutdown(timeout_ms=10_000)
    return str(d)


def test_kafka_offsets_decoder_reads_the_group_and_commits_of_seglog_group_coordinator(coordinator_dir):
    files = glob.glob(os.path.join(coordinator_dir, "__consumer_offsets-*", "*.log"))
    dumped, stderr = kafka_dump_log(files, "--offsets-decoder")
    lines = [line for f in files for line in dumped[f].lines if '"group":"click-counter"' in line]
    commits = {p: line for p in (0, 1) for line in lines if f'"topic":"clicks","partition":{p}}}' in line}
    assert set(commits) == {0, 1}, lines
    assert all('"offset":10' in line for line in commits.values()), commits
    generations = [line for line in lines if '"protocolType":"consumer"' in line]
    assert generations, f"no group metadata record in {lines}"
    assert any('"clientId":"counter-1"' in line and '"assignment":' in line for line in generations), generations
    assert "Exception" not in stderr, stderr


def test_kafka_dump_log_reads_the_txnindex_of_an_aborted_transaction_seglog_indexed(tmp_path):
    clock = MockTime()
    lg = open_log(tmp_path, clock)
    produced = Produced()
    first = produce(lg, produced, clock, [(b"a", b"1"), (b"b", b"2")], producer_id=7, producer_epoch=0,
                    base_sequence=0, is_transactional=True)[0]
    marker = end_transaction(lg, produced, clock, 7, commit=False, first_offset=first)
    lg.flush()
    (txn_index,) = [s.txn_index.path for s in lg.segments]
    lg.close()
    dumped, stderr = kafka_dump_log([txn_index])
    (line,) = [line for line in dumped[txn_index].lines if "producerId" in line]
    assert f"producerId: 7 firstOffset: {first} lastOffset: {marker}" in line, (line, stderr)
