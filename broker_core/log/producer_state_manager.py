"""The producers of one partition (Kafka's ProducerStateManager and ProducerAppendInfo).

For every producer id the partition has seen it keeps the epoch, the
metadata of the last five data batches (sequence and offset ranges, so a
retried batch is recognised and answered with its original offsets), the
coordinator epoch of its last transaction marker and the first offset of its
open transaction. From the open transactions follows the first unstable
offset, hence the last stable offset.

An append is first checked producer by producer (``prepare_update`` gives a
``ProducerAppendInfo`` that validates without changing anything) and applied
with ``update`` once the bytes are written. The state is written to
``<offset>.snapshot`` files (``format.producer_snapshot``) and read back from
the newest one at or below an offset; the log replays its batches after it.
Time is the caller's (``now_ms``); files are this module's only I/O.
"""

from __future__ import annotations

import bisect
import enum
import logging
import os
from collections import deque
from dataclasses import dataclass, field

from format import layout
from format.checkpoint import fsync_dir
from format.control import EndTransactionMarker
from format.producer_snapshot import (CorruptSnapshotError, ProducerSnapshotEntry, decode_snapshot,
                                      encode_snapshot)
from format.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

from ..errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceNumberError,
                      TransactionCoordinatorFencedError)

log = logging.getLogger(__name__)

#: Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: what a retrying producer may have in flight.
NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = (1 << 31) - 1


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): sequences are checked for clients only, epochs for
    clients and the transaction coordinator, nothing when the log is replayed."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` wrapping below 0 to int32's top, as sequences wrap (Kafka's)."""
    if sequence < decrement:
        return _INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """A data batch a producer wrote (Kafka's BatchMetadata)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer id's state in a partition (Kafka's ProducerStateEntry)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batches[0].first_seq

    @property
    def last_seq(self) -> int:
        return NO_SEQUENCE if self.is_empty else self.batches[-1].last_seq

    @property
    def first_data_offset(self) -> int:
        return -1 if self.is_empty else self.batches[0].first_offset

    @property
    def last_data_offset(self) -> int:
        return -1 if self.is_empty else self.batches[-1].last_offset

    @property
    def last_offset_delta(self) -> int:
        return 0 if self.is_empty else self.batches[-1].offset_delta

    def copy_without_batches(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset)

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        """A new epoch forgets the batches of the old one."""
        if self.producer_epoch == epoch:
            return False
        self.batches.clear()
        self.producer_epoch = epoch
        return True

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, newer: "ProducerStateEntry") -> None:
        """Take in what an append changed (``newer`` holds only the append's batches)."""
        self.maybe_update_producer_epoch(newer.producer_epoch)
        self.batches.extend(newer.batches)
        self.coordinator_epoch = newer.coordinator_epoch
        self.last_timestamp = newer.last_timestamp
        self.current_txn_first_offset = newer.current_txn_first_offset

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        """The batch already written with ``header``'s epoch and sequence range, if any."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        return next((b for b in self.batches if b.first_seq == first and b.last_seq == last), None)

    def to_snapshot(self) -> ProducerSnapshotEntry:
        txn = -1 if self.current_txn_first_offset is None else self.current_txn_first_offset
        return ProducerSnapshotEntry(self.producer_id, self.producer_epoch, self.last_seq, self.last_data_offset,
                                     self.last_offset_delta, self.last_timestamp, self.coordinator_epoch, txn)

    @classmethod
    def from_snapshot(cls, e: ProducerSnapshotEntry) -> "ProducerStateEntry":
        entry = cls(e.producer_id, e.epoch, e.coordinator_epoch, e.timestamp,
                    e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None)
        if e.last_offset >= 0:
            entry.batches.append(BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp))
        return entry


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """What DescribeProducers tells of a producer of a partition (Kafka's UnifiedLog.activeProducers)."""

    producer_id: int
    producer_epoch: int
    #: The last sequence of its last batch still known, -1 when none is.
    last_sequence: int
    last_timestamp: int
    #: The coordinator epoch of its last transaction marker, -1 before any.
    coordinator_epoch: int
    #: The first offset of its open transaction, -1 when none is open.
    current_txn_start_offset: int

    @classmethod
    def of(cls, entry: ProducerStateEntry) -> "ActiveProducer":
        txn = entry.current_txn_first_offset
        return cls(entry.producer_id, entry.producer_epoch, entry.last_seq, entry.last_timestamp,
                   entry.coordinator_epoch, -1 if txn is None else txn)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: its producer, first offset, the marker's offset (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppendInfo:
    """What one append does to one producer, checked before anything is written (Kafka's ProducerAppendInfo)."""

    def __init__(self, partition: str, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin):
        self.partition = partition
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.updated = current.copy_without_batches()
        self.started_transactions: list[int] = []  # first offsets

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch and self.origin != AppendOrigin.REPLICATION:
            raise InvalidProducerEpochError(
                f"{self.partition}: epoch of producer {self.producer_id} at offset {offset} is {epoch}, which is "
                f"smaller than the last seen epoch {self.updated.producer_epoch}")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"{self.partition}: invalid sequence number for new epoch of producer {self.producer_id} at "
                    f"offset {offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{self.updated.producer_epoch} (current producer epoch)")
            return
        if not self.updated.is_empty:
            current_last_seq = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last_seq = self.current.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # A producer whose batches are all gone (retention, expiry) may go on with any sequence.
        if self.current.producer_epoch != NO_PRODUCER_EPOCH and not _in_sequence(current_last_seq, first_seq):
            raise OutOfOrderSequenceNumberError(
                f"{self.partition}: out of order sequence number for producer {self.producer_id} at offset "
                f"{offset}: {first_seq} (incoming seq. number), {current_last_seq} (current end sequence number)")

    def append_data_batch(self, header: BatchHeader, first_offset: int) -> None:
        """A data batch whose offsets are ``first_offset``..``first_offset + last_offset_delta``."""
        epoch = header.producer_epoch
        self._check_producer_epoch(epoch, first_offset)
        if self.origin == AppendOrigin.CLIENT:
            self._check_sequence(epoch, header.base_sequence, first_offset)
        last_offset = first_offset + header.last_offset_delta
        self.updated.add_batch(epoch, header.last_sequence, last_offset, last_offset - first_offset,
                               header.max_timestamp)
        if self.updated.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(f"{self.partition}: expected a transactional write from producer "
                                       f"{self.producer_id} at offset {first_offset}: it has a transaction open "
                                       f"since offset {self.updated.current_txn_first_offset}")
        if self.updated.current_txn_first_offset is None and header.is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(self, marker: EndTransactionMarker, epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        """A COMMIT or ABORT marker at ``offset``; the transaction it ends, if one was open."""
        self._check_producer_epoch(epoch, offset)
        if self.updated.coordinator_epoch > marker.coordinator_epoch and self.origin != AppendOrigin.REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"{self.partition}: invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                f"{marker.coordinator_epoch} (zombie), {self.updated.coordinator_epoch} (current)")
        first = self.updated.current_txn_first_offset
        completed = None if first is None else CompletedTxn(self.producer_id, first, offset,
                                                            marker.control_type.name == "ABORT")
        self.updated.maybe_update_producer_epoch(epoch)
        self.updated.current_txn_first_offset = None
        self.updated.coordinator_epoch = marker.coordinator_epoch
        self.updated.last_timestamp = timestamp
        return completed


class ProducerStateManager:
    """The producer state of the partition whose directory is ``log_dir``."""

    def __init__(self, log_dir: str, partition: str, producer_id_expiration_ms: int, *, read_only: bool = False):
        self.log_dir = log_dir
        self.partition = partition
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.read_only = read_only
        self.producers: dict[int, ProducerStateEntry] = {}
        # Open transactions by first offset (the earliest bounds the last stable offset).
        self._ongoing: dict[int, int] = {}
        self._ongoing_offsets: list[int] = []
        # Transactions whose marker is not below the high watermark yet (Kafka's unreplicatedTxns):
        # first offset -> the marker's offset. They bound the last stable offset as open ones do.
        self._unreplicated: dict[int, int] = {}
        self._unreplicated_offsets: list[int] = []
        self.map_end_offset = 0  # the offset up to which the state reflects the log
        self._snapshots: list[int] = self._list_snapshots()

    def __repr__(self) -> str:
        return f"ProducerStateManager({self.partition})"

    # --- queries -----------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction still open or whose marker is not below the high
        watermark yet, or None."""
        firsts = self._ongoing_offsets[:1] + self._unreplicated_offsets[:1]
        return min(firsts) if firsts else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget the ended transactions whose marker is now below ``high_watermark``: committed everywhere."""
        if not self._unreplicated_offsets:
            return
        for first in [f for f in self._unreplicated_offsets if self._unreplicated[f] < high_watermark]:
            del self._unreplicated[first]
            self._unreplicated_offsets.remove(first)

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer the partition keeps state of, by producer id."""
        return [ActiveProducer.of(self.producers[pid]) for pid in sorted(self.producers)]

    def ongoing_transactions(self) -> dict[int, int]:
        """Open transactions: first offset -> producer id."""
        return {offset: self._ongoing[offset] for offset in self._ongoing_offsets}

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done (Kafka's: the next open transaction of another producer)."""
        for offset in self._ongoing_offsets:
            if self._ongoing[offset] != completed.producer_id:
                return offset
        return completed.last_offset + 1

    # --- appends -----------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.partition, producer_id, current, origin)

    def update(self, info: ProducerAppendInfo) -> None:
        current = self.producers.get(info.producer_id)
        if current is None:
            self.producers[info.producer_id] = info.updated
        else:
            current.update(info.updated)
        for offset in info.started_transactions:
            self._ongoing[offset] = info.producer_id
            bisect.insort(self._ongoing_offsets, offset)

    def complete_txn(self, completed: CompletedTxn) -> None:
        if self._ongoing.pop(completed.first_offset, None) is None:
            raise InvalidTxnStateError(f"{self.partition}: completed transaction {completed} was not open")
        self._ongoing_offsets.remove(completed.first_offset)
        self._unreplicated[completed.first_offset] = completed.last_offset
        bisect.insort(self._unreplicated_offsets, completed.first_offset)

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # --- expiry -----------------------------------------------------------

    def is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms`` with no transaction open."""
        expired = [pid for pid, entry in self.producers.items() if self.is_expired(now_ms, entry)]
        for pid in expired:
            del self.producers[pid]
        return expired

    # --- snapshots -----------------------------------------------------------

    def _list_snapshots(self) -> list[int]:
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return []
        return sorted(layout.offset_from_file_name(n) for n in names
                      if n.endswith(layout.PRODUCER_SNAPSHOT_FILE_SUFFIX) and n.split(".", 1)[0].isdigit())

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.log_dir, layout.producer_snapshot_file_name(offset))

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def take_snapshot(self) -> str | None:
        """Write the state as ``<map end offset>.snapshot`` (unless that one exists); returns its path."""
        if self.read_only or self.map_end_offset in self._snapshots:
            return None
        return self._write_snapshot(self.map_end_offset,
                                    encode_snapshot([e.to_snapshot() for e in self.producers.values()]))

    def restore_snapshot(self, offset: int, data: bytes) -> str:
        """Keep ``data`` (a snapshot file's bytes, as a remote segment holds it) as ``<offset>.snapshot``, for
        the next ``truncate_and_reload`` to load (a follower starting at a leader's remote tier)."""
        self.delete_snapshot(offset)
        return self._write_snapshot(offset, data)

    def _write_snapshot(self, offset: int, data: bytes) -> str:
        path = self._snapshot_path(offset)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(self.log_dir)
        bisect.insort(self._snapshots, offset)
        return path

    def _load_snapshot(self, offset: int) -> bool:
        path = self._snapshot_path(offset)
        try:
            with open(path, "rb") as f:
                entries = decode_snapshot(f.read(), path)
        except FileNotFoundError:
            # Deleted under a read-only view by its owner (retention): an older one may do.
            self._snapshots.remove(offset)
            return False
        except CorruptSnapshotError as exc:
            log.warning("%s: deleting the corrupt producer snapshot: %s", self, exc)
            self.delete_snapshot(offset)
            return False
        self._clear()
        for e in entries:
            entry = ProducerStateEntry.from_snapshot(e)
            self.producers[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                self._ongoing[entry.current_txn_first_offset] = entry.producer_id
                bisect.insort(self._ongoing_offsets, entry.current_txn_first_offset)
        self.map_end_offset = offset
        return True

    def _clear(self) -> None:
        self.producers.clear()
        self._ongoing.clear()
        self._ongoing_offsets.clear()
        self._unreplicated.clear()
        self._unreplicated_offsets.clear()

    def delete_snapshot(self, offset: int) -> None:
        if offset in self._snapshots:
            self._snapshots.remove(offset)
        if self.read_only:
            return
        try:
            os.remove(self._snapshot_path(offset))
        except FileNotFoundError:
            pass

    def delete_snapshots_outside(self, low: int, high: int) -> None:
        """Delete the snapshots below ``low`` (gone with their segments) and above ``high`` (past the log end)."""
        for offset in [o for o in self._snapshots if o < low or o > high]:
            self.delete_snapshot(offset)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int,
                            at_most: int | None = None) -> None:
        """Drop the snapshots outside [log start, log end] and load the newest at or below ``at_most``
        (default: the log end); without one the state starts empty at the log start. The caller
        replays the log from ``map_end_offset``."""
        if self.read_only:
            self._snapshots = self._list_snapshots()  # the owner's, as they are now
        self.delete_snapshots_outside(log_start_offset, log_end_offset)
        limit = log_end_offset if at_most is None else at_most
        for offset in reversed([o for o in self._snapshots if o <= limit]):
            if self._load_snapshot(offset):
                for pid in [p for p, e in self.producers.items() if self.is_expired(now_ms, e)]:
                    del self.producers[pid]
                return
        self._clear()
        self.map_end_offset = log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (the log was emptied and starts at ``offset``)."""
        for snapshot in list(self._snapshots):
            self.delete_snapshot(snapshot)
        self._clear()
        self.map_end_offset = offset
