"""confluent-kafka (librdkafka) against a ``seglog broker``: producers, consumers and the admin client.

Every record read back is compared with what was written, field by field:
partition, offset, key, value, headers and timestamp.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, TIMESTAMP_CREATE_TIME, Consumer, KafkaError,
                             KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import (AdminClient, ConfigResource, NewPartitions, NewTopic, OffsetSpec)

pytestmark = pytest.mark.slow

TIMEOUT_S = 20
BASE_TS = 1_700_000_000_000


def producer(bootstrap: str, **config) -> Producer:
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 15_000}
    settings.update(config)
    return Producer(settings)


def consumer(bootstrap: str, **config) -> Consumer:
    # A group id is required by the client; no group API is used (assign, not subscribe).
    settings = {"bootstrap.servers": bootstrap, "group.id": "interop", "enable.auto.commit": False,
                "fetch.wait.max.ms": 100, "enable.partition.eof": False}
    settings.update(config)
    return Consumer(settings)


@pytest.fixture()
def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create(admin: AdminClient, name: str, partitions: int = 1, config: dict | None = None) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        future.result(TIMEOUT_S)


def sample_records(n: int, *, prefix: bytes = b"") -> list[dict]:
    """Keys, headers (some with null values), null keys, null values and explicit timestamps."""
    out = []
    for i in range(n):
        out.append({
            "key": None if i % 5 == 4 else prefix + b"key-%d" % i,
            "value": None if i % 7 == 6 else prefix + b"value-%d-" % i + bytes(range(i % 50)),
            "headers": [("h%d" % j, b"v%d" % j if j % 2 == 0 else None) for j in range(i % 3)],
            "timestamp": BASE_TS + i,
        })
    return out


def produce_all(p: Producer, topic: str, records: list[dict], partition_of=lambda i: 0) -> list:
    """Produce and flush; returns the delivered messages in send order (None where none was reported)."""
    delivered: list = [None] * len(records)
    errors = []

    def on_delivery(i):
        def report(err, msg):
            if err is not None:
                errors.append(err)
            delivered[i] = msg
        return report

    for i, r in enumerate(records):
        p.produce(topic, value=r["value"], key=r["key"], headers=r["headers"] or None, timestamp=r["timestamp"],
                  partition=partition_of(i), on_delivery=on_delivery(i))
        p.poll(0)
    assert p.flush(TIMEOUT_S) == 0
    assert not errors, errors
    return delivered


def read_back(bootstrap: str, topic: str, partitions: int, count: int) -> list:
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = poll_n(c, count)
        assert len(got) == count, f"read {len(got)} of {count} records"
        return sorted(got, key=lambda m: (m.partition(), m.offset()))
    finally:
        c.close()


def poll_n(c: Consumer, n: int) -> list:
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append(msg)
    return got


def fields(msg) -> tuple:
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_CREATE_TIME
    return msg.key(), msg.value(), list(msg.headers() or []), ts


def expected_fields(sent: dict) -> tuple:
    return sent["key"], sent["value"], sent["headers"], sent["timestamp"]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_records_produced_with_each_acks_setting_read_back_field_by_field(bootstrap, admin, acks):
    create(admin, "acks-test", 3)
    sent = sample_records(60)
    # The idempotent producer (InitProducerId) needs acks=all.
    p = producer(bootstrap, acks=acks, **({"enable.idempotence": True} if acks == "all" else {}))
    delivered = produce_all(p, "acks-test", sent, partition_of=lambda i: i % 3)
    got = read_back(bootstrap, "acks-test", 3, len(sent))
    by_position = {(m.partition(), m.offset()): m for m in got}
    if acks != "0":  # with acks=0 the client never learns the offsets
        for m, s in zip(delivered, sent):
            assert fields(by_position[(m.partition(), m.offset())]) == expected_fields(s)
    for partition in range(3):
        assert [fields(m) for m in got if m.partition() == partition] == \
            [expected_fields(s) for i, s in enumerate(sent) if i % 3 == partition]
        assert [m.offset() for m in got if m.partition() == partition] == list(range(20))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec_round_trips(bootstrap, admin, codec):
    create(admin, f"codec-{codec}")
    sent = sample_records(300, prefix=codec.encode())
    produce_all(producer(bootstrap, **{"compression.type": codec, "batch.size": 8192, "enable.idempotence": True}),
                f"codec-{codec}", sent)
    got = read_back(bootstrap, f"codec-{codec}", 1, len(sent))
    assert [fields(m) for m in got] == [expected_fields(s) for s in sent]
    assert [m.offset() for m in got] == list(range(len(sent)))


def test_a_record_near_the_size_limit_round_trips(bootstrap, admin):
    create(admin, "big")
    # librdkafka's message.max.bytes is 1,000,000 by default; the broker allows 1 MiB + 12 per batch.
    sent = {"key": b"k", "value": bytes(range(256)) * (999_000 // 256), "headers": [("h", b"x")],
            "timestamp": BASE_TS}
    (delivered,) = produce_all(producer(bootstrap, acks="all"), "big", [sent])
    (got,) = read_back(bootstrap, "big", 1, 1)
    assert (got.offset(), fields(got)) == (delivered.offset(), expected_fields(sent))


def test_a_record_over_the_broker_limit_is_refused(bootstrap, admin):
    create(admin, "small", config={"max.message.bytes": "1000"})
    p = producer(bootstrap, acks="1")
    reports = []
    p.produce("small", value=b"x" * 5000, on_delivery=lambda err, msg: reports.append(err))
    p.flush(TIMEOUT_S)
    assert [e.code() for e in reports] == [KafkaError.MSG_SIZE_TOO_LARGE]


def test_consumer_seek_watermarks_and_offsets_for_times(bootstrap, admin):
    create(admin, "seek", 2)
    records = [{"key": b"k%d" % i, "value": b"v%d" % i, "headers": [], "timestamp": BASE_TS + 10 * i}
               for i in range(10)]
    produce_all(producer(bootstrap), "seek", records)
    c = consumer(bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition("seek", 0), timeout=TIMEOUT_S, cached=False) == (0, 10)
        assert c.get_watermark_offsets(TopicPartition("seek", 1), timeout=TIMEOUT_S, cached=False) == (0, 0)
        (found,) = c.offsets_for_times([TopicPartition("seek", 0, BASE_TS + 35)], timeout=TIMEOUT_S)
        assert found.offset == 4
        (past_the_end,) = c.offsets_for_times([TopicPartition("seek", 0, BASE_TS + 999)], timeout=TIMEOUT_S)
        assert past_the_end.offset == OFFSET_END

        c.assign([TopicPartition("seek", 0, 7)])
        assert [m.value() for m in poll_n(c, 3)] == [b"v7", b"v8", b"v9"]
        c.seek(TopicPartition("seek", 0, OFFSET_BEGINNING))
        assert [m.offset() for m in poll_n(c, 10)] == list(range(10))
        c.seek(TopicPartition("seek", 0, OFFSET_END))
        assert c.poll(0.5) is None
        produce_all(producer(bootstrap), "seek", [{"key": None, "value": b"after-end", "headers": [],
                                                   "timestamp": BASE_TS + 500}])
        (late,) = poll_n(c, 1)
        assert (late.offset(), late.value()) == (10, b"after-end")
    finally:
        c.close()


def test_admin_list_offsets_earliest_latest_and_by_timestamp(bootstrap, admin):
    create(admin, "offsets")
    records = [{"key": None, "value": b"v%d" % i, "headers": [], "timestamp": BASE_TS + i} for i in range(5)]
    produce_all(producer(bootstrap), "offsets", records)
    tp = TopicPartition("offsets", 0)
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max": OffsetSpec.max_timestamp(), "ts": OffsetSpec.for_timestamp(BASE_TS + 2)}
    results = {}
    for name, spec in specs.items():
        for _, future in admin.list_offsets({tp: spec}).items():
            info = future.result(TIMEOUT_S)
            results[name] = (info.offset, info.timestamp)
    assert results["earliest"][0] == 0
    assert results["latest"][0] == 5
    assert results["max"] == (4, BASE_TS + 4)
    assert results["ts"] == (2, BASE_TS + 2)


def test_admin_client_creates_describes_alters_and_deletes_topics(admin):
    create(admin, "adm", 2, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    assert "adm" in metadata.topics
    partitions = metadata.topics["adm"].partitions
    assert sorted(partitions) == [0, 1]
    assert all(p.leader == 0 and p.replicas == [0] and p.isrs == [0] for p in partitions.values())

    (future,) = admin.describe_configs([ConfigResource("topic", "adm")]).values()
    configs = future.result(TIMEOUT_S)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].is_default

    for future in admin.create_partitions([NewPartitions("adm", 5)]).values():
        future.result(TIMEOUT_S)
    assert len(admin.list_topics(timeout=TIMEOUT_S).topics["adm"].partitions) == 5

    (future,) = admin.create_topics([NewTopic("adm", 1, 1)]).values()
    with pytest.raises(KafkaException) as exc:
        future.result(TIMEOUT_S)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    (future,) = admin.create_topics([NewTopic("r3", 1, 3)]).values()
    with pytest.raises(KafkaException) as exc:
        future.result(TIMEOUT_S)
    assert exc.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR

    for future in admin.delete_topics(["adm"]).values():
        future.result(TIMEOUT_S)
    assert "adm" not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_the_cluster_id_is_the_one_in_meta_properties(broker_server, admin):
    assert admin.list_topics(timeout=TIMEOUT_S).cluster_id == broker_server.cluster_id
