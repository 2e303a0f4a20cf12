"""Loading a partition directory into segments, with Kafka's recovery rules (LogLoader).

On open: leftover ``.cleaned`` and ``.deleted`` files are removed (an interrupted
clean is rolled back; an interrupted delete is finished); a ``.swap`` segment is
complete by construction, so the swap is finished: the segments it replaces are
removed and it takes their place. Every other segment is opened; a segment
whose indexes are missing or fail their sanity check is rebuilt from its
``.log``. After an unclean shutdown, every segment from the one holding the
recovery point onwards is re-validated batch by batch; the first invalid batch
ends the log, and every later segment is removed.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from format import layout
from format.errors import CorruptIndexError
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


def _clean_transient_files(directory: str) -> None:
    for name in os.listdir(directory):
        if name.endswith((layout.CLEANED_FILE_SUFFIX, layout.DELETED_FILE_SUFFIX)) or name.endswith(".tmp"):
            _remove(os.path.join(directory, name))


def _complete_swaps(directory: str, config) -> None:
    names = os.listdir(directory)
    for base in _base_offsets_with_suffix(directory, names, layout.SWAP_FILE_SUFFIX):
        # The swap's indexes may be stale: only its .log is trusted.
        for index_name in (layout.offset_index_file_name(base), layout.time_index_file_name(base),
                           layout.txn_index_file_name(base)):
            _remove(os.path.join(directory, index_name + layout.SWAP_FILE_SUFFIX))
        swap = open_segment(directory, base, config, layout.SWAP_FILE_SUFFIX)
        swap.recover(config.max_message_bytes)
        next_offset = swap.read_next_offset()
        for name in os.listdir(directory):
            if not name.endswith(layout.LOG_FILE_SUFFIX):
                continue
            replaced = layout.offset_from_file_name(name)
            if base <= replaced < next_offset:
                for file_name in (layout.log_file_name(replaced), layout.offset_index_file_name(replaced),
                                  layout.time_index_file_name(replaced), layout.txn_index_file_name(replaced)):
                    _remove(os.path.join(directory, file_name))
        swap.change_file_suffixes(layout.SWAP_FILE_SUFFIX, "")
        swap.close()
        log.info("%s: completed the swap of segment %d", directory, base)


def load_segments(directory: str, config, *, recovery_point: int, had_clean_shutdown: bool,
                  log_start_offset: int = 0) -> LoadedSegments:
    """Open every segment of ``directory``, recovering what needs it."""
    _clean_transient_files(directory)
    _complete_swaps(directory, config)
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
