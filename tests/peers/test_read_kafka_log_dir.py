"""seglog reads a log dir the real Apache Kafka wrote — topics of every codec produced by
confluent-kafka with keys, headers and nulls, a compacted topic Kafka's cleaner cleaned, a
consumer group's commits — through ``seglog dump``, ``seglog consume``, ``seglog groups``,
``seglog topics``, the embedded ``Broker`` (read-only and writable) and Spark's
``format("seglog")``, record for record. Kafka's own files (``meta.properties`` of KRaft,
``__cluster_metadata-0`` and its ``quorum-state``, ``bootstrap.checkpoint``,
``partition.metadata``, ``leader-epoch-checkpoint``, ``.snapshot``, ``.deleted`` segments,
checkpoints, ``.kafka_cleanshutdown``) are understood or skipped."""

from __future__ import annotations

import glob
import os
import shutil
import time

import pytest

from broker_core import Broker
from broker_core.meta_properties import read_meta_properties
from format.checkpoint import parse_offset_checkpoint
from format.layout import CLEANER_OFFSET_CHECKPOINT_FILE, TopicPartition
from jvm.apache_kafka import KafkaBroker
from tests.broker_core.cli_kit import run
from tests.broker_core.log_dir_kit import read_partition, snapshot
from tests.peers.dump_log_kit import as_text, kafka_dump_log, parse_dump

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 2
PER_PARTITION = 30
T0 = 1_760_000_000_000
TABLE = "kafka-table"
GROUP = "kafka-readers"


def produced_record(codec: str, partition: int, n: int) -> tuple:
    """(key, value, headers, timestamp) of the n-th record of a partition: a null key every 7th,
    a null value every 11th, headers (one of them null-valued) on every other record."""
    key = None if n % 7 == 3 else f"{codec}-k{partition}-{n}".encode()
    value = None if n % 11 == 5 else f"{codec}-v{partition}-{n}".encode()
    headers = [("trace", f"t{n}".encode()), ("empty", None)] if n % 2 == 0 else []
    return key, value, headers, T0 + n


@pytest.fixture(scope="module")
def kafka_dir(tmp_path_factory) -> str:
    """The log dir of a Kafka broker that was written to and then shut down cleanly."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    root = tmp_path_factory.mktemp("kafka-written")
    with KafkaBroker(root, overrides={"log.cleaner.backoff.ms": 200}) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        topics = [NewTopic(f"k-{codec}", PARTITIONS) for codec in CODECS]
        topics.append(NewTopic(TABLE, 1, config={
            "cleanup.policy": "compact", "segment.ms": "100", "internal.segment.bytes": "1024",
            "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0"}))
        for future in admin.create_topics(topics).values():
            future.result(60)
        for codec in CODECS:
            # Batches of eight, in order, however busy the machine: a batch is sent once full (a short
            # linger.ms sends smaller ones, which the client leaves uncompressed when that is shorter), and
            # the idempotent producer keeps a retried batch ahead of the next (the topic is brand new, and
            # without idempotence librdkafka may write a retried first batch after the second).
            producer = Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec,
                                 "linger.ms": 1000, "batch.num.messages": 8,
                                 "enable.idempotence": True, "max.in.flight.requests.per.connection": 1})
            for n in range(PER_PARTITION):
                for p in range(PARTITIONS):
                    key, value, headers, ts = produced_record(codec, p, n)
                    producer.produce(f"k-{codec}", value=value, key=key, partition=p, headers=headers, timestamp=ts)
            assert producer.flush(30) == 0
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
        for round_ in range(8):
            for k in range(6):
                value = None if round_ == 7 and k < 2 else f"r{round_}-{k}".encode()
                producer.produce(TABLE, value=value, key=f"row-{k}".encode(), partition=0)
            assert producer.flush(30) == 0
            time.sleep(0.15)  # past segment.ms: the next round rolls a segment
        checkpoint = os.path.join(kafka.log_dir, CLEANER_OFFSET_CHECKPOINT_FILE)
        deadline = time.monotonic() + 60
        while True:
            try:
                with open(checkpoint) as f:
                    cleaned = parse_offset_checkpoint(f.read(), checkpoint)
            except (FileNotFoundError, ValueError):
                cleaned = {}
            if cleaned.get(TopicPartition(TABLE, 0), 0) > 0:
                break
            assert time.monotonic() < deadline, f"Kafka's cleaner did not clean {TABLE} within 60 s"
            time.sleep(0.2)
        consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": GROUP,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["k-none", "k-zstd"])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 2 * PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == 2 * PARTITIONS * PER_PARTITION
        consumer.commit(asynchronous=False)
        consumer.close()
        log_dir = str(kafka.log_dir)
    return log_dir


@pytest.fixture()
def kafka_copy(kafka_dir, tmp_path) -> str:
    """A copy of the Kafka log dir, for a test that writes into it."""
    copy = str(tmp_path / "kafka-logs")
    shutil.copytree(kafka_dir, copy)
    return copy


def segment_files(log_dir: str, topic: str, partition: int) -> list[str]:
    return sorted(glob.glob(os.path.join(log_dir, f"{topic}-{partition}", "*.log")))


def expected(codec: str, partition: int) -> list[tuple]:
    """(offset, timestamp, key, value, header keys) as written."""
    out = []
    for n in range(PER_PARTITION):
        key, value, headers, ts = produced_record(codec, partition, n)
        out.append((n, ts, as_text(key), as_text(value), tuple(k for k, _ in headers)))
    return out


def test_kafka_writes_the_files_seglog_must_understand_or_skip(kafka_dir):
    names = set(os.listdir(kafka_dir))
    assert {"meta.properties", "__cluster_metadata-0", "bootstrap.checkpoint", ".kafka_cleanshutdown",
            "recovery-point-offset-checkpoint", "cleaner-offset-checkpoint"} <= names
    partition = os.listdir(os.path.join(kafka_dir, "k-gzip-0"))
    assert {"partition.metadata", "leader-epoch-checkpoint"} <= set(partition)
    assert any(name.endswith(".snapshot") for name in partition)


@pytest.mark.parametrize("codec", CODECS)
def test_seglog_dump_reads_the_segments_kafka_wrote_with_codec(kafka_dir, codec):
    for p in range(PARTITIONS):
        files = segment_files(kafka_dir, f"k-{codec}", p)
        code, out, err = run("dump", "--print-data-log", *files)
        assert code == 0, err
        dumped = parse_dump(out)
        batches = [b for f in files for b in dumped[f].batches]
        assert batches and all(b.is_valid for b in batches)
        assert {b.codec for b in batches} == {codec}
        read = [(r.offset, r.timestamp, r.key, r.value, r.header_keys) for f in files for r in dumped[f].records]
        assert read == expected(codec, p)


def test_seglog_dump_reads_kafka_indexes_and_time_indexes(kafka_dir):
    indexes = sorted(glob.glob(os.path.join(kafka_dir, "k-*-*", "*.index")) +
                     glob.glob(os.path.join(kafka_dir, "k-*-*", "*.timeindex")))
    code, out, err = run("dump", *indexes)
    assert code == 0, err
    assert set(parse_dump(out)) == set(indexes)


def test_seglog_dump_reads_the_compacted_topic_as_kafka_dump_log_does(kafka_dir):
    files = segment_files(kafka_dir, TABLE, 0)
    code, out, err = run("dump", "--print-data-log", *files)
    assert code == 0, err
    ours = parse_dump(out)
    kafkas, _ = kafka_dump_log(files, "--deep-iteration", "--print-data-log")
    for f in files:
        assert ours[f].records == kafkas[f].records, f
    read = [r for f in files for r in ours[f].records]
    assert len(read) < 48, "Kafka's cleaner should have removed superseded records"


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_seglog_consume_reads_every_record_of_a_kafka_topic(kafka_dir, codec):
    code, out, err = run("consume", "--log-dir", kafka_dir, "--topic", f"k-{codec}", "--from-beginning",
                         "--timeout-ms", "0", "--print-key")
    assert code == 0, err
    written = [f"{key or 'null'}\t{value or 'null'}" for p in range(PARTITIONS)
               for _, _, key, value, _ in expected(codec, p)]
    assert sorted(out.splitlines()) == sorted(written)
    assert f"Processed a total of {PARTITIONS * PER_PARTITION} messages" in err


def test_seglog_consume_reads_the_topic_kafka_cleaner_compacted(kafka_dir):
    files = segment_files(kafka_dir, TABLE, 0)
    kafkas, _ = kafka_dump_log(files, "--deep-iteration", "--print-data-log")
    code, out, err = run("consume", "--log-dir", kafka_dir, "--topic", TABLE, "--from-beginning",
                         "--timeout-ms", "0", "--print-key")
    assert code == 0, err
    assert out.splitlines() == [f"{r.key}\t{r.value or 'null'}" for f in files for r in kafkas[f].records]


def test_seglog_groups_describe_shows_the_commits_of_a_kafka_consumer_group(kafka_dir):
    code, out, err = run("groups", "list", "--log-dir", kafka_dir)
    assert code == 0 and GROUP in out.split(), err
    code, out, err = run("groups", "describe", "--log-dir", kafka_dir, "--group", GROUP)
    assert code == 0, err
    rows = {(cells[1], int(cells[2])): (int(cells[3]), int(cells[4]), int(cells[5]))
            for cells in (line.split() for line in out.splitlines()) if cells and cells[0] == GROUP}
    assert rows == {(f"k-{codec}", p): (PER_PARTITION, PER_PARTITION, 0)
                    for codec in ("none", "zstd") for p in range(PARTITIONS)}


def test_seglog_topics_lists_kafka_topics_with_their_configs_and_not_the_metadata_log(kafka_dir):
    code, out, err = run("topics", "list", "--log-dir", kafka_dir)
    assert code == 0, err
    assert set(out.split()) == {"__consumer_offsets", TABLE, *(f"k-{c}" for c in CODECS)}
    code, out, err = run("topics", "describe", "--log-dir", kafka_dir, "--topic", TABLE)
    assert code == 0, err
    assert "cleanup.policy=compact" in out and "segment.ms=100" in out, out
    code, out, err = run("topics", "describe", "--log-dir", kafka_dir, "--topic", "k-lz4")
    assert code == 0 and "PartitionCount: 2" in out, out


def test_kraft_meta_properties_of_a_kafka_log_dir_are_read_with_their_fields(kafka_dir):
    meta = read_meta_properties(kafka_dir)
    assert meta is not None and meta.node_id == 1 and meta.version == 1
    assert len(meta.cluster_id) == 22 and len(meta.directory_id) == 22


def test_the_read_only_broker_reads_a_kafka_log_dir_and_writes_nothing(kafka_dir):
    before = snapshot(kafka_dir)
    with Broker(kafka_dir, read_only=True) as broker:
        assert not broker.unreadable()
        for codec in CODECS:
            for p in range(PARTITIONS):
                records = read_partition(broker, f"k-{codec}", p)
                assert [(r.offset, r.timestamp, as_text(r.key), as_text(r.value), tuple(h.key for h in r.headers))
                        for r in records] == expected(codec, p)
                headers = [tuple((h.key, h.value) for h in r.headers) for r in records]
                assert headers == [tuple(produced_record(codec, p, n)[2]) for n in range(PER_PARTITION)]
        assert broker.committed_offsets(GROUP)[TopicPartition("k-none", 1)].offset == PER_PARTITION
        assert broker.log_config(TABLE).compact
    assert snapshot(kafka_dir) == before


def test_the_writable_broker_opens_a_kafka_log_dir_and_appends_to_its_topics(kafka_copy):
    with Broker(kafka_copy) as broker:
        assert set(broker.list_topics()) >= {TABLE, "k-none"}
        (landed,) = broker.produce("k-none", [(b"after", b"kafka")], partition=0)
        assert landed.offset == PER_PARTITION
    with Broker(kafka_copy, read_only=True) as broker:
        records = read_partition(broker, "k-none", 0)
        assert len(records) == PER_PARTITION + 1
        assert (records[-1].key, records[-1].value) == (b"after", b"kafka")
        assert broker.log_config(TABLE).compact
    assert read_meta_properties(kafka_copy).node_id == 1


@pytest.mark.slow
def test_spark_reads_a_kafka_log_dir_record_for_record(kafka_dir, spark):
    rows = (spark.read.format("seglog").option("path", kafka_dir).option("subscribePattern", "k-.*")
            .option("includeHeaders", "true").load()
            .selectExpr("topic", "partition", "offset", "CAST(key AS STRING) AS key",
                        "CAST(value AS STRING) AS value", "timestamp", "headers")
            .collect())
    read = sorted((r.topic, r.partition, r.offset, r.key, r.value, int(r.timestamp.timestamp() * 1000),
                   tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers or ()))
                  for r in rows)
    written = sorted((f"k-{codec}", p, n, as_text(key), as_text(value), ts, tuple(headers))
                     for codec in CODECS for p in range(PARTITIONS)
                     for n, (key, value, headers, ts) in ((n, produced_record(codec, p, n))
                                                          for n in range(PER_PARTITION)))
    assert read == written
    topics = spark.read.format("seglog").option("path", kafka_dir).option("subscribePattern", ".*").load()
    assert "__cluster_metadata" not in {r.topic for r in topics.select("topic").distinct().collect()}
