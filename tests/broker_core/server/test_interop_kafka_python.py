"""kafka-python against a ``seglog broker``: producers, consumers and the admin client, unmodified.

Every record read back is compared with what was written, field by field:
partition, offset, key, value, headers and timestamp.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

pytestmark = pytest.mark.slow

TIMEOUT_S = 20
BASE_TS = 1_700_000_000_000


def producer(bootstrap: str, **config) -> KafkaProducer:
    settings = {"request_timeout_ms": 10_000, "max_block_ms": 10_000, "linger_ms": 5}
    return KafkaProducer(bootstrap_servers=bootstrap, **{**settings, **config})


def consumer(bootstrap: str, **config) -> KafkaConsumer:
    settings = {"group_id": None, "enable_auto_commit": False, "request_timeout_ms": 10_000,
                "fetch_max_wait_ms": 100}
    return KafkaConsumer(bootstrap_servers=bootstrap, **{**settings, **config})


@pytest.fixture()
def admin(bootstrap):
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


def sample_records(n: int, *, prefix: bytes = b"") -> list[dict]:
    """Keys, headers, null keys, null values (tombstones) and explicit timestamps, in a mix."""
    out = []
    for i in range(n):
        key = None if i % 5 == 4 else prefix + b"key-%d" % i
        # kafka-python refuses a record with neither key nor value.
        value = None if i % 7 == 6 and key is not None else prefix + b"value-%d-" % i + bytes(range(i % 50))
        out.append({
            "key": key,
            "value": value,
            "headers": [("h%d" % j, b"v%d" % j if j % 2 == 0 else b"") for j in range(i % 3)],
            "timestamp_ms": BASE_TS + i,
        })
    return out


def read_back(bootstrap: str, topic: str, partitions: int, count: int, **config) -> list:
    """Exactly ``count`` records from the beginning of every partition, by (partition, offset)."""
    c = consumer(bootstrap, **config)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got.extend(records)
        assert len(got) == count, f"read {len(got)} of {count} records"
        return sorted(got, key=lambda r: (r.partition, r.offset))
    finally:
        c.close()


def fields(record) -> tuple:
    headers = [(k, v) for k, v in record.headers]
    return record.key, record.value, headers, record.timestamp


def expected_fields(sent: dict) -> tuple:
    return sent["key"], sent["value"], sent["headers"], sent["timestamp_ms"]


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_records_produced_with_each_acks_setting_read_back_field_by_field(bootstrap, admin, acks):
    admin.create_topics({"acks-test": {"num_partitions": 3, "replication_factor": 1}})
    sent = sample_records(60)
    p = producer(bootstrap, acks=acks, enable_idempotence=acks == "all")
    try:
        futures = [p.send("acks-test", partition=i % 3, **r) for i, r in enumerate(sent)]
        p.flush(TIMEOUT_S)
        metadata = [f.get(TIMEOUT_S) for f in futures]
    finally:
        p.close(TIMEOUT_S)
    got = read_back(bootstrap, "acks-test", 3, len(sent))
    by_position = {(r.partition, r.offset): r for r in got}
    if acks != 0:  # with acks=0 the client never learns the offsets
        for m, s in zip(metadata, sent):
            assert fields(by_position[(m.partition, m.offset)]) == expected_fields(s)
    for partition in range(3):
        # Within a partition, records come back in the order they were sent.
        assert [fields(r) for r in got if r.partition == partition] == \
            [expected_fields(s) for i, s in enumerate(sent) if i % 3 == partition]
        assert [r.offset for r in got if r.partition == partition] == list(range(20))


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec_round_trips(bootstrap, admin, codec):
    admin.create_topics({f"codec-{codec}": {"num_partitions": 1, "replication_factor": 1}})
    sent = sample_records(200, prefix=codec.encode())
    p = producer(bootstrap, acks=1, compression_type=codec, batch_size=4096)
    try:
        for r in sent:
            p.send(f"codec-{codec}", partition=0, **r)
        p.flush(TIMEOUT_S)
    finally:
        p.close(TIMEOUT_S)
    got = read_back(bootstrap, f"codec-{codec}", 1, len(sent))
    assert [fields(r) for r in got] == [expected_fields(s) for s in sent]
    assert [r.offset for r in got] == list(range(len(sent)))


def test_a_record_near_the_size_limit_round_trips(bootstrap, admin):
    admin.create_topics({"big": {"num_partitions": 1, "replication_factor": 1}})
    # message.max.bytes (1 MiB + 12) bounds the batch; kafka-python's max_request_size (1 MiB) the request.
    value = bytes(range(256)) * (1_048_000 // 256)
    p = producer(bootstrap, acks="all")
    try:
        meta = p.send("big", key=b"k", value=value, headers=[("h", b"x")], timestamp_ms=BASE_TS).get(TIMEOUT_S)
    finally:
        p.close(TIMEOUT_S)
    (got,) = read_back(bootstrap, "big", 1, 1)
    assert (got.offset, fields(got)) == (meta.offset, (b"k", value, [("h", b"x")], BASE_TS))


def test_a_record_over_the_broker_limit_is_refused(bootstrap, admin):
    admin.create_topics({"small": {"num_partitions": 1, "replication_factor": 1,
                                   "configs": {"max.message.bytes": "1000"}}})
    p = producer(bootstrap, acks=1, retries=0)
    try:
        future = p.send("small", value=b"x" * 5000)
        with pytest.raises(Exception, match="MessageSizeTooLarge|MESSAGE_TOO_LARGE|too large"):
            future.get(TIMEOUT_S)
    finally:
        p.close(TIMEOUT_S)


def test_consumer_seek_beginning_end_offsets_and_offsets_for_times(bootstrap, admin):
    admin.create_topics({"seek": {"num_partitions": 2, "replication_factor": 1}})
    p = producer(bootstrap, acks=1)
    try:
        for i in range(10):
            p.send("seek", partition=0, key=b"k%d" % i, value=b"v%d" % i, timestamp_ms=BASE_TS + 10 * i)
        p.flush(TIMEOUT_S)
    finally:
        p.close(TIMEOUT_S)
    tp0, tp1 = TopicPartition("seek", 0), TopicPartition("seek", 1)
    c = consumer(bootstrap)
    try:
        c.assign([tp0, tp1])
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 0}
        found = c.offsets_for_times({tp0: BASE_TS + 35, tp1: BASE_TS})
        assert (found[tp0].offset, found[tp0].timestamp) == (4, BASE_TS + 40)
        assert found[tp1] is None
        assert c.offsets_for_times({tp0: BASE_TS + 1000})[tp0] is None

        c.seek(tp0, 7)
        assert [r.value for r in poll_n(c, 3)] == [b"v7", b"v8", b"v9"]
        c.seek_to_beginning(tp0)
        assert [r.offset for r in poll_n(c, 10)] == list(range(10))
        c.seek_to_end(tp0)
        assert c.position(tp0) == 10
    finally:
        c.close()


def poll_n(c: KafkaConsumer, n: int) -> list:
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < n and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=200).values():
            got.extend(records)
    return got


def test_a_consumer_waiting_at_the_end_sees_new_records(bootstrap, admin):
    admin.create_topics({"tail": {"num_partitions": 1, "replication_factor": 1}})
    tp = TopicPartition("tail", 0)
    c = consumer(bootstrap, fetch_max_wait_ms=5000)
    p = producer(bootstrap, acks=1)
    try:
        c.assign([tp])
        c.seek_to_end(tp)
        assert c.poll(timeout_ms=300) == {}
        p.send("tail", value=b"late").get(TIMEOUT_S)
        assert [r.value for r in poll_n(c, 1)] == [b"late"]
    finally:
        p.close(TIMEOUT_S)
        c.close()


def test_admin_client_creates_describes_alters_and_deletes_topics(admin):
    admin.create_topics({"adm": {"num_partitions": 2, "replication_factor": 1,
                                 "configs": {"retention.ms": "3600000", "cleanup.policy": "compact"}}})
    assert "adm" in admin.list_topics()
    (described,) = admin.describe_topics(["adm"])
    assert described["name"] == "adm" and described["error_code"] == 0
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1]
    assert all(p["leader_id"] == 0 and p["replica_nodes"] == [0] for p in described["partitions"])

    configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "adm")])
    topic_configs = configs["topic"]["adm"]
    assert topic_configs["retention.ms"]["value"] == "3600000"
    assert topic_configs["cleanup.policy"]["value"] == "compact"

    admin.create_partitions({"adm": 4})
    (described,) = admin.describe_topics(["adm"])
    assert len(described["partitions"]) == 4

    with pytest.raises(Exception, match="TopicAlreadyExists|TOPIC_ALREADY_EXISTS"):
        admin.create_topics({"adm": {"num_partitions": 1, "replication_factor": 1}})

    admin.delete_topics(["adm"])
    assert "adm" not in admin.list_topics()
