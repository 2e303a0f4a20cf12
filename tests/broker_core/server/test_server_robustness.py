"""The broker against broken and hostile clients: garbage, bad frames, unknown APIs, slow and vanishing peers.

Every test starts a broker with a *witness* beside the abuse: a confluent-kafka
producer and consumer on their own topic, sending and reading a record every
few milliseconds for as long as the test runs. Whatever the abusive socket
gets — an error response or a closed connection — the witness must not
notice: no error report, no reconnect, every record it sent acknowledged at
the offset of its sequence number and read back in order. At the end a fresh
kafka-python client produces and consumes, the broker's network and request
threads are alive, and nothing in the broker logged an error (a parser or
handler exception would).

Raw sockets go to 127.0.0.1 with timeouts, and every loop is bounded.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import SUPPORTED_VERSIONS, ApiKey, encode_request, parse_response
from broker_core.server.broker_server import BrokerServer
from format.record import SimpleRecord
from format.record_batch import build_batch

from server_kit import create_topic, read_frame, start_broker

pytestmark = pytest.mark.slow

TIMEOUT_S = 10
# How long a socket that should get nothing is watched before the test moves on.
QUIET_S = 0.5
UNSUPPORTED_VERSION = 35
WITNESS_TOPIC = "witness"
FRESH_TOPIC = "fresh"
ABUSED_TOPIC = "abused"
_SIZE = struct.Struct(">i")
# The correlation id of the ApiVersions request sent after an abusive frame:
# its answer shows the connection was still served after the frame.
PROBE_ID = 424242
PROBE = encode_request(ApiKey.API_VERSIONS, 0, PROBE_ID, "probe", {})


# --- the witness --------------------------------------------------------------------


class Witness(threading.Thread):
    """A producer and a consumer (confluent-kafka) kept busy on one partition while a test runs.

    Record ``i`` carries ``i`` as its value; it must be acknowledged at offset
    ``i`` and read back as the ``i``-th record. Anything else — a delivery
    error, an error callback, a record out of place, a reconnect reported by
    librdkafka's statistics — is a problem.
    """

    def __init__(self, bootstrap: str, topic: str, interval_s: float = 0.005) -> None:
        super().__init__(name="witness", daemon=True)
        self.topic = topic
        self.interval_s = interval_s
        self.problems: list[str] = []
        self.sent = 0
        self.acked = 0
        self.consumed = 0
        self.stats: dict[str, dict] = {}
        self.stats_reports = 0
        self._stop_event = threading.Event()
        common = {"bootstrap.servers": bootstrap, "statistics.interval.ms": 100, "stats_cb": self._on_stats}
        self.producer = Producer({**common, "acks": "all", "linger.ms": 0, "message.timeout.ms": 30_000,
                                  "error_cb": lambda e: self.problems.append(f"producer error: {e}")})
        self.consumer = Consumer({**common, "group.id": "witness", "enable.auto.commit": False,
                                  "fetch.wait.max.ms": 50, "enable.partition.eof": False,
                                  "error_cb": lambda e: self.problems.append(f"consumer error: {e}")})
        self.consumer.assign([ConfluentTopicPartition(topic, 0, 0)])

    def _on_stats(self, text: str) -> None:
        report = json.loads(text)
        self.stats[report["type"]] = report["brokers"]
        self.stats_reports += 1

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            self.problems.append(f"delivery failed: {err}")
            return
        seq = int(msg.value())
        if msg.offset() != seq:
            self.problems.append(f"record {seq} acknowledged at offset {msg.offset()}")
        self.acked += 1

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.producer.produce(self.topic, str(self.sent).encode(), partition=0, on_delivery=self._on_delivery)
            self.sent += 1
            self.producer.poll(0)
            for msg in self.consumer.consume(100, self.interval_s):
                if msg.error() is not None:
                    self.problems.append(f"consume error: {msg.error()}")
                elif int(msg.value()) != self.consumed or msg.offset() != self.consumed:
                    self.problems.append(f"read {msg.value()!r} at offset {msg.offset()}, expected record "
                                         f"{self.consumed}")
                    self.consumed = int(msg.value()) + 1
                else:
                    self.consumed += 1
        self.producer.flush(TIMEOUT_S)

    def wait_until_flowing(self, records: int = 20) -> None:
        """Block until ``records`` more records went through, produced and consumed, since the call."""
        target = self.sent + records
        deadline = time.monotonic() + TIMEOUT_S
        while self.consumed < target and time.monotonic() < deadline and not self.problems:
            time.sleep(0.01)
        assert not self.problems, self.problems
        assert self.consumed >= target, (f"the witness stalled: {self.consumed} records read, {self.acked} "
                                         f"acknowledged, {self.sent} sent; waiting for {target}")

    def assert_unaffected(self) -> None:
        """Records still flow, and nothing went wrong since the start (reconnects included)."""
        self.wait_until_flowing()
        # Statistics arrive every 100 ms: wait for two fresh reports so a late reconnect shows.
        seen = self.stats_reports
        deadline = time.monotonic() + TIMEOUT_S
        while self.stats_reports < seen + 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        for client, brokers in self.stats.items():
            for name, broker in brokers.items():
                if broker.get("source") == "logical":
                    # The consumer's group coordinator connection: with assign() and no commits it
                    # carries nothing, so connections.max.idle.ms closes it, as a Kafka broker does.
                    continue
                assert broker["disconnects"] == 0, f"the witness {client} lost its connection to {name}"
        assert not self.problems, self.problems

    def stop(self) -> None:
        self._stop_event.set()
        if self.is_alive():
            self.join(TIMEOUT_S)
        self.consumer.close()
        self.producer.close()


# --- a broker with a witness --------------------------------------------------------


@dataclass
class Served:
    server: BrokerServer
    witness: Witness
    caplog: pytest.LogCaptureFixture

    @property
    def port(self) -> int:
        return self.server.bound_port()

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap_servers

    def connect(self, **options: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        for option, value in options.items():
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, option), value)
        sock.settimeout(TIMEOUT_S)
        sock.connect(("127.0.0.1", self.port))
        return sock

    def wait_for_connections(self, count: int) -> None:
        wait_for_connections(self.server, count)

    def assert_unharmed(self) -> None:
        """The witness never noticed, a new client works, every thread is alive, no error was logged."""
        self.witness.assert_unaffected()
        round_trip_with_a_fresh_client(self.bootstrap)
        socket_server = self.server.socket_server
        assert all(p.is_alive() for p in socket_server.processors)
        assert all(a.is_alive() for a in socket_server.acceptors)
        assert all(t.is_alive() for t in self.server._handler_pool.threads)
        errors = [r.getMessage() for r in self.caplog.records
                  if r.name.startswith("broker_core") and r.levelno >= logging.ERROR]
        assert not errors, errors


def wait_for_connections(server: BrokerServer, count: int) -> None:
    """Block until the broker holds exactly ``count`` connections."""
    deadline = time.monotonic() + TIMEOUT_S
    while server.socket_server.connection_count != count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.socket_server.connection_count == count


def create_topics(bootstrap: str, *names: str, partitions: int = 1) -> None:
    with ProtocolClient(bootstrap, timeout_s=TIMEOUT_S) as client:
        for name in names:
            create_topic(client, name, partitions)


def round_trip_with_a_fresh_client(bootstrap: str) -> None:
    """A kafka-python producer writes a record and a kafka-python consumer reads it back."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=TIMEOUT_S * 1000,
                             max_block_ms=TIMEOUT_S * 1000)
    try:
        value = b"after the abuse %d" % time.monotonic_ns()
        sent = producer.send(FRESH_TOPIC, value=value, partition=0).get(timeout=TIMEOUT_S)
    finally:
        producer.close(timeout=TIMEOUT_S)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             request_timeout_ms=TIMEOUT_S * 1000, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(FRESH_TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, sent.offset)
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while not got and time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=200).get(tp, [])
        assert [r.value for r in got[:1]] == [value]
    finally:
        consumer.close()


@pytest.fixture()
def serve(tmp_path, caplog) -> Callable[..., Served]:
    """``serve(**broker settings)``: a started broker with a running witness; both stopped afterwards."""
    started: list[Served] = []

    def start(**props) -> Served:
        server = start_broker(tmp_path / "logs", **props)
        try:
            create_topics(server.bootstrap_servers, WITNESS_TOPIC, FRESH_TOPIC, ABUSED_TOPIC)
            # So that the connections the broker counts from here on are the witness's.
            wait_for_connections(server, 0)
            witness = Witness(server.bootstrap_servers, WITNESS_TOPIC)
        except BaseException:
            server.shutdown(timeout_ms=10_000)
            raise
        served = Served(server, witness, caplog)
        started.append(served)
        witness.start()
        witness.wait_until_flowing()
        return served

    yield start
    for served in started:
        served.witness.stop()
        served.server.shutdown(timeout_ms=10_000)


# --- raw frames and what comes back ----------------------------------------------------------


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def raw_request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A request frame with a v1 header (key, version, correlation id, client id) and ``body`` as given."""
    return frame(struct.pack(">hhih", api_key, version, correlation_id, 3) + b"raw" + body)




def correlation_id_of(response: bytes) -> int:
    return _SIZE.unpack_from(response)[0]


def closed_by_broker(sock: socket.socket, within_s: float = TIMEOUT_S) -> bool:
    """True when the broker closes ``sock`` (end of stream or reset) within ``within_s``, unread bytes skipped."""
    sock.settimeout(within_s)
    deadline = time.monotonic() + within_s
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def silent(sock: socket.socket, for_s: float = QUIET_S) -> bool:
    """True when nothing arrives on ``sock`` and it stays open for ``for_s``."""
    sock.settimeout(for_s)
    try:
        sock.recv(1)
    except socket.timeout:
        return True
    return False


def outcome_with_probe(sock: socket.socket) -> str:
    """After an abusive frame and PROBE were sent: "closed", or "answered" when PROBE got its answer.

    Any answers before PROBE's (to the abusive frame, if it was a request after
    all) are skipped. The broker answers in request order and one at a time,
    so PROBE answered means the abusive frame was dealt with first.
    """
    try:
        for _ in range(3):
            if correlation_id_of(read_frame(sock)) == PROBE_ID:
                return "answered"
    except (ConnectionError, ConnectionResetError):
        return "closed"
    raise AssertionError("PROBE was not answered after three responses")


def api_versions_v3() -> bytes:
    return encode_request(ApiKey.API_VERSIONS, 3, 1, "abuser", {"client_software_name": "abuser",
                                                                 "client_software_version": "1.0"})


def valid_requests() -> dict[str, bytes]:
    """One request frame of each kind a client sends most, all about ABUSED_TOPIC."""
    records = build_batch([SimpleRecord(b"value-%d" % i, b"key", 1_700_000_000_000 + i) for i in range(5)])
    return {
        "ApiVersions v3": api_versions_v3(),
        "Metadata v12": encode_request(ApiKey.METADATA, 12, 2, "abuser", {
            "topics": [{"name": ABUSED_TOPIC}], "allow_auto_topic_creation": False}),
        "Metadata v1": encode_request(ApiKey.METADATA, 1, 3, "abuser", {"topics": [{"name": ABUSED_TOPIC}]}),
        "Produce v9": encode_request(ApiKey.PRODUCE, 9, 4, "abuser", {
            "transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": ABUSED_TOPIC, "partition_data": [{"index": 0, "records": records}]}]}),
        "Produce v3": encode_request(ApiKey.PRODUCE, 3, 5, "abuser", {
            "transactional_id": None, "acks": 1, "timeout_ms": 1000,
            "topic_data": [{"name": ABUSED_TOPIC, "partition_data": [{"index": 0, "records": records}]}]}),
        "Fetch v12": encode_request(ApiKey.FETCH, 12, 6, "abuser", {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "topics": [{"topic": ABUSED_TOPIC, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": []}),
        "ListOffsets v7": encode_request(ApiKey.LIST_OFFSETS, 7, 7, "abuser", {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": ABUSED_TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
    }


# --- garbage ------------------------------------------------------------------------------


def test_random_bytes_close_the_connection_or_wait_for_the_rest_of_the_frame(serve):
    served = serve(**{"socket.request.max.bytes": 1 << 20})
    rng = random.Random(20261122)
    seen = {"closed": 0, "waiting": 0}
    for _ in range(40):
        data = rng.randbytes(rng.randint(1, 70_000))
        with served.connect() as sock:
            sock.sendall(data)
            if len(data) < 4:
                assert silent(sock), "a partial size prefix is waited for"
                seen["waiting"] += 1
                continue
            (size,) = _SIZE.unpack_from(data)
            if size < 0 or size > 1 << 20:
                assert closed_by_broker(sock), f"size prefix {size} did not close the connection"
                seen["closed"] += 1
            elif size > len(data) - 4:
                assert silent(sock), f"a frame of {size} bytes with {len(data) - 4} sent got an answer"
                seen["waiting"] += 1
            else:
                sock.sendall(PROBE)
                assert outcome_with_probe(sock) == "closed", f"{size} random bytes were taken for a request"
                seen["closed"] += 1
    # Most random size prefixes are beyond the limit or negative.
    assert seen["closed"] >= 30, seen
    served.assert_unharmed()


def test_random_frames_close_the_connection(serve):
    served = serve()
    rng = random.Random(7)
    for length in [0, 1, 2, 3, 4, 7, 8, *(rng.randint(9, 2000) for _ in range(150))]:
        with served.connect() as sock:
            sock.sendall(frame(rng.randbytes(length)) + PROBE)
            assert outcome_with_probe(sock) == "closed", f"a random frame of {length} bytes was answered"
    served.assert_unharmed()


def test_bit_flipped_and_spliced_requests_get_an_answer_or_a_closed_connection(serve):
    served = serve(**{"auto.create.topics.enable": "false"})
    # Fetch is left out: a flipped max_wait_ms may legitimately park a fetch for days.
    corpus = [request for name, request in valid_requests().items() if not name.startswith("Fetch")]
    rng = random.Random(11)
    outcomes = {"closed": 0, "answered": 0}
    for _ in range(800):
        request = bytearray(rng.choice(corpus))
        if rng.random() < 0.7:
            for _ in range(rng.randint(1, 4)):  # flip bytes after the size, key and version
                request[rng.randrange(8, len(request))] = rng.randrange(256)
        else:
            at = rng.randrange(8, len(request))
            request[at:at] = rng.randbytes(rng.randint(1, 16))
            request[:4] = _SIZE.pack(len(request) - 4)
        with served.connect() as sock:
            sock.sendall(bytes(request) + PROBE)
            outcomes[outcome_with_probe(sock)] += 1
    assert outcomes["closed"] > 100 and outcomes["answered"] > 100, outcomes
    served.assert_unharmed()


@pytest.mark.parametrize("name", list(valid_requests()))
def test_every_truncation_of_a_valid_request_closes_the_connection(serve, name):
    served = serve()
    request = valid_requests()[name]
    body = request[4:]
    with served.connect() as sock:  # the whole request is answered: the truncations are what fails
        sock.sendall(request + PROBE)
        assert outcome_with_probe(sock) == "answered"
    for cut in range(len(body)):
        with served.connect() as sock:
            sock.sendall(frame(body[:cut]) + PROBE)
            assert outcome_with_probe(sock) == "closed", f"{name} cut to {cut} of {len(body)} bytes was answered"
    served.assert_unharmed()


def test_a_valid_request_followed_by_garbage_is_answered_before_the_connection_closes(serve):
    served = serve()
    with served.connect() as sock:
        sock.sendall(api_versions_v3() + frame(b"\xff" * 40) + PROBE)
        assert correlation_id_of(read_frame(sock)) == 1
        assert closed_by_broker(sock)
    served.assert_unharmed()


# --- size prefixes ---------------------------------------------------------------------------


MAX_REQUEST = 65_536


@pytest.mark.parametrize("size", [-1, -(2 ** 31), MAX_REQUEST + 1, 2 ** 31 - 1])
def test_a_size_prefix_below_zero_or_beyond_socket_request_max_bytes_closes_the_connection(serve, size):
    served = serve(**{"socket.request.max.bytes": MAX_REQUEST})
    with served.connect() as sock:
        sock.sendall(_SIZE.pack(size))  # and nothing else: the prefix alone is refused
        assert closed_by_broker(sock)
    served.assert_unharmed()


def test_a_request_of_exactly_socket_request_max_bytes_is_answered(serve):
    served = serve(**{"socket.request.max.bytes": MAX_REQUEST})
    request = PROBE[4:]
    # Bytes after a request body are ignored, so padding makes a valid request of any size.
    with served.connect() as sock:
        sock.sendall(frame(request + bytes(MAX_REQUEST - len(request))))
        assert correlation_id_of(read_frame(sock)) == PROBE_ID
    served.assert_unharmed()


# --- unknown APIs and versions --------------------------------------------------------------


@pytest.mark.parametrize("api_key, version", [
    (1000, 0),               # no such API
    (-1, 0),
    (32767, 3),
    (int(ApiKey.PRODUCE), 2),  # below the oldest version served (RecordBatch v2 only)
    (int(ApiKey.FETCH), 3),
    (int(ApiKey.PRODUCE), 999),
    (int(ApiKey.METADATA), -1),
    (int(ApiKey.METADATA), SUPPORTED_VERSIONS[ApiKey.METADATA][1] + 1),
])
def test_an_unknown_api_key_or_version_closes_the_connection(serve, api_key, version):
    served = serve()
    with served.connect() as sock:
        sock.sendall(raw_request(api_key, version, 5, body=b"\x00" * 32) + PROBE)
        assert outcome_with_probe(sock) == "closed"
    served.assert_unharmed()


@pytest.mark.parametrize("version", [SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] + 1, 127, 32767])
def test_a_too_new_api_versions_request_gets_the_v0_fallback_with_error_35(serve, version):
    served = serve()
    low, high = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
    with served.connect() as sock:
        # A future ApiVersions body is unknown: any bytes will do, the broker must not read them.
        sock.sendall(raw_request(ApiKey.API_VERSIONS, version, 77, body=b"\x07future\x05body\x00"))
        correlation_id, body = parse_response(ApiKey.API_VERSIONS, 0, read_frame(sock))
        assert correlation_id == 77
        assert body["error_code"] == UNSUPPORTED_VERSION
        assert {"api_key": int(ApiKey.API_VERSIONS), "min_version": low, "max_version": high} in body["api_keys"]
        # The client retries at a version both speak, on the same connection.
        sock.sendall(encode_request(ApiKey.API_VERSIONS, high, 78, "retry", {
            "client_software_name": "retry", "client_software_version": "1"}))
        correlation_id, body = parse_response(ApiKey.API_VERSIONS, high, read_frame(sock))
        assert correlation_id == 78 and body["error_code"] == 0
        assert int(ApiKey.PRODUCE) in {e["api_key"] for e in body["api_keys"]}
    served.assert_unharmed()


# --- vanishing, slow and stalled clients -------------------------------------------------------


@pytest.mark.parametrize("how", ["close", "reset", "half-close"])
def test_a_frame_cut_mid_body_then_the_socket_closed_releases_the_connection(serve, how):
    served = serve()
    baseline = served.server.socket_server.connection_count
    for _ in range(20):
        sock = served.connect()
        sock.sendall(_SIZE.pack(1000) + b"\x00\x12" + bytes(498))  # half of a 1000-byte frame
        if how == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        elif how == "half-close":
            sock.shutdown(socket.SHUT_WR)
            assert closed_by_broker(sock)
            sock.close()
        else:
            sock.close()
    served.wait_for_connections(baseline)
    served.assert_unharmed()


def test_clients_that_reset_with_a_request_in_flight_do_not_disturb_the_others(serve):
    served = serve()
    baseline = served.server.socket_server.connection_count
    requests = list(valid_requests().values())
    for i in range(60):
        sock = served.connect()
        sock.sendall(requests[i % len(requests)])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # gone before its answer
    served.wait_for_connections(baseline)
    served.assert_unharmed()


def test_a_client_that_half_closes_after_its_request_still_gets_the_answer(serve):
    served = serve()
    with served.connect() as sock:
        sock.sendall(PROBE)
        sock.shutdown(socket.SHUT_WR)
        assert correlation_id_of(read_frame(sock)) == PROBE_ID
        assert closed_by_broker(sock)
    served.assert_unharmed()


def test_a_slow_client_sending_one_byte_at_a_time_is_answered_and_holds_nobody_up(serve):
    served = serve()
    requests = valid_requests()
    trickle = requests["Metadata v12"] + requests["ListOffsets v7"]  # two requests, pipelined
    with served.connect() as slow, served.connect() as other:
        slow.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i, byte in enumerate(trickle):
            slow.sendall(bytes([byte]))
            if i == len(trickle) // 3:
                # Mid-frame on the slow connection, another client is answered at once.
                other.sendall(PROBE)
                assert correlation_id_of(read_frame(other)) == PROBE_ID
            time.sleep(0.002)
        _, metadata = parse_response(ApiKey.METADATA, 12, read_frame(slow))
        _, offsets = parse_response(ApiKey.LIST_OFFSETS, 7, read_frame(slow))
    assert metadata["topics"][0]["name"] == ABUSED_TOPIC and metadata["topics"][0]["error_code"] == 0
    assert offsets["topics"][0]["partitions"][0]["error_code"] == 0
    served.assert_unharmed()


# Long beside the busy client's 100 ms between requests, so that a loaded machine delaying it a few hundred
# ms does not make it idle.
IDLE_MS = 2000


def test_idle_connections_are_closed_after_connections_max_idle_ms_and_busy_ones_are_not(serve):
    served = serve(**{"connections.max.idle.ms": IDLE_MS})
    with served.connect() as idle, served.connect() as busy:
        idle.sendall(PROBE)
        assert correlation_id_of(read_frame(idle)) == PROBE_ID
        assert silent(idle, for_s=IDLE_MS / 1000 / 2), "closed before connections.max.idle.ms"
        # The busy connection asks something every 100 ms for two idle periods.
        for _ in range(2 * IDLE_MS // 100):
            busy.sendall(PROBE)
            assert correlation_id_of(read_frame(busy)) == PROBE_ID
            time.sleep(0.1)
        assert closed_by_broker(idle, within_s=1.0)
        assert silent(busy, for_s=0.05), "closed while busy"
        assert closed_by_broker(busy)  # once it stops asking
    served.assert_unharmed()  # the witness, busy throughout, kept its connections


def test_a_client_that_stops_reading_its_responses_is_closed_once_idle(serve):
    served = serve(**{"connections.max.idle.ms": IDLE_MS})
    baseline = served.server.socket_server.connection_count
    big = build_batch([SimpleRecord(bytes(1000), None, 1_700_000_000_000 + i) for i in range(1000)])
    with ProtocolClient(served.bootstrap, timeout_s=TIMEOUT_S) as client:
        for _ in range(12):  # 12 MB: more than the socket buffers on both sides hold
            response = client.send(ApiKey.PRODUCE, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                                    "topic_data": [{"name": ABUSED_TOPIC, "partition_data": [
                                                        {"index": 0, "records": big}]}]})
            assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
    served.wait_for_connections(baseline)
    with served.connect(SO_RCVBUF=4096) as stalled:
        stalled.sendall(encode_request(ApiKey.FETCH, 12, 1, "stalled", {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 64 << 20, "isolation_level": 0,
            "topics": [{"topic": ABUSED_TOPIC, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 64 << 20}]}],
            "forgotten_topics_data": []}))
        served.wait_for_connections(baseline + 1)
        # Never read: the response stalls half-written, and the connection counts as idle.
        served.wait_for_connections(baseline)
    served.assert_unharmed()


def test_connections_beyond_max_connections_wait_until_another_closes(serve):
    served = serve(**{"max.connections": 6})
    free = 6 - served.server.socket_server.connection_count
    assert free >= 1
    held = []
    try:
        for _ in range(free):
            sock = served.connect()
            held.append(sock)
            sock.sendall(PROBE)
            assert correlation_id_of(read_frame(sock)) == PROBE_ID
        with served.connect() as extra:  # the kernel completes the handshake; the broker does not accept
            extra.sendall(PROBE)
            assert silent(extra, for_s=1.0)
            held.pop().close()
            extra.settimeout(TIMEOUT_S)
            assert correlation_id_of(read_frame(extra)) == PROBE_ID
    finally:
        for sock in held:
            sock.close()
    served.wait_for_connections(6 - free)
    served.assert_unharmed()
