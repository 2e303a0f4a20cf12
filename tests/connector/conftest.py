"""Helpers to fill log dirs for the connector tests (the Spark session is in tests/conftest.py)."""

from __future__ import annotations

import os
import struct
from typing import Mapping

from broker_core import Broker
from format import layout
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


def produce_events(broker) -> None:
    """Topic ``events`` of 2 partitions through ``broker``: 30 records a partition in batches of 10, record n
    keyed ``k<n>``, valued ``events-<partition>-<n>``, stamped T0 + n seconds."""
    broker.create_topic("events", 2)
    for p in range(2):
        for first in range(0, 30, 10):
            broker.produce("events", [SimpleRecord(b"events-%d-%d" % (p, n), b"k%d" % n, T0 + n * 1000)
                                      for n in range(first, first + 10)], partition=p)


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


def bytes_from(log_dir: str, partition_dir: str, offset: int) -> int:
    """The bytes of every batch of ``partition_dir`` whose last offset is ``offset`` or later, found by walking
    each ``.log`` file batch by batch (base offset at byte 0, length at 8, last offset delta at 23 of a
    batch header): what a consumer lagging from ``offset`` has yet to fetch."""
    d = os.path.join(log_dir, partition_dir)
    total = 0
    for name in sorted(n for n in os.listdir(d) if n.endswith(layout.LOG_FILE_SUFFIX)):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        position = 0
        while position + 27 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, position)
            (last_offset_delta,) = struct.unpack_from(">i", data, position + 23)
            if base_offset + last_offset_delta >= offset:
                total += 12 + length
            position += 12 + length
    return total
