"""Spark's own Kafka source and sink (spark-sql-kafka-0-10, the Java client) against ``seglog
broker``: ``format("kafka")`` pointed at the broker reads the rows ``format("seglog")`` reads from
the broker's log dir, and what ``format("kafka")`` writes comes back through both. A pipeline can
switch its broker first and its source second."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.broker_core.server.server_kit import start_broker
from tests.connector.conftest import T0

pytestmark = pytest.mark.slow

ORDER_COUNT = 40
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


@pytest.fixture(scope="module")
def seglog(tmp_path_factory):
    """A seglog broker for the module; its log dir is what ``format("seglog")`` reads."""
    log_dir = tmp_path_factory.mktemp("seglog-kafka-source") / "logs"
    server = start_broker(log_dir)
    try:
        yield server, str(log_dir)
    finally:
        server.shutdown(timeout_ms=10_000)


def create_topics(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    for future in admin.create_topics(list(topics)).values():
        future.result(timeout=30)


def produce_orders(bootstrap: str, topic: str, first: int, count: int, compression: str) -> None:
    """Records with a key (none for every 7th), a value (none for every 11th), a header on odd ones
    and the timestamp T0 + n seconds (where the topic keeps CreateTime)."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5})
    for n in range(first, first + count):
        producer.produce(topic, key=None if n % 7 == 0 else f"k{n}", value=None if n % 11 == 5 else f"{topic}-{n}",
                         headers=[("n", str(n).encode()), ("empty", None)] if n % 2 else None,
                         timestamp=T0 + n * 1000)
    assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def orders(seglog):
    """Topics written by a Kafka client: orders-zstd (3 partitions, zstd, CreateTime), orders-lz4
    (1 partition, lz4, LogAppendTime) and audit (2 partitions, uncompressed)."""
    server, log_dir = seglog
    bootstrap = server.bootstrap_servers
    create_topics(bootstrap, NewTopic("orders-zstd", 3), NewTopic("audit", 2),
                  NewTopic("orders-lz4", 1, config={"message.timestamp.type": "LogAppendTime"}))
    produce_orders(bootstrap, "orders-zstd", 0, ORDER_COUNT, "zstd")
    produce_orders(bootstrap, "orders-lz4", 0, ORDER_COUNT, "lz4")
    produce_orders(bootstrap, "audit", 0, ORDER_COUNT, "none")
    return bootstrap, log_dir


def kafka_reader(spark, bootstrap: str, stream: bool = False):
    reader = spark.readStream if stream else spark.read
    return reader.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("includeHeaders", "true")


def seglog_reader(spark, log_dir: str, stream: bool = False):
    reader = spark.readStream if stream else spark.read
    return reader.format("seglog").option("path", log_dir).option("includeHeaders", "true")


def rows(df) -> list[tuple]:
    """Every column of every row, in (topic, partition, offset) order; headers as tuples."""
    out = []
    for r in df.select(*COLUMNS).collect():
        headers = None if r.headers is None else tuple((h.key, None if h.value is None else bytes(h.value))
                                                       for h in r.headers)
        out.append((None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value), r.topic,
                    r.partition, r.offset, r.timestamp, r.timestampType, headers))
    return sorted(out, key=lambda row: (row[2], row[3], row[4]))


def test_kafka_source_reads_the_rows_format_seglog_reads(spark, orders):
    bootstrap, log_dir = orders
    topics = "orders-zstd,orders-lz4,audit"
    from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribe", topics).load())
    from_files = rows(seglog_reader(spark, log_dir).option("subscribe", topics).load())
    assert len(from_kafka) == 3 * ORDER_COUNT
    assert from_kafka == from_files
    lz4 = [row for row in from_kafka if row[2] == "orders-lz4"]
    assert {row[6] for row in lz4} == {1}  # LogAppendTime
    assert [row[4] for row in lz4] == list(range(ORDER_COUNT))
    third = next(row for row in lz4 if row[4] == 3)
    assert third[:2] == (b"k3", b"orders-lz4-3") and third[7] == (("n", b"3"), ("empty", None))
    assert next(row for row in lz4 if row[4] == 5)[1] is None and next(row for row in lz4 if row[4] == 7)[0] is None


def test_kafka_source_honours_starting_and_ending_offsets_json_as_format_seglog_does(spark, orders):
    bootstrap, log_dir = orders
    starting = '{"orders-zstd": {"0": 2, "1": -2, "2": 1}, "audit": {"0": -2, "1": 3}}'
    ending = '{"orders-zstd": {"0": 5, "1": -1, "2": 4}, "audit": {"0": 2, "1": -1}}'
    from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribe", "orders-zstd,audit")
                      .option("startingOffsets", starting).option("endingOffsets", ending).load())
    from_files = rows(seglog_reader(spark, log_dir).option("subscribe", "orders-zstd,audit")
                      .option("startingOffsets", starting).option("endingOffsets", ending).load())
    assert from_kafka == from_files
    by_partition = {}
    for row in from_kafka:
        by_partition.setdefault((row[2], row[3]), []).append(row[4])
    assert by_partition[("orders-zstd", 0)] == [2, 3, 4]
    assert by_partition[("orders-zstd", 2)] == [1, 2, 3]
    assert by_partition[("audit", 0)] == [0, 1]
    assert by_partition[("audit", 1)][0] == 3


def test_kafka_source_starts_and_ends_at_timestamps_as_format_seglog_does(spark, orders):
    bootstrap, log_dir = orders
    by_timestamp = {"startingTimestamp": str(T0 + 12_000), "endingTimestamp": str(T0 + 30_000)}
    from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribe", "orders-zstd,audit")
                      .options(**by_timestamp).load())
    from_files = rows(seglog_reader(spark, log_dir).option("subscribe", "orders-zstd,audit")
                      .options(**by_timestamp).load())
    assert from_kafka == from_files
    assert sorted(row[1] for row in from_kafka if row[1] is not None) == sorted(
        f"{topic}-{n}".encode() for topic in ("orders-zstd", "audit") for n in range(12, 30) if n % 11 != 5)


def test_kafka_source_assign_reads_the_partitions_format_seglog_reads(spark, orders):
    bootstrap, log_dir = orders
    assign = '{"orders-zstd": [2], "audit": [0]}'
    from_kafka = rows(kafka_reader(spark, bootstrap).option("assign", assign).load())
    from_files = rows(seglog_reader(spark, log_dir).option("assign", assign).load())
    assert from_kafka == from_files
    assert {(row[2], row[3]) for row in from_kafka} == {("orders-zstd", 2), ("audit", 0)}


def test_kafka_source_subscribe_pattern_selects_the_topics_format_seglog_selects(spark, orders):
    bootstrap, log_dir = orders
    from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribePattern", "orders-.*").load())
    from_files = rows(seglog_reader(spark, log_dir).option("subscribePattern", "orders-.*").load())
    assert from_kafka == from_files
    assert {row[2] for row in from_kafka} == {"orders-zstd", "orders-lz4"}
    assert len(from_kafka) == 2 * ORDER_COUNT


def run_available_now(df, sink_dir: str, checkpoint: str) -> None:
    query = (df.writeStream.format("parquet").option("path", sink_dir).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    assert query.awaitTermination(300), "the availableNow query did not end within 300 s"
    assert query.exception() is None


def test_kafka_source_stream_resumes_from_its_checkpoint_as_format_seglog_does(spark, seglog, tmp_path):
    server, log_dir = seglog
    bootstrap = server.bootstrap_servers
    create_topics(bootstrap, NewTopic("ticks", 2))
    produce_orders(bootstrap, "ticks", 0, 30, "gzip")
    streams = {"kafka": kafka_reader(spark, bootstrap, stream=True),
               "seglog": seglog_reader(spark, log_dir, stream=True)}
    for reader in streams.values():
        reader.option("subscribe", "ticks").option("startingOffsets", "earliest")
    for name, reader in streams.items():
        run_available_now(reader.load(), str(tmp_path / name), str(tmp_path / f"{name}-checkpoint"))
    first = {name: rows(spark.read.parquet(str(tmp_path / name))) for name in streams}
    assert len(first["kafka"]) == 30 and first["kafka"] == first["seglog"]

    produce_orders(bootstrap, "ticks", 30, 20, "snappy")
    for name, reader in streams.items():
        run_available_now(reader.load(), str(tmp_path / name), str(tmp_path / f"{name}-checkpoint"))
    second = {name: rows(spark.read.parquet(str(tmp_path / name))) for name in streams}
    assert second["kafka"] == second["seglog"]
    assert sorted(row[1] for row in second["kafka"] if row[1] is not None) == sorted(
        f"ticks-{n}".encode() for n in range(50) if n % 11 != 5)
    assert len(second["kafka"]) == 50  # each record once across the restart


def test_kafka_source_starts_where_retention_left_the_log_as_format_seglog_does(spark, tmp_path):
    log_dir = tmp_path / "logs"
    server = start_broker(log_dir, **{"log.retention.check.interval.ms": 200})
    try:
        bootstrap = server.bootstrap_servers
        create_topics(bootstrap, NewTopic("retained", 1, config={"segment.bytes": "1024", "retention.ms": "3600000"}))
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        now = int(time.time() * 1000)
        for n in range(150):  # the first 100 a year old, beyond retention.ms
            producer.produce("retained", key=f"k{n}", value=f"v{n}", timestamp=now - 365 * 86_400_000 + n
                             if n < 100 else now)
            if n % 10 == 9:
                producer.flush(30)
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 60
        while server.broker.list_offsets("retained", 0, "earliest").offset == 0:
            assert time.monotonic() < deadline, "retention did not delete the old segments within 60 s"
            time.sleep(0.2)
        time.sleep(1)  # one more retention check, which finds nothing more to delete
        log_start = server.broker.list_offsets("retained", 0, "earliest").offset
        starts = {"earliest": {}, "below the log start": {"startingOffsets": '{"retained": {"0": 5}}',
                                                         "failOnDataLoss": "false"}}
        for name, options in starts.items():
            from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribe", "retained").options(**options).load())
            from_files = rows(seglog_reader(spark, str(log_dir)).option("subscribe", "retained").options(**options)
                              .load())
            assert from_kafka == from_files, name
            assert [row[4] for row in from_kafka] == list(range(log_start, 150)), name
        assert 5 < log_start <= 100
    finally:
        server.shutdown(timeout_ms=10_000)


def test_kafka_source_stream_picks_up_new_partitions_as_format_seglog_does(spark, seglog, tmp_path):
    server, log_dir = seglog
    bootstrap = server.bootstrap_servers
    create_topics(bootstrap, NewTopic("growing", 1))
    produce_orders(bootstrap, "growing", 0, 10, "none")
    streams = {"kafka": kafka_reader(spark, bootstrap, stream=True),
               "seglog": seglog_reader(spark, log_dir, stream=True)}
    for reader in streams.values():
        reader.option("subscribe", "growing").option("startingOffsets", "earliest")
    for name, reader in streams.items():
        run_available_now(reader.load(), str(tmp_path / name), str(tmp_path / f"{name}-checkpoint"))

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions("growing", 3)]).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(10, 40):
        producer.produce("growing", key=f"k{n}", value=f"growing-{n}", partition=n % 3, timestamp=T0 + n * 1000)
    assert producer.flush(30) == 0
    for name, reader in streams.items():
        run_available_now(reader.load(), str(tmp_path / name), str(tmp_path / f"{name}-checkpoint"))
    read = {name: rows(spark.read.parquet(str(tmp_path / name))) for name in streams}
    assert read["kafka"] == read["seglog"]
    assert {row[3] for row in read["kafka"]} == {0, 1, 2} and len(read["kafka"]) == 40


def written_rows(spark, count: int):
    """Rows for Kafka's sink: key, value, a header and a partition."""
    data = [(f"w{n}", f"written-{n}", n % 2, [("n", str(n).encode())]) for n in range(count)]
    return spark.createDataFrame(data, "key string, value string, partition int, "
                                       "headers array<struct<key: string, value: binary>>")


def test_kafka_sink_batch_write_lands_in_seglog_and_reads_back_through_both_sources(spark, seglog):
    server, log_dir = seglog
    bootstrap = server.bootstrap_servers
    create_topics(bootstrap, NewTopic("written-batch", 2))
    (written_rows(spark, 25).write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", "written-batch").save())
    from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribe", "written-batch").load())
    from_files = rows(seglog_reader(spark, log_dir).option("subscribe", "written-batch").load())
    assert from_kafka == from_files
    assert sorted((row[3], row[0], row[1], row[7]) for row in from_kafka) == sorted(
        (n % 2, f"w{n}".encode(), f"written-{n}".encode(), (("n", str(n).encode()),)) for n in range(25))


def test_kafka_sink_streaming_write_lands_in_seglog_and_reads_back_through_both_sources(spark, seglog, tmp_path):
    server, log_dir = seglog
    bootstrap = server.bootstrap_servers
    create_topics(bootstrap, NewTopic("stream-source", 1), NewTopic("written-stream", 1))
    produce_orders(bootstrap, "stream-source", 0, 20, "none")
    source = seglog_reader(spark, log_dir, stream=True).option("subscribe", "stream-source") \
        .option("startingOffsets", "earliest").load()
    query = (source.selectExpr("key", "value", "headers").writeStream.format("kafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", "written-stream")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(300), "the streaming write did not end within 300 s"
    assert query.exception() is None
    from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribe", "written-stream").load())
    from_files = rows(seglog_reader(spark, log_dir).option("subscribe", "written-stream").load())
    assert from_kafka == from_files
    source_rows = rows(seglog_reader(spark, log_dir).option("subscribe", "stream-source").load())
    assert sorted(((row[0], row[1], row[7]) for row in from_kafka), key=repr) == sorted(
        ((row[0], row[1], row[7]) for row in source_rows), key=repr)
    assert len(from_kafka) == 20


def test_kafka_source_reads_a_compacted_topic_as_format_seglog_does(spark, seglog):
    server, log_dir = seglog
    bootstrap = server.bootstrap_servers
    create_topics(bootstrap, NewTopic("compacted", 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}))
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 7})
    for n in range(300):
        producer.produce("compacted", key=f"key-{n % 13}", value=f"v{n}", timestamp=T0 + n)
        if n % 50 == 49:
            producer.flush(30)
    assert producer.flush(30) == 0
    while server.broker.log_manager.cleaner.clean_filthiest_log(force=True) is not None:
        pass
    # Spark's Kafka source takes offsets missing inside a range for lost data unless told otherwise.
    from_kafka = rows(kafka_reader(spark, bootstrap).option("subscribe", "compacted")
                      .option("failOnDataLoss", "false").load())
    from_files = rows(seglog_reader(spark, log_dir).option("subscribe", "compacted").load())
    assert from_kafka == from_files
    offsets = [row[4] for row in from_kafka]
    assert len(offsets) < 300 and offsets[-1] == 299  # cleaned, with the active segment's records left
    assert {row[0] for row in from_kafka} == {f"key-{k}".encode() for k in range(13)}
