"""CompactionLease and ReplaceSegments over a real socket: an outside job leases a compacted
partition, writes a cleaned segment beside the live ones, has the running broker swap it in,
and a Kafka client reads the cleaned log; errors, ApiVersions and malformed requests."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from broker_core.client.protocol_client import ProtocolClient
from broker_core.config import LogConfig
from broker_core.log.cleaner.cleaner import new_cleaned_segment
from broker_core.log.cleaner.log_cleaner_manager import Paused
from broker_core.protocol import ApiKey, SeglogApiKey, encode_request
from broker_core.protocol.messages.compaction import ACQUIRE, RELEASE, RENEW
from format import layout
from format.checkpoint import OffsetCheckpointFile
from format.file_records import FileRecords
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

from server_kit import create_topic, produce


UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_MEMBER_ID = 25
INVALID_REQUEST = 42
CONCURRENT_TRANSACTIONS = 51
TIMEOUT_S = 20
# Segments of a few batches; the broker's own cleaner never finds the topic dirty enough.
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "1.0"}
TABLE0 = TopicPartition("table", 0)


@pytest.fixture()
def client(broker_server):
    with ProtocolClient(broker_server.bootstrap_servers) as c:
        yield c


def produce_keyed(client: ProtocolClient, key: bytes, value: bytes) -> int:
    """One record to table-0; its offset."""
    result = produce(client, "table", 0, build_batch([SimpleRecord(value, key, 1_700_000_000_000)]))
    assert result["error_code"] == 0
    return result["base_offset"]


def key_of(i: int) -> bytes:
    # Every fourth record has a key of its own (it survives compaction); the rest share five keys.
    return b"u%d" % i if i % 4 == 0 else b"k%d" % (i % 5)


def fill(client: ProtocolClient, n: int = 60) -> list[tuple[int, bytes, bytes]]:
    return [(produce_keyed(client, key_of(i), b"value-%d" % i), key_of(i), b"value-%d" % i) for i in range(n)]


def lease(client: ProtocolClient, lease_id: str, operation: int, topics: dict[str, list[int]] | None = None,
          lease_ms: int = 60_000) -> dict:
    return client.send(SeglogApiKey.COMPACTION_LEASE, {
        "lease_id": lease_id, "operation": operation, "lease_ms": lease_ms,
        "topics": [{"name": name, "partitions": parts} for name, parts in (topics or {}).items()]}, version=0)


def replace(client: ProtocolClient, lease_id: str, partition: int, through: int,
            groups: list[list[int]]) -> dict:
    response = client.send(SeglogApiKey.REPLACE_SEGMENTS, {"lease_id": lease_id, "topics": [{
        "name": "table", "partitions": [{
            "partition_index": partition, "cleaned_through_offset": through,
            "segments": [{"base_offset": g[0], "replaced_base_offsets": g} for g in groups]}]}]}, version=0)
    (topic,) = response["topics"]
    assert topic["name"] == "table"
    (result,) = topic["partitions"]
    return result


def segment_bases(partition_dir: str) -> list[int]:
    """The live segments' base offsets, from the directory listing, as the job sees them."""
    return sorted(layout.offset_from_file_name(n) for n in os.listdir(partition_dir)
                  if n.endswith(layout.LOG_FILE_SUFFIX))


def write_cleaned(partition_dir: str, group: list[int], keep: set[int]) -> None:
    """What the job writes: one cleaned segment holding the kept batches of ``group``'s segments."""
    dest = new_cleaned_segment(partition_dir, group[0], LogConfig())
    for base in group:
        records = FileRecords.open(os.path.join(partition_dir, layout.log_file_name(base)), writable=False)
        try:
            for batch in records.batches():
                if batch.header.base_offset in keep:
                    dest.append(bytes(batch))
        finally:
            records.close()
    dest.on_becoming_inactive_segment()
    dest.flush()
    dest.close()


def survivors(records, below: int) -> set[int]:
    latest = {}
    for offset, key, _ in records:
        latest[key] = offset
    return {o for o in latest.values() if o < below}


def consume(bootstrap: str, count: int) -> list[tuple[int, bytes, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=10_000, fetch_max_wait_ms=100)
    try:
        tp = KafkaTopicPartition("table", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                got.extend((r.offset, r.key, r.value) for r in batch)
        return got
    finally:
        consumer.close()


class RacingReader(threading.Thread):
    """Fetches the partition from offset 0 over and over, checking each answer whole."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.reads = 0
        self.failures: list[str] = []

    def run(self) -> None:
        with ProtocolClient(self.bootstrap) as c:
            while not self.stop.is_set():
                try:
                    response = c.send(ApiKey.FETCH, {
                        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                        "isolation_level": 0, "forgotten_topics_data": [], "topics": [{"topic": "table", "partitions": [
                            {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
                    part = response["responses"][0]["partitions"][0]
                    offsets = [r.offset for b in iter_batches(bytes(part["records"] or b"")) for r in b.records()]
                    if part["error_code"] != 0 or not offsets or offsets != sorted(set(offsets)):
                        self.failures.append(f"error {part['error_code']}, offsets {offsets[:5]}...")
                    self.reads += 1
                except Exception as exc:  # a dropped connection or an unreadable answer
                    self.failures.append(repr(exc))
                    return


# --- the job's round trip ------------------------------------------------------------------


def test_a_job_swaps_its_cleaned_segments_into_a_running_broker_and_consumers_read_them(broker_server, client):
    create_topic(client, "table", 1, COMPACTED)
    records = fill(client)
    acquired = lease(client, "job-1", ACQUIRE, {"table": [0]})
    log_dir = broker_server.broker.log_manager.log_dirs[0]
    assert acquired == {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": [
        {"name": "table", "partitions": [
            {"partition_index": 0, "error_code": 0, "error_message": None, "log_dir": log_dir}]}]}
    assert broker_server.broker.log_manager.cleaner.manager.state(TABLE0) == Paused(1)

    partition_dir = os.path.join(acquired["topics"][0]["partitions"][0]["log_dir"], "table-0")
    bases = segment_bases(partition_dir)
    assert len(bases) >= 5
    group, end = bases[:3], bases[3]
    keep = survivors(records, end)
    assert 0 < len(keep) < end
    write_cleaned(partition_dir, group, keep)

    reader = RacingReader(broker_server.bootstrap_servers)
    reader.start()
    try:
        while reader.reads < 3 and not reader.failures:
            time.sleep(0.01)
        result = replace(client, "job-1", 0, end, [group])
        seen = reader.reads
        while reader.reads < seen + 3 and not reader.failures:
            time.sleep(0.01)
    finally:
        reader.stop.set()
        reader.join(TIMEOUT_S)
    assert result == {"partition_index": 0, "error_code": 0, "error_message": None}
    assert reader.failures == []

    expected = [r for r in records if r[0] >= end or r[0] in keep]
    assert consume(broker_server.bootstrap_servers, len(expected)) == expected
    assert segment_bases(partition_dir)[:2] == [group[0], end]
    assert not [n for n in os.listdir(partition_dir) if n.endswith(layout.CLEANED_FILE_SUFFIX)]
    checkpoint = OffsetCheckpointFile(os.path.join(log_dir, layout.CLEANER_OFFSET_CHECKPOINT_FILE)).read()
    assert checkpoint[TABLE0] == end

    # The log goes on: a new record lands after the last one and is read back with the rest.
    offset = produce_keyed(client, b"after", b"the swap")
    assert offset == records[-1][0] + 1
    assert consume(broker_server.bootstrap_servers, len(expected) + 1) == expected + [(offset, b"after", b"the swap")]

    # The lease outlives the swap until the job lets it go.
    assert broker_server.broker.compaction_leases.holder(TABLE0) == "job-1"
    released = lease(client, "job-1", RELEASE)
    assert released["error_code"] == 0 and released["topics"][0]["partitions"][0]["log_dir"] == log_dir
    assert broker_server.broker.log_manager.cleaner.manager.state(TABLE0) is None


def test_a_swap_that_names_the_active_segment_is_refused_and_changes_nothing(broker_server, client):
    create_topic(client, "table", 1, COMPACTED)
    records = fill(client, 30)
    acquired = lease(client, "job-1", ACQUIRE, {"table": [0]})
    partition_dir = os.path.join(acquired["topics"][0]["partitions"][0]["log_dir"], "table-0")
    bases = segment_bases(partition_dir)
    write_cleaned(partition_dir, bases[-2:-1], set(range(bases[-1])))
    result = replace(client, "job-1", 0, bases[-1], [bases[-2:]])
    assert result["error_code"] == INVALID_REQUEST
    assert f"segment {bases[-1]} is the active segment" in result["error_message"]
    missing = replace(client, "job-1", 0, bases[1], [[bases[0]]])
    assert missing["error_code"] == INVALID_REQUEST and "does not exist" in missing["error_message"]
    assert segment_bases(partition_dir) == bases
    assert consume(broker_server.bootstrap_servers, len(records)) == records


# --- errors over the wire ---------------------------------------------------------------------


def test_an_acquire_conflicting_with_another_lease_leases_nothing(client, broker_server):
    create_topic(client, "table", 2, COMPACTED)
    assert lease(client, "job-1", ACQUIRE, {"table": [1]})["error_code"] == 0
    refused = lease(client, "job-2", ACQUIRE, {"table": [0, 1]})
    assert refused["error_code"] == CONCURRENT_TRANSACTIONS
    assert "'job-1'" in refused["error_message"]
    p0, p1 = refused["topics"][0]["partitions"]
    assert (p0["partition_index"], p0["error_code"], p0["error_message"], p0["log_dir"]) == (0, 0, None, "")
    assert (p1["partition_index"], p1["error_code"], p1["log_dir"]) == (1, CONCURRENT_TRANSACTIONS, "")
    assert "held by compaction lease 'job-1'" in p1["error_message"]
    assert broker_server.broker.compaction_leases.holder(TopicPartition("table", 0)) is None
    assert broker_server.broker.log_manager.cleaner.manager.state(TopicPartition("table", 0)) is None


def test_an_acquire_of_an_unknown_or_uncompacted_partition_names_the_first_error(client):
    create_topic(client, "table", 1, COMPACTED)
    create_topic(client, "events", 1, {"cleanup.policy": "delete"})
    refused = lease(client, "job-1", ACQUIRE, {"table": [0, 4], "events": [0]})
    assert refused["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    codes = [(t["name"], p["partition_index"], p["error_code"]) for t in refused["topics"] for p in t["partitions"]]
    assert codes == [("table", 0, 0), ("table", 4, UNKNOWN_TOPIC_OR_PARTITION), ("events", 0, INVALID_REQUEST)]
    assert "cleanup.policy" in refused["topics"][1]["partitions"][0]["error_message"]
    assert lease(client, "job-1", RENEW)["error_code"] == UNKNOWN_MEMBER_ID


def test_an_unknown_lease_gets_unknown_member_id_from_each_call(client):
    create_topic(client, "table", 1, COMPACTED)
    for operation in (RENEW, RELEASE):
        answer = lease(client, "nobody", operation)
        assert answer["error_code"] == UNKNOWN_MEMBER_ID and "'nobody'" in answer["error_message"]
        assert answer["topics"] == []
    result = replace(client, "nobody", 0, 0, [[0]])
    assert result["error_code"] == UNKNOWN_MEMBER_ID and "'nobody'" in result["error_message"]
    assert lease(client, "job", 7)["error_code"] == INVALID_REQUEST


def test_renew_keeps_the_lease_and_a_lapsed_lease_resumes_cleaning_on_the_broker_clock(client, broker_server):
    create_topic(client, "table", 1, COMPACTED)
    assert lease(client, "job-1", ACQUIRE, {"table": [0]}, lease_ms=60_000)["error_code"] == 0
    renewed = lease(client, "job-1", RENEW, lease_ms=200)
    assert renewed["error_code"] == 0 and renewed["topics"][0]["partitions"][0]["partition_index"] == 0
    manager = broker_server.broker.log_manager.cleaner.manager
    deadline = time.monotonic() + TIMEOUT_S
    # No lease call from here on: the broker's scheduler expires the lease by itself.
    while manager.state(TABLE0) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert manager.state(TABLE0) is None
    assert lease(client, "job-1", RELEASE)["error_code"] == UNKNOWN_MEMBER_ID


# --- what Kafka clients see, and bad requests ---------------------------------------------------


def test_api_versions_never_lists_the_seglog_admin_apis(client):
    assert ApiKey.PRODUCE in client.broker_versions
    assert 32000 not in client.broker_versions and 32001 not in client.broker_versions
    assert all(key < 1000 for key in client.broker_versions)


def _closes(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("name", ["truncated", "version 1"])
def test_a_malformed_admin_request_closes_its_connection_and_the_broker_serves_on(broker_server, client, name):
    create_topic(client, "table", 1, COMPACTED)
    if name == "truncated":
        frame = encode_request(SeglogApiKey.COMPACTION_LEASE, 0, 5, "bad", {
            "lease_id": "x", "operation": ACQUIRE, "lease_ms": 1000, "topics": [{"name": "table", "partitions": [0]}]})
        payload = frame[4:-6]
    else:
        payload = struct.pack(">hhi", SeglogApiKey.REPLACE_SEGMENTS, 1, 5) + b"\x00\x03bad\x00" + b"\x00" * 10
    with socket.create_connection(("127.0.0.1", broker_server.bound_port()), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert _closes(sock)
    assert broker_server.broker.compaction_leases.holder(TABLE0) is None
    assert lease(client, "job-1", ACQUIRE, {"table": [0]})["error_code"] == 0
    with ProtocolClient(broker_server.bootstrap_servers) as other:
        assert lease(other, "job-1", RELEASE)["error_code"] == 0
