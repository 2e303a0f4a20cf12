"""A ``seglog broker`` process that tiers its own topic to SeaweedFS on loopback: after producing, most of the
topic is only in S3; confluent-kafka reads every record from offset 0 through the broker, and Spark reads
every record from the log dir and S3 directly, its tasks reading the remote segments themselves."""

from __future__ import annotations

import pathlib
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker_core.client.protocol_client import ProtocolClient
from format import remote_tier
from format.fs import filesystem_for
from format.log_dir import read_topic_id
from testbed.broker_process import BrokerProcess
from tests.broker_core.server.server_kit import create_topic

pytestmark = pytest.mark.slow

RECORDS = 600
TIMEOUT_S = 60
TOPIC_CONFIG = {"remote.storage.enable": "true", "segment.bytes": "2048", "local.retention.bytes": "4096",
                "retention.ms": "-1"}


def _value(n: int) -> bytes:
    return f"event-{n:05d}".encode().ljust(100, b".")


@pytest.fixture()
def tiering_broker(tmp_path, s3_bucket):
    bucket, options = s3_bucket
    url = f"s3://{bucket}/tier"
    log_dir = str(tmp_path / "logs")
    settings = {"remote.log.storage.system.enable": "true", "remote.storage.url": url,
                "remote.log.manager.task.interval.ms": "200", "log.retention.check.interval.ms": "200",
                "log.segment.delete.delay.ms": "0",
                **{f"remote.storage.options.{k}": v for k, v in options.items()}}
    flags = [arg for key, value in settings.items() for arg in ("--config", f"{key}={value}")]
    broker = BrokerProcess([log_dir], *flags)
    try:
        yield broker, log_dir, url, options
    finally:
        broker.stop()


def _remote_segments(url: str, options: dict, log_dir: str) -> list[remote_tier.RemoteLogSegmentMetadata]:
    fs, _ = filesystem_for(url, options)
    fs.invalidate_cache()
    topic_id = read_topic_id(*filesystem_for(f"{log_dir}/events-0"))
    return [m for m in remote_tier.list_segments(fs, url, "events", topic_id, 0)
            if m.state is remote_tier.RemoteLogSegmentState.COPY_SEGMENT_FINISHED]


def test_a_broker_tiers_its_topic_and_both_a_consumer_and_spark_read_every_record(tiering_broker, spark):
    broker, log_dir, url, options = tiering_broker
    with ProtocolClient(broker.bootstrap) as client:
        create_topic(client, "events", 1, TOPIC_CONFIG)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all", "batch.size": 1024})
    for n in range(RECORDS):
        producer.produce("events", value=_value(n), partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0

    deadline = time.monotonic() + TIMEOUT_S
    while True:
        remote = _remote_segments(url, options, log_dir)
        local = sorted(p.name for p in (pathlib.Path(log_dir) / "events-0").glob("*.log"))
        if remote and remote[-1].end_offset >= RECORDS // 2 and int(local[0].split(".")[0]) > 0:
            break
        assert time.monotonic() < deadline, f"not tiered within {TIMEOUT_S} s: remote {remote}, local {local}"
        time.sleep(0.3)
    assert remote[0].base_offset == 0  # everything below the local tail is in S3 only

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "from-zero", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition("events", 0, 0)])
        seen = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None:
                assert message.error() is None, message.error()
                seen.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert seen == [(n, _value(n)) for n in range(RECORDS)]

    reader = (spark.read.format("seglog").option("path", log_dir).option("subscribe", "events")
              .option("endingOffsets", "latest"))
    for key, value in options.items():
        reader = reader.option(f"storage.{key}", value)
    rows = reader.load().orderBy("offset").collect()
    assert [(r.offset, bytes(r.value)) for r in rows] == [(n, _value(n)) for n in range(RECORDS)]
    segments = (spark.read.format("seglog").option("path", log_dir).option("subscribe", "events")
                .options(**{f"storage.{k}": v for k, v in options.items()}).option("view", "segments").load())
    tiers = {r.tier for r in segments.collect()}
    assert tiers == {"local", "remote"}
