"""A partition's segments as its directory listing shows them, read through fsspec from wherever the log dir is.

The job's planning sees a segment as the sizes of its four files and its
modification time (``RemoteSegment``), and reads a segment's largest timestamp
from its time index and last batches, as ``LogSegment.largest_timestamp``
does for the broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Mapping

from format import layout, log_dir
from format.file_records import FileRecords
from format.fs import is_local, join
from format.index import OffsetIndex, TimeIndex

from ..cleaner import SegmentSizes

#: A segment's files: the log and its three indexes.
SEGMENT_FILE_SUFFIXES = (layout.LOG_FILE_SUFFIX, layout.INDEX_FILE_SUFFIX, layout.TIME_INDEX_FILE_SUFFIX,
                         layout.TXN_INDEX_FILE_SUFFIX)


def _mtime_ms(entry: Mapping) -> int | None:
    value = entry.get("mtime", entry.get("LastModified", entry.get("last_modified")))
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(float(value) * 1000)


def list_files(fs, directory: str) -> dict[str, Mapping]:
    """File name -> listing entry (size, modification time) of a directory, fresh."""
    return {name: entry for name, entry in log_dir.entries(fs, directory) if entry.get("type") != "directory"}


@dataclass(frozen=True)
class RemoteSegment:
    """A segment as its directory listing shows it."""

    base_offset: int
    size: int
    offset_index_size: int
    time_index_size: int
    txn_index_size: int
    last_modified_ms: int | None

    def sizes(self) -> SegmentSizes:
        return SegmentSizes(self.base_offset, self.size, self.offset_index_size, self.time_index_size)


def remote_segments(files: Mapping[str, Mapping]) -> list[RemoteSegment]:
    out = []
    for name, entry in files.items():
        if not name.endswith(layout.LOG_FILE_SUFFIX):
            continue
        try:
            base = layout.offset_from_file_name(name)
        except ValueError:
            continue

        def size_of(file_name: str) -> int:
            found = files.get(file_name)
            return int(found.get("size") or 0) if found else 0

        out.append(RemoteSegment(base, int(entry.get("size") or 0), size_of(layout.offset_index_file_name(base)),
                                 size_of(layout.time_index_file_name(base)), size_of(layout.txn_index_file_name(base)),
                                 _mtime_ms(entry)))
    return sorted(out, key=lambda s: s.base_offset)


def open_records(fs, path: str, size: int | None) -> FileRecords:
    if is_local(fs):
        return FileRecords.open(path, writable=False)
    return FileRecords.open_fs(fs, path, size)


def segment_path(directory: str, fs, base_offset: int, suffix: str = layout.LOG_FILE_SUFFIX) -> str:
    return join(fs, directory, layout.filename_prefix_from_offset(base_offset) + suffix)


def largest_timestamp(fs, directory: str, segment: RemoteSegment) -> int:
    """A segment's largest timestamp (its time index's last entry, then the batches after it),
    or its modification time when it has none, as ``LogSegment.largest_timestamp``."""
    try:
        data = fs.cat_file(segment_path(directory, fs, segment.base_offset, layout.TIME_INDEX_FILE_SUFFIX))
        last = TimeIndex.from_bytes(segment.base_offset, data).last_entry
    except FileNotFoundError:
        last = None
    start = 0
    best = -1
    if last is not None and last.timestamp >= 0:
        best = last.timestamp
        try:
            index = OffsetIndex.from_bytes(segment.base_offset, fs.cat_file(
                segment_path(directory, fs, segment.base_offset, layout.INDEX_FILE_SUFFIX)))
            start = index.lookup(last.offset).position
        except FileNotFoundError:
            start = 0
    records = open_records(fs, segment_path(directory, fs, segment.base_offset), segment.size)
    try:
        for _, header in records.batch_headers(start):
            best = max(best, header.max_timestamp)
    finally:
        records.close()
    if best >= 0:
        return best
    return segment.last_modified_ms if segment.last_modified_ms is not None else -1
