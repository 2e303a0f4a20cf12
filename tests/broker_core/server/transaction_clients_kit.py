"""confluent-kafka's transactional producer and read_committed / read_uncommitted consumers, for the
transaction tests against a running broker (``seglog broker`` or Apache Kafka)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

TIMEOUT_S = 20
_PARTITION_EOF = KafkaError._PARTITION_EOF


def transactional_producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    """A producer of ``transactional_id`` with its transactions initialized (earlier producers fenced)."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **config})
    p.init_transactions(TIMEOUT_S)
    return p


def read_all(bootstrap: str, topic: str, isolation_level: str, partitions: int,
             timeout_s: float = TIMEOUT_S) -> list[bytes]:
    """Every value a consumer with ``isolation_level`` reads from the start to the end of each partition
    (the last stable offset for read_committed), sorted."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation_level}",
                  "isolation.level": isolation_level, "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values, ended = [], set()
        deadline = time.monotonic() + timeout_s
        while len(ended) < partitions and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == _PARTITION_EOF, msg.error()
                ended.add(msg.partition())
                continue
            values.append(msg.value())
        assert len(ended) == partitions, f"read {values} without reaching the end of every partition"
        return sorted(values)
    finally:
        c.close()
