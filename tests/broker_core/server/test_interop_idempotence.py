"""Idempotent producers of confluent-kafka (librdkafka), kafka-python and aiokafka against a ``seglog broker``,
with Produce responses lost on the way back: each record is written once."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from format.layout import TopicPartition as LogPartition
from format.record_batch import iter_batches
from server_kit import read_exactly, start_broker

pytestmark = pytest.mark.slow

TIMEOUT_S = 20
_SIZE = struct.Struct(">i")
PRODUCE = 0


class ResponseDroppingProxy:
    """A loopback proxy in front of the broker that, for the first ``drop`` Produce requests, lets the
    request through and closes the connection instead of delivering the response: the record is
    written, and the producer never hears of it."""

    def __init__(self, drop: int):
        self.to_drop = drop
        self.dropped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def start(self, target_port: int) -> None:
        self._target = target_port
        self._acceptor.start()

    @staticmethod
    def _spawn(fn, *args) -> None:
        threading.Thread(target=fn, args=args, daemon=True).start()  # ends when its sockets close

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            broker = socket.create_connection(("127.0.0.1", self._target), timeout=TIMEOUT_S)
            client.settimeout(None)
            produce_ids: set[int] = set()
            self._spawn(self._requests, client, broker, produce_ids)
            self._spawn(self._responses, broker, client, produce_ids)

    @staticmethod
    def _frame(sock: socket.socket) -> bytes:
        size = _SIZE.unpack(read_exactly(sock, 4))[0]
        return read_exactly(sock, size)

    def _requests(self, client: socket.socket, broker: socket.socket, produce_ids: set[int]) -> None:
        try:
            while True:
                frame = self._frame(client)
                api_key, _, correlation_id = struct.unpack_from(">hhi", frame)
                if api_key == PRODUCE:
                    produce_ids.add(correlation_id)
                broker.sendall(_SIZE.pack(len(frame)) + frame)
        except OSError:
            self._close(client, broker)

    def _responses(self, broker: socket.socket, client: socket.socket, produce_ids: set[int]) -> None:
        try:
            while True:
                frame = self._frame(broker)
                (correlation_id,) = struct.unpack_from(">i", frame)
                with self._lock:
                    drop = correlation_id in produce_ids and self.to_drop > 0
                    if drop:
                        self.to_drop -= 1
                        self.dropped += 1
                if drop:
                    self._close(client, broker)
                    return
                client.sendall(_SIZE.pack(len(frame)) + frame)
        except OSError:
            self._close(client, broker)

    @staticmethod
    def _close(*socks: socket.socket) -> None:
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def stop(self) -> None:
        self._stop.set()
        self._acceptor.join(timeout=5)
        self._listener.close()


@pytest.fixture()
def lossy_broker(tmp_path):
    """A broker reached through a proxy that loses the first two Produce responses."""
    proxy = ResponseDroppingProxy(drop=2)
    server = start_broker(tmp_path / "logs", **{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.start(server.bound_port())
    try:
        yield server, proxy, f"127.0.0.1:{proxy.port}"
    finally:
        proxy.stop()
        server.shutdown(timeout_ms=10_000)


def stored_values(server, topic: str) -> list[bytes]:
    out, offset = [], 0
    log = server.broker.log_manager.get_log(LogPartition(topic, 0))
    while offset < log.log_end_offset:
        result = server.broker.fetch(topic, 0, offset)
        batches = list(iter_batches(result.records))
        out.extend(r.value for r in result.decoded(offset))
        offset = batches[-1].header.next_offset
    return out


def test_confluent_kafkas_idempotent_producer_writes_each_record_once_when_responses_are_lost(lossy_broker):
    server, proxy, bootstrap = lossy_broker
    server.broker.create_topic("events", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                         "message.timeout.ms": 30_000, "retry.backoff.ms": 50})
    sent = [b"event-%03d" % i for i in range(200)]
    errors = []
    for i, value in enumerate(sent):
        producer.produce("events", value, partition=0,
                         on_delivery=lambda err, msg: errors.append(err) if err is not None else None)
        if i % 50 == 49:
            producer.flush(TIMEOUT_S)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []
    assert proxy.dropped == 2
    assert stored_values(server, "events") == sent

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition("events", 0, 0)])
    read = []
    try:
        while True:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"no message after {len(read)}"
            if message.error():
                break  # the end of the partition
            read.append(message.value())
    finally:
        consumer.close()
    assert read == sent


def test_kafka_pythons_idempotent_producer_writes_each_record_once_when_responses_are_lost(lossy_broker):
    kafka = pytest.importorskip("kafka")
    server, proxy, bootstrap = lossy_broker
    server.broker.create_topic("events", 1)
    try:
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=20,
                                       retries=10, retry_backoff_ms=50, request_timeout_ms=5_000)
    except (TypeError, AssertionError) as exc:
        pytest.skip(f"this kafka-python has no idempotent producer: {exc}")
    sent = [b"event-%03d" % i for i in range(100)]
    futures = [producer.send("events", value, partition=0) for value in sent]
    producer.flush(TIMEOUT_S)
    for future in futures:
        future.get(TIMEOUT_S)
    producer.close(TIMEOUT_S)
    assert proxy.dropped == 2
    assert stored_values(server, "events") == sent


def test_aiokafkas_idempotent_producer_writes_each_record_once_when_responses_are_lost(lossy_broker):
    aiokafka = pytest.importorskip("aiokafka")
    server, proxy, bootstrap = lossy_broker
    server.broker.create_topic("events", 1)
    sent = [b"event-%03d" % i for i in range(100)]

    async def produce() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=20,
                                             retry_backoff_ms=50, request_timeout_ms=5_000)
        await producer.start()
        try:
            for chunk in range(0, len(sent), 25):
                futures = [await producer.send("events", value, partition=0) for value in sent[chunk:chunk + 25]]
                await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
        finally:
            await producer.stop()

    asyncio.run(produce())
    assert proxy.dropped == 2
    assert stored_values(server, "events") == sent
