"""What a log directory holds, listed from its files through fsspec: partition directories and their segments.

Nothing is locked and nothing is written: a broker may be adding and removing
segments while this lists, so every listing is fresh (fsspec's cache is
dropped first) and a directory that vanished lists as empty. The log end
offset is that of the last complete batch: a torn tail is not data yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from fsspec.spec import AbstractFileSystem

from . import layout
from .layout import TopicPartition
from .segment_reader import SegmentReader

__all__ = ["SegmentInfo", "entries", "partitions", "segments", "log_end_offset"]


@dataclass(frozen=True)
class SegmentInfo:
    """One segment's ``.log`` file: its base offset and size (``swapped``: a cleaned ``.log.swap`` standing in)."""

    base_offset: int
    size: int
    swapped: bool = False

    @property
    def file_name(self) -> str:
        name = layout.log_file_name(self.base_offset)
        return name + layout.SWAP_FILE_SUFFIX if self.swapped else name


def entries(fs: AbstractFileSystem, path: str) -> list[tuple[str, dict]]:
    """(base name, fsspec entry) of everything in ``path`` now; empty when ``path`` does not exist."""
    fs.invalidate_cache(path)
    try:
        listed = fs.ls(path, detail=True)
    except FileNotFoundError:
        return []
    return [(e["name"].rstrip("/").rsplit("/", 1)[-1], e) for e in listed]


def partitions(fs: AbstractFileSystem, root: str) -> list[TopicPartition]:
    """The live partition directories of the log directory ``root``, in topic and partition order.

    Deleted, future and stray directories (and anything else) are left out.
    """
    out = []
    for name, entry in entries(fs, root):
        if entry.get("type") != "directory":
            continue
        try:
            out.append(layout.parse_partition_dir(name))
        except ValueError:
            continue
    return sorted(out, key=lambda tp: (tp.topic, tp.partition))


def segments(fs: AbstractFileSystem, directory: str, *, swapped: bool = False) -> list[SegmentInfo]:
    """The segments of a partition directory, in offset order.

    With ``swapped``, a cleaned ``.log.swap`` stands in for a ``.log`` that is
    missing: between the cleaner renaming the old segments away and the swap
    file into place, the cleaned data exists under that name only.
    """
    found: dict[int, SegmentInfo] = {}
    swap_suffix = layout.LOG_FILE_SUFFIX + layout.SWAP_FILE_SUFFIX
    for name, entry in entries(fs, directory):
        is_log = name.endswith(layout.LOG_FILE_SUFFIX)
        if not (is_log or (swapped and name.endswith(swap_suffix))):
            continue
        try:
            base_offset = layout.offset_from_file_name(name)
        except ValueError:
            continue
        if is_log or base_offset not in found:
            found[base_offset] = SegmentInfo(base_offset, int(entry.get("size") or 0), not is_log)
    return [found[b] for b in sorted(found)]


def log_end_offset(fs: AbstractFileSystem, directory: str, listed: Sequence[SegmentInfo]) -> int:
    """The offset after the last complete batch of the segments ``listed`` (in offset order, at least one).

    Only the last segment is read, from its last index entry on; while it holds
    no batch yet (just rolled) the end is its base offset.
    """
    last = listed[-1]
    with SegmentReader(fs, directory, last.base_offset, last.size) as reader:
        found = reader.next_offset()
    return last.base_offset if found is None else found
