"""A partition's leader epochs and the offset each began at (Kafka's LeaderEpochFileCache).

Every leader stamps its epoch into the ``partitionLeaderEpoch`` field of the
batches it appends; the cache keeps, per epoch, the first offset written under
it, in the partition directory's ``leader-epoch-checkpoint`` (Kafka's format:
version 0, a count, "epoch start_offset" lines). Entries rise in epoch and in
start offset together: a new entry removes every entry at or above its epoch or
its start offset first, as a follower truncated back to the leader's history
takes the leader's epochs in.

``end_offset_for(epoch, log_end_offset)`` answers OffsetsForLeaderEpoch
(KIP-101, KIP-279): the largest epoch at or below the one asked and the start
offset of the first epoch above it, or the log end for the latest epoch; a
follower truncates to that offset, a consumer checks its position against it.

The file is rewritten, fsynced, on every change; a cache without a file (a
read-only log) keeps its entries in memory only.
"""

from __future__ import annotations

import bisect
import logging
import threading
from dataclasses import dataclass
from typing import Iterable

from format.checkpoint import EpochEntry, LeaderEpochCheckpointFile
from format.errors import CheckpointError

log = logging.getLogger(__name__)

#: Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET: no epoch, no end offset.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """An epoch and the offset it ended at (exclusive): OffsetsForLeaderEpoch's answer."""

    leader_epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.end_offset == UNDEFINED_EPOCH_OFFSET


UNDEFINED_EPOCH_END_OFFSET = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


class LeaderEpochFileCache:
    """The epochs of one partition; ``checkpoint`` None keeps them in memory only."""

    def __init__(self, owner: str, checkpoint: LeaderEpochCheckpointFile | None,
                 entries: Iterable[EpochEntry] | None = None):
        """Entries from ``entries`` when given, else from the checkpoint file (none if it is missing)."""
        self._owner = owner
        self._checkpoint = checkpoint
        self._lock = threading.RLock()
        self._epochs: list[int] = []
        self._entries: list[EpochEntry] = []
        source = entries if entries is not None else (checkpoint.read() if checkpoint is not None else [])
        for entry in source:
            if entry.epoch < 0 or entry.start_offset < 0:
                where = checkpoint.path if checkpoint is not None and entries is None else owner
                raise CheckpointError(f"{where}: invalid leader epoch entry: epoch {entry.epoch} "
                                      f"start offset {entry.start_offset}")
            self._assign(entry)

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._owner}: {self.epoch_entries()})"

    # --- reading -------------------------------------------------------------

    def epoch_entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The newest epoch that has records (or was assigned by a new leader)."""
        latest = self.latest_entry
        return None if latest is None else latest.epoch

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at ``offset`` was written in, as far as the cache knows."""
        with self._lock:
            found = None
            for entry in self._entries:
                if entry.start_offset > offset:
                    break
                found = entry.epoch
            return found

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """The epoch and end offset for ``requested_epoch`` (Kafka's endOffsetFor): the largest epoch at or
        below it and the start offset of the first epoch above, or ``log_end_offset`` for the latest
        epoch; an epoch below every cached one ends where the first cached one starts (KIP-279);
        ``UNDEFINED_EPOCH_END_OFFSET`` for an undefined or an unknown newer epoch."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH_END_OFFSET
            if self._entries[-1].epoch == requested_epoch:
                return EpochEndOffset(requested_epoch, log_end_offset)
            above = bisect.bisect_right(self._epochs, requested_epoch)
            if above == len(self._entries):
                return UNDEFINED_EPOCH_END_OFFSET
            higher = self._entries[above]
            if above == 0:
                return EpochEndOffset(requested_epoch, higher.start_offset)
            return EpochEndOffset(self._entries[above - 1].epoch, higher.start_offset)

    # --- changes -------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` begins at ``start_offset``; written to the file when it changed
        anything. Entries at or above the epoch or the offset give way to it."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"{self._owner}: invalid leader epoch entry: epoch {epoch} start offset {start_offset}")
        with self._lock:
            if not self._assign(EpochEntry(epoch, start_offset)):
                return False
            self._write()
            return True

    def _assign(self, entry: EpochEntry) -> bool:
        latest = self._entries[-1] if self._entries else None
        if latest is not None and latest.epoch == entry.epoch and entry.start_offset >= latest.start_offset:
            return False
        removed = []
        while self._entries and (self._entries[-1].epoch >= entry.epoch
                                 or self._entries[-1].start_offset >= entry.start_offset):
            removed.append(self._entries.pop())
            self._epochs.pop()
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("%s: new epoch entry %s replaced conflicting entries %s", self._owner, entry, removed)
        self._entries.append(entry)
        self._epochs.append(entry.epoch)
        return True

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Drop the entries starting at or past ``end_offset`` (the log was truncated to it)."""
        with self._lock:
            removed = []
            while self._entries and end_offset >= 0 and self._entries[-1].start_offset >= end_offset:
                removed.append(self._entries.pop())
                self._epochs.pop()
            if removed:
                log.debug("%s: epochs %s removed by truncation to offset %d", self._owner, removed, end_offset)
                self._write()
            return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """Drop the entries wholly below ``start_offset`` (old segments deleted); the epoch that
        holds ``start_offset`` stays, starting there."""
        with self._lock:
            removed = []
            while self._entries and self._entries[0].start_offset <= start_offset:
                removed.append(self._entries.pop(0))
                self._epochs.pop(0)
            if removed:
                self._entries.insert(0, EpochEntry(removed[-1].epoch, start_offset))
                self._epochs.insert(0, removed[-1].epoch)
                if removed != [self._entries[0]]:
                    self._write()
                else:
                    return []
            return removed

    def clear(self) -> None:
        """Forget every epoch (the log was emptied and starts again)."""
        with self._lock:
            if self._entries:
                self._entries.clear()
                self._epochs.clear()
                self._write()

    def _write(self) -> None:
        if self._checkpoint is not None:
            self._checkpoint.write(self._entries)
