"""One log segment: a ``.log`` file and its ``.index``, ``.timeindex`` and ``.txnindex``
(Kafka's LogSegment).

The segment appends whole batches whose offsets are already assigned, adds a
sparse index entry every ``index.interval.bytes``, translates offsets and
timestamps into file positions, and recovers itself by re-validating every
batch and rebuilding its indexes. It knows nothing of the other segments of
its partition; the log above it does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import layout
from .errors import CorruptRecordError, IndexFullError, InvalidRecordError
from .file_handles import FileHandleCache
from .file_records import FileRecords, LogOffsetPosition, TimestampAndOffset
from .index import DEFAULT_MAX_INDEX_SIZE, OffsetIndex, TimeIndex
from .record_batch import NO_TIMESTAMP, iter_batches
from .txn_index import TransactionIndex

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read returns: where it started and the bytes of complete batches."""

    fetch_offset: int
    segment_base_offset: int
    position: int
    records: bytes

    @property
    def size(self) -> int:
        return len(self.records)


@dataclass(frozen=True, slots=True)
class RollParams:
    """What the log asks a segment when deciding to roll (Kafka's RollParams)."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


class LogSegment:
    """A segment of a partition's log, starting at ``base_offset``."""

    def __init__(self, log: FileRecords, offset_index: OffsetIndex, time_index: TimeIndex,
                 txn_index: TransactionIndex, base_offset: int,
                 index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES, rolling_jitter_ms: int = 0):
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.rolling_jitter_ms = rolling_jitter_ms
        self.bytes_since_last_index_entry = 0
        self._max_timestamp_and_offset: TimestampAndOffset | None = None
        self.rolling_based_timestamp: int | None = None
        # When the owner created (or last emptied) the segment: the roll clock without timestamps.
        self.created_ms: int | None = None
        # Why the last recovery stopped early, if it did (for the log's warning).
        self.last_recovery_error: CorruptRecordError | None = None

    @classmethod
    def open(cls, directory: str | os.PathLike, base_offset: int, *,
             index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
             max_index_size: int = DEFAULT_MAX_INDEX_SIZE, file_suffix: str = "",
             rolling_jitter_ms: int = 0, handles: FileHandleCache | None = None) -> "LogSegment":
        """Open (or create) the segment files in ``directory``, all carrying ``file_suffix``.

        The files hold no descriptor between uses: ``handles`` (the process's cache by
        default) keeps a bounded number of them open and reopens the others on demand.
        """
        d = os.fspath(directory)
        log = FileRecords.open(os.path.join(d, layout.log_file_name(base_offset) + file_suffix), handles=handles)
        offset_index = OffsetIndex(os.path.join(d, layout.offset_index_file_name(base_offset) + file_suffix),
                                   base_offset, max_index_size, handles=handles)
        time_index = TimeIndex(os.path.join(d, layout.time_index_file_name(base_offset) + file_suffix),
                               base_offset, max_index_size, handles=handles)
        txn_index = TransactionIndex(os.path.join(d, layout.txn_index_file_name(base_offset) + file_suffix),
                                     base_offset)
        return cls(log, offset_index, time_index, txn_index, base_offset, index_interval_bytes, rolling_jitter_ms)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path})"

    @property
    def size(self) -> int:
        return self.log.size_in_bytes

    # --- timestamps -----------------------------------------------------------

    def _max_timestamp(self) -> TimestampAndOffset:
        if self._max_timestamp_and_offset is None:
            # Kafka takes the last time index entry; the batches after it may be newer.
            last = self.time_index.last_entry
            start = self.offset_index.lookup(last.offset).position if last.timestamp != NO_TIMESTAMP else 0
            tail = self.log.largest_timestamp_after(start)
            if tail.timestamp > last.timestamp:
                self._max_timestamp_and_offset = tail
            else:
                self._max_timestamp_and_offset = TimestampAndOffset(last.timestamp, last.offset)
        return self._max_timestamp_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_timestamp().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_timestamp().offset

    @property
    def largest_timestamp(self) -> int:
        """The largest timestamp in the segment, or the file's modification time when it has none."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return int(os.path.getmtime(self.log.path) * 1000)

    # --- appending -----------------------------------------------------------

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    def append(self, records, batches: list[tuple[int, int, int, int]] | None = None) -> int:
        """Append validated batches (offsets assigned); returns the file position they start at.

        ``batches`` may give (base offset, last offset, max timestamp, size) of each
        batch when the caller already knows them, sparing a walk over the bytes.
        """
        view = memoryview(records)
        if not len(view):
            return self.size
        position = self.size
        appended = 0
        max_ts = self._max_timestamp()
        if batches is None:
            batches = [(h.base_offset, h.last_offset, h.max_timestamp, h.size_in_bytes)
                       for h in (b.header for b in iter_batches(view, path=self.log.path, base_position=position,
                                                                stop_at_partial=False))]
        if batches[0][0] < self.base_offset:
            raise InvalidRecordError(f"{self}: batch base offset {batches[0][0]} is below the "
                                     f"segment's base offset {self.base_offset}")
        last_offset = batches[-1][1]
        if not self.can_convert_to_relative_offset(last_offset):
            raise InvalidRecordError(f"{self}: offset {last_offset} is beyond the int32 range of relative offsets")
        before = (self.bytes_since_last_index_entry, self.rolling_based_timestamp)
        try:
            for _, batch_last_offset, batch_max_timestamp, size in batches:
                if self.rolling_based_timestamp is None and self.size == 0 and appended == 0:
                    self.rolling_based_timestamp = batch_max_timestamp
                if batch_max_timestamp > max_ts.timestamp:
                    max_ts = TimestampAndOffset(batch_max_timestamp, batch_last_offset)
                if self.bytes_since_last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(batch_last_offset, position + appended)
                    self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                    self.bytes_since_last_index_entry = 0
                self.bytes_since_last_index_entry += size
                appended += size
            self.log.append(view)
        except OSError:
            # A full disk: the .log is as before (FileRecords.append undoes a partial write),
            # so the index entries pointing into this append go too.
            self.offset_index.truncate_to(batches[0][0])
            self.time_index.truncate_to(batches[0][0])
            self.bytes_since_last_index_entry, self.rolling_based_timestamp = before
            raise
        self._max_timestamp_and_offset = max_ts
        return position

    def update_txn_index(self, aborted_txn) -> None:
        self.txn_index.append(aborted_txn)

    # --- reading -----------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (or the first after it): index lookup, then a short scan."""
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset(offset, max(mapping.position, starting_position))

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False, *, max_offset: int | None = None,
             validate: bool = False) -> FetchDataInfo | None:
        """Complete batches from the one holding ``start_offset``, at most ``max_size`` bytes and
        none starting at or past ``max_offset``.

        With ``min_one_message`` the first batch is returned whole even when it is
        larger than ``max_size``, as Kafka does so a consumer can make progress.
        The bytes are read once and walked once. With ``validate`` every batch is
        checked against its CRC: the read stops before a corrupt batch, and raises
        ``CorruptRecordError`` (file and position) when the first one is.
        Returns None when the offset is beyond the segment.
        """
        if max_size < 0:
            raise ValueError(f"{self}: invalid max size {max_size}")
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        limit = self.size if max_position is None else min(max_position, self.size)
        budget = max(max_size, start.size) if min_one_message else max_size
        wanted = min(budget, limit - start.position)
        data = self.log.read(start.position, wanted) if wanted > 0 else b""
        end = 0
        try:
            for batch in iter_batches(data, path=self.log.path, base_position=start.position):
                h = batch.header
                if max_offset is not None and h.base_offset >= max_offset:
                    break
                if validate and batch.compute_checksum() != h.crc:
                    raise CorruptRecordError(f"CRC mismatch: stored 0x{h.crc:08x}, computed "
                                             f"0x{batch.compute_checksum():08x}", path=self.log.path,
                                             position=batch.position)
                end = batch.position - start.position + h.size_in_bytes
        except CorruptRecordError:
            if end == 0:
                raise
            # Serve the sound batches before it; the next read starts at the corrupt one and fails.
        return FetchDataInfo(start_offset, self.base_offset, start.position, data if end == len(data) else data[:end])

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None
                                 ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``timestamp``."""
        starting_offset = self.base_offset if starting_offset is None else starting_offset
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def read_next_offset(self) -> int:
        """The offset after the last batch of the segment (the base offset when empty)."""
        mapping = self.offset_index.lookup(_INT32_MAX + self.base_offset)
        return self.log.next_offset(self.base_offset, mapping.position)

    # --- recovery and truncation ------------------------------------------------

    def recover(self, max_message_size: int | None = None) -> int:
        """Re-validate every batch, rebuild the indexes and cut a corrupt or torn tail.

        Returns the number of bytes truncated. The first invalid batch (CRC,
        length, magic, offsets going backwards) ends the valid log.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None
        self.last_recovery_error = None
        max_ts = TimestampAndOffset(NO_TIMESTAMP, self.base_offset)
        valid_bytes = 0
        last_offset = self.base_offset - 1
        try:
            for batch in self.log.batches(validate=True, stop_at_partial=True, max_batch_size=max_message_size):
                h = batch.header
                if h.base_offset <= last_offset or not self.can_convert_to_relative_offset(h.last_offset):
                    raise CorruptRecordError(f"batch offsets {h.base_offset}..{h.last_offset} do not follow "
                                             f"offset {last_offset} within segment {self.base_offset}",
                                             path=self.log.path, position=batch.position)
                if self.rolling_based_timestamp is None:
                    self.rolling_based_timestamp = h.max_timestamp
                if h.max_timestamp > max_ts.timestamp:
                    max_ts = TimestampAndOffset(h.max_timestamp, h.last_offset)
                if self.bytes_since_last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(h.last_offset, valid_bytes)
                    self.time_index.maybe_append(max_ts.timestamp, max_ts.offset)
                    self.bytes_since_last_index_entry = 0
                self.bytes_since_last_index_entry += h.size_in_bytes
                valid_bytes += h.size_in_bytes
                last_offset = h.last_offset
        except CorruptRecordError as exc:
            self.last_recovery_error = exc
        truncated = self.log.truncate_to(valid_bytes)
        self._max_timestamp_and_offset = max_ts
        # As a clean close would have, record the largest timestamp before trimming.
        if max_ts.timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or past the one holding ``offset``; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if mapping is None:
            return 0
        removed = self.log.truncate_to(mapping.position)
        self._max_timestamp_and_offset = None
        if self.size == 0:
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        return removed

    def sanity_check(self) -> None:
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        self.txn_index.sanity_check()

    # --- rolling -----------------------------------------------------------

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        """How long this segment has been open, measured as Kafka does: in message time
        (the incoming timestamp minus the segment's first), falling back to the wall
        clock since the segment was created when it has no timestamp yet."""
        if self.rolling_based_timestamp is None and self.size > 0:
            first = next(self.log.batch_headers(), None)
            self.rolling_based_timestamp = first[1].max_timestamp if first else None
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now - (self.created_ms if self.created_ms is not None else now)

    def should_roll(self, params: RollParams) -> bool:
        """Kafka's reasons: size, age, a full index, or an offset out of int32 range."""
        reached_time = (self.time_waited_for_roll(params.now, params.max_timestamp_in_messages)
                        > params.max_segment_ms - self.rolling_jitter_ms)
        return ((self.size > params.max_segment_bytes - params.messages_size)
                or (self.size > 0 and reached_time)
                or self.offset_index.is_full or self.time_index.is_full
                or not self.can_convert_to_relative_offset(params.max_offset_in_messages))

    def on_becoming_inactive_segment(self) -> None:
        """Seal the indexes when the log rolls past this segment (Kafka's behaviour)."""
        max_ts = self._max_timestamp()
        self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    # --- files -----------------------------------------------------------

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def resize_indexes(self, max_index_size: int) -> None:
        """Give the indexes room again (the log does this for its active segment on load)."""
        self.offset_index.resize(max_index_size)
        self.time_index.resize(max_index_size)

    def close(self) -> None:
        max_ts = self._max_timestamp_and_offset
        if max_ts is not None and max_ts.timestamp > self.time_index.last_entry.timestamp:
            try:
                self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
            except IndexFullError:
                pass  # a trimmed index already took its final entry when it was sealed
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.log.close()

    def _files(self):
        return [self.log, self.offset_index, self.time_index, self.txn_index]

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment (``.cleaned`` -> ``.swap`` -> ``""``...)."""
        for f in self._files():
            path = f.path
            if path is None:
                continue
            base = path[:-len(old_suffix)] if old_suffix and path.endswith(old_suffix) else path
            f.rename_to(base + new_suffix)

    def has_suffix(self, suffix: str) -> bool:
        return self.log.path.endswith(suffix)

    def delete(self) -> None:
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log.close()
        try:
            os.remove(self.log.path)
        except FileNotFoundError:
            pass
