"""A partition's transactions as its files show them, for readers that do not own the log:
the last stable offset (LSO), and the aborted transactions over a range of offsets.

Only the owner keeps producer state in memory; a reader rebuilds what it needs
from the files, as the owner does when it starts:

- **The LSO** is the first offset of the earliest transaction still open, else
  the log end. The open transactions are those of the newest ``.snapshot``
  (each producer's ``current_txn_first_offset``; the owner writes one at every
  segment roll and at shutdown) plus the transactional batches after it that no
  marker has ended yet; without a usable snapshot the walk starts at the first
  segment. Only batch headers are read, and the marker batches (a few dozen
  bytes). The walk is thus at most the active segment of a log the owner rolls.
- **An aborted transaction whose ABORT marker is on disk but not yet in its
  segment's ``.txnindex``** (the owner writes the index entry just after the
  marker) holds the LSO at its first offset, so that everything below the LSO
  can be filtered with the ``.txnindex`` alone.
- **The aborted transactions** of a range come from the ``.txnindex`` files of
  the segment holding its first offset on, until an entry shows that nothing
  later can overlap the range (``txn_index.collect_aborted_txns``).
"""

from __future__ import annotations

import bisect
import logging
from typing import TYPE_CHECKING, Sequence

from fsspec.spec import AbstractFileSystem

from . import layout
from .control import ControlRecordType
from .fs import join
from .producer_snapshot import CorruptSnapshotError, decode_snapshot
from .record_batch import RecordBatch
from .segment_reader import SegmentReader
from .txn_index import AbortedTxn, collect_aborted_txns, parse_aborted_txns

if TYPE_CHECKING:
    from .log_dir import SegmentInfo

log = logging.getLogger(__name__)


def _offsets_named(names: Sequence[str], suffix: str) -> list[int]:
    out = []
    for name in names:
        if name.endswith(suffix):
            try:
                out.append(layout.offset_from_file_name(name))
            except ValueError:
                continue
    return sorted(out)


def _newest_snapshot(fs: AbstractFileSystem, directory: str, names: Sequence[str], first_base: int,
                     log_end_offset: int) -> tuple[int, dict[int, int]]:
    """(offset, producer id -> first offset of its open transaction) of the newest readable snapshot
    within the log, else (``first_base``, nothing open)."""
    offsets = [o for o in _offsets_named(names, layout.PRODUCER_SNAPSHOT_FILE_SUFFIX)
               if first_base <= o <= log_end_offset]
    for offset in reversed(offsets):
        path = join(fs, directory, layout.producer_snapshot_file_name(offset))
        try:
            entries = decode_snapshot(fs.cat_file(path), path)
        except FileNotFoundError:
            continue  # deleted with its segment since the listing
        except CorruptSnapshotError as exc:
            log.warning("ignoring %s", exc)
            continue
        return offset, {e.producer_id: e.current_txn_first_offset for e in entries
                        if e.current_txn_first_offset >= 0}
    return first_base, {}


def _indexed(fs: AbstractFileSystem, directory: str, base_offset: int) -> list[AbortedTxn]:
    path = join(fs, directory, layout.txn_index_file_name(base_offset))
    try:
        return parse_aborted_txns(fs.cat_file(path), path)
    except FileNotFoundError:
        return []


def last_stable_offset(fs: AbstractFileSystem, directory: str, names: Sequence[str],
                       segments: Sequence[SegmentInfo], log_end_offset: int) -> int:
    """The LSO of the partition directory ``directory``, whose entries are ``names`` and whose
    segments (in offset order) end at ``log_end_offset``. A segment deleted under the walk raises
    FileNotFoundError: list again and retry."""
    if not segments:
        return log_end_offset
    start, open_txns = _newest_snapshot(fs, directory, names, segments[0].base_offset, log_end_offset)
    aborted: list[tuple[int, int, int]] = []  # (producer id, first offset, marker offset) seen on the walk
    bases = [s.base_offset for s in segments]
    for segment in segments[max(bisect.bisect_right(bases, start) - 1, 0):]:
        if segment.base_offset >= log_end_offset:
            break
        with SegmentReader(fs, directory, segment.base_offset, segment.size) as reader:
            position = 0
            if start > segment.base_offset:
                found = reader.translate_offset(start)
                position = reader.size if found is None else found.position
            for at, h in reader.records.batch_headers(position):
                if h.base_offset >= log_end_offset:
                    break
                if h.last_offset < start or not h.has_producer_id:
                    continue
                if not h.is_control:
                    if h.is_transactional:
                        open_txns.setdefault(h.producer_id, h.base_offset)
                    continue
                first = open_txns.pop(h.producer_id, None)
                if first is None:
                    continue
                marker = RecordBatch(reader.records.read(at, h.size_in_bytes), h, at, reader.log_path)
                ended = marker.end_txn_marker()
                if ended is not None and ended.control_type == ControlRecordType.ABORT:
                    aborted.append((h.producer_id, first, h.base_offset))
                elif ended is None:
                    open_txns[h.producer_id] = first  # another control type: no end of a transaction
    held = list(open_txns.values())
    for producer_id, first, marker_offset in aborted:
        base = bases[bisect.bisect_right(bases, marker_offset) - 1]
        if not any(t.producer_id == producer_id and t.last_offset == marker_offset
                   for t in _indexed(fs, directory, base)):
            held.append(first)
    return min([log_end_offset, *held])


def aborted_transactions(fs: AbstractFileSystem, directory: str, names: Sequence[str],
                         segments: Sequence[SegmentInfo], from_offset: int, until_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [from_offset, until_offset), from the ``.txnindex`` files
    (among ``names``) of the segments from the one holding ``from_offset`` on."""
    indexed = set(_offsets_named(names, layout.TXN_INDEX_FILE_SUFFIX))
    bases = [s.base_offset for s in segments]
    found: list[AbortedTxn] = []
    for base in bases[max(bisect.bisect_right(bases, from_offset) - 1, 0):]:
        if base not in indexed:
            continue
        result = collect_aborted_txns(_indexed(fs, directory, base), from_offset, until_offset)
        found.extend(result.aborted_txns)
        if result.is_complete:
            break
    return found
