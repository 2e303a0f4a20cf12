"""The log of one partition: its ordered segments (Kafka's UnifiedLog and LocalLog).

The log validates and appends whole batches (offsets assigned by rewriting each
batch's baseOffset), rolls segments, serves reads by offset and by timestamp,
flushes, truncates, and deletes old segments for a predicate it is given. It
never decodes records unless the topic's configuration requires it
(re-compression); it never reaches into another partition.

Batches with a producer id go through the partition's producer state
(``producer_state_manager``): sequences and epochs are checked, a retried
batch is answered with the offsets it was written at, transactions are
tracked for the last stable offset, and an ABORT marker adds its transaction
to the segment's ``.txnindex``. The state is snapshotted at every roll and on
close; opening loads the newest snapshot and replays the batches after it,
rebuilding the ``.txnindex`` of every segment recovery rebuilt.

Each batch a leader appends carries the leader epoch it was written under
(``partitionLeaderEpoch``); the log keeps the partition's leader-epoch cache
(``leader_epoch_file_cache``, the ``leader-epoch-checkpoint`` file) in step
with its batches through appends, truncation, retention and recovery, and
rebuilds it from the batches when the file is missing.

The high watermark is the offset below which records are committed: readers
stop there. While the log is its partition's only replica (``sole_replica``,
the single broker) every append is committed at once and the high watermark
is the log end; a replicated partition moves it itself
(``maybe_increment_high_watermark`` on the leader, ``update_high_watermark``
on a follower). It never exceeds the log end offset; the log manager
checkpoints it in ``replication-offset-checkpoint`` and hands it back at open.
How far a read goes is its ``FetchIsolation`` (``fetch_upper_bound``): a
follower reads to the log end, a consumer to the high watermark, a
read_committed consumer to the last stable offset, which a transaction holds
until its marker is below the high watermark.

With remote storage (``remote.storage.enable``, Kafka's tiered storage) the log has two start
offsets: ``log_start_offset``, the first offset anywhere (the remote tier's first, checkpointed in
``log-start-offset-checkpoint``), and ``local_log_start_offset``, the first on local disk, where local
reads begin. Retention then keeps ``local.retention.*`` locally and deletes only segments the remote
tier holds whole (``highest_offset_in_remote_storage``, set by the remote log manager); the remote log
manager applies the totals and moves the log start offset.

A log opened read-only (``Log.open(..., read_only=True)``) writes nothing and
refuses every write; ``refresh()`` takes in what the directory's owner
appended, rolled or deleted since. It keeps no producer state: its last
stable offset is read from the files (``format.transactions``: the newest
``.snapshot`` and the batches after it), again whenever the view grows, and
``active_producers()`` rebuilds the state as a start would, when asked.
"""

from __future__ import annotations

import bisect
import enum
import logging
import os
import random
import shutil
import threading
from dataclasses import dataclass
from typing import Callable

import fsspec

from format import layout, transactions
from format.checkpoint import EpochEntry, LeaderEpochCheckpointFile, fsync_dir
from format.compression import CompressionType
from format.control import ControlRecordType, EndTransactionMarker
from format.errors import CheckpointError, CorruptRecordError
from format.file_records import TimestampAndOffset
from format.log_dir import SegmentInfo
from format.record import SimpleRecord
from format.record_batch import (
    NO_TIMESTAMP, RecordBatch, build_batch, build_end_txn_marker_batch, iter_batches, set_base_offset,
    set_log_append_time, set_partition_leader_epoch)
from format.segment import FetchDataInfo, LogSegment, RollParams
from format.txn_index import AbortedTxn

from ..clock import SYSTEM_CLOCK, Clock
from ..config import LogConfig
from ..errors import (CorruptMessageError, InvalidRecordError, InvalidTimestampError, KafkaStorageError,
                      LogDirReadOnlyError, MessageTooLargeError, OffsetOutOfRangeError)
from .leader_epoch_file_cache import EpochEndOffset, LeaderEpochFileCache
from .log_dir_failure import LogDirFailureChannel
from .log_loader import UnreadableBytes, load_segments, open_segment
from .producer_state_manager import (ActiveProducer, AppendOrigin, CompletedTxn, ProducerAppendInfo,
                                     ProducerStateManager)
from .scheduler import Scheduler

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

# The epoch a log that never had a leader epoch writes under: the single broker's, forever.
INITIAL_LEADER_EPOCH = 0

_LOCAL_FS = fsspec.filesystem("file")


class IsolationLevel(enum.IntEnum):
    """Kafka's isolation levels, as Fetch and ListOffsets carry them."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class FetchIsolation(enum.Enum):
    """How far a read of the log may go (Kafka's FetchIsolation): a follower copies the whole log
    (``LOG_END``), a consumer reads what is committed (``HIGH_WATERMARK``), a read_committed consumer
    what is also stable (``TXN_COMMITTED``, the last stable offset)."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"

    @classmethod
    def of(cls, replica_id: int, isolation_level: IsolationLevel | int | None) -> "FetchIsolation":
        """A request's isolation: a replica id names a follower (or the broker itself, with no
        isolation level), which reads to the log end; a consumer (replica id -1) reads to the high
        watermark, or to the last stable offset at read_committed."""
        if replica_id >= 0 or isolation_level is None:
            return cls.LOG_END
        if isolation_level == IsolationLevel.READ_COMMITTED:
            return cls.TXN_COMMITTED
        return cls.HIGH_WATERMARK


# The replica id of a consumer (and of every client that is not a broker) in Fetch and ListOffsets.
CONSUMER_REPLICA_ID = -1

# A read lists the segments at most this often when the cleaner keeps replacing them under it.
_READ_ATTEMPTS = 4


@dataclass(frozen=True)
class ProducerStateConfig:
    """The broker's producer-id settings (Kafka's ProducerStateManagerConfig)."""

    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    producer_id_expiration_check_interval_ms: int = 600_000  # producer.id.expiration.check.interval.ms


@dataclass(frozen=True)
class LogAppendInfo:
    """What an append did (Kafka's LogAppendInfo)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    num_batches: int
    num_records: int
    valid_bytes: int
    # A retried batch already in the log: the offsets are where it was written, nothing was appended.
    duplicate: bool = False


def _end_txn_marker(batch: RecordBatch, owner: object) -> EndTransactionMarker | None:
    """The marker of a control batch; None for an empty one (the cleaner removed its transaction)."""
    try:
        return batch.end_txn_marker()
    except CorruptRecordError as exc:
        raise CorruptMessageError(f"{owner}: {exc}") from None


def _codec_for(config: LogConfig) -> CompressionType | None:
    """The codec the topic forces, or None for ``compression.type=producer``."""
    name = config.compression_type
    if name == "producer":
        return None
    return CompressionType.NONE if name == "uncompressed" else CompressionType.from_name(name)


class Log:
    """One partition's log in ``directory``; use ``Log.open``."""

    def __init__(self, directory: str, topic_partition: layout.TopicPartition, config: LogConfig,
                 segments: list[LogSegment], *, recovery_point: int, log_start_offset: int, next_offset: int,
                 clock: Clock, scheduler: Scheduler, read_only: bool = False,
                 unreadable: UnreadableBytes | None = None,
                 producer_state_config: ProducerStateConfig = ProducerStateConfig(),
                 leader_epoch_cache: LeaderEpochFileCache | None = None, high_watermark: int | None = None,
                 sole_replica: bool = True):
        self.dir = directory
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self.scheduler = scheduler
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        for segment in segments:
            if segment.created_ms is None:
                segment.created_ms = clock.milliseconds()
        self._lock = threading.RLock()
        self._log_end_offset = next_offset
        self.recovery_point = recovery_point
        # The first offset on local disk; the log start offset is the first anywhere: with remote storage
        # (Kafka's tiered storage) the remote tier holds the offsets between them.
        self.local_log_start_offset = max(log_start_offset, segments[0].base_offset)
        self.log_start_offset = (min(max(log_start_offset, 0), self.local_log_start_offset)
                                 if config.remote_storage_enable else self.local_log_start_offset)
        # The last offset the remote tier holds in a finished copy (-1: none known); only segments wholly at
        # or below it may leave local disk (the remote log manager sets it).
        self.highest_offset_in_remote_storage = -1
        self.last_flush_time = clock.milliseconds()
        self._closed = False
        self.read_only = read_only
        # Read-only: what the load could not read (the view ends before it).
        self.unreadable = unreadable
        # Where an I/O error on append takes the log dir offline (the log manager's).
        self.failure_channel: LogDirFailureChannel | None = None
        self.producer_state_config = producer_state_config
        self.producer_state = ProducerStateManager(directory, str(topic_partition),
                                                   producer_state_config.producer_id_expiration_ms,
                                                   read_only=read_only)
        self._files_lso: tuple[tuple, int] | None = None  # read-only: (what it was read from, the LSO)
        self.leader_epoch_cache = leader_epoch_cache or LeaderEpochFileCache(str(topic_partition), None)
        # True while this log is its partition's only replica: each append is committed as it lands.
        self.sole_replica = sole_replica
        self._high_watermark = self.log_start_offset
        self.update_high_watermark(next_offset if high_watermark is None or sole_replica else high_watermark)

    @classmethod
    def open(cls, directory: str, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int = 0,
             had_clean_shutdown: bool = False, clock: Clock = SYSTEM_CLOCK,
             scheduler: Scheduler | None = None, read_only: bool = False,
             producer_state_config: ProducerStateConfig = ProducerStateConfig(),
             high_watermark: int | None = None, sole_replica: bool = True) -> "Log":
        """Load the partition in ``directory``. ``high_watermark`` is the checkpointed one (bounded by the
        log start and end offsets); a ``sole_replica`` log commits everything it holds: its high
        watermark is its log end."""
        if not read_only:
            os.makedirs(directory, exist_ok=True)
        tp = layout.parse_partition_dir(os.path.basename(directory.rstrip(os.sep)))
        loaded = load_segments(directory, config, recovery_point=recovery_point,
                               had_clean_shutdown=had_clean_shutdown, log_start_offset=log_start_offset,
                               read_only=read_only)
        if not loaded.segments:
            raise FileNotFoundError(f"{directory}: the partition directory holds no segment yet")
        checkpoint = LeaderEpochCheckpointFile(os.path.join(directory, layout.LEADER_EPOCH_CHECKPOINT_FILE))
        rebuild_epochs = not read_only and not os.path.exists(checkpoint.path)
        try:
            epochs = cls._open_leader_epoch_cache(str(tp), checkpoint, read_only)
        except BaseException:
            for segment in loaded.segments:
                segment.close()
            raise
        opened = cls(directory, tp, config, loaded.segments, recovery_point=loaded.recovery_point,
                     log_start_offset=min(log_start_offset, loaded.next_offset), next_offset=loaded.next_offset,
                     clock=clock, scheduler=scheduler or Scheduler(clock), read_only=read_only,
                     unreadable=loaded.unreadable, producer_state_config=producer_state_config,
                     leader_epoch_cache=epochs, high_watermark=high_watermark, sole_replica=sole_replica)
        if not read_only:
            try:
                opened._load_leader_epochs(rebuild_epochs, loaded.recovered)
                opened._load_producer_state(loaded.recovered)
            except BaseException:
                opened.close()
                raise
            opened._schedule_producer_expiration()
        return opened

    @staticmethod
    def _open_leader_epoch_cache(owner: str, checkpoint: LeaderEpochCheckpointFile,
                                 read_only: bool) -> LeaderEpochFileCache:
        if not read_only:
            return LeaderEpochFileCache(owner, checkpoint)
        try:  # a reader keeps the owner's epochs in memory; a file it cannot read costs it only those
            return LeaderEpochFileCache(owner, None, checkpoint.read())
        except CheckpointError as exc:
            log.warning("%s: leader epochs unknown: %s", owner, exc)
            return LeaderEpochFileCache(owner, None)

    def __repr__(self) -> str:
        return f"Log({self.topic_partition})"

    # --- offsets and sizes ---------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed (the log end while the log is the only replica;
        a read-only view's is the end of what it sees, or, of a replica, what its owner checkpointed)."""
        return self._log_end_offset if self.read_only and self.sole_replica else self._high_watermark

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark, bounded by the log start and end offsets (Kafka's updateHighWatermark:
        a follower takes the leader's, a log restores its checkpoint); returns the value set."""
        with self._lock:
            self._high_watermark = min(max(high_watermark, self.log_start_offset), self._log_end_offset)
            self._forget_replicated_transactions()
            return self._high_watermark

    def maybe_increment_high_watermark(self, high_watermark: int) -> int | None:
        """Move the high watermark forward to ``high_watermark`` (the leader, when its in-sync
        replicas all hold the records below it); returns the old one if it moved, None if not."""
        with self._lock:
            if high_watermark > self._log_end_offset:
                raise ValueError(f"{self}: high watermark {high_watermark} would be above the log end offset "
                                 f"{self._log_end_offset}")
            old = self._high_watermark
            if high_watermark <= old:
                return None
            self._high_watermark = high_watermark
            self._forget_replicated_transactions()
            return old

    # --- leader epochs ----------------------------------------------------------------

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch in the epoch cache; None when the log knows none."""
        return self.leader_epoch_cache.latest_epoch

    @property
    def leader_epoch(self) -> int:
        """The epoch an append as leader writes under unless told another: the newest one the log knows
        (a leader assigns its own at election, ``maybe_assign_epoch_start_offset``), else 0."""
        latest = self.leader_epoch_cache.latest_epoch
        return INITIAL_LEADER_EPOCH if latest is None else latest

    def maybe_assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """A new leader's epoch begins at ``start_offset`` (its log end, Kafka's makeLeader)."""
        with self._lock:
            self._check_writable()
            self.leader_epoch_cache.assign(leader_epoch, start_offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> EpochEndOffset | None:
        """OffsetsForLeaderEpoch's answer for ``leader_epoch``: the largest epoch at or below it and where
        the next epoch starts (the log end for the latest); None when the log cannot tell."""
        with self._lock:
            found = self.leader_epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)
        return None if found.undefined else found

    def _load_leader_epochs(self, rebuild: bool, recovered: set[int]) -> None:
        """Bring the epoch cache in line with the loaded log (Kafka's LogLoader): epochs past the log end or
        wholly below its start go; the batches of recovered segments (every batch, when the file was
        missing) assign the epochs they carry that the cache lacks."""
        cache = self.leader_epoch_cache
        cache.truncate_from_end(self._log_end_offset)
        start = self.local_log_start_offset if rebuild else min(recovered, default=None)
        if start is not None:
            assigned = 0
            for segment in list(self._segments):
                next_base = self._next_base(segment)
                if next_base is not None and next_base <= start:
                    continue
                for _, header in segment.log.batch_headers():
                    latest = cache.latest_epoch
                    if header.last_offset < start or header.partition_leader_epoch < 0:
                        continue
                    if latest is None or header.partition_leader_epoch > latest:
                        cache.assign(header.partition_leader_epoch,
                                     max(header.base_offset, self.local_log_start_offset))
                        assigned += 1
            if assigned:
                log.info("%s: leader epochs rebuilt from the batches from offset %d: %s", self, start,
                         cache.epoch_entries())
        cache.truncate_from_start(self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest transaction still open — or ended by a marker not below the
        high watermark yet — else the high watermark (Kafka's LSO): read_committed consumers read below it."""
        if self.read_only:
            return self._last_stable_offset_from_files()
        with self._lock:
            high_watermark = self.high_watermark
            first_unstable = self.producer_state.first_unstable_offset
        return high_watermark if first_unstable is None else min(first_unstable, high_watermark)

    def _forget_replicated_transactions(self) -> None:
        """The high watermark moved, or transactions ended: those whose marker is now below it no longer hold
        the last stable offset (Kafka calls onHighWatermarkUpdated where the high watermark changes)."""
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def _last_stable_offset_from_files(self) -> int:
        """A read-only view's LSO, read again when the view or the ``.txnindex`` files changed."""
        with self._lock:
            listed = [SegmentInfo(s.base_offset, s.size) for s in self._segments]
            end = self.high_watermark
        try:
            names = os.listdir(self.dir)
            indexes = tuple(sorted((n, os.stat(os.path.join(self.dir, n)).st_size) for n in names
                                   if n.endswith(layout.TXN_INDEX_FILE_SUFFIX)))
            key = (end, tuple(listed), indexes)
            if self._files_lso is None or self._files_lso[0] != key:
                found = transactions.last_stable_offset(_LOCAL_FS, self.dir, names, listed, end)
                self._files_lso = (key, found)
            return self._files_lso[1]
        except FileNotFoundError:
            return min(end, self._files_lso[1]) if self._files_lso is not None else self.log_start_offset

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self.recovery_point

    # --- producer state -----------------------------------------------------------

    def _load_producer_state(self, rebuilt_segments: set[int] = frozenset()) -> None:
        """Load the newest snapshot at or below the log end and replay the batches after it (Kafka's
        rebuildProducerState). Segments in ``rebuilt_segments`` lost their ``.txnindex`` to recovery:
        the replay starts at or below the first of them and indexes their aborted transactions again."""
        state = self.producer_state
        first_rebuilt = min(rebuilt_segments, default=None)
        state.truncate_and_reload(self.local_log_start_offset, self._log_end_offset, self.clock.milliseconds(),
                                  at_most=first_rebuilt)
        start = max(state.map_end_offset, self.local_log_start_offset)
        replayed = 0
        for segment in list(self._segments):
            next_base = self._next_base(segment)
            if next_base is not None and next_base <= start:
                continue
            found = segment.translate_offset(start) if start > segment.base_offset else None
            position = 0 if found is None else found.position
            index = segment.base_offset in rebuilt_segments
            for batch in segment.log.batches(position):
                h = batch.header
                if h.last_offset < start or not h.has_producer_id:
                    continue
                info = state.prepare_update(h.producer_id, AppendOrigin.REPLICATION)
                txn = None
                if h.is_control:
                    marker = _end_txn_marker(batch, self)
                    if marker is None:
                        continue
                    txn = info.append_end_txn_marker(marker, h.producer_epoch, h.base_offset, h.max_timestamp)
                else:
                    info.append_data_batch(h, h.base_offset)
                state.update(info)
                replayed += 1
                if txn is not None:
                    if txn.is_aborted and index:
                        segment.update_txn_index(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                            state.last_stable_offset(txn)))
                    state.complete_txn(txn)
        state.update_map_end_offset(self._log_end_offset)
        self._forget_replicated_transactions()
        if replayed:
            log.info("%s: producer state rebuilt from offset %d to %d (%d producer batches replayed)", self,
                     start, self._log_end_offset, replayed)

    def active_producers(self) -> list[ActiveProducer]:
        """The producers this partition keeps state of, by producer id (what DescribeProducers answers).
        A read-only view builds the state from the files as its owner left them: the newest
        snapshot and the batches after it, up to what the view has taken in."""
        with self._lock:
            self._check_open()
            if self.read_only:
                self._load_producer_state()
            return self.producer_state.active_producers()

    def _schedule_producer_expiration(self) -> None:
        """Forget idle producers every ``producer.id.expiration.check.interval.ms`` (on the scheduler's clock)."""
        def check() -> None:
            with self._lock:
                if self._closed:
                    return
                expired = self.producer_state.remove_expired_producers(self.clock.milliseconds())
            if expired:
                log.debug("%s: producer ids %s expired", self, expired)
            self._schedule_producer_expiration()

        self.scheduler.schedule(f"producer-expiration-{self.topic_partition}", check,
                                self.producer_state_config.producer_id_expiration_check_interval_ms)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from the ``.txnindex``
        of the segment holding ``start_offset`` on, until an entry shows no later one can matter
        (Kafka's collectAbortedTransactions): what a read_committed fetch answers beside its records."""
        with self._lock:
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            segments = self._segments[i:]
        found: list[AbortedTxn] = []
        for segment in segments:
            result = segment.txn_index.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted_txns)
            if result.is_complete:
                break
        return found

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"{self}: the log is closed")

    def _check_writable(self) -> None:
        if self.read_only:
            raise LogDirReadOnlyError(f"{self}: {self.dir} is open read-only; only its owner writes to it")

    # --- read-only views -------------------------------------------------------

    def refresh(self) -> None:
        """A read-only log takes in what the directory's owner wrote since the last look: the
        batches appended to the active segment, new segments (rolls) and segments gone
        (retention). Every batch taken in is checked as a load checks it; the view ends at
        the first unsound one and stays there."""
        if not self.read_only or self.unreadable is not None:
            return
        with self._lock:
            self._check_open()
            self._drop_vanished_segments()
            while True:
                active = self._segments[-1]
                # Listed first: once a newer segment exists, the active one is sealed and read whole.
                newer = self._next_segment_on_disk(active.base_offset)
                found = active.refresh(self._log_end_offset, self.config.max_message_bytes)
                if found.next_offset is not None:
                    self._log_end_offset = found.next_offset
                if found.error is not None and (newer is not None or not found.torn):
                    self.unreadable = UnreadableBytes(active.log.path, found.end, 0, 0, 0, found.error.reason)
                    log.warning("%s: %s", self, self.unreadable)
                    if newer is not None:
                        newer.close()
                    return
                if newer is None:
                    return
                newer.limit_to(0)  # taken in batch by batch, checked, in the next round
                self._segments.append(newer)
                self._bases.append(newer.base_offset)

    def _next_segment_on_disk(self, after: int) -> LogSegment | None:
        try:
            bases = sorted(layout.offset_from_file_name(n) for n in os.listdir(self.dir)
                           if n.endswith(layout.LOG_FILE_SUFFIX))
        except FileNotFoundError:
            return None
        for base in bases:
            if base > after:
                try:
                    return open_segment(self.dir, base, self.config, writable=False)
                except FileNotFoundError:
                    continue
        return None

    def _drop_vanished_segments(self) -> None:
        while len(self._segments) > 1 and not os.path.exists(self._segments[0].log.path):
            gone = self._segments.pop(0)
            self._bases.pop(0)
            gone.close()
        self._advance_local_log_start_offset(self._segments[0].base_offset)

    # --- append -----------------------------------------------------------

    def append(self, records: bytes, *, assign_offsets: bool = True, from_client: bool = True,
               leader_epoch: int | None = None) -> LogAppendInfo:
        """Validate ``records`` (whole v2 batches), assign offsets and write them.

        Assigning offsets is appending as leader: each batch is stamped with ``leader_epoch`` (default:
        ``self.leader_epoch``). Every batch's epoch newer than the cache's latest starts that epoch in
        the leader-epoch cache at the batch's base offset. While the log is the only replica
        (``sole_replica``) the append is committed: the high watermark moves to the new log end.

        Raises CorruptMessageError (bad CRC, length or magic), MessageTooLargeError
        (a batch over ``max.message.bytes``), InvalidRecordError (rules a producer
        broke) or InvalidTimestampError; nothing is written then. A write that fails
        (a full disk) raises KafkaStorageError, leaves nothing of the append in the
        segment, and takes the log dir offline (``failure_channel``).

        Batches with a producer id are checked against the producer state: a client's
        batch out of sequence raises OutOfOrderSequenceNumberError, one of a fenced epoch
        InvalidProducerEpochError, a plain batch of a producer with a transaction open
        InvalidTxnStateError; a client's batch already among the producer's last five is
        answered with its original offsets (``duplicate``) and nothing is written. Offsets
        given (``assign_offsets=False``) are the leader's: producer state is taken in unchecked.
        """
        origin = (AppendOrigin.CLIENT if from_client else
                  AppendOrigin.COORDINATOR if assign_offsets else AppendOrigin.REPLICATION)
        data = bytearray(records)
        now = self.clock.milliseconds()
        try:
            batches = list(iter_batches(data, stop_at_partial=False))
        except CorruptRecordError as exc:
            raise CorruptMessageError(f"{self}: {exc}") from None
        if not batches:
            raise InvalidRecordError(f"{self}: the append holds no record batch")
        validated = self._validate(data, batches, now, from_client)
        if validated is not data:  # re-compressed: walk the new bytes
            data = validated
            batches = list(iter_batches(data, stop_at_partial=False))
        with self._lock:
            self._check_open()
            self._check_writable()
            if self.failure_channel is not None:
                self.failure_channel.check_online(os.path.dirname(self.dir), self)
            next_offset = self._log_end_offset
            first_offset = batches[0].header.base_offset if not assign_offsets else next_offset
            max_ts = (NO_TIMESTAMP, -1)
            num_records = 0
            epoch = self.leader_epoch if leader_epoch is None else leader_epoch
            epochs: list[tuple[int, int]] = []  # (epoch, base offset) of each batch, for the epoch cache
            lat = now if self.config.message_timestamp_type == "LogAppendTime" else -1
            written = []  # (base offset, last offset, max timestamp, size) as stored, for the segment
            producers: dict[int, ProducerAppendInfo] = {}
            completed: list[CompletedTxn] = []
            for batch in batches:
                h = batch.header
                if assign_offsets:
                    set_base_offset(data, batch.position, next_offset)
                    set_partition_leader_epoch(data, batch.position, epoch)
                    base = next_offset
                    epochs.append((epoch, base))
                else:
                    if h.base_offset < next_offset:
                        raise InvalidRecordError(f"{self}: batch offset {h.base_offset} is below the log end "
                                                 f"offset {next_offset}")
                    base = h.base_offset
                    epochs.append((h.partition_leader_epoch, base))
                if lat >= 0:
                    set_log_append_time(data, batch.position, lat)
                last = base + h.last_offset_delta
                ts = lat if lat >= 0 else h.max_timestamp
                if h.has_producer_id:
                    duplicate = self._producer_batch(batch, base, ts, origin, producers, completed)
                    if duplicate is not None:
                        return duplicate
                written.append((base, last, ts, h.size_in_bytes))
                if ts > max_ts[0]:
                    max_ts = (ts, last)
                num_records += h.records_count
                next_offset = last + 1
            last_offset = next_offset - 1
            try:
                # The epochs first, as Kafka does: a crash leaves the file ahead of the log, which loading trims.
                self._assign_epochs(epochs)
                self._maybe_roll(len(data), max_ts[0], first_offset, last_offset, now)
                self.active_segment.append(data, written)
            except OSError as exc:
                try:
                    self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                except OSError:
                    pass  # the file stays ahead of the log: loading trims it
                raise self._storage_error(f"cannot append to {self.active_segment.log.path}", exc) from exc
            self._log_end_offset = next_offset
            if self.sole_replica:
                self._high_watermark = next_offset  # the only replica holds it: committed
            self._update_producer_state(producers, completed, next_offset)
            if self.unflushed_messages >= self.config.flush_messages:
                self.flush()
            return LogAppendInfo(first_offset, last_offset, max_ts[0], max_ts[1], lat, self.log_start_offset,
                                 len(batches), num_records, len(data))

    def append_as_follower(self, records: bytes) -> LogAppendInfo:
        """Append the leader's batches as they are: its offsets, its epochs (Kafka's appendAsFollower)."""
        return self.append(records, assign_offsets=False, from_client=False)

    def _assign_epochs(self, epochs: list[tuple[int, int]]) -> None:
        cache = self.leader_epoch_cache
        for epoch, base in epochs:
            latest = cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                cache.assign(epoch, base)

    def _producer_batch(self, batch: RecordBatch, base: int, timestamp: int, origin: AppendOrigin,
                        producers: dict[int, ProducerAppendInfo], completed: list[CompletedTxn]
                        ) -> LogAppendInfo | None:
        """Check one producer batch against the producer state (Kafka's analyzeAndValidateProducerState);
        the answer to a retried client batch already written, else None."""
        h = batch.header
        if origin == AppendOrigin.CLIENT:
            entry = self.producer_state.last_entry(h.producer_id)
            found = entry.find_duplicate_batch(h) if entry is not None else None
            if found is not None:
                log.debug("%s: batch of producer %d with sequences %d..%d was written at offsets %d..%d",
                          self, h.producer_id, h.base_sequence, h.last_sequence, found.first_offset,
                          found.last_offset)
                return LogAppendInfo(found.first_offset, found.last_offset, found.timestamp, found.last_offset,
                                     -1, self.log_start_offset, 0, 0, 0, duplicate=True)
        info = producers.get(h.producer_id)
        if info is None:
            info = producers[h.producer_id] = self.producer_state.prepare_update(h.producer_id, origin)
        if h.is_control:
            marker = _end_txn_marker(batch, self)
            if marker is not None:
                txn = info.append_end_txn_marker(marker, h.producer_epoch, base, timestamp)
                if txn is not None:
                    completed.append(txn)
        else:
            info.append_data_batch(h, base)
        return None

    def _update_producer_state(self, producers: dict[int, ProducerAppendInfo], completed: list[CompletedTxn],
                               next_offset: int) -> None:
        """Take in what an append wrote: producers, transactions ended (aborted ones indexed)."""
        state = self.producer_state
        for info in producers.values():
            state.update(info)
        for txn in completed:
            if txn.is_aborted:
                segment = self._segment_for(txn.last_offset)
                try:
                    segment.update_txn_index(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                        state.last_stable_offset(txn)))
                except OSError as exc:
                    raise self._storage_error(f"cannot append to {segment.txn_index.path}", exc) from exc
            state.complete_txn(txn)
        state.update_map_end_offset(next_offset)
        self._forget_replicated_transactions()

    def _segment_for(self, offset: int) -> LogSegment:
        return self._segments[max(bisect.bisect_right(self._bases, offset) - 1, 0)]

    def append_control_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                              commit: bool, leader_epoch: int | None = None) -> LogAppendInfo:
        """Append a COMMIT or ABORT marker for ``producer_id`` (what the transaction coordinator's
        WriteTxnMarkers does to each partition of a transaction). A marker of an older producer epoch
        raises InvalidProducerEpochError, one of an older coordinator epoch
        TransactionCoordinatorFencedError. Ending an aborted transaction adds it to the ``.txnindex``."""
        marker = EndTransactionMarker(ControlRecordType.COMMIT if commit else ControlRecordType.ABORT,
                                      coordinator_epoch)
        batch = build_end_txn_marker_batch(marker, producer_id=producer_id, producer_epoch=producer_epoch,
                                           timestamp=self.clock.milliseconds())
        return self.append(batch, from_client=False, leader_epoch=leader_epoch)

    def _storage_error(self, what: str, exc: OSError) -> KafkaStorageError:
        """The error an append answers for an I/O failure; the log dir goes offline."""
        cause = f"{self}: {what}: {exc.strerror or exc}"
        if self.failure_channel is not None:
            self.failure_channel.mark_offline(os.path.dirname(self.dir), cause)
        else:
            log.error("%s", cause)
        return KafkaStorageError(cause)

    def _validate(self, data: bytearray, batches: list[RecordBatch], now: int, from_client: bool) -> bytearray:
        config = self.config
        target_codec = _codec_for(config)
        rebuilt: list[bytes] | None = None
        for i, batch in enumerate(batches):
            h = batch.header
            if h.size_in_bytes > config.max_message_bytes:
                raise MessageTooLargeError(f"{self}: the batch at position {batch.position} is {h.size_in_bytes} "
                                           f"bytes, larger than max.message.bytes {config.max_message_bytes}")
            try:
                batch.ensure_valid()
            except CorruptRecordError as exc:
                raise CorruptMessageError(f"{self}: {exc}") from None
            if from_client:
                if h.is_control:
                    raise InvalidRecordError(f"{self}: clients may not write control batches")
                if h.records_count == 0 or h.last_offset_delta != h.records_count - 1:
                    raise InvalidRecordError(f"{self}: batch at position {batch.position} declares "
                                             f"{h.records_count} records over offset delta {h.last_offset_delta}")
                if h.is_transactional and not h.has_producer_id:
                    raise InvalidRecordError(f"{self}: a transactional batch needs a producer id")
                if h.has_producer_id and h.base_sequence < 0:
                    raise InvalidRecordError(f"{self}: invalid sequence number {h.base_sequence} in the batch at "
                                             f"position {batch.position} with producer id {h.producer_id}")
            if config.message_timestamp_type == "CreateTime" and h.records_count:
                if (now - h.base_timestamp > config.message_timestamp_before_max_ms
                        or h.max_timestamp - now > config.message_timestamp_after_max_ms):
                    raise InvalidTimestampError(
                        f"{self}: timestamps {h.base_timestamp}..{h.max_timestamp} are out of the range allowed "
                        f"around {now} by message.timestamp.before.max.ms / after.max.ms")
            if target_codec is not None and not h.is_control and h.compression_type != target_codec:
                if rebuilt is None:
                    rebuilt = [bytes(b.buffer) for b in batches[:i]]
                rebuilt.append(self._recompress(batch, target_codec))
            elif rebuilt is not None:
                rebuilt.append(bytes(batch.buffer))
        return data if rebuilt is None else bytearray(b"".join(rebuilt))

    def _recompress(self, batch: RecordBatch, codec: CompressionType) -> bytes:
        try:
            records = batch.records()
        except CorruptRecordError as exc:
            raise CorruptMessageError(f"{self}: {exc}") from None
        h = batch.header
        return build_batch([SimpleRecord(r.value, r.key, r.timestamp, r.headers) for r in records],
                           base_offset=h.base_offset, compression=codec, producer_id=h.producer_id,
                           producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                           is_transactional=h.is_transactional, partition_leader_epoch=h.partition_leader_epoch,
                           offsets=[r.offset for r in records], last_offset_delta=h.last_offset_delta)

    # --- rolling -----------------------------------------------------------

    def _maybe_roll(self, messages_size: int, max_timestamp: int, first_offset: int, max_offset: int,
                    now: int) -> None:
        segment = self.active_segment
        params = RollParams(self.config.segment_ms, self.config.segment_bytes, max_timestamp, max_offset,
                            messages_size, now)
        if segment.should_roll(params):
            # The new segment starts at the append's first offset, so its offsets fit in int32.
            self.roll(first_offset)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or later, for an append past a gap)."""
        with self._lock:
            self._check_open()
            self._check_writable()
            new_base = max(self._log_end_offset, expected_next_offset or 0)
            active = self.active_segment
            if active.base_offset == new_base and active.size == 0:
                return active  # already rolled: an empty segment at the log end
            active.on_becoming_inactive_segment()
            for name in (layout.log_file_name(new_base), layout.offset_index_file_name(new_base),
                         layout.time_index_file_name(new_base), layout.txn_index_file_name(new_base)):
                path = os.path.join(self.dir, name)
                if os.path.exists(path) and os.path.getsize(path) == 0:
                    os.remove(path)
            jitter = random.randrange(self.config.segment_jitter_ms) if self.config.segment_jitter_ms > 0 else 0
            segment = open_segment(self.dir, new_base, self.config, rolling_jitter_ms=jitter)
            segment.created_ms = self.clock.milliseconds()
            self._segments.append(segment)
            self._bases.append(new_base)
            # The state up to the new segment, so a recovery replays no further back than it.
            self.producer_state.update_map_end_offset(new_base)
            try:
                self.producer_state.take_snapshot()
            except OSError as exc:
                raise self._storage_error(f"cannot write the producer snapshot at offset {new_base}", exc) from exc
            # Kafka flushes the sealed segment asynchronously; its data is below the new base.
            self.scheduler.schedule(f"flush-{self.topic_partition}", lambda: self.flush(new_base), 0)
            return segment

    # --- reading -----------------------------------------------------------

    def _check_offset(self, offset: int) -> None:
        # Local reads: below the local log start offset the records are in the remote tier, if anywhere.
        if offset < self.local_log_start_offset or offset > self._log_end_offset:
            below = offset < self.local_log_start_offset
            which = "log start offset" if self.local_log_start_offset == self.log_start_offset else \
                "local log start offset"
            raise OffsetOutOfRangeError(
                f"{self}: offset {offset} is {f'below the {which} {self.local_log_start_offset}' if below else 'beyond the log end offset ' + str(self._log_end_offset)}")

    def read(self, start_offset: int, max_bytes: int, min_one_message: bool = True,
             max_offset: int | None = None, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             zero_copy: bool = False) -> FetchDataInfo:
        """Complete batches from the one holding ``start_offset``, at most ``max_bytes``, below the
        bound of ``isolation`` (``fetch_upper_bound``; ``max_offset`` is an explicit bound instead).

        Every batch served is checked against its CRC and its offsets against its
        neighbours and the index: a corrupt batch is never served, and if it is the
        first one the read fails naming file and position.

        ``zero_copy`` (the socket server's fetch on a plaintext listener) lets the
        read return a ``FileSlice`` of a segment file instead of its bytes, for
        bytes already CRC-checked in this process (``LogSegment.read``); the
        caller then owns the slice's descriptor and closes it (``release``).

        The segments are listed under the lock and read outside it. A segment the
        cleaner replaced meanwhile holds offsets that live on in its cleaned
        successor, so the read lists the segments again; when that keeps happening
        it answers no records (the fetch is retried) rather than serve a later
        segment and skip those offsets.
        """
        for _ in range(_READ_ATTEMPTS):
            with self._lock:
                self._check_open()
                self._check_offset(start_offset)
                upper = self.fetch_upper_bound(isolation) if max_offset is None else max_offset
                if start_offset >= upper:
                    return FetchDataInfo(start_offset, self.active_segment.base_offset, self.active_segment.size, b"")
                i = bisect.bisect_right(self._bases, start_offset) - 1
                segments = self._segments[max(i, 0):]
            info = self._read_segments(segments, start_offset, max_bytes, min_one_message, upper, zero_copy)
            if info is not None:
                return info
        log.warning("%s: segments were replaced under %d reads from offset %d in a row; answering no records",
                    self, _READ_ATTEMPTS, start_offset)
        with self._lock:
            return FetchDataInfo(start_offset, self.active_segment.base_offset, self.active_segment.size, b"")

    def _read_segments(self, segments: list[LogSegment], start_offset: int, max_bytes: int,
                       min_one_message: bool, upper: int, zero_copy: bool = False) -> FetchDataInfo | None:
        """Read from the first of ``segments`` that has data; None when one was replaced under the read
        (its offsets live on in a segment the listing does not have)."""
        for n, segment in enumerate(segments):
            next_base = segments[n + 1].base_offset if n + 1 < len(segments) else None
            try:
                info = segment.read(start_offset, max_bytes, min_one_message=min_one_message, max_offset=upper,
                                    validate=True, next_base_offset=next_base, zero_copy=zero_copy)
            except CorruptRecordError as error:
                log.error("%s: refusing to serve a corrupt batch: %s", self, error)
                raise CorruptMessageError(f"{self}: {error}") from None
            except (ValueError, OSError) as exc:
                with self._lock:
                    if self.read_only and not self._closed:
                        self._drop_vanished_segments()  # the owner's retention removed it since the last look
                    gone = self._closed or segment not in self._segments
                    replaced = gone and not self._closed and start_offset >= self.local_log_start_offset
                if replaced:
                    return None
                if gone:
                    continue  # deleted under us by retention: move on
                raise KafkaStorageError(f"{self}: cannot read {segment.log.path}: {exc}") from exc
            if info is None:
                continue  # the offset lies in a gap past this segment's last batch
            return info
        return FetchDataInfo(start_offset, self.active_segment.base_offset, self.active_segment.size, b"")

    def fetch_upper_bound(self, isolation: FetchIsolation) -> int:
        """The offset a read at ``isolation`` stops before: the log end, the high watermark, or the
        last stable offset (never above the high watermark)."""
        if isolation is FetchIsolation.LOG_END:
            return self._log_end_offset
        if isolation is FetchIsolation.TXN_COMMITTED:
            return self.last_stable_offset
        return self.high_watermark

    def fetchable_offset(self, isolation_level: IsolationLevel | int | None) -> int:
        """Where a client reading at ``isolation_level`` stops: the LSO for read_committed, the high
        watermark for read_uncommitted; None (a replica, or the broker itself) reads to the log end."""
        return self.fetch_upper_bound(FetchIsolation.of(CONSUMER_REPLICA_ID, isolation_level))

    def fetch_offset_for_timestamp(self, timestamp: int, isolation_level: IsolationLevel | int | None = None
                                   ) -> TimestampAndOffset | None:
        """ListOffsets as Kafka's Partition answers it: LATEST is the last fetchable offset at the
        isolation level (a client's: the high watermark, or the LSO at read_committed; with no level,
        a replica's: the log end), and no other answer may lie at or past it (EARLIEST excepted)."""
        with self._lock:
            self._check_open()
            fetchable = self.fetchable_offset(isolation_level)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, fetchable)
        found = self.offset_for_timestamp(timestamp)
        if found is None or timestamp == EARLIEST_TIMESTAMP or found.offset < fetchable:
            return found
        return None

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ListOffsets: EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3) or the first
        offset whose timestamp is >= ``timestamp``; None when no record is that recent."""
        with self._lock:
            self._check_open()
            if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset)
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(NO_TIMESTAMP, self._log_end_offset)
            segments = list(self._segments)
        if timestamp == MAX_TIMESTAMP:
            best = None
            for segment in segments:
                if segment.size and (best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far):
                    best = segment
            if best is None:
                return None
            return TimestampAndOffset(best.max_timestamp_so_far, best.offset_of_max_timestamp_so_far)
        for segment in segments:
            if segment.size and segment.max_timestamp_so_far >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.local_log_start_offset)
                if found is not None:
                    return found
        return None

    # --- flushing -----------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """Make everything below ``offset`` (default: the log end) durable; moves the recovery point.

        A failing ``fsync`` takes the log dir offline and raises KafkaStorageError; a log in an
        offline dir is not flushed (its recovery point stays: the next start recovers it)."""
        with self._lock:
            if self._closed:
                return
            if self.failure_channel is not None and self.failure_channel.offline(os.path.dirname(self.dir)):
                return
            offset = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
            if offset <= self.recovery_point:
                return
            for segment in self._segments:
                next_base = self._next_base(segment)
                if next_base is not None and next_base <= self.recovery_point:
                    continue
                if segment.base_offset >= offset:
                    break
                try:
                    segment.flush()
                except OSError as exc:
                    raise self._storage_error(f"cannot flush {segment.log.path}", exc) from exc
            self.recovery_point = offset
            self.last_flush_time = self.clock.milliseconds()

    def _next_base(self, segment: LogSegment) -> int | None:
        i = self._bases.index(segment.base_offset)
        return self._bases[i + 1] if i + 1 < len(self._bases) else None

    # --- truncation and deletion ----------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """Drop every record at or past ``target_offset``; returns whether anything was removed."""
        if target_offset < 0:
            raise ValueError(f"{self}: cannot truncate to negative offset {target_offset}")
        with self._lock:
            self._check_open()
            self._check_writable()
            if target_offset >= self._log_end_offset:
                # An epoch this replica began as leader and wrote nothing in may still end the cache.
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            if target_offset < self._segments[0].base_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            while len(self._segments) > 1 and self._segments[-1].base_offset > target_offset:
                segment = self._segments.pop()
                self._bases.pop()
                segment.delete()
            active = self.active_segment
            active.truncate_to(target_offset)
            active.resize_indexes(self.config.segment_index_bytes)
            self._log_end_offset = active.read_next_offset()
            self.recovery_point = min(self.recovery_point, self._log_end_offset)
            self.log_start_offset = min(self.log_start_offset, self._log_end_offset)
            self.local_log_start_offset = min(self.local_log_start_offset, self._log_end_offset)
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            self._load_producer_state()
            return True

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start again, empty, at ``new_offset``."""
        with self._lock:
            self._check_writable()
            for segment in self._segments:
                segment.delete()
            segment = open_segment(self.dir, new_offset, self.config)
            segment.created_ms = self.clock.milliseconds()
            self._segments = [segment]
            self._bases = [new_offset]
            self._log_end_offset = new_offset
            self.recovery_point = new_offset
            self.log_start_offset = new_offset
            self.local_log_start_offset = new_offset
            self._high_watermark = new_offset
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(new_offset)

    def build_remote_log_aux_state(self, local_log_start_offset: int, log_start_offset: int,
                                   epochs: list[EpochEntry], producer_snapshot: bytes | None) -> None:
        """A follower starting past the remote tier (Kafka's buildRemoteLogAuxState): emptied and started at
        ``local_log_start_offset`` (the end + 1 of a remote segment), its log start offset the leader's
        ``log_start_offset`` (the offsets between are in the remote tier), its leader epochs and producer state
        those the remote segment ending below ``local_log_start_offset`` was copied with."""
        with self._lock:
            self.truncate_fully_and_start_at(local_log_start_offset)
            if self.config.remote_storage_enable:
                self.log_start_offset = min(log_start_offset, local_log_start_offset)
            for entry in epochs:
                if entry.start_offset < local_log_start_offset:
                    self.leader_epoch_cache.assign(entry.epoch, max(entry.start_offset, self.log_start_offset))
            if producer_snapshot is not None:
                self.producer_state.restore_snapshot(local_log_start_offset, producer_snapshot)
            self._load_producer_state()
        log.info("%s: starts at offset %d, past the remote tier's segment below it; log start offset %d, leader "
                 "epochs %s and %s from the remote tier", self, local_log_start_offset, self.log_start_offset,
                 [(e.epoch, e.start_offset) for e in self.leader_epoch_cache.epoch_entries()],
                 "the producer state" if producer_snapshot is not None else "no producer snapshot")

    def delete_old_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str) -> int:
        """Delete segments from the oldest while ``predicate(segment, next_segment)`` holds.

        The active segment qualifies only when it holds data; the log rolls first so
        a fresh active segment remains. Returns how many segments were deleted.
        """
        with self._lock:
            self._check_open()
            self._check_writable()
            doomed = []
            for i, segment in enumerate(self._segments):
                following = self._segments[i + 1] if i + 1 < len(self._segments) else None
                if following is None and segment.size == 0:
                    break
                if not predicate(segment, following):
                    break
                doomed.append(segment)
            if not doomed:
                return 0
            if doomed[-1] is self.active_segment:
                self.roll()
            for segment in doomed:
                self._segments.remove(segment)
                self._bases.remove(segment.base_offset)
            self._advance_local_log_start_offset(self._segments[0].base_offset)
            self._high_watermark = max(self._high_watermark, self.local_log_start_offset)
            self._forget_replicated_transactions()
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
            for segment in doomed:
                segment.change_file_suffixes("", layout.DELETED_FILE_SUFFIX)
                self.producer_state.delete_snapshot(segment.base_offset)
                log.info("%s: deleting segment %d (%s)", self, segment.base_offset, reason)
                self.scheduler.schedule(f"delete-{self.topic_partition}-{segment.base_offset}", segment.delete,
                                        self.config.file_delete_delay_ms)
            return len(doomed)

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Swap cleaned segments (files ending ``.cleaned``) in for the segments they replace
        (Kafka's LocalLog.replaceSegments), in the order log loading relies on after a crash:

        1. each new segment, highest first, is renamed ``.cleaned`` -> ``.swap`` (a crash before all
           are renamed leaves a ``.cleaned`` file below them and loading rolls the swap back);
        2. each old segment is renamed ``.deleted`` and its deletion scheduled (loading removes
           ``.deleted`` files and, for a ``.swap``, every segment file in its offset range);
        3. each new segment loses its ``.swap`` suffix.

        Old segments already removed (retention got there first) are left alone.
        """
        with self._lock:
            self._check_open()
            self._check_writable()
            new_sorted = sorted(new_segments, key=lambda s: s.base_offset)
            live = {id(s) for s in self._segments}
            old_sorted = sorted((s for s in old_segments if id(s) in live), key=lambda s: s.base_offset)
            for segment in reversed(new_sorted):
                segment.change_file_suffixes(layout.CLEANED_FILE_SUFFIX, layout.SWAP_FILE_SUFFIX)
                if segment.created_ms is None:
                    segment.created_ms = self.clock.milliseconds()
                i = bisect.bisect_left(self._bases, segment.base_offset)
                if i < len(self._bases) and self._bases[i] == segment.base_offset:
                    self._segments[i] = segment
                else:
                    self._segments.insert(i, segment)
                    self._bases.insert(i, segment.base_offset)
            new_bases = {s.base_offset for s in new_sorted}
            for segment in old_sorted:
                if segment.base_offset not in new_bases:
                    i = self._segments.index(segment)
                    del self._segments[i]
                    del self._bases[i]
                segment.change_file_suffixes("", layout.DELETED_FILE_SUFFIX)
                if segment.base_offset not in new_bases:
                    self.producer_state.delete_snapshot(segment.base_offset)
                self.scheduler.schedule(f"delete-{self.topic_partition}-{segment.base_offset}", segment.delete,
                                        self.config.file_delete_delay_ms)
            for segment in new_sorted:
                segment.change_file_suffixes(layout.SWAP_FILE_SUFFIX, "")
            fsync_dir(self.dir)

    def _advance_local_log_start_offset(self, offset: int) -> None:
        self.local_log_start_offset = max(self.local_log_start_offset, offset)
        if not self.config.remote_storage_enable:
            self.log_start_offset = max(self.log_start_offset, self.local_log_start_offset)

    def maybe_increment_log_start_offset(self, offset: int, reason: str) -> None:
        """Move the log start offset (the first offset anywhere) forward to ``offset``: the remote log manager,
        after deleting remote segments. Local segments wholly below it go at the next retention pass."""
        with self._lock:
            if offset > self.log_start_offset:
                log.info("%s: log start offset %d -> %d (%s)", self, self.log_start_offset, offset, reason)
                self.log_start_offset = min(offset, self._log_end_offset)
                self.local_log_start_offset = max(self.local_log_start_offset, self.log_start_offset)
                self._high_watermark = max(self._high_watermark, self.log_start_offset)
                self.leader_epoch_cache.truncate_from_start(self.log_start_offset)

    def _remote_copied(self, predicate: Callable[[LogSegment, LogSegment | None], bool]
                       ) -> Callable[[LogSegment, LogSegment | None], bool]:
        """With remote storage, a segment leaves local disk only once the remote tier holds all of it (Kafka's
        UnifiedLog.isSegmentEligibleForDeletion)."""
        if not self.config.remote_storage_enable:
            return predicate
        return lambda s, following: (following is not None
                                     and following.base_offset - 1 <= self.highest_offset_in_remote_storage
                                     and predicate(s, following))

    def delete_retention_ms_breached_segments(self) -> int:
        # With remote storage the local tail keeps local.retention.ms; the remote log manager applies the total.
        remote = self.config.remote_storage_enable
        retention_ms = self.config.local_retention_ms_resolved if remote else self.config.retention_ms
        if retention_ms < 0:
            return 0
        now = self.clock.milliseconds()
        name = "local.retention.ms" if remote else "retention.ms"
        return self.delete_old_segments(self._remote_copied(lambda s, _: now - s.largest_timestamp > retention_ms),
                                        f"{name} {retention_ms} breached")

    def delete_retention_size_breached_segments(self) -> int:
        remote = self.config.remote_storage_enable
        retention_bytes = self.config.local_retention_bytes_resolved if remote else self.config.retention_bytes
        if retention_bytes < 0:
            return 0
        excess = [self.size - retention_bytes]

        def over(segment: LogSegment, _next) -> bool:
            if excess[0] - segment.size >= 0:
                excess[0] -= segment.size
                return True
            return False

        if excess[0] <= 0:
            return 0
        name = "local.retention.bytes" if remote else "retention.bytes"
        return self.delete_old_segments(self._remote_copied(over), f"{name} {retention_bytes} breached")

    def delete_log_start_offset_breached_segments(self) -> int:
        return self.delete_old_segments(
            lambda s, following: following is not None and following.base_offset <= self.log_start_offset,
            "below the log start offset")

    def delete_old_segments_by_retention(self) -> int:
        """Kafka's retention pass: only for ``cleanup.policy`` containing ``delete``."""
        if not self.config.delete:
            return self.delete_log_start_offset_breached_segments()
        return (self.delete_retention_ms_breached_segments() + self.delete_retention_size_breached_segments()
                + self.delete_log_start_offset_breached_segments())

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    # --- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Close the segments; a writable log in an online dir snapshots its producer state first."""
        with self._lock:
            if self._closed:
                return
            online = self.failure_channel is None or not self.failure_channel.offline(os.path.dirname(self.dir))
            if not self.read_only and online:
                try:
                    self.producer_state.take_snapshot()
                except OSError as exc:
                    log.warning("%s: cannot write the producer snapshot on close: %s", self, exc)
            for segment in self._segments:
                segment.close()
            self._closed = True

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        with self._lock:
            if not self._closed:
                for segment in self._segments:
                    segment.close()
                self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)
