"""Consumers read up to the high watermark only: Fetch from a consumer (replica id -1) and ListOffsets
``latest`` stop at it and report it, the LSO never exceeds it, while a follower's fetch reads to the log
end. The partition's log is held as a replicated one whose high watermark lags its end."""

from __future__ import annotations

import time

from broker_core.client.protocol_client import ProtocolClient
from broker_core.log.log import FetchIsolation, Log
from broker_core.server.delayed_fetch import FetchParams, FetchPartition, read_from_local_log
from format.layout import TopicPartition
from format.record_batch import iter_batches

from server_kit import create_topic, produce
from test_server_kafka_apis import batch, fetch, list_offset, values_of

LATEST = -1


def replicated_log(broker_server, topic: str, high_watermark: int) -> Log:
    """The partition's log as a replica of a replicated partition: appends no longer commit, and the high
    watermark is where the in-sync replicas are (``high_watermark``)."""
    lg = broker_server.broker.log_manager.get_log(TopicPartition(topic, 0))
    lg.sole_replica = False
    lg.update_high_watermark(high_watermark)
    return lg


def offsets_in(records: bytes) -> list[int]:
    return [r.offset for b in iter_batches(bytes(records)) for r in b.records()]


def test_a_consumer_fetch_stops_at_the_high_watermark_and_reports_it(client, broker_server):
    create_topic(client, "t")
    for value in (b"a", b"b", b"c"):
        produce(client, "t", 0, batch(value))
    replicated_log(broker_server, "t", 2)
    produce(client, "t", 0, batch(b"d", b"e"))  # offsets 3..4, not committed either
    answer = fetch(client, [("t", 0, 0, 1 << 20)])[("t", 0)]
    assert values_of(answer["records"]) == [b"a", b"b"]
    assert (answer["high_watermark"], answer["last_stable_offset"]) == (2, 2)
    assert fetch(client, [("t", 0, 2, 1 << 20)])[("t", 0)]["records"] in (b"", None)  # at the HW: nothing yet


def test_list_offsets_latest_answers_the_high_watermark_and_read_committed_never_more(client, broker_server):
    create_topic(client, "t")
    produce(client, "t", 0, batch(b"a", b"b", b"c", timestamp=1000))
    replicated_log(broker_server, "t", 1)
    assert list_offset(client, "t", 0, LATEST)["offset"] == 1
    assert list_offset(client, "t", 0, LATEST, isolation_level=1)["offset"] == 1
    assert list_offset(client, "t", 0, 1002)["offset"] == -1  # a timestamp found past the HW is not answered


def test_a_followers_fetch_reads_to_the_log_end(broker_server):
    lg_topic = "t"
    broker = broker_server.broker
    broker.create_topic(lg_topic, 1)
    broker.produce(lg_topic, [(None, b"a"), (None, b"b"), (None, b"c")], partition=0)
    replicated_log(broker_server, lg_topic, 1)
    asked = [FetchPartition(lg_topic, 0, 0, 1 << 20)]
    follower = FetchParams(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, replica_id=2)
    consumer = FetchParams(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20)
    assert (follower.isolation, consumer.isolation) == (FetchIsolation.LOG_END, FetchIsolation.HIGH_WATERMARK)
    (copied,) = read_from_local_log(broker.log_manager, follower, asked)
    assert (offsets_in(copied.records), copied.high_watermark) == ([0, 1, 2], 1)
    (consumed,) = read_from_local_log(broker.log_manager, consumer, asked)
    assert offsets_in(consumed.records) == [0, 1, 2]  # whole batches: the one holding offset 0 ends at 2
    broker.produce(lg_topic, [(None, b"d")], partition=0)
    (past_the_hw,) = read_from_local_log(broker.log_manager, consumer, [FetchPartition(lg_topic, 0, 3, 1 << 20)])
    assert offsets_in(past_the_hw.records) == []


def test_the_embedded_broker_fetch_and_list_offsets_stop_at_the_high_watermark(broker_server):
    broker = broker_server.broker
    broker.create_topic("t", 1)
    for value in (b"a", b"b", b"c", b"d"):
        broker.produce("t", [(None, value)], partition=0)
    replicated_log(broker_server, "t", 3)
    broker.produce("t", [(None, b"e")], partition=0)
    fetched = broker.fetch("t", 0, 0)
    assert [r.value for r in fetched.decoded()] == [b"a", b"b", b"c"]
    assert (fetched.high_watermark, fetched.last_stable_offset) == (3, 3)
    assert broker.fetch("t", 0, 0, isolation_level="read_committed").decoded()[-1].offset == 2
    assert broker.list_offsets("t", 0, "latest").offset == 3
    assert broker.list_offsets("t", 0, "latest", "read_committed").offset == 3


def test_a_kafka_consumer_reads_only_below_the_high_watermark_and_the_rest_once_it_moves(bootstrap, broker_server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    with ProtocolClient(bootstrap) as admin:
        create_topic(admin, "t")
        for n in range(3):
            produce(admin, "t", 0, batch(b"committed-%d" % n))
        lg = replicated_log(broker_server, "t", 3)
        for n in range(3):
            produce(admin, "t", 0, batch(b"pending-%d" % n))
    tp = KafkaTopicPartition("t", 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             fetch_max_wait_ms=100, request_timeout_ms=10_000)
    try:
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: 3}
        seen: list[bytes] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            seen += [record.value for record in consumer.poll(timeout_ms=200).get(tp, [])]
        assert seen == [b"committed-%d" % n for n in range(3)]
        assert lg.maybe_increment_high_watermark(6) == 3
        deadline = time.monotonic() + 30
        while len(seen) < 6 and time.monotonic() < deadline:
            seen += [record.value for record in consumer.poll(timeout_ms=200).get(tp, [])]
        assert seen[3:] == [b"pending-%d" % n for n in range(3)]
    finally:
        consumer.close()
