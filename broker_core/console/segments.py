"""A partition's segments as the console lists them: offsets and bytes each covers, and how far its
offset index (``.index``) and time index (``.timeindex``) reach — read from the indexes' first and last
entries, never from the ``.log``."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from format.index import NO_TIMESTAMP

from ..log.log import Log

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexCoverage:
    """An index's entries and the first and last offset (and timestamp, for the time index) they name;
    the offsets are None when the index is empty."""

    entries: int
    first_offset: int | None
    last_offset: int | None
    first_timestamp: int | None = None
    last_timestamp: int | None = None


@dataclass(frozen=True)
class SegmentDescription:
    base_offset: int
    next_offset: int  # the base offset of the next segment, the log end offset for the active one
    size_bytes: int
    active: bool
    largest_timestamp: int | None  # None: no record carries a timestamp
    offset_index: IndexCoverage
    time_index: IndexCoverage


def describe_segments(partition_log: Log) -> list[SegmentDescription]:
    """The log's segments, oldest first; one that retention or compaction removes meanwhile is left out."""
    segments = partition_log.segments
    end = partition_log.log_end_offset
    out = []
    for i, segment in enumerate(segments):
        next_offset = segments[i + 1].base_offset if i + 1 < len(segments) else end
        try:
            offsets = segment.offset_index
            n = offsets.entries
            offset_index = IndexCoverage(n, offsets.entry(0).offset if n else None,
                                         offsets.last_offset if n else None)
            times = segment.time_index
            n = times.entries
            first = times.entry(0) if n else None
            last = times.last_entry
            time_index = IndexCoverage(n, first.offset if first else None, last.offset if n else None,
                                       first.timestamp if first else None, last.timestamp if n else None)
            largest = segment.max_timestamp_so_far
            size = segment.size
        except (OSError, ValueError) as exc:
            log.debug("segment %s of %s vanished while described: %s", segment.base_offset,
                      partition_log.topic_partition, exc)
            continue
        out.append(SegmentDescription(segment.base_offset, next_offset, size, i + 1 == len(segments),
                                      None if largest == NO_TIMESTAMP else largest, offset_index, time_index))
    return out
