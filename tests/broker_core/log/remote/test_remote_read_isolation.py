"""Reads of the remote tier that must answer as reads of local disk do: read_committed fetches list the
aborted transactions of remote segments, and ListOffsets' max-timestamp (-3) looks at both tiers. The tier
is a local directory written by the broker's own remote log manager."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from broker_core.clock import MockTime
from broker_core.log.remote.remote_log_reader import LISTING_TTL_MS
from broker_core.server.broker_server import BrokerServer
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import iter_batches
from tests.broker_core.log.remote.remote_tier_kit import (T0, TIERED_TOPIC, TOPIC, open_broker, tier_round,
                                                          tiered_config)
from tests.broker_core.transactions_kit import TransactionalWriter

TIMEOUT_S = 30


def local_tier(tmp_path) -> str:
    (tmp_path / "remote").mkdir()
    return (tmp_path / "remote").as_uri()


def serve(tmp_path, url: str) -> BrokerServer:
    return BrokerServer({"log.dirs": str(tmp_path / "logs"), "listeners": "PLAINTEXT://127.0.0.1:0",
                         "num.network.threads": 1, "num.io.threads": 2, **tiered_config(url, {})}).startup()


def test_a_read_committed_fetch_below_the_local_log_start_lists_the_aborted_transactions_of_remote_segments(
        tmp_path):
    url = local_tier(tmp_path)
    with open_broker(tmp_path / "logs", url, {}) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        writer = TransactionalWriter(broker, TOPIC)
        for n in range(8):
            writer.plain(f"plain-{n}")
            writer.send(1, f"committed-{n}")
            writer.send(2, f"aborted-{n}")
            writer.end(1, commit=True)
            writer.end(2, commit=False)
        for n in range(60):
            writer.plain(f"tail-{n}".ljust(100, "."))
        tier_round(broker, broker.remote_log_manager)
        local_start = broker.log_manager.get_log(TopicPartition(TOPIC, 0)).local_log_start_offset
        assert max(o for o, _, fate in writer.records if fate == "aborted") < local_start  # in the remote tier only
        seen, listed, offset = [], [], 0
        while offset < local_start:
            result = broker.fetch(TOPIC, 0, offset, isolation_level="read_committed")
            batches = list(iter_batches(result.records))
            assert batches, f"nothing read at {offset}"
            seen += [r.value.decode() for r in result.decoded(offset)]
            listed += result.aborted_transactions
            offset = batches[-1].header.next_offset
        assert {t.producer_id for t in listed} == {2}
        assert seen == writer.values("plain", "committed", below=offset)
        expected = writer.committed_values()
    server = serve(tmp_path, url)
    try:
        consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "committed",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 100})
        try:
            consumer.assign([KafkaTopicPartition(TOPIC, 0, 0)])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < len(expected) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None:
                    assert message.error() is None, message.error()
                    got.append(message.value().decode())
        finally:
            consumer.close()
    finally:
        server.shutdown()
    assert got == expected


def test_list_offsets_max_timestamp_finds_the_largest_timestamp_in_a_remote_segment(tmp_path):
    url = local_tier(tmp_path)
    latest = 58
    clock = MockTime(current_time_ms=T0)
    with open_broker(tmp_path / "logs", url, {}, clock=clock) as broker:
        broker.create_topic(TOPIC, 1, TIERED_TOPIC)
        for n in range(60):
            ts = T0 + 3_600_000 if n in (5, latest) else T0 + n  # two records share the largest timestamp
            broker.produce(TOPIC, [SimpleRecord(f"value-{n}".encode().ljust(150, b"."), None, ts)], partition=0)
        tier_round(broker, broker.remote_log_manager)
        lg = broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        assert 5 < lg.local_log_start_offset <= latest  # the first holder of the largest timestamp is remote only
        clock.sleep(LISTING_TTL_MS)  # the broker's listing of the remote tier, taken before the copies, expires
        found = broker.list_offsets(TOPIC, 0, "max_timestamp")
        assert (found.offset, found.timestamp) == (5, T0 + 3_600_000)
    server = serve(tmp_path, url)
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
        tp = KafkaTopicPartition(TOPIC, 0)
        info = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(TIMEOUT_S)
    finally:
        server.shutdown()
    assert (info.offset, info.timestamp) == (5, T0 + 3_600_000)
