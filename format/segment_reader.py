"""Read-only access to one segment on any fsspec filesystem, for readers that
never own the log: Spark tasks, dumps, tools pointed at a bucket.

The offset index is read whole (it is small and sparse) and searched in
memory; the ``.log`` file is read in chunks from the batch that holds the
first wanted offset, and only complete batches are decoded. The file's size is
taken once, when the reader opens: a segment still being written is read up
to that point, which is always a set of whole batches or a torn tail that
reading stops before. Offsets are checked along every walk as the broker
checks them (``offset_order``): a batch whose offsets contradict its
neighbours or the index raises ``CorruptRecordError`` and is never decoded.

Finding offsets (the indexes, a walk of batch headers) needs neither numpy nor Arrow: the chunk walk
(``batch_table``) and the decoder (``arrow``) are imported by the reads that use them, so that planning
a query, which only finds offsets, does not load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

from . import layout
from .file_records import FileRecords, LogOffsetPosition, TimestampAndOffset
from .fs import join
from .index import OffsetIndex, TimeIndex
from .offset_order import OffsetOrder, OffsetOrderError
from .record_batch import LOG_OVERHEAD, RecordBatch
from .segment import check_tail, start_of_walk
from .txn_index import AbortedTxn

if TYPE_CHECKING:
    import pyarrow as pa

    from .batch_table import BatchTable

DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024


class _OrderBroken(Exception):
    """Batch ``index`` of a chunk broke the offset order (``error``)."""

    def __init__(self, index: int, error: OffsetOrderError):
        super().__init__(index, error)
        self.index = index
        self.error = error


class SegmentReader:
    """One segment of ``directory`` (a partition directory) on ``fs``; ``stem`` names its files when they
    are not named by the base offset alone (a remote tier's ``<base offset>-<segment id>``)."""

    def __init__(self, fs, directory: str, base_offset: int, log_size: int | None = None, stem: str | None = None):
        self.fs = fs
        self.directory = directory
        self.base_offset = base_offset
        self.stem = layout.filename_prefix_from_offset(base_offset) if stem is None else stem
        self.log_path = join(fs, directory, self.stem + layout.LOG_FILE_SUFFIX)
        self.records = FileRecords.open_fs(fs, self.log_path, log_size)
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None

    def __enter__(self) -> "SegmentReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.records.close()

    @property
    def size(self) -> int:
        return self.records.size_in_bytes

    def _load_index(self, cls, name: str):
        path = join(self.fs, self.directory, name)
        try:
            data = self.fs.cat_file(path)
        except FileNotFoundError:
            data = b""  # no index yet: every lookup starts at the top of the file
        return cls.from_bytes(self.base_offset, data, path=path)

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = self._load_index(OffsetIndex, self.stem + layout.INDEX_FILE_SUFFIX)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = self._load_index(TimeIndex, self.stem + layout.TIME_INDEX_FILE_SUFFIX)
        return self._time_index

    def _start_of_walk(self, offset: int) -> tuple[int, OffsetOrder]:
        return start_of_walk(self.records, self.offset_index, self.base_offset, offset)

    def translate_offset(self, offset: int, order: OffsetOrder | None = None) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (or the first after it), or None past the end."""
        position, start_order = self._start_of_walk(offset)
        return self.records.search_for_offset(offset, position, order if order is not None else start_order)

    def next_offset(self) -> int | None:
        """The offset after the last sound batch, or None when the segment holds none: the tail
        after the last index entry is validated as the broker validates it on open, so both
        report the same log end."""
        return check_tail(self.records, self.offset_index, self.base_offset).next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None
                                 ) -> TimestampAndOffset | None:
        starting_offset = self.base_offset if starting_offset is None else starting_offset
        entry = self.time_index.lookup(timestamp)
        position, order = self._start_of_walk(max(entry.offset, starting_offset))
        return self.records.search_for_timestamp(timestamp, position, starting_offset, order)

    def read_chunks(self, from_offset: int, until_offset: int | None = None,
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[tuple[int, bytes, list[RecordBatch]]]:
        """(file position, bytes, batches) of complete batches from the one holding ``from_offset``:
        ``read_tables`` with each batch as a ``RecordBatch`` view into the bytes."""
        for position, data, table in self.read_tables(from_offset, until_offset, chunk_bytes):
            yield position, data, table.batches()

    def read_tables(self, from_offset: int, until_offset: int | None = None,
                    chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[tuple[int, bytes, BatchTable]]:
        """(file position, bytes, batches) of complete batches from the one holding ``from_offset``:
        the batches (a ``BatchTable`` over the bytes) are walked once here so that the decoder need
        not walk them again; the bytes may run past the last batch (into one cut short by the chunk).
        A chunk is given out only once the batch after it is seen to follow it, so a batch whose
        offsets contradict the next one's is never decoded (either may be the damaged one)."""
        from .batch_table import walk_batches

        position, order = self._start_of_walk(from_offset)
        start = self.records.search_for_offset(from_offset, position, order)
        if start is None:
            return
        first = start.position
        pos = start.position
        size = self.size
        while pos < size:
            data = self.records.read(pos, min(chunk_bytes, size - pos))
            table = walk_batches(data, path=self.log_path, base_position=pos, until_offset=until_offset)
            reached_until = bool(len(table)) and until_offset is not None and (
                int(table.headers["base_offset"][-1]) >= until_offset)
            try:
                self._check_order(order, table, pos == first)
            except _OrderBroken as broken:
                if broken.index > 1:
                    yield pos, data, table[:broken.index - 1]
                raise broken.error from None
            if reached_until:
                table = table[:-1]
            end = int(table.ends[-1]) if len(table) else 0
            if end == 0 and not reached_until:
                # The next batch is larger than a chunk, or it is a torn tail.
                if len(data) < LOG_OVERHEAD:
                    return
                needed = int.from_bytes(data[8:12], "big", signed=True) + LOG_OVERHEAD
                base_offset = int.from_bytes(data[0:8], "big", signed=True)
                if needed <= len(data) or pos + needed > size or (
                        until_offset is not None and base_offset >= until_offset):
                    return
                data = self.records.read(pos, needed)
                table = walk_batches(data, path=self.log_path, base_position=pos)
                if pos != first:
                    h = table.headers[0]
                    order.check(pos, int(h["base_offset"]), int(h["base_offset"]) + int(h["last_offset_delta"]))
                end = needed
            if end and not reached_until and pos + end + LOG_OVERHEAD <= size:
                following = data[end:end + 8] if len(data) >= end + 8 else self.records.read(pos + end, 8)
                try:
                    order.check_next_base(pos + end, int.from_bytes(following, "big", signed=True))
                except OffsetOrderError:
                    if len(table) > 1:
                        yield pos, data, table[:-1]
                    raise
            if end:
                yield pos, data, table
            if reached_until:
                return
            pos += end

    @staticmethod
    def _check_order(order: OffsetOrder, table: BatchTable, starts_the_walk: bool) -> None:
        """Every batch of ``table`` through ``order`` (the walk's first batch, found by the offset
        search, is not checked again); raises ``_OrderBroken`` naming the batch that breaks it."""
        skip = 1 if starts_the_walk else 0
        base, last = table.base_offsets, table.last_offsets
        i = skip + order.accept_run(base[skip:], last[skip:])
        positions = table.file_positions
        while i < len(table):
            try:
                order.check(int(positions[i]), int(base[i]), int(last[i]))
            except OffsetOrderError as exc:
                raise _OrderBroken(i, exc) from None
            i += 1

    def iter_arrow(self, topic: str, partition: int, from_offset: int, until_offset: int | None = None,
                   include_headers: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                   aborted_transactions: Sequence[AbortedTxn] | None = None) -> Iterator[pa.RecordBatch]:
        """Arrow record batches of the records with ``from_offset <= offset < until_offset``, without
        those of ``aborted_transactions`` (read_committed)."""
        from .arrow import decode_to_arrow

        for position, data, table in self.read_tables(from_offset, until_offset, chunk_bytes):
            batch = decode_to_arrow(data, topic=topic, partition=partition, from_offset=from_offset,
                                    until_offset=until_offset, include_headers=include_headers,
                                    path=self.log_path, base_position=position, table=table,
                                    aborted_transactions=aborted_transactions)
            if batch.num_rows:
                yield batch
