"""Zero-copy fetch under what can happen between planning a response and sending it: a segment deleted
(retention, DeleteRecords) or swapped by the cleaner, the file truncated, a reader that reads slowly (partial
sends) or goes away, a fetch that waits in the purgatory, a broker that shuts down. Each fetch here is sent
to a broker whose records go out from the segment files (``bytes_sent_from_files``) and compared with the
copying path's answer to the same request on the same log; descriptors are counted in /proc/self/fd."""

from __future__ import annotations

import logging
import os
import socket
import time

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey, encode_request
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch
from recording_proxy_kit import replay
from server_kit import create_topic, produce, read_exactly, start_broker

TOPIC = "planned"
SEGMENT_BYTES = 2 * 1024 * 1024
BATCH_RECORDS = 20
VALUE_BYTES = 2000
TIMEOUT_S = 10
# The broker's send buffer kept small, so the kernel holds little of an answer: the rest waits in the broker.
SMALL_SEND_BUFFER = {"socket.send.buffer.bytes": 16 * 1024}


def _fill(port: int, batches: int, configs: dict | None = None, keys: int | None = None) -> None:
    with ProtocolClient(f"127.0.0.1:{port}") as client:
        create_topic(client, TOPIC, 1, {"segment.bytes": str(SEGMENT_BYTES), "file.delete.delay.ms": "0",
                                        **(configs or {})})
        for b in range(batches):
            records = [SimpleRecord(os.urandom(VALUE_BYTES // 2).hex().encode(),
                                    f"key-{(b * BATCH_RECORDS + i) % keys if keys else b * BATCH_RECORDS + i}".encode())
                       for i in range(BATCH_RECORDS)]
            assert produce(client, TOPIC, 0, build_batch(records))["error_code"] == 0


def _fetch(offset: int, correlation_id: int = 1, max_bytes: int = 8 * 1024 * 1024, min_bytes: int = 0,
           max_wait_ms: int = 0) -> bytes:
    return encode_request(ApiKey.FETCH, 12, correlation_id, "zero-copy-test", {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                     "partition_max_bytes": max_bytes, "current_leader_epoch": -1,
                                                     "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def _slow_reader(port: int) -> socket.socket:
    """A connection that takes bytes only as fast as the test reads them."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(TIMEOUT_S)
    sock.connect(("127.0.0.1", port))
    return sock


def _segment_descriptors(log_dir) -> int:
    """Descriptors this process holds on the log dir's segment files (open, renamed or deleted)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(log_dir)) and ".log" in target:
            count += 1
    return count


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _copying_answers(log_dir, requests: list[bytes]) -> list[bytes]:
    server = start_broker(log_dir, **{"fetch.zero.copy.enable": False})
    try:
        return replay(server.bound_port(), requests)
    finally:
        server.shutdown()


@pytest.fixture()
def filled(tmp_path):
    """A log dir holding a few segments of TOPIC-0, written by a broker since shut down."""
    log_dir = tmp_path / "logs"
    server = start_broker(log_dir)
    try:
        _fill(server.bound_port(), batches=150)  # about 6 MiB: three segments
    finally:
        server.shutdown()
    return log_dir


def _started_mid_transfer(log_dir, request: bytes, expected: bytes):
    """A zero-copy broker over ``log_dir`` that already served ``request`` once (so its bytes are CRC-checked),
    and a slow reader that has asked again and read only the start of the answer."""
    server = start_broker(log_dir, **SMALL_SEND_BUFFER)
    assert replay(server.bound_port(), [request]) == [expected]  # the first serve reads and checks the bytes
    sent_before = server.socket_server.bytes_sent_from_files
    reader = _slow_reader(server.bound_port())
    reader.sendall(request)
    head = read_exactly(reader, 64 * 1024)
    _wait_for(lambda: server.socket_server.bytes_sent_from_files > sent_before, "the send from the file to start")
    # Still mid-transfer: most of the answer is on neither side of the connection yet.
    assert server.socket_server.bytes_sent_from_files - sent_before < len(expected) // 2
    return server, reader, head


def _rest(reader: socket.socket, head: bytes, total: int) -> bytes:
    out = bytearray(head)
    while len(out) < total:
        chunk = reader.recv(min(64 * 1024, total - len(out)))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def test_a_segment_deleted_under_a_planned_fetch_is_sent_as_it_was(filled):
    request = _fetch(0)
    (expected,) = _copying_answers(filled, [request])
    server, reader, head = _started_mid_transfer(filled, request, expected)
    try:
        lg = server.broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        first = lg.segments[0]
        lg.maybe_increment_log_start_offset(lg.segments[1].base_offset, "records deleted")
        assert lg.delete_log_start_offset_breached_segments() == 1
        _wait_for(lambda: not any(name.startswith(os.path.basename(first.log.path).split(".")[0])
                                  for name in os.listdir(os.path.dirname(first.log.path))),
                  "the segment's files to be deleted")
        assert _rest(reader, head, len(expected) + 4) == expected_frame(expected)
    finally:
        reader.close()
        server.shutdown()


def expected_frame(answer: bytes) -> bytes:
    return len(answer).to_bytes(4, "big") + answer


def test_a_segment_the_cleaner_swaps_under_a_planned_fetch_is_sent_as_it_was(tmp_path):
    log_dir = tmp_path / "logs"
    server = start_broker(log_dir)
    try:
        # Cleaned only when the test says so (a ratio never exceeded): the fetch is planned on the log as written.
        _fill(server.bound_port(), batches=150, configs={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "1"},
              keys=50)
    finally:
        server.shutdown()
    request = _fetch(0)
    (expected,) = _copying_answers(log_dir, [request])
    server, reader, head = _started_mid_transfer(log_dir, request, expected)
    try:
        lg = server.broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        first = lg.segments[0]
        assert server.broker.log_manager.cleaner.clean_filthiest_log(force=True) is not None
        assert first not in lg.segments  # swapped for its cleaned successor
        _wait_for(lambda: not os.path.exists(first.log.path), "the replaced segment to be deleted")
        assert _rest(reader, head, len(expected) + 4) == expected_frame(expected)
        assert replay(server.bound_port(), [request]) != [expected]  # a fetch planned now gets the cleaned log
    finally:
        reader.close()
        server.shutdown()


def test_a_slow_reader_gets_the_whole_answer_in_many_partial_sends(filled):
    requests = [_fetch(0, 1), _fetch(1000, 2), _fetch(2000, 3)]
    expected = _copying_answers(filled, requests)
    server = start_broker(filled, **SMALL_SEND_BUFFER)
    try:
        replay(server.bound_port(), requests)  # the first serve checks the bytes
        sent_before = server.socket_server.bytes_sent_from_files
        reader = _slow_reader(server.bound_port())
        with reader:
            for request, answer in zip(requests, expected):
                reader.sendall(request)
                got = bytearray()
                while len(got) < len(answer) + 4:
                    got += reader.recv(4096)  # small reads: the broker's sends stop and resume many times
                assert bytes(got) == expected_frame(answer)
        assert server.socket_server.bytes_sent_from_files - sent_before > sum(map(len, expected)) * 0.9
    finally:
        server.shutdown()


def test_a_connection_closed_mid_transfer_leaks_no_descriptor_and_others_are_served(filled):
    request = _fetch(0)
    (expected,) = _copying_answers(filled, [request])
    server, reader, _ = _started_mid_transfer(filled, request, expected)
    try:
        reader.close()
        assert replay(server.bound_port(), [request]) == [expected]  # another client is served meanwhile
        _wait_for(lambda: server.socket_server.connection_count == 0, "the closed connection to be dropped")
        lg = server.broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        # Left: the file handle cache's own descriptors, at most one per segment file.
        _wait_for(lambda: _segment_descriptors(filled) <= len(lg.segments), "the slice's descriptor to be closed")
    finally:
        server.shutdown()
    assert _segment_descriptors(filled) == 0


def test_truncation_under_a_planned_send_closes_only_that_connection(tmp_path, caplog):
    log_dir = tmp_path / "logs"
    server = start_broker(log_dir, **SMALL_SEND_BUFFER)
    try:
        _fill(server.bound_port(), batches=60)  # one segment, the active one, about 2.4 MiB
        request = _fetch(0)
        (expected,) = replay(server.bound_port(), [request])
        reader = _slow_reader(server.bound_port())
        reader.sendall(request)
        head = read_exactly(reader, 64 * 1024)
        _wait_for(lambda: server.socket_server.bytes_sent_from_files > len(expected), "the send from the file")
        lg = server.broker.log_manager.get_log(TopicPartition(TOPIC, 0))
        path = lg.segments[0].log.path
        with caplog.at_level(logging.ERROR, logger="broker_core.network.processor"):
            assert lg.truncate_to(100)
            got = _rest(reader, head, len(expected) + 4)
            assert len(got) < len(expected) + 4  # the connection closed before the answer was whole
            reader.close()
        assert any(path in r.getMessage() and "position 0" in r.getMessage() for r in caplog.records), caplog.text
        (after,) = replay(server.bound_port(), [request])  # other connections are served, from the shorter log
        assert len(after) < len(expected)
    finally:
        server.shutdown()
    assert _segment_descriptors(log_dir) == 0


def test_a_parked_fetch_releases_the_descriptors_of_its_first_read(filled):
    server = start_broker(filled)
    try:
        active = server.broker.log_manager.get_log(TopicPartition(TOPIC, 0)).active_segment.base_offset
        replay(server.bound_port(), [_fetch(active)])  # checks the bytes: the next reads are slices
        before = _segment_descriptors(filled)
        sent_before = server.socket_server.bytes_sent_from_files
        asked = time.monotonic()
        (answer,) = replay(server.bound_port(), [_fetch(active, min_bytes=64 * 1024 * 1024, max_wait_ms=300)])
        assert time.monotonic() - asked >= 0.25  # it waited in the purgatory
        assert len(answer) > SEGMENT_BYTES // 2
        assert server.socket_server.bytes_sent_from_files - sent_before > SEGMENT_BYTES // 2
        assert _segment_descriptors(filled) == before
    finally:
        server.shutdown()


def test_broker_shutdown_releases_the_descriptors_of_responses_being_sent(filled):
    request = _fetch(0)
    (expected,) = _copying_answers(filled, [request])
    server, reader, _ = _started_mid_transfer(filled, request, expected)
    with reader:
        server.shutdown(timeout_ms=200)
    assert _segment_descriptors(filled) == 0


def test_a_parked_fetch_whose_client_went_away_releases_its_descriptors(filled):
    server = start_broker(filled)
    try:
        active = server.broker.log_manager.get_log(TopicPartition(TOPIC, 0)).active_segment.base_offset
        replay(server.bound_port(), [_fetch(active)])  # checks the bytes: the next reads are slices
        before = _segment_descriptors(filled)
        purgatory = server.apis.fetch_purgatory
        with socket.create_connection(("127.0.0.1", server.bound_port()), timeout=TIMEOUT_S) as gone:
            gone.sendall(_fetch(active, min_bytes=64 * 1024 * 1024, max_wait_ms=500))  # parks, then reads again
            _wait_for(lambda: purgatory.num_delayed() == 1, "the fetch to park")
        _wait_for(lambda: purgatory.num_delayed() == 0, "the parked fetch to complete")
        _wait_for(lambda: server.socket_server.connection_count == 0, "the connection to be dropped")
        _wait_for(lambda: _segment_descriptors(filled) == before, "the answer's descriptors to be closed")
    finally:
        server.shutdown()
