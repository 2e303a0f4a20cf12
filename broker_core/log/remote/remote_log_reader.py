"""Reading a partition's remote tier (KIP-405's read path): fetches below the local log start offset and
the offsets ListOffsets answers across both tiers.

A partition's remote segments are those ``format.remote_tier`` lists in ``COPY_SEGMENT_FINISHED`` state
(a copy started, or a segment being deleted, is never read); where they overlap (a new leader's segment
boundaries differ from the old leader's), each offset is read from the one segment serving it
(``remote_tier.serving_segments``). A read finds the segment serving the offset,
looks the offset up in the segment's ``.index`` (fetched once into the local ``RemoteIndexCache``), and
range-reads the ``.log`` object through fsspec from that position: only the bytes a fetch returns travel.
Batches are checked as local reads check them (CRC, offsets against their neighbours and the index).

An object that is missing or cannot be read answers ``KAFKA_STORAGE_ERROR`` naming the object, and is
logged as an error; the broker goes on serving every other read.

The listing of a partition's remote segments is kept for ``LISTING_TTL_MS`` (each listing reads every
metadata object), and listed again at once when a read meets an object that is gone. A tier that cannot be
listed fails only what needs it: the log start offset falls back to the log's own, reads of local disk go on,
and outside a read of the tier the listing is not tried again for the TTL after the failed one gave up, then
for twice as long after each failure in a row, up to ``remote.log.manager.task.retry.backoff.max.ms`` (never
less than the TTL; ``retry_backoff``): a fetch that asks for the log start offset waits on the attempt, so a
tier that stays down is waited on less and less often.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Mapping

from format import remote_tier
from format.checkpoint import EpochEntry, parse_leader_epoch_checkpoint
from format.errors import CheckpointError, CorruptRecordError
from format.file_records import FileRecords, TimestampAndOffset
from format.fs import filesystem_for
from format.index import OffsetIndex, TimeIndex
from format.layout import TopicPartition
from format.record_batch import NO_TIMESTAMP
from format.txn_index import AbortedTxn, collect_aborted_txns, parse_aborted_txns
from format.remote_tier import RemoteLogSegmentMetadata, ServingSegment, serving_index
from format.segment import FetchDataInfo, LogSegment

from ...clock import SYSTEM_CLOCK, Clock
from ...config import BrokerConfig
from ...errors import CorruptMessageError, KafkaStorageError, OffsetOutOfRangeError
from ..log import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, MAX_TIMESTAMP,
                   FetchIsolation, IsolationLevel, Log)
from .remote_index_cache import RemoteIndexCache
from .retry_backoff import retry_backoff_ms

log = logging.getLogger(__name__)

#: How long a partition's listing of remote segments serves before it is listed again.
LISTING_TTL_MS = 5_000


@dataclass(frozen=True)
class RemoteStorage:
    """Where a broker's remote tier is: an fsspec URL and its storage options (credentials among them)."""

    url: str
    options: Mapping[str, str]


def remote_storage_of(config: BrokerConfig) -> RemoteStorage | None:
    """The remote tier the broker config names (``remote.storage.url``, ``remote.storage.options.<name>``);
    None when it names none."""
    if not config.remote_storage_url:
        return None
    return RemoteStorage(config.remote_storage_url, dict(config.remote_storage_options))


class RemoteLogReader:
    """The remote tier at ``storage``, read for the partitions of ``topic_id_of`` (a topic's id as Kafka
    writes it, ``Uuid.toString``; None for a topic the broker does not know). ``index_cache`` keeps the
    fetched offset indexes (None: fetched for every read, as a read-only broker does, which writes nothing).
    ``retry_backoff_max_ms`` bounds the wait before a tier that failed to list is listed again."""

    def __init__(self, storage: RemoteStorage, topic_id_of: Callable[[str], str | None],
                 index_cache: RemoteIndexCache | None, clock: Clock = SYSTEM_CLOCK,
                 retry_backoff_max_ms: int = BrokerConfig.remote_log_manager_task_retry_backoff_max_ms):
        self.storage = storage
        self.fs, self.root = filesystem_for(storage.url, storage.options)
        self.topic_id_of = topic_id_of
        self.index_cache = index_cache
        self.clock = clock
        self.retry_backoff_max_ms = max(retry_backoff_max_ms, LISTING_TTL_MS)
        self._lock = threading.Lock()
        self._listings: dict[TopicPartition, tuple[int, list[ServingSegment]]] = {}
        # Why the last listing failed, how many failed in a row, and when to list again.
        self._failures: dict[TopicPartition, tuple[str, int, int]] = {}

    def __repr__(self) -> str:
        return f"RemoteLogReader({self.storage.url})"

    # --- the segments -----------------------------------------------------------

    def segments(self, tp: TopicPartition, refresh: bool = False) -> list[ServingSegment]:
        """The partition's readable remote segments in offset order: finished copies, each serving from past
        the end of the one before (``remote_tier.serving_segments``)."""
        now = self.clock.milliseconds()
        with self._lock:
            cached = self._listings.get(tp)
            failed = self._failures.get(tp)
        if cached is not None and not refresh and now - cached[0] < LISTING_TTL_MS:
            return cached[1]
        if failed is not None and not refresh and now < failed[2]:
            raise KafkaStorageError(failed[0])  # not tried again yet: a fetch would wait on it
        topic_id = self.topic_id_of(tp.topic)
        if topic_id is None:
            return []
        directory = remote_tier.partition_path(self.root, tp.topic, topic_id, tp.partition)
        try:
            self.fs.invalidate_cache(directory)
            listed = remote_tier.list_segments(self.fs, self.root, tp.topic, topic_id, tp.partition)
        except CorruptRecordError as exc:
            log.error("%s: %s", self, exc)
            raise KafkaStorageError(f"remote tier {self.storage.url}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - each fsspec backend raises its own (botocore's are no OSError)
            log.error("%s: cannot list %s: %s", self, directory, exc)
            cause = f"remote tier {self.storage.url}: cannot list {directory}: {exc}"
            with self._lock:
                failures = 1 if failed is None else failed[1] + 1
                wait = retry_backoff_ms(failures, LISTING_TTL_MS, self.retry_backoff_max_ms)
                self._failures[tp] = (cause, failures, self.clock.milliseconds() + wait)  # from when it gave up
            raise KafkaStorageError(cause) from None
        kept = remote_tier.serving_segments(listed)
        with self._lock:
            self._listings[tp] = (now, kept)
            self._failures.pop(tp, None)
        return kept

    def log_start_offset(self, lg: Log) -> int:
        """The earliest offset of either tier: the log's own when it counts the remote tier (its log start
        below its local one), else the first remote segment's, if that is earlier."""
        local = lg.local_log_start_offset
        if lg.log_start_offset < local:
            return lg.log_start_offset
        try:
            listed = self.segments(lg.topic_partition)
        except KafkaStorageError:
            return lg.log_start_offset  # the tier cannot be listed (logged): reads of local disk go on
        return min(lg.log_start_offset, listed[0].start_offset) if listed else lg.log_start_offset

    def highest_offset(self, tp: TopicPartition) -> int:
        """The last offset a complete remote segment holds (ListOffsets' latest-tiered); -1 when none."""
        listed = self.segments(tp)
        return listed[-1].end_offset if listed else -1

    # --- reading -----------------------------------------------------------------

    def read(self, lg: Log, offset: int, max_bytes: int, min_one_message: bool = True) -> FetchDataInfo:
        """Complete batches of the remote segment serving ``offset`` (at most ``max_bytes``, the first batch
        whole with ``min_one_message``); OffsetOutOfRangeError when neither tier holds ``offset`` (as Kafka
        answers an offset that no remote segment holds, one in a gap between them too)."""
        tp = lg.topic_partition
        for refresh in (False, True):
            listed = self.segments(tp, refresh=refresh)
            start = self.log_start_offset(lg)
            local = lg.local_log_start_offset
            i = serving_index(listed, offset) if offset >= start else None
            if i is None:
                if refresh:
                    raise OffsetOutOfRangeError(
                        f"{lg}: offset {offset} is in neither tier: the log starts at {start}, on local disk at "
                        f"{local}, and the remote tier {self.storage.url} holds {_ranges(listed)}")
                continue
            serving = listed[i]
            # Where the read must stop: the next segment serves from there (a remote segment reaching past the
            # local log start offset is read to its end: the local copy holds the same batches).
            following = listed[i + 1].start_offset if i + 1 < len(listed) else \
                local if local > serving.end_offset else None
            m = serving.metadata
            try:
                info = self._read_segment(m, offset, max_bytes, min_one_message, following)
            except FileNotFoundError as exc:
                if not refresh:
                    continue  # deleted since the listing (total retention): list again
                raise self._storage_error(m, exc) from None
            if info is not None:
                return info
        return FetchDataInfo(offset, local, 0, b"")

    def _read_segment(self, m: RemoteLogSegmentMetadata, offset: int, max_bytes: int, min_one_message: bool,
                      next_base_offset: int) -> FetchDataInfo | None:
        return self._with_segment(m, lambda segment: segment.read(
            offset, max_bytes, min_one_message=min_one_message, validate=True, next_base_offset=next_base_offset))

    def offset_for_timestamp(self, lg: Log, timestamp: int) -> TimestampAndOffset | None:
        """The first offset of the remote tier whose record's timestamp is at or after ``timestamp`` (a
        segment's time index fetched for the lookup); None when no remote record is that recent."""
        start = self.log_start_offset(lg)
        for s in self.segments(lg.topic_partition):
            m = s.metadata
            if m.end_offset < start or 0 <= m.max_timestamp_ms < timestamp:
                continue
            try:
                found = self._with_segment(m, lambda segment: segment.find_offset_by_timestamp(
                    timestamp, max(start, s.start_offset)), time_index=True)
            except FileNotFoundError as exc:
                raise self._storage_error(m, exc) from None
            if found is not None:
                return found
        return None

    def remote_log_aux_state(self, tp: TopicPartition, offset: int) -> tuple[int, list[EpochEntry], bytes | None]:
        """Where a follower starting past ``offset`` starts — the end offset + 1 of the remote segment holding
        ``offset``, which its producer snapshot describes (it can end past ``offset`` when remote segments
        overlap) — and the leader epochs and producer snapshot that segment was copied with (Kafka's
        ReplicaFetcherTierStateMachine), listed afresh. KafkaStorageError when no complete remote segment
        holds ``offset`` or its objects cannot be read."""
        listed = self.segments(tp, refresh=True)
        i = serving_index(listed, offset)
        if i is None:
            raise KafkaStorageError(f"{tp.topic}-{tp.partition}: no complete remote segment in the remote tier "
                                    f"{self.storage.url} holds offset {offset} (it holds {_ranges(listed)})")
        found = listed[i].metadata
        objects = {}
        for suffix in (".leader_epoch_checkpoint", ".snapshot"):
            if suffix in found.objects:
                path = remote_tier.segment_object(self.root, found, suffix)
                try:
                    objects[suffix] = self.fs.cat_file(path)
                except Exception as exc:  # noqa: BLE001 - each fsspec backend raises its own
                    raise self._storage_error(found, exc, path) from None
        checkpoint = remote_tier.segment_object(self.root, found, ".leader_epoch_checkpoint")
        try:
            epochs = parse_leader_epoch_checkpoint(objects.get(".leader_epoch_checkpoint", b"").decode(), checkpoint)
        except (CheckpointError, UnicodeDecodeError) as exc:
            raise KafkaStorageError(f"{tp.topic}-{tp.partition}: {exc}") from None
        return found.end_offset + 1, epochs, objects.get(".snapshot")

    def max_timestamp(self, lg: Log) -> TimestampAndOffset | None:
        """The remote record with the largest timestamp (the first of equals) among the remote segments below
        the local ones, found in the time index of the segment whose metadata names that timestamp; None when
        the remote tier holds no timestamped record."""
        start = self.log_start_offset(lg)
        candidates = sorted((s for s in self.segments(lg.topic_partition)
                             if s.end_offset >= start and s.start_offset < lg.local_log_start_offset
                             and s.metadata.max_timestamp_ms >= 0),
                            key=lambda s: (-s.metadata.max_timestamp_ms, s.start_offset))
        for s in candidates:
            m = s.metadata
            try:
                found = self._with_segment(m, lambda segment: segment.find_offset_by_timestamp(
                    m.max_timestamp_ms, max(start, s.start_offset)), time_index=True)
            except FileNotFoundError as exc:
                raise self._storage_error(m, exc) from None
            if found is not None:
                return found
        return None

    def collect_aborted_transactions(self, lg: Log, start_offset: int, upper_bound_offset: int
                                     ) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset) that the ``.txnindex`` of
        the remote segment holding ``start_offset`` and the remote segments after it list, and whether the
        search is complete (Kafka's RemoteLogManager.collectAbortedTransactions); when not, the local
        segments' indexes follow."""
        found: list[AbortedTxn] = []
        for s in self.segments(lg.topic_partition):
            if s.end_offset < start_offset or s.start_offset >= lg.local_log_start_offset:
                continue
            # From where the segment serves: what it holds below that, the segment before listed already.
            result = collect_aborted_txns(self._txn_index(s.metadata), max(start_offset, s.start_offset),
                                          upper_bound_offset)
            found.extend(result.aborted_txns)
            if result.is_complete:
                return found, True
        return found, False

    def _txn_index(self, m: RemoteLogSegmentMetadata) -> list[AbortedTxn]:
        if ".txnindex" not in m.objects:
            return []  # copied without one: no transaction aborted in the segment
        path = remote_tier.segment_object(self.root, m, ".txnindex")

        def load() -> bytes:
            try:
                return self.fs.cat_file(path)
            except Exception as exc:  # noqa: BLE001 - each fsspec backend raises its own
                raise self._storage_error(m, exc, path) from None

        data = load() if self.index_cache is None else self.index_cache.get(f"{m.name}.txnindex", load)
        try:
            return parse_aborted_txns(data, path)
        except CorruptRecordError as exc:
            log.error("%s: %s", self, exc)
            raise KafkaStorageError(f"{m.topic}-{m.partition}: {exc}") from None

    def _with_segment(self, m: RemoteLogSegmentMetadata, use: Callable[[LogSegment], object],
                      time_index: bool = False):
        """``use(segment)`` on the remote segment ``m`` opened for ranged reads; its errors as the broker's."""
        log_object = remote_tier.segment_object(self.root, m, ".log")
        try:
            index = OffsetIndex.from_bytes(m.base_offset, self._offset_index(m),
                                           path=remote_tier.segment_object(self.root, m, ".index"))
            times = TimeIndex.from_bytes(m.base_offset, self._time_index(m) if time_index else b"",
                                         path=remote_tier.segment_object(self.root, m, ".timeindex"))
            records = FileRecords.open_fs(self.fs, log_object, m.size_in_bytes)
            # No transaction index: reads and lookups take none.
            segment = LogSegment(records, index, times, None, m.base_offset)
            try:
                return use(segment)
            finally:
                records.close()
        except CorruptRecordError as exc:
            log.error("%s: refusing to serve a corrupt batch: %s", self, exc)
            raise CorruptMessageError(f"{m.topic}-{m.partition}: {exc}") from None
        except FileNotFoundError as exc:
            if exc.filename:
                raise
            raise FileNotFoundError(2, "no such object", log_object) from None
        except KafkaStorageError:
            raise
        except Exception as exc:  # noqa: BLE001 - each fsspec backend raises its own
            raise self._storage_error(m, exc, log_object) from None

    def _time_index(self, m: RemoteLogSegmentMetadata) -> bytes:
        if ".timeindex" not in m.objects:
            return b""
        path = remote_tier.segment_object(self.root, m, ".timeindex")
        try:
            return self.fs.cat_file(path)
        except Exception as exc:  # noqa: BLE001 - each fsspec backend raises its own
            raise self._storage_error(m, exc, path) from None

    def _offset_index(self, m: RemoteLogSegmentMetadata) -> bytes:
        if ".index" not in m.objects:
            return b""  # copied with no index: reads walk the .log from its start
        path = remote_tier.segment_object(self.root, m, ".index")

        def load() -> bytes:
            try:
                return self.fs.cat_file(path)
            except FileNotFoundError:
                raise FileNotFoundError(2, "no such object", path) from None
            except Exception as exc:  # noqa: BLE001 - each fsspec backend raises its own
                raise self._storage_error(m, exc, path) from None

        if self.index_cache is None:
            return load()
        return self.index_cache.get(f"{m.name}.index", load)

    def _storage_error(self, m: RemoteLogSegmentMetadata, exc: Exception, path: str | None = None
                       ) -> KafkaStorageError:
        where = path or getattr(exc, "filename", None) or remote_tier.segment_object(self.root, m, ".log")
        cause = (f"{m.topic}-{m.partition}: cannot read remote segment {m.base_offset}..{m.end_offset} "
                 f"(segment id {m.segment_id}): {where}: {getattr(exc, 'strerror', None) or exc}")
        log.error("%s: %s", self, cause)
        return KafkaStorageError(cause)


def _ranges(listed: list[ServingSegment]) -> str:
    """The offsets ``listed`` serves, for an error message."""
    return ", ".join(f"{s.start_offset}..{s.end_offset}" for s in listed) or "nothing"


# --- both tiers -------------------------------------------------------------------


def tier_of(lg: Log, remote: RemoteLogReader | None) -> RemoteLogReader | None:
    """The remote tier ``lg`` is read from: the broker's, when the log's topic has ``remote.storage.enable``
    (a topic without it has no remote segments the broker may serve, whatever the store holds)."""
    return remote if remote is not None and lg.config.remote_storage_enable else None


def read_log(lg: Log, remote: RemoteLogReader | None, offset: int, max_bytes: int, *, min_one_message: bool = True,
             isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK, zero_copy: bool = False) -> FetchDataInfo:
    """A fetch's read of ``lg`` from ``offset``: from the remote tier below the local log start offset (its
    records are all committed and stable; always bytes in memory, ``zero_copy`` or not), from local disk at or
    above it."""
    remote = tier_of(lg, remote)
    if remote is not None and offset < lg.local_log_start_offset:
        return remote.read(lg, offset, max_bytes, min_one_message)
    return lg.read(offset, max_bytes, min_one_message=min_one_message, isolation=isolation, zero_copy=zero_copy)


def collect_aborted_transactions(lg: Log, remote: RemoteLogReader | None, start_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start_offset, upper_bound_offset) across both tiers: a
    read_committed fetch below the local log start offset lists those of the remote segments' transaction
    indexes, then the local segments' as far as the search must go."""
    remote = tier_of(lg, remote)
    if remote is None or start_offset >= lg.local_log_start_offset:
        return lg.collect_aborted_transactions(start_offset, upper_bound_offset)
    found, complete = remote.collect_aborted_transactions(lg, start_offset, upper_bound_offset)
    if not complete:
        found += lg.collect_aborted_transactions(lg.local_log_start_offset, upper_bound_offset)
    return found


def log_start_offset_of(lg: Log, remote: RemoteLogReader | None) -> int:
    """The earliest offset of either tier (the log's own without a remote tier)."""
    remote = tier_of(lg, remote)
    return lg.log_start_offset if remote is None else remote.log_start_offset(lg)


def fetch_offset_for_timestamp(lg: Log, remote: RemoteLogReader | None, timestamp: int,
                               isolation_level: IsolationLevel | int | None = None) -> TimestampAndOffset | None:
    """ListOffsets across both tiers (Kafka's UnifiedLog.fetchOffsetByTimestamp): earliest (-2) is the first
    offset of either tier, earliest-local (-4) the first on local disk, latest-tiered (-5) the last offset a
    complete remote segment holds (-1 when none); max-timestamp (-3) the record with the largest timestamp of
    either tier; a timestamp is looked for in the remote tier first; the rest as the local log answers them."""
    remote = tier_of(lg, remote)
    if timestamp == EARLIEST_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, log_start_offset_of(lg, remote))
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, lg.local_log_start_offset)
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return TimestampAndOffset(NO_TIMESTAMP, -1 if remote is None else remote.highest_offset(lg.topic_partition))
    if remote is not None and timestamp == MAX_TIMESTAMP:
        local = lg.fetch_offset_for_timestamp(timestamp, isolation_level)
        found = remote.max_timestamp(lg)
        # On a tie the earlier record, as within the local log.
        return found if found is not None and (local is None or found.timestamp >= local.timestamp) else local
    if remote is not None and timestamp >= 0:
        found = remote.offset_for_timestamp(lg, timestamp)
        if found is not None and found.offset < lg.local_log_start_offset:
            return found
    return lg.fetch_offset_for_timestamp(timestamp, isolation_level)
