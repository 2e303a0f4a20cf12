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
re-validated batch by batch; the first invalid batch ends the log, and every
later segment is removed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Callable

from format import layout
from format.checkpoint import fsync_dir
from format.errors import CorruptIndexError
from format.file_records import FileRecords
from format.segment import LogSegment

log = logging.getLogger(__name__)


@dataclass
class LoadedSegments:
    segments: list[LogSegment]
    recovery_point: int
    truncated_bytes: int
    next_offset: int


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _base_offsets_with_suffix(directory: str, names: list[str], suffix: str) -> list[int]:
    return sorted(layout.offset_from_file_name(n) for n in names
                  if n.endswith(layout.LOG_FILE_SUFFIX + suffix))


def open_segment(directory: str, base_offset: int, config, suffix: str = "", rolling_jitter_ms: int = 0
                 ) -> LogSegment:
    """A segment opened with the topic's index settings."""
    return LogSegment.open(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                           max_index_size=config.segment_index_bytes, file_suffix=suffix,
                           rolling_jitter_ms=rolling_jitter_ms)


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
    ``.log.swap`` file. Pure, so local loading and the Spark job (on object storage) share it."""
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


def load_segments(directory: str, config, *, recovery_point: int, had_clean_shutdown: bool,
                  log_start_offset: int = 0) -> LoadedSegments:
    """Open every segment of ``directory``, recovering what needs it."""
    _settle_transient_files(directory)
    names = os.listdir(directory)
    # Index files whose .log is gone are orphans of an interrupted delete.
    log_bases = set(_base_offsets_with_suffix(directory, names, ""))
    for name in names:
        if layout.is_index_file_name(name) and layout.offset_from_file_name(name) not in log_bases:
            _remove(os.path.join(directory, name))
    segments: list[LogSegment] = []
    for base in sorted(log_bases):
        index_missing = not os.path.exists(os.path.join(directory, layout.offset_index_file_name(base)))
        segment = open_segment(directory, base, config)
        try:
            if index_missing:
                raise CorruptIndexError("offset index is missing")
            segment.sanity_check()
        except CorruptIndexError as exc:
            log.warning("%s: rebuilding the indexes of segment %d: %s", directory, base, exc)
            segment.recover(config.max_message_bytes)
        segments.append(segment)

    truncated = 0
    if not had_clean_shutdown and segments:
        first = 0
        for i, segment in enumerate(segments):
            if segment.base_offset <= recovery_point:
                first = i
        i = first
        while i < len(segments):
            segment = segments[i]
            cut = segment.recover(config.max_message_bytes)
            truncated += cut
            if segment.last_recovery_error is not None:
                log.warning("%s: truncated %d bytes at %s", directory, cut, segment.last_recovery_error)
            if cut:
                # Nothing after an invalid batch can be trusted: drop the later segments.
                for later in segments[i + 1:]:
                    truncated += later.size
                    later.delete()
                del segments[i + 1:]
                break
            i += 1

    if not segments:
        segments.append(open_segment(directory, max(log_start_offset, 0), config))
    active = segments[-1]
    active.resize_indexes(config.segment_index_bytes)
    next_offset = active.read_next_offset()
    if had_clean_shutdown:
        recovery_point = next_offset
    else:
        recovery_point = min(max(recovery_point, segments[0].base_offset), next_offset)
    return LoadedSegments(segments, recovery_point, truncated, next_offset)
