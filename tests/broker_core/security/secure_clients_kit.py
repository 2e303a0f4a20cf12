"""Kafka's three Python clients configured for a secured listener, and one round trip each: create a topic,
produce, consume it in a consumer group and commit — what every interop test over SSL and SASL runs.

``ClientSecurity`` holds the settings once, as a Kafka user writes them; ``settings_for(lib)`` spells them
the way confluent-kafka, kafka-python or aiokafka takes them."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

LIBRARIES = ("confluent-kafka", "kafka-python", "aiokafka")
TIMEOUT_S = 30


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    cafile: str | None = None
    certfile: str | None = None  # the client's certificate chain (PEM)
    keyfile: str | None = None
    key_password: str | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    def confluent(self) -> dict:
        out = {"security.protocol": self.security_protocol}
        optional = {"ssl.ca.location": self.cafile, "ssl.certificate.location": self.certfile,
                    "ssl.key.location": self.keyfile, "ssl.key.password": self.key_password,
                    "sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                    "sasl.password": self.password}
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    def kafka_python(self) -> dict:
        out = {"security_protocol": self.security_protocol}
        optional = {"ssl_cafile": self.cafile, "ssl_certfile": self.certfile, "ssl_keyfile": self.keyfile,
                    "ssl_password": self.key_password, "sasl_mechanism": self.sasl_mechanism,
                    "sasl_plain_username": self.username, "sasl_plain_password": self.password}
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    def aiokafka(self) -> dict:
        out: dict = {"security_protocol": self.security_protocol}
        if self.security_protocol in ("SSL", "SASL_SSL"):
            from aiokafka.helpers import create_ssl_context

            out["ssl_context"] = create_ssl_context(cafile=self.cafile, certfile=self.certfile,
                                                    keyfile=self.keyfile, password=self.key_password)
        optional = {"sasl_mechanism": self.sasl_mechanism, "sasl_plain_username": self.username,
                    "sasl_plain_password": self.password}
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


def _confluent_round_trip(bootstrap: str, security: ClientSecurity, topic: str, group: str, count: int) -> list:
    from confluent_kafka import Consumer, Producer

    settings = {"bootstrap.servers": bootstrap, **security.confluent()}
    producer = Producer(settings)
    for i in range(count):
        producer.produce(topic, value=b"value-%d" % i, key=b"key-%d" % i)
    assert producer.flush(TIMEOUT_S) == 0, "records left unsent"
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            values += [m.value() for m in consumer.consume(100, 0.5) if m.error() is None]
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
        assert [tp.offset for tp in committed] == [count], committed
    finally:
        consumer.close()
    return values


def _kafka_python_round_trip(bootstrap: str, security: ClientSecurity, topic: str, group: str, count: int) -> list:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition

    settings = {"bootstrap_servers": bootstrap, "request_timeout_ms": 15_000, **security.kafka_python()}
    producer = KafkaProducer(**settings)
    try:
        for i in range(count):
            producer.send(topic, value=b"value-%d" % i, key=b"key-%d" % i)
        producer.flush(TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                             fetch_max_wait_ms=100, **settings)
    try:
        values: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values += [r.value for r in records]
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == count
    finally:
        consumer.close()
    return values


def _aiokafka_round_trip(bootstrap: str, security: ClientSecurity, topic: str, group: str, count: int) -> list:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def run() -> list:
        settings = {"bootstrap_servers": bootstrap, **security.aiokafka()}
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            for i in range(count):
                await producer.send(topic, value=b"value-%d" % i, key=b"key-%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                    fetch_max_wait_ms=100, **settings)
        await consumer.start()
        try:
            values: list = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(values) < count and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    values += [r.value for r in records]
            await consumer.commit()
            assert await consumer.committed(TopicPartition(topic, 0)) == count
        finally:
            await consumer.stop()
        return values

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT_S * 2))


def round_trip(lib: str, bootstrap: str, security: ClientSecurity, topic: str, group: str,
               count: int = 20) -> list:
    """Produce ``count`` records to ``topic`` (auto-created, one partition) with ``lib``, consume them in
    ``group`` and commit; returns the values read, in order."""
    run = {"confluent-kafka": _confluent_round_trip, "kafka-python": _kafka_python_round_trip,
           "aiokafka": _aiokafka_round_trip}[lib]
    return run(bootstrap, security, topic, group, count)


def expected_values(count: int = 20) -> list:
    return [b"value-%d" % i for i in range(count)]


class Witness:
    """A client that authenticated before a refusal and must keep working after it: seglog's protocol client
    producing one record to ``topic`` per ``check`` (and seeing its offset advance)."""

    def __init__(self, bootstrap: str, security, topic: str = "witness") -> None:
        from broker_core.client.protocol_client import ProtocolClient
        from tests.broker_core.server.server_kit import create_topic

        self.client = ProtocolClient(bootstrap, security=security, timeout_s=10)
        self.topic = topic
        create_topic(self.client, topic)
        self.next_offset = 0

    def check(self) -> None:
        from format.record import SimpleRecord
        from format.record_batch import build_batch
        from tests.broker_core.server.server_kit import produce

        answer = produce(self.client, self.topic, 0, build_batch([SimpleRecord(b"still-here")]))
        assert (answer["error_code"], answer["base_offset"]) == (0, self.next_offset), answer
        self.next_offset += 1

    def topic_names(self) -> set[str]:
        from broker_core.protocol import ApiKey

        answer = self.client.send(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False})
        return {t["name"] for t in answer["topics"]}

    def close(self) -> None:
        self.client.close()
