"""Helpers for tests that damage a log dir's files and check what reading or loading does to them."""

from __future__ import annotations

import contextlib
import os
import subprocess

from broker_core import Broker
from format.file_records import FileRecords
from format.record import Record, SimpleRecord
from format.record_batch import iter_batches


def snapshot(directory: str) -> dict[str, tuple[bytes, int]]:
    """Every file under ``directory`` (relative path -> content, modification time in ns)."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, directory)] = (f.read(), os.stat(path).st_mtime_ns)
    return out


def numbered(first: int, count: int, pad: int = 0) -> list[SimpleRecord]:
    """Records whose value is their own offset (then ``pad`` dots), so a read can tell a record
    served at a wrong offset."""
    return [SimpleRecord(b"%d" % n + b"." * pad, b"k%d" % n, 1_000_000 + n) for n in range(first, first + count)]


def read_partition(broker: Broker, topic: str, partition: int) -> list[Record]:
    """Every record of the partition, from its log start to its end, fetch after fetch (a fetch
    stops at the end of a segment)."""
    offset = broker.list_offsets(topic, partition, "earliest").offset
    end = broker.list_offsets(topic, partition, "latest").offset
    records: list[Record] = []
    while offset < end:
        fetched = broker.fetch(topic, partition, offset, max_bytes=1 << 24)
        records += fetched.decoded(offset)
        offset = max(offset, *(b.header.last_offset + 1 for b in iter_batches(fetched.records)))
    return records


def produce_numbered(broker: Broker, topic: str, total: int, per_batch: int, pad: int = 0) -> None:
    for first in range(0, total, per_batch):
        broker.produce(topic, numbered(first, min(per_batch, total - first), pad), partition=0)


def batch_positions(path: str) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of every batch of a ``.log`` file."""
    records = FileRecords.open(path, writable=False)
    try:
        return [(position, h.base_offset, h.size_in_bytes) for position, h in records.batch_headers()]
    finally:
        records.close()


def poke(path: str, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def records_at_true_offsets(records) -> bool:
    """Whether every record carries the offset its value names (as ``numbered`` wrote them)."""
    return all(r.value.split(b".")[0] == b"%d" % r.offset for r in records)


@contextlib.contextmanager
def read_only_mount(directory: str, mount_point: str):
    """``directory`` seen through a read-only bind mount at ``mount_point``; yields None when the
    system does not let this process mount (then the caller skips)."""
    os.makedirs(mount_point, exist_ok=True)
    if subprocess.run(["mount", "--bind", directory, mount_point], capture_output=True).returncode != 0:
        yield None
        return
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", mount_point], capture_output=True).returncode != 0:
            yield None
            return
        yield mount_point
    finally:
        subprocess.run(["umount", mount_point], capture_output=True)
