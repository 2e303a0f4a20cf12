"""Fetch over TLS: the records must be encrypted, so a TLS listener reads them into memory (no zero copy)
and answers with the same bytes as a plaintext listener of the same broker, which sends them from the files."""

from __future__ import annotations

import os
import socket
import ssl

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey, encode_request
from format.record import SimpleRecord
from format.record_batch import build_batch
from tests.broker_core.security.tls_kit import server_ssl_props
from tests.broker_core.server.server_kit import create_topic, produce, read_frame, start_broker
from tests.broker_core.server.socket_server_kit import Server, frame

TOPIC = "tls-fetch"


def _fetch(offset: int) -> bytes:
    return encode_request(ApiKey.FETCH, 12, 1, "tls-fetch-test", {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 8 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": TOPIC, "partitions": [{"partition": 0, "fetch_offset": offset,
                                                     "partition_max_bytes": 8 << 20, "current_leader_epoch": -1,
                                                     "last_fetched_epoch": -1, "log_start_offset": -1}]}],
        "forgotten_topics_data": [], "rack_id": ""})


def _answer(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    return read_frame(sock)


def test_a_tls_listener_copies_the_records_and_serves_the_same_bytes_as_plaintext(tmp_path, server_stores):
    server = start_broker(tmp_path / "logs", listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                          **server_ssl_props(server_stores))
    try:
        plaintext_port, tls_port = server.bound_port("PLAINTEXT"), server.bound_port("SSL")
        with ProtocolClient(f"127.0.0.1:{plaintext_port}") as client:
            create_topic(client, TOPIC)
            for b in range(40):
                records = [SimpleRecord(bytes([b]) * 1000, f"k{i}".encode()) for i in range(20)]
                assert produce(client, TOPIC, 0, build_batch(records))["error_code"] == 0
        request = _fetch(0)
        context = ssl.create_default_context(cafile=str(server_stores.truststore))
        with context.wrap_socket(socket.create_connection(("127.0.0.1", tls_port), timeout=10),
                                 server_hostname="127.0.0.1") as tls:
            over_tls = _answer(tls, request)
        assert server.socket_server.bytes_sent_from_files == 0
        with socket.create_connection(("127.0.0.1", plaintext_port), timeout=10) as plain:
            in_the_clear = _answer(plain, request)
        assert server.socket_server.bytes_sent_from_files > 40 * 20 * 1000
        assert over_tls == in_the_clear
    finally:
        server.shutdown()


def test_a_file_slice_in_a_response_is_read_and_encrypted_on_a_tls_listener(tmp_path, server_stores):
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    server = Server(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **server_ssl_props(server_stores)).start()
    try:
        context = ssl.create_default_context(cafile=str(server_stores.truststore))
        with context.wrap_socket(server.connect("SSL"), server_hostname="127.0.0.1") as tls:
            tls.sendall(frame(b"file:" + str(path).encode()))
            assert read_frame(tls) == data
        with server.connect() as plain:
            plain.sendall(frame(b"file:" + str(path).encode()))
            assert read_frame(plain) == data
        assert server.socket_server.bytes_sent_from_files == 2 * len(data)
    finally:
        server.stop()
