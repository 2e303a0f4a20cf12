"""The fetch path: reading partitions for a Fetch request, and the fetch that waits (Kafka's DelayedFetch).

``read_from_local_log`` reads the partitions of one request in order under
the request's limits, as Kafka's ``ReplicaManager.readFromLocalLog`` does:
each partition gets at most its ``partition_max_bytes`` and what remains of
the request's ``max_bytes``; the first partition that has data returns at
least one whole batch even if that batch is larger than both (KIP-74), so a
consumer can always make progress. Errors are per partition. How far each
partition is read is the request's ``FetchIsolation``: a consumer (replica id
-1) stops at the high watermark, or at the last stable offset with
read_committed; a follower (a replica id) reads to the log end. An offset
below the local log start offset is read from the remote tier, when the
broker has one (``remote_log_reader``).
With ``FetchParams.zero_copy`` (the socket server's fetch on a plaintext
listener) a local read may return its records as a ``FileSlice`` of the
segment file rather than bytes; whoever takes the results closes the slices:
the network thread once it sent them, the fetch itself when it parks
(``release_results``: completion reads again). Remote-tier reads are bytes.

A fetch that found fewer than ``min_bytes`` waits as a ``DelayedFetch`` in
the fetch purgatory, watched under each of its partitions. A produce to one
of them calls ``check_and_complete``; ``try_complete`` then estimates the
bytes now available from segment positions alone — no read — and completes
once they reach ``min_bytes``, or when the fetch can never be satisfied as
asked (the partition is gone, the log was truncated below the fetch offset,
or a new segment was rolled). ``max_wait_ms`` on the timer completes the
rest. Completion reads the logs again and hands the result to the callback.

A fetch naming the epoch of the last batch it holds (``last_fetched_epoch``,
Fetch v12, what followers send) is checked against the leader-epoch cache
first: when that epoch ended in this log before the fetch offset, or the log
never had it, the answer is the diverging epoch and where it ended, with no
records, and the fetcher truncates there (Kafka's
validateFetchOffsetAndMaybeGetDivergingEpoch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from format.layout import TopicPartition

from format.file_slice import FileSlice, release
from format.record_batch import batch_spans
from format.segment import FetchDataInfo
from format.txn_index import AbortedTxn

from ..cluster.partition import NO_PARTITION_LEADER_EPOCH, check_leader_epoch
from ..errors import KafkaError, OffsetMovedToTieredStorageError, UnknownServerError, UnknownTopicOrPartitionError
from ..log.leader_epoch_file_cache import EpochEndOffset
from ..log.log import CONSUMER_REPLICA_ID, FetchIsolation, IsolationLevel, Log
from ..log.remote.remote_log_reader import (RemoteLogReader, collect_aborted_transactions, log_start_offset_of,
                                           read_log)
from ..purgatory.delayed_operation import DelayedOperation

log = logging.getLogger(__name__)

READ_UNCOMMITTED = IsolationLevel.READ_UNCOMMITTED
READ_COMMITTED = IsolationLevel.READ_COMMITTED
UNKNOWN_OFFSET = -1


class LogSource(Protocol):
    """Where the fetch path finds a partition's log: anything with ``get_log`` (the broker's LogManager)."""

    def get_log(self, tp: TopicPartition) -> Log | None: ...


@dataclass(frozen=True)
class FetchParams:
    """The request-wide settings of a fetch."""

    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = READ_UNCOMMITTED
    # The fetching broker's id (a follower), or -1 for a consumer.
    replica_id: int = CONSUMER_REPLICA_ID
    # Whether the reads may return records as ``FileSlice``s of the segment files (the socket server's fetch
    # on a plaintext listener, ``fetch.zero.copy.enable``): whoever takes the results then closes them.
    zero_copy: bool = False

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def isolation(self) -> FetchIsolation:
        """How far this fetch reads: a follower to the log end, a consumer to the high watermark (the
        last stable offset at read_committed)."""
        return FetchIsolation.of(self.replica_id, self.isolation_level)


@dataclass(frozen=True)
class FetchPartition:
    """One partition a fetch asks for."""

    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    # The leader epoch the fetcher knows (-1: none); another one than the partition's is fenced.
    current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    # The epoch of the last batch the fetcher holds (-1: none).
    last_fetched_epoch: int = NO_PARTITION_LEADER_EPOCH


@dataclass(frozen=True)
class LogOffsetMetadata:
    """Where an offset sits in the log: its segment and byte position (Kafka's LogOffsetMetadata)."""

    message_offset: int
    segment_base_offset: int
    relative_position_in_segment: int


@dataclass(frozen=True)
class LogReadResult:
    """What reading one partition gave: records, or the error, and the partition's offsets."""

    partition: FetchPartition
    records: bytes | memoryview | FileSlice = b""  # what the log read (FetchDataInfo.records)
    high_watermark: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    error: KafkaError | None = None
    fetch_offset_metadata: LogOffsetMetadata | None = None
    # read_committed: the aborted transactions overlapping the records (None for read_uncommitted).
    aborted_transactions: tuple[AbortedTxn, ...] | None = None
    # Where the fetcher's history and this log's part: it truncates there before fetching again.
    diverging_epoch: EpochEndOffset | None = None

    @property
    def error_code(self) -> int:
        return 0 if self.error is None else self.error.code


def _next_offset(info: FetchDataInfo, fetch_offset: int) -> int:
    """The offset after the last batch of a read (``fetch_offset`` when it holds none)."""
    if info.next_offset is not None:  # a file slice: the read walked its headers
        return info.next_offset
    next_offset = fetch_offset
    for _, _, _, last_offset, _ in batch_spans(info.records):
        next_offset = last_offset + 1
    return next_offset


def _read_partition(logs: LogSource, fp: FetchPartition, max_bytes: int, min_one_message: bool,
                    params: FetchParams, remote: RemoteLogReader | None) -> LogReadResult:
    lg = logs.get_log(TopicPartition(fp.topic, fp.partition))
    if lg is None:
        return LogReadResult(fp, error=UnknownTopicOrPartitionError(
            f"this broker has no partition {fp.topic}-{fp.partition}"))
    try:
        check_leader_epoch(lg, fp.current_leader_epoch, lg.leader_epoch)
        diverging = diverging_epoch(lg, fp.last_fetched_epoch, fp.fetch_offset)
        if diverging is not None:
            return LogReadResult(fp, b"", lg.high_watermark, lg.last_stable_offset,
                                 log_start_offset_of(lg, remote), diverging_epoch=diverging)
        if params.is_from_follower and lg.config.remote_storage_enable and fp.fetch_offset < lg.local_log_start_offset:
            # A follower rebuilds what lies below the local log start offset from the remote tier (KIP-405).
            raise OffsetMovedToTieredStorageError(
                f"{lg}: offset {fp.fetch_offset} fetched by broker {params.replica_id} is below the local log start "
                f"offset {lg.local_log_start_offset}: in the remote tier only")
        info = read_log(lg, remote, fp.fetch_offset, max_bytes, min_one_message=min_one_message,
                        isolation=params.isolation, zero_copy=params.zero_copy)
        # Taken after the read, so the records served never lie past the high watermark reported.
        high_watermark = lg.high_watermark
        last_stable_offset = lg.last_stable_offset
        aborted = None
        if params.isolation is FetchIsolation.TXN_COMMITTED:
            try:
                aborted = tuple(collect_aborted_transactions(lg, remote, fp.fetch_offset,
                                                             _next_offset(info, fp.fetch_offset)))
            except BaseException:
                release(info.records)
                raise
        return LogReadResult(fp, info.records, high_watermark, last_stable_offset, log_start_offset_of(lg, remote),
                             fetch_offset_metadata=LogOffsetMetadata(fp.fetch_offset, info.segment_base_offset,
                                                                     info.position),
                             aborted_transactions=aborted)
    except KafkaError as exc:
        return LogReadResult(fp, error=exc)
    except Exception as exc:  # a storage bug answers this partition with an error, not the whole request
        log.exception("reading %s-%d at offset %d failed", fp.topic, fp.partition, fp.fetch_offset)
        return LogReadResult(fp, error=UnknownServerError(f"{fp.topic}-{fp.partition}: {exc}"))


def diverging_epoch(lg: Log, last_fetched_epoch: int, fetch_offset: int) -> EpochEndOffset | None:
    """Where a fetcher whose last batch is of ``last_fetched_epoch`` and who fetches from ``fetch_offset``
    left this log's history, or None while it has not: the epoch ended before the fetch offset here, or
    this log knows only an older one."""
    if last_fetched_epoch < 0:
        return None
    found = lg.end_offset_for_epoch(last_fetched_epoch)
    if found is None:
        return EpochEndOffset(-1, -1)
    if found.leader_epoch < last_fetched_epoch or found.end_offset < fetch_offset:
        return found
    return None


def read_from_local_log(logs: LogSource, params: FetchParams, partitions: Sequence[FetchPartition],
                        remote: RemoteLogReader | None = None) -> list[LogReadResult]:
    """Read ``partitions`` in request order within ``params.max_bytes`` (see the module docstring); offsets
    below a log's local log start offset are read from the ``remote`` tier."""
    results = []
    remaining = params.max_bytes
    min_one_message = True
    for fp in partitions:
        limit = max(0, min(fp.partition_max_bytes, remaining))
        result = _read_partition(logs, fp, limit, min_one_message, params, remote)
        if result.records:
            # KIP-74: only the first partition with data may exceed the limits.
            min_one_message = False
            remaining -= len(result.records)
        results.append(result)
    return results


def release_results(results: Sequence[LogReadResult]) -> None:
    """Close the file slices among ``results``' records (results read for zero copy and not sent)."""
    for result in results:
        release(result.records)


@dataclass(frozen=True)
class FetchPartitionStatus:
    """A waiting fetch's partition and where its fetch offset was found in the log."""

    partition: FetchPartition
    start: LogOffsetMetadata


class DelayedFetch(DelayedOperation):
    """A fetch waiting for ``min_bytes`` on its partitions or for ``max_wait_ms``."""

    def __init__(self, logs: LogSource, params: FetchParams, statuses: Sequence[FetchPartitionStatus],
                 response_callback: Callable[[list[LogReadResult]], None],
                 remote: RemoteLogReader | None = None) -> None:
        super().__init__(params.max_wait_ms)
        self.logs = logs
        self.remote = remote
        self.params = params
        self.statuses = list(statuses)
        self.response_callback = response_callback
        self.expired = False

    def try_complete(self) -> bool:
        accumulated = 0
        for status in self.statuses:
            fp, start = status.partition, status.start
            lg = self.logs.get_log(TopicPartition(fp.topic, fp.partition))
            if lg is None:
                return self.force_complete()  # deleted: answer with the error now
            if fp.current_leader_epoch != NO_PARTITION_LEADER_EPOCH and fp.current_leader_epoch != lg.leader_epoch:
                return self.force_complete()  # a new leader epoch: the fetcher is fenced now
            end_offset = lg.fetch_upper_bound(self.params.isolation)
            if end_offset == start.message_offset:
                continue
            active = lg.active_segment
            if end_offset < start.message_offset:
                return self.force_complete()  # truncated below the fetch offset
            if start.segment_base_offset < active.base_offset:
                # A segment rolled since the first read: more than the rest of
                # that segment is there, which Kafka counts as enough.
                return self.force_complete()
            available = active.size - start.relative_position_in_segment
            accumulated += max(0, min(available, fp.partition_max_bytes))
        if accumulated >= self.params.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        partitions = [status.partition for status in self.statuses]
        try:
            results = read_from_local_log(self.logs, self.params, partitions, self.remote)
        except Exception as exc:  # the client must get an answer whatever happened
            log.exception("completing a delayed fetch failed")
            results = [LogReadResult(fp, error=UnknownServerError(str(exc))) for fp in partitions]
        self.response_callback(results)

    def on_expiration(self) -> None:
        self.expired = True

    def __repr__(self) -> str:
        parts = ",".join(f"{s.partition.topic}-{s.partition.partition}@{s.start.message_offset}"
                         for s in self.statuses)
        return f"DelayedFetch({parts}, min_bytes={self.params.min_bytes}, completed={self.is_completed()})"
