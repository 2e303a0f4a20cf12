"""One log segment: a ``.log`` file and its ``.index``, ``.timeindex`` and ``.txnindex``
(Kafka's LogSegment).

The segment appends whole batches whose offsets are already assigned, adds a
sparse index entry every ``index.interval.bytes``, translates offsets and
timestamps into file positions, and recovers itself by re-validating every
batch and rebuilding its indexes. Every walk over its batches checks their
offsets (``offset_order``); recovery moves the bytes it cuts into a file
beside the segment instead of deleting them. Opened read-only it changes
nothing and can follow a file its owner is still writing (``refresh``). It
knows nothing of the other segments of its partition; the log above it does.

It remembers which of its bytes passed their CRC check in this process
(``crc_checked``; why that is sound is written there): a read asked for zero
copy returns those as a ``FileSlice`` of the file instead of reading them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import layout
from .checkpoint import fsync_dir
from .crc_checked import CrcCheckedRanges
from .errors import CorruptRecordError, IndexFullError, InvalidRecordError
from .file_handles import FileHandleCache
from .file_records import FileRecords, LogOffsetPosition, TimestampAndOffset, ValidPrefix
from .file_slice import FileSlice
from .index import DEFAULT_MAX_INDEX_SIZE, OffsetIndex, TimeIndex
from .offset_order import OffsetOrder, OffsetOrderError
from .record_batch import ATTRIBUTES_OFFSET, LOG_OVERHEAD, NO_TIMESTAMP, batch_spans, crc32c, iter_batches
from .txn_index import TransactionIndex

DEFAULT_INDEX_INTERVAL_BYTES = 4096  # index.interval.bytes
_INT32_MAX = (1 << 31) - 1
# A zero-copy read of fewer bytes is copied instead: sending a few KiB from a file costs more calls than
# copying them, and every slice holds a descriptor until it is sent.
ZERO_COPY_MIN_BYTES = 16 * 1024
# A zero-copy read reads the headers of its last batches this much at a time.
_ZERO_COPY_HEADER_READ = 4096


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read returns: where it started and the bytes of complete batches.

    ``records`` is a read-only view of the buffer the file was read into (a
    ``memoryview``, or ``b""`` when nothing was read), not a copy: it is what a
    fetch response writes to the socket. ``bytes(records)`` makes a copy.
    A read asked for zero copy may instead return a ``FileSlice`` of the
    segment file (its owner closes it), and then says ``next_offset``, the
    offset after its last batch, since its bytes are not at hand to walk."""

    fetch_offset: int
    segment_base_offset: int
    position: int
    records: bytes | memoryview | FileSlice
    next_offset: int | None = None

    @property
    def size(self) -> int:
        return len(self.records)


@dataclass(frozen=True, slots=True)
class SetAside:
    """Bytes a recovery moved out of a segment: ``source`` from ``position`` on, now in ``path``."""

    source: str
    position: int
    path: str
    size: int
    records: int  # in the batches whose headers could still be read


def count_records(records: FileRecords, position: int) -> int:
    """The records of the batches from ``position`` whose headers still make sense (an estimate of
    what damaged bytes held)."""
    count = 0
    try:
        for _, header in records.batch_headers(position):
            count += max(header.records_count, 0)
    except CorruptRecordError:
        pass
    return count


def _free_set_aside_path(directory: str, name: str, position: int) -> str:
    taken = set(os.listdir(directory))
    for attempt in range(1000):
        candidate = layout.set_aside_file_name(name, position, attempt)
        if candidate not in taken:
            return os.path.join(directory, candidate)
    raise FileExistsError(f"{directory}: no free name to set {name} aside from position {position}")


def start_of_walk(records: FileRecords, offset_index: OffsetIndex, base_offset: int, offset: int,
                  starting_position: int = 0) -> tuple[int, OffsetOrder]:
    """Where a walk to ``offset`` starts (the index's entry at or below it) and the rules for the
    offsets it meets. An entry past the end of the ``.log`` (a reader that saw the index grow
    before the file) is no guide: the walk starts at the top then."""
    mapping = offset_index.lookup(offset)
    if mapping.position >= records.size_in_bytes or starting_position > mapping.position:
        return starting_position, OffsetOrder(records.path, base_offset)
    return mapping.position, OffsetOrder.from_index_entry(records.path, base_offset, mapping.offset,
                                                          mapping.position)


def check_tail(records: FileRecords, offset_index: OffsetIndex, base_offset: int,
               max_batch_size: int | None = None) -> ValidPrefix:
    """Validate the batches after the last offset index entry (CRCs and offsets): a segment a
    clean shutdown left should end there with a whole, sound batch. Where the sound batches
    end is the segment's end for every reader — the broker, ``seglog`` and Spark alike."""
    entries = offset_index.entries
    last = offset_index.entry(entries - 1) if entries else None
    if last is not None and last.position >= records.size_in_bytes:
        found = records.valid_prefix(0, OffsetOrder(records.path, base_offset), max_batch_size)
        if found.error is not None:
            return found
        return ValidPrefix(found.end, found.next_offset, CorruptRecordError(
            f"the offset index puts offset {last.offset} at position {last.position}, past the end of the "
            f"log ({records.size_in_bytes} bytes)", path=offset_index.path, position=(entries - 1) * 8))
    position, order = start_of_walk(records, offset_index, base_offset, _INT32_MAX + base_offset)
    found = records.valid_prefix(position, order, max_batch_size)
    if found.next_offset is None and found.end > 0:
        # Nothing sound from the last index entry on: the end is that of the batches before it.
        before = records.valid_prefix(0, OffsetOrder(records.path, base_offset), max_batch_size, end=found.end)
        return ValidPrefix(before.end, before.next_offset, found.error if before.error is None else before.error,
                           found.torn)
    return found


def _read_only_index(cls, path: str, base_offset: int, handles: FileHandleCache | None = None):
    """An index opened without changing anything: a missing file is an empty index."""
    try:
        return cls(path, base_offset, writable=False, handles=handles)
    except FileNotFoundError:
        return cls.from_bytes(base_offset, b"", path=path)


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
        # Why the last recovery stopped early, if it did, and where the bytes it cut went.
        self.last_recovery_error: CorruptRecordError | None = None
        self.last_recovery_set_aside: SetAside | None = None
        # The byte ranges whose batches passed their CRC in this process (see crc_checked): only those
        # are sent from the file by a zero-copy read.
        self.crc_checked = CrcCheckedRanges()

    @classmethod
    def open(cls, directory: str | os.PathLike, base_offset: int, *,
             index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
             max_index_size: int = DEFAULT_MAX_INDEX_SIZE, file_suffix: str = "",
             rolling_jitter_ms: int = 0, writable: bool = True,
             handles: FileHandleCache | None = None) -> "LogSegment":
        """Open (or create) the segment files in ``directory``, all carrying ``file_suffix``.

        The files hold no descriptor between uses: ``handles`` (the process's cache by
        default) keeps a bounded number of them open and reopens the others on demand.
        Read-only (``writable=False``) nothing is created or changed: a missing index
        is an empty one, and lookups then scan the ``.log`` from its start.
        """
        d = os.fspath(directory)
        log = FileRecords.open(os.path.join(d, layout.log_file_name(base_offset) + file_suffix), writable,
                               handles=handles)
        offset_index_path = os.path.join(d, layout.offset_index_file_name(base_offset) + file_suffix)
        time_index_path = os.path.join(d, layout.time_index_file_name(base_offset) + file_suffix)
        if writable:
            offset_index = OffsetIndex(offset_index_path, base_offset, max_index_size, handles=handles)
            time_index = TimeIndex(time_index_path, base_offset, max_index_size, handles=handles)
        else:
            offset_index = _read_only_index(OffsetIndex, offset_index_path, base_offset, handles)
            time_index = _read_only_index(TimeIndex, time_index_path, base_offset, handles)
        txn_index = TransactionIndex(os.path.join(d, layout.txn_index_file_name(base_offset) + file_suffix),
                                     base_offset)
        return cls(log, offset_index, time_index, txn_index, base_offset, index_interval_bytes, rolling_jitter_ms)

    @property
    def writable(self) -> bool:
        return self.log.writable

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
            start, order = self._start_of_walk(last.offset if last.timestamp != NO_TIMESTAMP else self.base_offset)
            tail = self.log.largest_timestamp_after(start, order)
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
        The caller has checked every batch's CRC (the log validates what it appends, the
        cleaner what it copies): the appended bytes count as checked (``crc_checked``).
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
            self.crc_checked.add(position, position + len(view))
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

    def _start_of_walk(self, offset: int, starting_position: int = 0) -> tuple[int, OffsetOrder]:
        return start_of_walk(self.log, self.offset_index, self.base_offset, offset, starting_position)

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """The batch holding ``offset`` (or the first after it): index lookup, then a short scan whose
        offsets are checked (``CorruptRecordError`` when they contradict each other or the index)."""
        position, order = self._start_of_walk(offset, starting_position)
        return self.log.search_for_offset(offset, position, order)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False, *, max_offset: int | None = None,
             validate: bool = False, next_base_offset: int | None = None,
             zero_copy: bool = False) -> FetchDataInfo | None:
        """Complete batches from the one holding ``start_offset``, at most ``max_size`` bytes and
        none starting at or past ``max_offset``.

        With ``min_one_message`` the first batch is returned whole even when it is
        larger than ``max_size``, as Kafka does so a consumer can make progress.
        The bytes are read once and walked once. Offsets are checked along the
        walk (each batch above the one before, the first where the index says,
        the last below ``next_base_offset`` — the next segment's — and below the
        batch that follows it): a batch whose neighbours contradict it is not
        served, nor is the neighbour, since either may be the damaged one. With
        ``validate`` every batch is checked against its CRC too. The read stops
        before the first damaged batch, and raises ``CorruptRecordError`` (file
        and position) when that is the first one.

        With ``zero_copy`` (and ``validate``) a read of at least
        ``ZERO_COPY_MIN_BYTES`` whose bytes all passed their CRC in this process
        (``crc_checked``) reads none of them: it finds where it ends from the
        offset index and the last headers, and returns a ``FileSlice`` of the
        file; any other read reads and checks the bytes as above, records them
        as checked, and returns them.
        Returns None when the offset is beyond the segment.
        """
        if max_size < 0:
            raise ValueError(f"{self}: invalid max size {max_size}")
        position, order = self._start_of_walk(start_offset)
        start = self.log.search_for_offset(start_offset, position, order)
        if start is None:
            return None
        limit = self.size if max_position is None else min(max_position, self.size)
        budget = max(max_size, start.size) if min_one_message else max_size
        wanted = min(budget, limit - start.position)
        if zero_copy and validate and wanted >= ZERO_COPY_MIN_BYTES and \
                self.crc_checked.covers(start.position, start.position + 1):
            info = self._read_slice(start_offset, start, wanted, max_offset)
            if info is not None:
                return info
        data = memoryview(self.log.read(start.position, wanted) if wanted > 0 else b"")
        end = 0
        before_last = 0  # where the batch before the last one kept ends
        try:
            for at, size, base_offset, last_offset, crc in batch_spans(data, path=self.log.path,
                                                                       base_position=start.position):
                if max_offset is not None and base_offset >= max_offset:
                    break  # unchecked: what follows the walk is checked against what it served
                if at:  # the first was checked on the way here
                    order.check(start.position + at, base_offset, last_offset)
                if validate:
                    computed = crc32c(data[at + ATTRIBUTES_OFFSET:at + size])
                    if computed != crc:
                        raise CorruptRecordError(f"CRC mismatch: stored 0x{crc:08x}, computed 0x{computed:08x}",
                                                 path=self.log.path, position=start.position + at)
                before_last = end
                end = at + size
            if end:
                self._check_what_follows(order, start.position + end, data[end:end + 8], next_base_offset)
        except CorruptRecordError as exc:
            if isinstance(exc, OffsetOrderError):
                end = before_last  # the batch before may be the one whose offsets are wrong
            if end == 0:
                raise
            # Serve the sound batches before it; the next read starts at the damage and fails.
        if validate and end:
            self.crc_checked.add(start.position, start.position + end)
        # A view of the bytes read: the file's bytes are copied once on their way to a client.
        return FetchDataInfo(start_offset, self.base_offset, start.position, data[:end])

    def _read_slice(self, start_offset: int, start: LogOffsetPosition, wanted: int, max_offset: int | None
                    ) -> FetchDataInfo | None:
        """``read`` as a ``FileSlice``, for CRC-checked bytes; None when the bytes it would send are not all
        checked, or something looks amiss (the copying read then finds and reports it).

        The bytes of a checked range passed their CRC and offset checks and do not change
        (``crc_checked``), so the read need not visit every batch again: it finds where it ends from the
        offset index and reads the headers of the last batch or two only."""
        try:
            walked = self._walk_end(start, start.position + wanted, max_offset)
            if walked is None and max_offset is not None:
                # max_offset may lie before where the walk began: find its batch, end the read there.
                at = self.translate_offset(max_offset, start.position)
                if at is not None:
                    bound = at.position if at.offset >= max_offset else at.position + at.size
                    walked = self._walk_end(start, min(start.position + wanted, bound), max_offset)
        except CorruptRecordError:
            return None
        if walked is None:
            return None
        end, next_offset = walked
        if end < ZERO_COPY_MIN_BYTES or not self.crc_checked.covers(start.position, start.position + end):
            return None
        records = self.log.slice(start.position, end)
        if records is None:
            return None
        return FetchDataInfo(start_offset, self.base_offset, start.position, records, next_offset)

    def _walk_end(self, start: LogOffsetPosition, bound: int, max_offset: int | None) -> tuple[int, int] | None:
        """Where a read from ``start`` ends before ``bound`` and ``max_offset`` (its size, and the offset after
        its last batch), walking from the offset index entry before the last one below ``bound``; None when
        that walk cannot tell (``max_offset`` may lie before it) or finds nothing."""
        entry = self.offset_index.lookup_position(bound, back=1)
        walk_from = start.position if entry is None or entry.position <= start.position else entry.position
        end = next_offset = 0
        order = OffsetOrder(self.log.path, self.base_offset)
        for position, header in self.log.batch_headers(walk_from, bound, read_ahead=_ZERO_COPY_HEADER_READ):
            if position == walk_from and walk_from != start.position:
                if header.base_offset > entry.offset:
                    raise CorruptRecordError(f"the offset index puts offset {entry.offset} at position "
                                             f"{position}, where a batch from offset {header.base_offset} starts",
                                             path=self.log.path, position=position)
                if max_offset is not None and header.base_offset >= max_offset:
                    return None  # the batches skipped may reach max_offset already
            if max_offset is not None and header.base_offset >= max_offset:
                break
            order.check(position, header.base_offset, header.last_offset)
            end = position + header.size_in_bytes - start.position
            next_offset = header.last_offset + 1
        return (end, next_offset) if end else None

    def _check_what_follows(self, order: OffsetOrder, position: int, read_past: bytes,
                            next_base_offset: int | None) -> None:
        """The last batch of a read must end below the batch after it and below the next segment.
        ``read_past`` is what the read already holds of the batch after it: the file is read again
        only when that lacks its base offset (the read ended on a batch boundary)."""
        if position + LOG_OVERHEAD <= self.size:
            following = read_past if len(read_past) == 8 else self.log.read(position, 8)
            order.check_next_base(position, int.from_bytes(following, "big", signed=True))
        elif next_base_offset is not None:
            order.check_bound(position, next_base_offset)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int | None = None
                                 ) -> TimestampAndOffset | None:
        """The first record at or after ``starting_offset`` with a timestamp >= ``timestamp``."""
        starting_offset = self.base_offset if starting_offset is None else starting_offset
        entry = self.time_index.lookup(timestamp)
        position, order = self._start_of_walk(max(entry.offset, starting_offset))
        return self.log.search_for_timestamp(timestamp, position, starting_offset, order)

    def read_next_offset(self) -> int:
        """The offset after the last batch of the segment (the base offset when empty)."""
        position, order = self._start_of_walk(_INT32_MAX + self.base_offset)
        return self.log.next_offset(self.base_offset, position, order)

    def check_tail(self, max_batch_size: int | None = None) -> ValidPrefix:
        """Validate the batches after the last offset index entry (``check_tail``)."""
        return check_tail(self.log, self.offset_index, self.base_offset, max_batch_size)

    def valid_prefix(self, max_batch_size: int | None = None) -> ValidPrefix:
        """Validate every batch (CRCs and offsets) from the top: how far the segment is sound."""
        return self.log.valid_prefix(0, OffsetOrder(self.log.path, self.base_offset), max_batch_size)

    # --- read-only views -------------------------------------------------------

    def limit_to(self, size: int) -> None:
        """A read-only segment reads no further than ``size`` (where its sound batches end)."""
        self.log.limit_to(size)

    def refresh(self, next_offset: int, max_batch_size: int | None = None) -> ValidPrefix:
        """A read-only segment takes in the sound batches a writer appended after ``next_offset``
        (the offset its known batches end at); the offset index is re-read so lookups stay short."""
        known = self.size
        self.log.refresh_size()
        order = OffsetOrder(self.log.path, self.base_offset, last_offset=next_offset - 1)
        found = self.log.valid_prefix(known, order, max_batch_size)
        self.log.limit_to(found.end)
        if found.end > known and self.offset_index.path is not None:
            fresh = _read_only_index(OffsetIndex, self.offset_index.path, self.base_offset)
            self.offset_index.close()
            self.offset_index = fresh
            self._max_timestamp_and_offset = None
        return found

    # --- recovery and truncation ------------------------------------------------

    def recover(self, max_message_size: int | None = None) -> int:
        """Re-validate every batch, rebuild the indexes and cut a corrupt or torn tail.

        Returns the number of bytes cut. The first invalid batch (CRC, length,
        magic, offsets out of order — then the batch before it too, as
        ``FileRecords.valid_prefix`` says) ends the valid log; the bytes from it on
        are moved into a file beside the segment (``layout.set_aside_file_name``),
        never deleted: ``last_recovery_set_aside`` says where and how much.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None
        self.last_recovery_set_aside = None
        max_ts = TimestampAndOffset(NO_TIMESTAMP, self.base_offset)
        valid_bytes = 0
        sound = self.valid_prefix(max_message_size)
        self.last_recovery_error = None if sound.torn else sound.error  # a torn tail is no corruption
        for batch in self.log.batches(0, sound.end):
            h = batch.header
            if not self.can_convert_to_relative_offset(h.last_offset):
                self.last_recovery_error = CorruptRecordError(
                    f"batch offsets {h.base_offset}..{h.last_offset} are beyond the int32 range of segment "
                    f"{self.base_offset}", path=self.log.path, position=batch.position)
                break
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
        truncated = 0
        if valid_bytes < self.size:
            self.last_recovery_set_aside = self.move_tail_aside(valid_bytes)
            truncated = self.last_recovery_set_aside.size
        self.crc_checked.add(0, valid_bytes)
        self._max_timestamp_and_offset = max_ts
        # As a clean close would have, record the largest timestamp before trimming.
        if max_ts.timestamp != NO_TIMESTAMP:
            self.time_index.maybe_append(max_ts.timestamp, max_ts.offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        return truncated

    def move_tail_aside(self, position: int) -> SetAside:
        """Move the ``.log`` bytes from ``position`` on into a new file beside the segment (named by
        ``layout.set_aside_file_name``) and cut them here."""
        directory, name = os.path.split(self.log.path)
        target = _free_set_aside_path(directory, name, position)
        counted = count_records(self.log, position)
        size = self.log.move_tail_aside(position, target)
        self.crc_checked.truncate(self.size)
        fsync_dir(directory)
        return SetAside(self.log.path, position, target, size, counted)

    def move_aside(self) -> SetAside:
        """Move the whole segment aside (its ``.log`` renamed as ``set_aside_file_name`` says, its
        indexes removed: they are rebuilt from the ``.log`` should it ever be put back) and close
        it; the owner drops it from the log."""
        directory, name = os.path.split(self.log.path)
        target = _free_set_aside_path(directory, name, 0)
        counted = count_records(self.log, 0)
        size = self.size
        self.log.flush()
        self.log.close()
        os.replace(self.log.path, target)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        fsync_dir(directory)
        return SetAside(self.log.path, 0, target, size, counted)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or past the one holding ``offset``; returns bytes removed."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if mapping is None:
            return 0
        removed = self.log.truncate_to(mapping.position)
        self.crc_checked.truncate(self.size)
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
        if self.writable and max_ts is not None and max_ts.timestamp > self.time_index.last_entry.timestamp:
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
