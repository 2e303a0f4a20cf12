"""Helpers to fill log dirs for the connector tests (the Spark session is in tests/conftest.py)."""

from __future__ import annotations

from typing import Mapping

from broker_core import Broker
from format.layout import TopicPartition
from format.record import Header, SimpleRecord

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def produce_numbered(log_dir: str, topic: str, partitions: int, per_partition: int, *, start: int = 0,
                     batch: int = 10, value_size: int = 20, headers: bool = False, config=None) -> None:
    """Records whose value starts with "<topic>-<partition>-<n>" and whose timestamp is T0 + n seconds."""
    with Broker(log_dir, background=False) as broker:
        if topic not in broker.list_topics():
            broker.create_topic(topic, partitions, config or {})
        for p in range(partitions):
            for first in range(start, start + per_partition, batch):
                records = [SimpleRecord(f"{topic}-{p}-{n}".encode() + b"." * value_size, f"k{n}".encode(),
                                        T0 + n * 1000, (Header("n", str(n).encode()),) if headers else ())
                           for n in range(first, min(first + batch, start + per_partition))]
                broker.produce(topic, records, partition=p)


def hold_high_watermarks(log_dir: str, high_watermarks: Mapping[TopicPartition, int]) -> None:
    """What a broker in cluster mode leaves in ``log_dir`` for readers of its files: the dir marked as
    holding replicas and ``replication-offset-checkpoint`` naming each partition's high watermark
    (where its in-sync replicas are), below the log end."""
    from broker_core.config import BrokerConfig
    from broker_core.log.log_manager import LogManager

    manager = LogManager(BrokerConfig(log_dirs=(log_dir,)), sole_replica=False)
    manager.load_logs()
    try:
        for tp, high_watermark in high_watermarks.items():
            manager.log_or_raise(tp).update_high_watermark(high_watermark)
    finally:
        manager.shutdown()  # checkpoints the high watermarks as they are held
