"""Reading one offset range on an executor: segment files straight into Arrow.

The task lists the partition's segments itself (the driver's listing may be
stale) — of both tiers when the log dir has a remote tier (``format.tiered_log``):
remote segments are read straight from object storage — starts at the segment
holding the first offset, and reads segment after segment until the range is
done. Retention may delete segments under it: a range that starts below what
is left is data loss, which fails the task naming topic, partition and offsets
when ``failOnDataLoss`` is true, and skips ahead with a warning otherwise; so is
a complete remote segment one of whose objects is missing (the message names it).
"""

from __future__ import annotations

import bisect
import logging
from contextlib import contextmanager
from typing import Iterator

import pyarrow as pa

from format.layout import TopicPartition
from format.log_dir import LogDirectory, SegmentInfo
from format.segment_reader import SegmentReader

from .data_loss import data_loss
from .planning import OffsetRange
from .read_counter import ReadCounter

log = logging.getLogger(__name__)


@contextmanager
def _counted(reader: SegmentReader, counter: ReadCounter | None) -> Iterator[SegmentReader]:
    with reader:
        try:
            yield reader
        finally:
            if counter is not None:
                counter.bytes_read += reader.records.bytes_read


def _still_listed(directory: LogDirectory, tp: TopicPartition, segment: SegmentInfo) -> bool:
    return any(s.remote is not None and s.remote.segment_id == segment.remote.segment_id
               for s in directory.segments(tp))


def read_range(directory: LogDirectory, r: OffsetRange, *, include_headers: bool, fail_on_data_loss: bool,
               chunk_bytes: int, read_committed: bool = False, counter: ReadCounter | None = None
               ) -> Iterator[pa.RecordBatch]:
    """Arrow record batches holding the records of ``r``, in offset order; ``read_committed`` leaves out
    those of aborted transactions (the planner ends ``r`` at or below the last stable offset); ``counter``
    counts the bytes of segment files read."""
    tp = TopicPartition(r.topic, r.partition)
    aborted = directory.aborted_transactions(tp, r.from_offset, r.until_offset) if read_committed else None
    position = r.from_offset
    while position < r.until_offset:
        segments = directory.segments(tp)
        if not segments:
            data_loss(f"partition {tp} has no segment left; offsets {position} to {r.until_offset} are gone",
                      fail_on_data_loss)
            return
        bases = [s.base_offset for s in segments]
        if position < bases[0]:
            data_loss(f"offsets {position} to {min(bases[0], r.until_offset)} of {tp} are gone: the log now "
                      f"starts at {bases[0]}", fail_on_data_loss)
            position = bases[0]
            continue
        i = bisect.bisect_right(bases, position) - 1
        segment = segments[i]
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        until = r.until_offset if next_base is None else min(r.until_offset, next_base)
        try:
            with _counted(directory.reader(tp, segment), counter) as reader:
                for batch in reader.iter_arrow(r.topic, r.partition, position, until, include_headers,
                                               chunk_bytes, aborted):
                    yield batch
                    position = batch.column("offset")[-1].as_py() + 1
        except FileNotFoundError:
            if segment.remote is not None and _still_listed(directory, tp, segment):
                # The metadata says the copy is complete, yet an object of it is missing: the data is lost.
                data_loss(f"offsets {position} to {until} of {tp} are in remote segment {segment.remote.segment_id}, "
                          f"whose object {directory.location(tp, segment)} is missing", fail_on_data_loss)
                position = until
                if next_base is None:
                    return
                continue
            # Deleted while being read: list again; the data-loss rule decides what follows.
            log.info("segment %d of %s vanished while being read; listing again", segment.base_offset, tp)
            continue
        if next_base is None:
            return  # the active segment: what is not there yet is past the log end
        position = max(position, until)
