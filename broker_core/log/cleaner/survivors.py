"""What a clean keeps, as a set of offsets: the offset map's answers computed ahead, so that
the records can be filtered by offset alone (the Spark compaction job's form of the map).

The broker's filter keeps a keyed record at or below the map's latest offset
when its offset is at least the offset the map holds for its key, or when the
map does not hold its key. Knowing, for every keyed record of the cleaned
range, its key and offset, the same answer is a set:

* the *mapped* records: for each key, the latest committed record of the dirty
  section (what the offset map holds);
* the *candidates*: every other keyed record (the clean section below the
  first dirty offset, data of aborted transactions), kept when its key is not
  mapped or its offset is not below the mapped one.

``survivor_offsets`` turns both into the sorted offsets that survive;
``SurvivorOffsets`` answers the filter from them by binary search, without
hashing a key. Control batches and keyless records are decided by the filter
itself and never appear here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from format.record_batch import iter_batches

from .filter import offsets_between
from .key_runs import latest_per_key, key_runs
from .records import RecordColumns, decode_columns
from .transactions import ProducerEvent

# Mapped records are reduced to one per key whenever this many are waiting.
REDUCE_EVERY = 4_000_000


@dataclass
class KeyOffsets:
    """Key hashes and offsets, one entry per record (or per key, once reduced)."""

    h1: np.ndarray
    h2: np.ndarray
    offsets: np.ndarray

    @classmethod
    def empty(cls) -> "KeyOffsets":
        return cls(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))

    @classmethod
    def concat(cls, parts: list["KeyOffsets"]) -> "KeyOffsets":
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(np.concatenate([p.h1 for p in parts]), np.concatenate([p.h2 for p in parts]),
                   np.concatenate([p.offsets for p in parts]))

    def __len__(self) -> int:
        return len(self.offsets)

    def take(self, which: np.ndarray) -> "KeyOffsets":
        return KeyOffsets(self.h1[which], self.h2[which], self.offsets[which])

    def latest_per_key(self) -> "KeyOffsets":
        return KeyOffsets(*latest_per_key(self.h1, self.h2, self.offsets))


@dataclass
class BatchIndex:
    """Where the batches of some segments lie, one entry per batch in offset order: what lets a
    clean read only the batches it keeps something of (``wanted``, ``read_ranges``)."""

    segment: np.ndarray  # the base offset of the segment holding the batch
    position: np.ndarray  # its position in that segment's file
    size: np.ndarray
    base_offset: np.ndarray
    last_offset: np.ndarray

    @classmethod
    def of(cls, rows: list[tuple[int, int, int, int, int]]) -> "BatchIndex":
        table = np.array(rows, dtype=np.int64).reshape(len(rows), 5)
        return cls(*(table[:, i].copy() for i in range(5)))

    @classmethod
    def concat(cls, parts: list["BatchIndex"]) -> "BatchIndex":
        if not parts:
            return cls.of([])
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, f) for p in parts])
                     for f in ("segment", "position", "size", "base_offset", "last_offset")))

    def __len__(self) -> int:
        return len(self.base_offset)

    def take(self, which: np.ndarray) -> "BatchIndex":
        return BatchIndex(self.segment[which], self.position[which], self.size[which], self.base_offset[which],
                          self.last_offset[which])

    def holding(self, offsets: np.ndarray) -> np.ndarray:
        """Whether each batch holds one of ``offsets`` (sorted)."""
        return offsets_between(offsets, self.base_offset, self.last_offset)

    def read_ranges(self, chunk_bytes: int) -> dict[int, list[tuple[int, int]]]:
        """Per segment, (position, length) reads covering these batches: neighbours in the file
        are read together, up to ``chunk_bytes`` a read."""
        out: dict[int, list[tuple[int, int]]] = {}
        for segment, position, size in zip(self.segment.tolist(), self.position.tolist(), self.size.tolist()):
            reads = out.setdefault(segment, [])
            if reads and reads[-1][0] + reads[-1][1] == position and reads[-1][1] + size <= chunk_bytes:
                reads[-1] = (reads[-1][0], reads[-1][1] + size)
            else:
                reads.append((position, size))
        return out


def map_chunk(data, position: int, first_dirty_offset: int, is_aborted, events: list[ProducerEvent],
              segment: int, batches: list[tuple[int, int, int, int, int]], path: str | None = None
              ) -> tuple[KeyOffsets, KeyOffsets]:
    """The keyed records of one chunk of whole batches of the segment based at ``segment``, split
    into mapped (committed, at or past the first dirty offset) and candidates (the rest).

    Every batch is validated (size, magic, CRC), its producer fields go to ``events`` and its place
    to ``batches`` (segment, position, size, base offset, last offset), so that the rewrite can
    read only the batches it keeps. ``is_aborted(header)`` says whether a data batch belongs to an
    aborted transaction."""
    wanted = []
    aborted_batches = []
    for batch in iter_batches(data, path=path, base_position=position, stop_at_partial=False, validate=True):
        h = batch.header
        batches.append((segment, batch.position, h.size_in_bytes, h.base_offset, h.last_offset))
        if h.has_producer_id:
            events.append(ProducerEvent.of(h))
        if h.is_control or not h.records_count:
            continue
        if h.last_offset >= first_dirty_offset and is_aborted(h):
            aborted_batches.append(len(wanted))
        wanted.append(batch)
    if not wanted:
        return KeyOffsets.empty(), KeyOffsets.empty()
    columns = decode_columns(data, wanted, position, path)
    keyed = np.flatnonzero(columns.has_key)
    h1, h2 = columns.hashes(keyed)
    offsets = columns.offset[keyed]
    mapped = offsets >= first_dirty_offset
    if aborted_batches:
        in_aborted = np.zeros(len(wanted), dtype=bool)
        in_aborted[aborted_batches] = True
        mapped &= ~in_aborted[columns.batch[keyed]]
    everything = KeyOffsets(h1, h2, offsets)
    if mapped.all():
        return everything, KeyOffsets.empty()
    return everything.take(mapped), everything.take(~mapped)


class KeyMapBuilder:
    """Stage 1's accumulation for a run of segments: mapped records reduced to one per key as
    they pile up, candidates kept whole."""

    def __init__(self, reduce_every: int = REDUCE_EVERY):
        self.reduce_every = reduce_every
        self._mapped: list[KeyOffsets] = []
        self._waiting = 0
        self._candidates: list[KeyOffsets] = []

    def add(self, mapped: KeyOffsets, candidates: KeyOffsets) -> None:
        if len(mapped):
            self._mapped.append(mapped)
            self._waiting += len(mapped)
            if self._waiting >= self.reduce_every:
                self._mapped = [KeyOffsets.concat(self._mapped).latest_per_key()]
                self._waiting = len(self._mapped[0])
        if len(candidates):
            self._candidates.append(candidates)

    def result(self) -> tuple[KeyOffsets, KeyOffsets]:
        return KeyOffsets.concat(self._mapped).latest_per_key(), KeyOffsets.concat(self._candidates)


def survivor_offsets(mapped: KeyOffsets, candidates: KeyOffsets) -> np.ndarray:
    """The sorted offsets of the keyed records a clean keeps: the mapped ones (one per key), and
    each candidate whose key is not mapped or whose offset is not below its key's mapped offset."""
    if not len(candidates):
        return np.sort(mapped.offsets)
    both = KeyOffsets.concat([mapped, candidates])
    order, starts = key_runs(both.h1, both.h2)
    is_mapped = np.zeros(len(both), dtype=np.int64)
    is_mapped[:len(mapped)] = 1
    run_lengths = np.diff(np.append(starts, len(order)))
    # Each run's mapped offset (-1 when the key is not mapped), spread over the run's records.
    run_mapped = np.maximum.reduceat(np.where(is_mapped[order] == 1, both.offsets[order], -1), starts)
    threshold = np.repeat(run_mapped, run_lengths)
    kept = order[both.offsets[order] >= threshold]
    return np.sort(both.offsets[kept])


class SurvivorOffsets:
    """The filter's ``LatestOffsets`` from the sorted offsets that survive (``survivor_offsets``)
    of every keyed record up to ``latest_offset``."""

    def __init__(self, offsets: np.ndarray, latest_offset: int):
        self.offsets = offsets
        self.latest_offset = latest_offset

    def is_latest(self, columns: RecordColumns, rows: np.ndarray) -> np.ndarray:
        offsets = columns.offset[rows]
        return offsets_between(self.offsets, offsets, offsets)

    def hold_none(self, base_offsets: np.ndarray, last_offsets: np.ndarray) -> np.ndarray:
        return (last_offsets <= self.latest_offset) & ~offsets_between(self.offsets, base_offsets, last_offsets)
