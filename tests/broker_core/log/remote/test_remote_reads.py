"""Reads across both tiers: a partition whose older segments are only in the remote tier (SeaweedFS on
loopback), served by the broker — embedded, over the Kafka protocol, to confluent-kafka, and by the CLI."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest
import s3fs
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, OffsetSpec

from broker_core.broker import Broker
from broker_core.clock import MockTime
from broker_core.cli import main
from broker_core.client.protocol_client import ProtocolClient
from broker_core.errors import KafkaStorageError, OffsetOutOfRangeError
from broker_core.log.remote.remote_index_cache import DIR_NAME
from broker_core.log.remote.remote_log_reader import LISTING_TTL_MS, RemoteLogReader, RemoteStorage
from broker_core.protocol import ApiKey
from broker_core.server.broker_server import BrokerServer
from format import remote_tier
from format.layout import TopicPartition as LogPartition
from format.record_batch import iter_batches
from testbed.broker_process import BrokerProcess
from tests.broker_core.log.remote.tiered_partition_kit import (EVENT_MS, PER_BATCH, RECORDS, remote_config, tier, value,
                                                               write_topic)
from tests.format.tiered_log_kit import recopy_overlapping

pytestmark = pytest.mark.slow

TIMEOUT_S = 30
KAFKA_STORAGE_ERROR = 56
UNSUPPORTED_VERSION = 35


@pytest.fixture()
def tiered(tmp_path, s3_bucket):
    """A log dir with topic ``t`` (one partition) whose segments below the newest three are only in the remote
    tier; yields (log dir, broker settings naming the tier, the remote segments, the s3fs options)."""
    bucket, options = s3_bucket
    log_dir = str(tmp_path / "logs")
    write_topic(log_dir, "t", remote_config(bucket, options))
    copied = tier(log_dir, "t", 0, bucket, options)
    assert len(copied) >= 10
    return log_dir, remote_config(bucket, options), copied, options


@pytest.fixture()
def server(tiered):
    log_dir, config, _, _ = tiered
    broker = BrokerServer({"log.dirs": log_dir, "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                           "num.io.threads": 4, **config}).startup()
    try:
        yield broker
    finally:
        broker.shutdown()


def list_offset(client: ProtocolClient, timestamp: int, version: int = 9, topic: str = "t") -> dict:
    response = client.send(ApiKey.LIST_OFFSETS, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]},
        version=version)
    return response["topics"][0]["partitions"][0]


def fetch_partition(client: ProtocolClient, topic: str, offset: int) -> dict:
    response = client.send(ApiKey.FETCH, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                     "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []})
    return response["responses"][0]["partitions"][0]


def test_a_consumer_from_offset_zero_reads_every_record_in_order_through_the_broker(tiered, server):
    _, _, copied, _ = tiered
    consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "tiered",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition("t", 0, 0)])
        seen = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(seen) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert copied[0].base_offset == 0 and copied[-1].end_offset > RECORDS // 2  # most of it was remote
    assert seen == [(i, value(i)) for i in range(RECORDS)]


def consume_all(server: BrokerServer, first: int = 0) -> list[tuple[int, bytes]]:
    """Every record from ``first`` to the log end, as confluent-kafka receives them."""
    consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "tiered",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition("t", 0, first)])
        seen = []
        deadline = time.monotonic() + TIMEOUT_S
        while (not seen or seen[-1][0] < RECORDS - 1) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return seen


def test_a_remote_segment_overlapping_the_one_before_after_a_leader_change_serves_every_offset_once(tiered, server):
    _, config, copied, options = tiered
    before = copied[3]
    overlapping = recopy_overlapping(config["remote.storage.url"], options, before, copied[4])
    assert overlapping.base_offset < before.end_offset < copied[4].base_offset <= overlapping.end_offset
    assert consume_all(server) == [(i, value(i)) for i in range(RECORDS)]
    # A consumer starting inside the overlap, and one where the overlapping segment starts serving.
    for first in (overlapping.base_offset + 1, before.end_offset + 1):
        assert consume_all(server, first) == [(i, value(i)) for i in range(first, RECORDS)]


def test_a_fetch_at_the_end_of_a_remote_segment_that_a_later_one_overlaps_moves_on_to_the_later_one(tiered):
    log_dir, config, copied, options = tiered
    before = copied[3]
    recopy_overlapping(config["remote.storage.url"], options, before, copied[4])
    with Broker(log_dir, config, background=False) as broker:
        last = broker.fetch("t", 0, before.end_offset)
        assert [r.offset for r in last.decoded(before.end_offset)] == [before.end_offset]
        following = broker.fetch("t", 0, before.end_offset + 1)
        assert [(r.offset, r.value) for r in following.decoded()][:1] == [(before.end_offset + 1,
                                                                          value(before.end_offset + 1))]
        held_only_by_the_overlapping_one = copied[4].base_offset + 1
        assert broker.list_offsets("t", 0, EVENT_MS + held_only_by_the_overlapping_one).offset == \
            held_only_by_the_overlapping_one
        assert broker.list_offsets("t", 0, "latest_tiered").offset == copied[-1].end_offset


def test_an_offset_in_a_gap_between_remote_segments_is_out_of_range_as_from_kafka(tiered):
    log_dir, config, copied, options = tiered
    lost = copied[4]
    fs = s3fs.S3FileSystem(**options)
    for suffix in (*lost.objects, remote_tier.METADATA_SUFFIX):
        fs.rm(remote_tier.segment_object(config["remote.storage.url"], lost, suffix))
    with Broker(log_dir, config, background=False) as broker:
        with pytest.raises(OffsetOutOfRangeError, match=f"offset {lost.base_offset + 1} is in neither tier"):
            broker.fetch("t", 0, lost.base_offset + 1)
        assert broker.fetch("t", 0, lost.end_offset + 1).decoded()[0].offset == lost.end_offset + 1


def test_list_offsets_answers_earliest_of_either_tier_earliest_local_and_latest_tiered(tiered, server):
    _, _, copied, _ = tiered
    local_start = copied[-1].end_offset + 1
    with ProtocolClient(server.bootstrap_servers) as client:
        assert list_offset(client, -2)["offset"] == 0
        assert list_offset(client, -4)["offset"] == local_start
        assert list_offset(client, -5)["offset"] == copied[-1].end_offset
        assert list_offset(client, -1)["offset"] == RECORDS
        # Each spec at the version Kafka introduced it: earliest-local at v8, latest-tiered at v9.
        assert list_offset(client, -4, version=8)["offset"] == local_start
        assert list_offset(client, -4, version=7)["error_code"] == UNSUPPORTED_VERSION
        assert list_offset(client, -5, version=8)["error_code"] == UNSUPPORTED_VERSION
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    (future,) = admin.list_offsets({TopicPartition("t", 0): OffsetSpec.earliest()}).values()
    assert future.result(TIMEOUT_S).offset == 0
    consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "tiered"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("t", 0), timeout=TIMEOUT_S) == (0, RECORDS)
    finally:
        consumer.close()


def test_a_timestamp_held_only_by_the_remote_tier_finds_its_remote_offset(tiered, server):
    _, _, copied, _ = tiered
    remote_offset = copied[4].base_offset + 1
    local_offset = copied[-1].end_offset + 2
    consumer = Consumer({"bootstrap.servers": server.bootstrap_servers, "group.id": "tiered"})
    try:
        found = consumer.offsets_for_times([TopicPartition("t", 0, EVENT_MS + remote_offset)], timeout=TIMEOUT_S)
        assert [tp.offset for tp in found] == [remote_offset]
        found = consumer.offsets_for_times([TopicPartition("t", 0, EVENT_MS + local_offset)], timeout=TIMEOUT_S)
        assert [tp.offset for tp in found] == [local_offset]
    finally:
        consumer.close()
    with ProtocolClient(server.bootstrap_servers) as client:
        entry = list_offset(client, EVENT_MS + remote_offset)
        assert (entry["offset"], entry["timestamp"]) == (remote_offset, EVENT_MS + remote_offset)


def test_latest_tiered_is_minus_one_for_a_partition_with_nothing_tiered(tiered, server):
    log_dir, _, _, _ = tiered
    with ProtocolClient(server.bootstrap_servers) as client:
        response = client.send(ApiKey.CREATE_TOPICS, {"topics": [{
            "name": "local", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout_ms": 5000})
        assert response["topics"][0]["error_code"] == 0
        assert list_offset(client, -5, topic="local")["offset"] == -1
        assert list_offset(client, -2, topic="local")["offset"] == 0


def test_a_fetch_from_the_middle_of_a_remote_segment_starts_at_the_batch_holding_the_offset(tiered):
    log_dir, config, copied, _ = tiered
    segment = copied[3]
    middle = segment.base_offset + (segment.end_offset - segment.base_offset) // 2 + 1
    with Broker(log_dir, config, background=False) as broker:
        result = broker.fetch("t", 0, middle, max_bytes=1)
    (batch,) = list(iter_batches(result.records))  # max_bytes=1: the first batch whole, as Kafka serves it
    assert batch.header.base_offset == middle - middle % PER_BATCH <= middle <= batch.header.last_offset
    assert [r.value for r in result.decoded(middle)] == [value(i) for i in range(middle, batch.header.last_offset + 1)]
    assert result.log_start_offset == 0


def test_the_embedded_broker_answers_both_tiers_offsets(tiered):
    log_dir, config, copied, _ = tiered
    with Broker(log_dir, config, background=False) as broker:
        assert broker.list_offsets("t", 0, "earliest").offset == 0
        assert broker.list_offsets("t", 0, "earliest_local").offset == copied[-1].end_offset + 1
        assert broker.list_offsets("t", 0, "latest_tiered").offset == copied[-1].end_offset
    with Broker(log_dir, read_only=True) as reader:  # no remote tier named: the log's own offsets, local disk
        assert reader.list_offsets("t", 0, "earliest").offset == 0  # the log keeps its start across both tiers
        assert reader.list_offsets("t", 0, "earliest_local").offset == copied[-1].end_offset + 1
        assert reader.list_offsets("t", 0, "latest_tiered").offset == -1


def test_a_topic_without_remote_storage_is_never_read_from_the_remote_tier(tmp_path, s3_bucket):
    bucket, options = s3_bucket
    log_dir = str(tmp_path / "plain-logs")
    config = remote_config(bucket, options)
    write_topic(log_dir, "plain", config, topic_config={})
    copied = tier(log_dir, "plain", 0, bucket, options)  # its segments in the tier all the same
    local_start = copied[-1].end_offset + 1
    with Broker(log_dir, config, background=False) as broker:
        assert broker.list_offsets("plain", 0, "earliest").offset == local_start
        assert broker.list_offsets("plain", 0, "latest_tiered").offset == -1
        with pytest.raises(OffsetOutOfRangeError):
            broker.fetch("plain", 0, 0)
        assert broker.fetch("plain", 0, local_start).log_start_offset == local_start
        assert broker.describe_topic("plain").partitions[0].remote_log_start_offset is None


def test_disabling_remote_storage_with_incremental_alter_configs_is_refused_with_kafkas_message(server):
    admin = AdminClient({"bootstrap.servers": server.bootstrap_servers})
    resource = ConfigResource("topic", "t", incremental_configs=[
        ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as raised:
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Disabling remote storage feature on the topic level is not supported." in error.str()


def test_the_index_cache_stays_under_its_bound(tiered):
    log_dir, config, copied, options = tiered
    fs = s3fs.S3FileSystem(**options)
    root = config["remote.storage.url"].removeprefix("s3://")
    largest = max(fs.size(remote_tier.segment_object(root, m, ".index")) for m in copied)
    bound = largest * 5 // 2  # room for two indexes
    with Broker(log_dir, {**config, "remote.log.index.file.cache.total.size.bytes": bound},
                background=False) as broker:
        cache = broker.remote_log_reader.index_cache
        offset = 0
        while offset <= copied[-1].end_offset:
            result = broker.fetch("t", 0, offset, max_bytes=1)
            offset = list(iter_batches(result.records))[-1].header.next_offset
            assert cache.size_in_bytes <= bound
        index_sizes = [os.path.getsize(os.path.join(log_dir, DIR_NAME, n)) for n in os.listdir(
            os.path.join(log_dir, DIR_NAME))]
    assert largest > 0 and 0 < sum(index_sizes) <= bound
    assert 2 <= len(index_sizes) < len(copied)  # the least recently used were evicted


def test_a_missing_remote_object_answers_kafka_storage_error_naming_it_and_the_broker_serves_others(tiered):
    log_dir, config, copied, options = tiered
    fs = s3fs.S3FileSystem(**options)
    gone = copied[2]
    missing = remote_tier.segment_object(config["remote.storage.url"].removeprefix("s3://"), gone, ".log")
    fs.rm(missing)
    broker = BrokerProcess([log_dir], *[arg for k, v in config.items() for arg in ("--config", f"{k}={v}")])
    try:
        with ProtocolClient(broker.bootstrap) as client:
            failed = fetch_partition(client, "t", gone.base_offset)
            assert failed["error_code"] == KAFKA_STORAGE_ERROR
            assert not failed["records"]
            # The rest of the tier and local disk are still served.
            earlier = fetch_partition(client, "t", copied[1].base_offset)
            assert earlier["error_code"] == 0 and earlier["records"]
            local = fetch_partition(client, "t", copied[-1].end_offset + 1)
            assert local["error_code"] == 0 and local["records"]
    finally:
        assert broker.stop() == 0
    (logged,) = [line for line in broker.stderr_text.splitlines() if missing in line]
    assert "ERROR" in logged and f"segment {gone.base_offset}..{gone.end_offset}" in logged, broker.stderr_text


def test_topics_describe_shows_local_and_remote_log_start_offsets_and_sizes(tiered, capsys):
    log_dir, config, copied, _ = tiered
    settings = [arg for k, v in config.items() for arg in ("--broker-config", f"{k}={v}")]
    assert main(["topics", "describe", "--log-dir", log_dir, "--topic", "t", *settings]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "Partition: 0" in line]
    fields = dict(field.split(": ", 1) for field in line.strip().split("\t"))
    local_start = copied[-1].end_offset + 1
    assert fields["LogStartOffset"] == "0"
    assert fields["LocalLogStartOffset"] == str(local_start)
    assert fields["RemoteLogStartOffset"] == "0"
    assert fields["RemoteSize"] == str(sum(m.size_in_bytes for m in copied))
    assert fields["RemoteSegments"] == str(len(copied))
    assert fields["LogEndOffset"] == str(RECORDS)
    assert int(fields["Size"]) > 0 and fields["Segments"] == "3"
    # Without the tier named, describe shows no remote tier.
    assert main(["topics", "describe", "--log-dir", log_dir, "--topic", "t"]) == 0
    out = capsys.readouterr().out
    assert "LogStartOffset: 0" in out and "Remote" not in out  # the log's own start offset, both tiers


def test_topics_describe_over_bootstrap_shows_the_tier_offsets_that_log_dir_shows(tiered, server, capsys):
    log_dir, config, copied, _ = tiered

    def described(*how: str) -> dict[str, str]:
        assert main(["topics", "describe", *how, "--topic", "t"]) == 0
        (line,) = [line for line in capsys.readouterr().out.splitlines() if "Partition: 0" in line]
        return dict(field.split(": ", 1) for field in line.strip().split("\t"))

    over_bootstrap = described("--bootstrap", server.bootstrap_servers)
    from_log_dir = described("--log-dir", log_dir,
                             *[arg for k, v in config.items() for arg in ("--broker-config", f"{k}={v}")])
    tier_fields = ("LogStartOffset", "LocalLogStartOffset", "RemoteLogStartOffset", "LogEndOffset")
    assert {f: over_bootstrap[f] for f in tier_fields} == {f: from_log_dir[f] for f in tier_fields}
    assert over_bootstrap["LocalLogStartOffset"] == str(copied[-1].end_offset + 1)
    assert over_bootstrap["RemoteLogStartOffset"] == "0"
    # No Kafka API tells the remote tier's bytes and segments: left out, not made up.
    assert "RemoteSize" not in over_bootstrap and from_log_dir["RemoteSegments"] == str(len(copied))


def test_an_unreachable_remote_tier_fails_only_reads_of_the_tier(tiered):
    log_dir, _, copied, _ = tiered
    unreachable = {"remote.log.storage.system.enable": "true", "remote.storage.url": "s3://nowhere/tier",
                   "remote.storage.options.endpoint_url": "http://127.0.0.1:9",  # nothing listens there
                   "remote.storage.options.key": "k", "remote.storage.options.secret": "s"}
    local_start = copied[-1].end_offset + 1
    with Broker(log_dir, unreachable, background=False) as broker:
        local = broker.fetch("t", 0, local_start)
        assert [r.offset for r in local.decoded()][:1] == [local_start]
        assert local.log_start_offset == 0  # the log's own, kept across both tiers while the tier is unlisted
        with pytest.raises(KafkaStorageError, match="s3://nowhere/tier: cannot list"):
            broker.fetch("t", 0, 0)
        (described,) = broker.describe_topic("t").partitions
        assert described.local_log_start_offset == local_start and described.remote_segments is None
        broker.create_topic("new", 1)  # answered with its description


def test_an_unreachable_tier_is_listed_again_only_after_a_wait_from_when_the_last_listing_gave_up(caplog):
    """Giving up on an unreachable endpoint takes seconds (simulated time passes meanwhile, a minute here); every
    fetch asks for the log start offset, so until the wait is over a failed listing answers without listing
    again. The wait counts from when the listing gave up, and doubles with each failure in a row."""
    clock = MockTime()
    reader = RemoteLogReader(RemoteStorage("s3://nowhere/tier", {"endpoint_url": "http://127.0.0.1:9", "key": "k",
                                                                   "secret": "s"}),
                             lambda topic: "AAAAAAAAAAAAAAAAAAAAAA", None, clock, retry_backoff_max_ms=60_000)
    tp = LogPartition("t", 0)

    def listings() -> int:
        return sum("cannot list" in r.getMessage() for r in caplog.records)

    def fails(*, while_listing_ms: int = 0) -> None:
        done = threading.Event()

        def time_goes_by() -> None:  # while the endpoint is given up on
            while not done.wait(0.05):
                clock.sleep(while_listing_ms // 20)

        ticker = threading.Thread(target=time_goes_by)
        ticker.start()
        try:
            with pytest.raises(KafkaStorageError, match="s3://nowhere/tier: cannot list"):
                reader.segments(tp)
        finally:
            done.set()
            ticker.join()

    with caplog.at_level(logging.ERROR, logger="broker_core.log.remote.remote_log_reader"):
        fails(while_listing_ms=60_000)
        assert listings() == 1
        fails()  # at once after it gave up: not listed again
        assert listings() == 1
        clock.sleep(LISTING_TTL_MS)
        fails()  # the wait is over: listed again, and failed again
        assert listings() == 2
        clock.sleep(LISTING_TTL_MS)
        fails()  # the second failure in a row waits twice as long
        assert listings() == 2
        clock.sleep(LISTING_TTL_MS)
        fails()
        assert listings() == 3
