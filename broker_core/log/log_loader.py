"""Loading a partition directory into segments, with Kafka's recovery rules (LogLoader).

On open, what an interrupted clean, swap or delete left is settled first, by
Kafka's rules (``plan_swap_recovery``):

* ``.deleted`` files are removed (the delete was decided);
* ``.cleaned`` files are removed (the clean never reached its swap), and so is
  every ``.swap`` file at or above the lowest ``.cleaned`` offset: the cleaner
  renames ``.cleaned`` to ``.swap`` from the highest segment down, so such a
  swap belongs to a swap that was still being prepared;
* the remaining ``.swap`` segments are complete: every other file named by an
  offset inside their range (from the lowest swap's base offset to the
  highest swap's next offset) belongs to a segment they replace and is
  removed, then they lose their suffix.

Every other segment is opened; a segment whose indexes are missing or fail
their sanity check is rebuilt from its ``.log``. After an unclean shutdown,
every segment from the one holding the recovery point onwards is
re-validated batch by batch (its indexes are rebuilt then, so they are not
checked first: a crashed writer leaves them preallocated with zeros); the
first invalid batch (CRC, length, offsets out of order) ends the log. After
a clean shutdown the active segment's tail — from its last index entry on —
is validated all the same, since the marker says nothing of what happened to
the files since. Bytes recovery cuts, and every later segment, are moved
aside into ``<file>.<position>.corrupt`` files, never deleted, and logged as
an error with their sizes; loading ignores such files.

A read-only load (``read_only=True``) changes nothing: it settles no
transient file, rebuilds no index on disk and cuts nothing. It validates what
recovery would, ends the partition's view at the last sound batch and reports
the rest as ``UnreadableBytes``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Callable

from format import layout
from format.checkpoint import fsync_dir
from format.errors import CorruptIndexError
from format.file_records import FileRecords
from format.index import OffsetIndex
from format.segment import LogSegment, SetAside, count_records

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnreadableBytes:
    """What a read-only load could not read of a partition: ``path`` from ``position`` on
    (``size`` bytes, about ``records`` records, then ``later_segments`` whole segments)."""

    path: str
    position: int
    size: int
    records: int
    later_segments: int
    reason: str

    def __str__(self) -> str:
        later = f" and {self.later_segments} later segments" if self.later_segments else ""
        return (f"cannot read {self.size} bytes ({self.records} records){later} from {self.path} at position "
                f"{self.position}: {self.reason}")


@dataclass
class LoadedSegments:
    segments: list[LogSegment]
    recovery_point: int
    truncated_bytes: int
    next_offset: int
    unreadable: UnreadableBytes | None = None
    set_aside: list[SetAside] = field(default_factory=list)
    # Segments rebuilt from their .log: their .txnindex is empty until the producer state is replayed.
    recovered: set[int] = field(default_factory=set)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _base_offsets_with_suffix(directory: str, names: list[str], suffix: str) -> list[int]:
    return sorted(layout.offset_from_file_name(n) for n in names
                  if n.endswith(layout.LOG_FILE_SUFFIX + suffix))


def open_segment(directory: str, base_offset: int, config, suffix: str = "", rolling_jitter_ms: int = 0,
                 writable: bool = True) -> LogSegment:
    """A segment opened with the topic's index settings."""
    return LogSegment.open(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                           max_index_size=config.segment_index_bytes, file_suffix=suffix,
                           rolling_jitter_ms=rolling_jitter_ms, writable=writable)


@dataclass(frozen=True)
class SwapRecovery:
    """What settling a directory's transient files takes: files to remove, then renames."""

    delete: tuple[str, ...]
    rename: tuple[tuple[str, str], ...]


def _offset_of(name: str) -> int | None:
    try:
        return layout.offset_from_file_name(name)
    except ValueError:
        return None


def plan_swap_recovery(names: list[str], swap_next_offset: Callable[[str], int]) -> SwapRecovery:
    """Kafka's rules for ``.deleted``, ``.cleaned`` and ``.swap`` files, over a directory listing
    (file names only). ``swap_next_offset(name)`` reads the offset after the last batch of a
    ``.log.swap`` file. Pure, so local loading and the Spark job (on object storage) share it.
    Bytes recovery set aside (``.corrupt``) are never touched."""
    names = [n for n in names if not layout.is_set_aside_file_name(n)]
    doomed = [n for n in names if n.endswith(layout.DELETED_FILE_SUFFIX)]
    cleaned = [n for n in names if n.endswith(layout.CLEANED_FILE_SUFFIX)]
    swaps = [n for n in names if n.endswith(layout.SWAP_FILE_SUFFIX)]
    min_cleaned = min((o for o in map(_offset_of, cleaned) if o is not None), default=None)
    valid = []
    for name in swaps:
        offset = _offset_of(name)
        if offset is None or (min_cleaned is not None and offset >= min_cleaned):
            doomed.append(name)  # part of a swap that never completed its renames
        else:
            valid.append(name)
    doomed.extend(cleaned)
    log_swaps = [n for n in valid if layout.strip_transient_suffix(n).endswith(layout.LOG_FILE_SUFFIX)]
    if log_swaps:
        low = min(layout.offset_from_file_name(n) for n in log_swaps)
        # A swap's own base offset is in its range even when it holds no batch.
        high = max(max(swap_next_offset(n), layout.offset_from_file_name(n) + 1) for n in log_swaps)
        gone = set(doomed)
        for name in names:
            if name in gone or name.endswith(layout.SWAP_FILE_SUFFIX):
                continue
            offset = _offset_of(name)
            if offset is not None and low <= offset < high:
                doomed.append(name)  # a segment the swap replaces, not yet renamed .deleted
    rename = tuple((n, layout.strip_transient_suffix(n)) for n in sorted(valid))
    return SwapRecovery(tuple(doomed), rename)


def _swap_next_offset(directory: str, name: str) -> int:
    records = FileRecords.open(os.path.join(directory, name), writable=False)
    try:
        return records.next_offset(layout.offset_from_file_name(name))
    finally:
        records.close()


def _settle_transient_files(directory: str) -> None:
    names = [n for n in os.listdir(directory) if os.path.isfile(os.path.join(directory, n))]
    for name in names:
        if name.endswith(".tmp"):
            _remove(os.path.join(directory, name))
    plan = plan_swap_recovery(names, lambda n: _swap_next_offset(directory, n))
    for name in plan.delete:
        _remove(os.path.join(directory, name))
    for source, target in plan.rename:
        os.replace(os.path.join(directory, source), os.path.join(directory, target))
        log.info("%s: completed the swap of %s", directory, target)
    if plan.delete or plan.rename:
        fsync_dir(directory)


def _recovery_start(bases: list[int], recovery_point: int) -> int | None:
    """The base offset of the segment holding the recovery point (where recovery starts)."""
    start = bases[0] if bases else None
    for base in bases:
        if base <= recovery_point:
            start = base
    return start


def _report_set_aside(directory: str, moved: list[SetAside], reason) -> None:
    if not moved:
        return
    first, later = moved[0], moved[1:]
    log.error("%s: recovery moved %d bytes (%d records) of %s from position %d into %s%s, nothing deleted: %s",
              directory, first.size, first.records, os.path.basename(first.source), first.position,
              os.path.basename(first.path),
              f", and {len(later)} later segments ({sum(m.size for m in later)} bytes, "
              f"{sum(m.records for m in later)} records) into "
              f"{', '.join(os.path.basename(m.path) for m in later)}" if later else "",
              reason or "a torn batch at the end")


def _recover_from(directory: str, segments: list[LogSegment], i: int, config) -> tuple[int, list[SetAside]]:
    """Recover segment ``i``; if it had to be cut, move every later segment aside too."""
    segment = segments[i]
    segment.recover(config.max_message_bytes)
    moved = segment.last_recovery_set_aside
    if moved is None:
        return 0, []
    # Nothing after an invalid batch can be trusted: the later segments go aside as well.
    all_moved = [moved] + [later.move_aside() for later in segments[i + 1:]]
    del segments[i + 1:]
    _report_set_aside(directory, all_moved, segment.last_recovery_error)
    return sum(m.size for m in all_moved), all_moved


def load_segments(directory: str, config, *, recovery_point: int, had_clean_shutdown: bool,
                  log_start_offset: int = 0, read_only: bool = False) -> LoadedSegments:
    """Open every segment of ``directory``, recovering what needs it (read-only: reporting it)."""
    if read_only:
        return _load_read_only(directory, config, recovery_point=recovery_point,
                               had_clean_shutdown=had_clean_shutdown, log_start_offset=log_start_offset)
    _settle_transient_files(directory)
    names = os.listdir(directory)
    # Index files whose .log is gone are orphans of an interrupted delete.
    log_bases = sorted(set(_base_offsets_with_suffix(directory, names, "")))
    for name in names:
        if layout.is_index_file_name(name) and layout.offset_from_file_name(name) not in log_bases:
            _remove(os.path.join(directory, name))
    recover_from = None if had_clean_shutdown else _recovery_start(log_bases, recovery_point)
    segments: list[LogSegment] = []
    set_aside: list[SetAside] = []
    recovered: set[int] = set()
    truncated = 0
    for base in log_bases:
        index_missing = not os.path.exists(os.path.join(directory, layout.offset_index_file_name(base)))
        segment = open_segment(directory, base, config)
        segments.append(segment)
        if recover_from is not None and base >= recover_from:
            continue  # recovered below, indexes and all
        try:
            if index_missing:
                raise CorruptIndexError("offset index is missing")
            segment.sanity_check()
        except CorruptIndexError as exc:
            log.warning("%s: rebuilding the indexes of segment %d: %s", directory, base, exc)
            segment.recover(config.max_message_bytes)
            recovered.add(base)
            if segment.last_recovery_set_aside is not None:
                moved = segment.last_recovery_set_aside
                set_aside.append(moved)
                truncated += moved.size
                _report_set_aside(directory, [moved], segment.last_recovery_error)

    if recover_from is not None:
        i = next(n for n, s in enumerate(segments) if s.base_offset == recover_from)
        while i < len(segments):
            recovered.add(segments[i].base_offset)
            cut, moved = _recover_from(directory, segments, i, config)
            truncated += cut
            set_aside.extend(moved)
            i += 1
    elif segments:
        # The marker says the files were closed cleanly, not that nothing happened to them since.
        active = segments[-1]
        tail = active.check_tail(config.max_message_bytes)
        if tail.error is not None:
            log.warning("%s: the active segment's tail fails its check after a clean shutdown: %s", directory,
                      tail.error)
            recovered.add(active.base_offset)
            cut, moved = _recover_from(directory, segments, len(segments) - 1, config)
            truncated += cut
            set_aside.extend(moved)

    if not segments:
        segments.append(open_segment(directory, max(log_start_offset, 0), config))
    active = segments[-1]
    active.resize_indexes(config.segment_index_bytes)
    next_offset = active.read_next_offset()
    if had_clean_shutdown:
        recovery_point = next_offset
    else:
        recovery_point = min(max(recovery_point, segments[0].base_offset), next_offset)
    return LoadedSegments(segments, recovery_point, truncated, next_offset, set_aside=set_aside,
                          recovered=recovered & {s.base_offset for s in segments})


def _load_read_only(directory: str, config, *, recovery_point: int, had_clean_shutdown: bool,
                    log_start_offset: int) -> LoadedSegments:
    names = os.listdir(directory)
    bases = sorted(set(_base_offsets_with_suffix(directory, names, "")))
    segments: list[LogSegment] = []
    for base in bases:
        try:
            segment = open_segment(directory, base, config, writable=False)
        except FileNotFoundError:
            continue  # deleted by the owner while we listed
        try:
            segment.sanity_check()
        except CorruptIndexError as exc:
            # Lookups then scan the .log from the top: slower, never wrong.
            log.warning("%s: not using the offset index of segment %d: %s", directory, base, exc)
            segment.offset_index.close()
            segment.offset_index = OffsetIndex.from_bytes(base, b"", path=segment.offset_index.path)
        segments.append(segment)
    if not segments:
        return LoadedSegments([], recovery_point, 0, max(log_start_offset, 0))
    if had_clean_shutdown:
        checked = [(len(segments) - 1, segments[-1].check_tail(config.max_message_bytes))]
    else:
        start = _recovery_start(bases, recovery_point)
        checked = ((i, s.valid_prefix(config.max_message_bytes)) for i, s in enumerate(segments)
                   if s.base_offset >= start)
    unreadable = None
    next_offset = None
    for i, found in checked:
        segment = segments[i]
        if found.error is None:
            continue
        last = i == len(segments) - 1
        segment.limit_to(found.end)
        next_offset = found.next_offset
        if last and found.torn:
            # Possibly a batch a running broker is still writing: followed by refresh().
            log.info("%s: segment %d ends with an incomplete batch at position %d", directory,
                     segment.base_offset, found.end)
            break
        later = segments[i + 1:]
        segment.log.refresh_size()  # count what lies past the sound batches, then stop there again
        unreadable = UnreadableBytes(segment.log.path, found.end,
                                     segment.size - found.end + sum(s.size for s in later),
                                     count_records(segment.log, found.end) + sum(count_records(s.log, 0)
                                                                                 for s in later),
                                     len(later), found.error.reason)
        segment.limit_to(found.end)
        for s in later:
            s.close()
        del segments[i + 1:]
        log.warning("%s: %s", directory, unreadable)
        break
    active = segments[-1]
    if next_offset is None:
        next_offset = active.read_next_offset()
    return LoadedSegments(segments, recovery_point, 0, next_offset, unreadable)
