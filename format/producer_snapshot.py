"""Kafka's producer-state snapshot: the ``<offset>.snapshot`` file of a partition.

The file holds, for every producer id the partition knows, what Kafka's
``ProducerStateManager`` needs to go on without replaying the log below
``offset`` (the name: the log end offset when the snapshot was taken).
Kafka's ``ProducerSnapshot`` message, version 1, big-endian:

    int16 version (1) | uint32 crc | int32 entry count | entries...

    entry (46 bytes): int64 producer_id | int16 epoch | int32 last_sequence
        | int64 last_offset | int32 offset_delta | int64 timestamp
        | int32 coordinator_epoch | int64 current_txn_first_offset

The CRC-32C covers everything after it (from the entry count on).
``last_sequence`` and ``last_offset`` describe the producer's last data
batch (-1 when it has none), ``offset_delta`` that batch's last offset minus
its first, ``current_txn_first_offset`` the first offset of its open
transaction (-1 when none). Pure: bytes in, entries out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .errors import CorruptRecordError
from .record_batch import crc32c

SNAPSHOT_VERSION = 1

_HEADER = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
ENTRY_SIZE = _ENTRY.size  # 46
CRC_OFFSET = 2
PRODUCER_ENTRIES_OFFSET = 6


class CorruptSnapshotError(CorruptRecordError):
    """A snapshot whose version, length or CRC is wrong (Kafka's CorruptSnapshotException)."""


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer as a snapshot stores it (Kafka's ProducerSnapshot.ProducerEntry)."""

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode_snapshot(entries: list[ProducerSnapshotEntry]) -> bytes:
    """The bytes of a snapshot file holding ``entries``."""
    body = bytearray(_COUNT.pack(len(entries)))
    for e in entries:
        body += _ENTRY.pack(e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
                            e.coordinator_epoch, e.current_txn_first_offset)
    return _HEADER.pack(SNAPSHOT_VERSION, crc32c(bytes(body))) + bytes(body)


def decode_snapshot(data: bytes, path: str | None = None) -> list[ProducerSnapshotEntry]:
    """The entries of a snapshot file; ``CorruptSnapshotError`` (naming ``path`` and the position)
    when its version, length or CRC is wrong."""
    if len(data) < PRODUCER_ENTRIES_OFFSET + _COUNT.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its "
                                   f"{PRODUCER_ENTRIES_OFFSET + _COUNT.size}-byte header", path=path, position=0)
    version, crc = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}", path=path, position=0)
    computed = crc32c(data[PRODUCER_ENTRIES_OFFSET:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot is corrupt (CRC is no longer valid): stored 0x{crc:08x}, "
                                   f"computed 0x{computed:08x}", path=path, position=CRC_OFFSET)
    (count,) = _COUNT.unpack_from(data, PRODUCER_ENTRIES_OFFSET)
    start = PRODUCER_ENTRIES_OFFSET + _COUNT.size
    if count < 0 or start + count * ENTRY_SIZE != len(data):
        raise CorruptSnapshotError(f"snapshot declares {count} entries of {ENTRY_SIZE} bytes but holds "
                                   f"{len(data) - start} bytes of entries", path=path,
                                   position=PRODUCER_ENTRIES_OFFSET)
    return [ProducerSnapshotEntry(*_ENTRY.unpack_from(data, start + i * ENTRY_SIZE)) for i in range(count)]
