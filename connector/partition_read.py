"""One Spark task's read of the ``seglog`` source: its offset range read from the segment files
(``reading``) or, without ``path``, fetched from the broker (``remote.fetch_range``), keeping only the rows
inside the bounds of the pushed filters (``pushdown``).

Only tasks import this module, when they read (``SeglogBatchReader.read``): the Arrow decoder and Arrow's
compute kernels are not loaded where a query is planned."""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from .options import SourceOptions, open_log_directory
from .planning import OffsetRange
from .pushdown import ReadBounds
from .read_counter import ReadCounter
from .reading import read_range
from .remote import fetch_range


def read_partition(options: SourceOptions, offset_range: OffsetRange, bounds: ReadBounds = ReadBounds(),
                   counter: ReadCounter | None = None) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of ``offset_range`` in offset order, only rows inside ``bounds``; ``counter``
    counts the bytes of segment files read, or of record batches fetched."""
    if not options.path:
        batches = fetch_range(options.bootstrap, offset_range, include_headers=options.include_headers,
                              fail_on_data_loss=options.fail_on_data_loss, max_bytes=options.chunk_bytes,
                              read_committed=options.read_committed, client_props=options.client_props,
                              counter=counter)
    else:
        batches = read_range(open_log_directory(options), offset_range, include_headers=options.include_headers,
                             fail_on_data_loss=options.fail_on_data_loss, chunk_bytes=options.chunk_bytes,
                             read_committed=options.read_committed, counter=counter)
    if bounds.keys is None and bounds.min_timestamp is None and bounds.max_timestamp is None:
        yield from batches
        return
    for batch in batches:
        # Rows are dropped only once decoded: no batch is left out unread for its keys or timestamps.
        batch = keep_rows(bounds, batch)
        if batch.num_rows:
            yield batch


def keep_rows(bounds: ReadBounds, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The rows of a decoded batch inside the timestamp and key bounds (the columns of Spark's Kafka schema)."""
    if bounds.keys is None and _within_timestamps(bounds, batch):
        return batch  # the usual batch of a range planned from the time index: every row is kept
    keep = None
    if bounds.min_timestamp is not None:
        keep = pc.greater_equal(batch.column("timestamp").cast(pa.int64()), bounds.min_timestamp * 1000)
    if bounds.max_timestamp is not None:
        below = pc.less_equal(batch.column("timestamp").cast(pa.int64()), bounds.max_timestamp * 1000)
        keep = below if keep is None else pc.and_(keep, below)
    if bounds.keys is not None:
        keys = pa.array(sorted(bounds.keys), type=batch.schema.field("key").type)
        same = pc.fill_null(pc.is_in(batch.column("key"), value_set=keys), False)
        keep = same if keep is None else pc.and_(keep, same)
    return batch if keep is None else batch.filter(keep)


def _within_timestamps(bounds: ReadBounds, batch: pa.RecordBatch) -> bool:
    """Whether every row of ``batch`` is inside the timestamp bounds (one pass for the smallest and largest)."""
    if not batch.num_rows:
        return True
    extremes = pc.min_max(batch.column("timestamp").cast(pa.int64()))
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    return ((bounds.min_timestamp is None or low >= bounds.min_timestamp * 1000)
            and (bounds.max_timestamp is None or high <= bounds.max_timestamp * 1000))
