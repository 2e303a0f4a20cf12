"""The distributed compaction job's steps as plain functions; ``compaction_job`` wires them into Spark.

Driver, before: take the lease (``compaction_lease``: the log dir's lock file,
or a lease from the broker running on it), settle what an earlier interrupted
swap left (``recover_partition``, the log loader's rules; a running broker
settles its own), and plan each partition with the broker cleaner's rules
(``plan_partition``): first dirty offset from ``cleaner-offset-checkpoint``,
first uncleanable offset (active segment, ``min.compaction.lag.ms``), segment
groups.

Stage 1 (``run_map_task``, a task per ~256 MiB of a partition's segments):
the keys of the cleanable segments are hashed; those of the dirty section are
reduced to their latest offset, the others kept as candidates; every segment
also reports the headers of its producers' batches. Pieces of one partition
merge (``merge_pieces``), and ``clean_inputs`` turns the partition's result
into the offsets that survive (``broker_core.log.cleaner.survivors``), cut by the
offset ranges of its stage-2 tasks.

Stage 2 (``run_clean_task``, a task per ~256 MiB of segment groups, or one per
partition when it holds transactions, whose state runs through the log in
order): each group is cleaned by the broker's own ``clean_group``, records
chosen by offset, into ``.cleaned`` files beside the originals (built locally
and uploaded for object storage).

Driver, after: per partition, the cleaned segments are swapped in by Kafka's
renames (``swap_partition``) and ``cleaner-offset-checkpoint`` moves to the end
of the cleaned range, or the broker holding the lease does both; then the
replaced files are deleted.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from broker_core.config import BrokerConfig, LogConfig
from broker_core.errors import LogDirInUseError
from broker_core.log.cleaner.cleaner import (DEFAULT_CHUNK_BYTES, DEFAULT_PRODUCER_ID_EXPIRATION_MS, CleanerStats,
                                             SegmentSizes, SourceSegment, aborted_intervals, clean_group,
                                             group_segments_by_size, header_events,
                                             is_aborted, new_cleaned_segment, read_chunks, segments_overlapping)
from broker_core.log.cleaner.filter import FilterContext
from broker_core.log.cleaner.log_cleaner_manager import calculate_cleanable_bytes, cleanable_offsets
from broker_core.log.cleaner.survivors import (BatchIndex, KeyMapBuilder, KeyOffsets, SurvivorOffsets, map_chunk,
                                               survivor_offsets)
from broker_core.log.cleaner.transactions import (CleanedTransactionMetadata, LastRecord, ProducerEvent,
                                                  ProducerStateBuilder, collect_aborted_transactions)
from broker_core.log.log_loader import plan_swap_recovery
from broker_core.log.log_manager import LogDirLock
from broker_core.log.topic_store import read_topics
from broker_core.protocol.api_keys import SeglogApiKey
from broker_core.protocol.messages.compaction import ACQUIRE, RELEASE, RENEW
from format import layout
from format.checkpoint import OffsetCheckpointFile, parse_offset_checkpoint, render_offset_checkpoint
from format.file_records import FileRecords
from format.fs import filesystem_for, is_local, join
from format.index import OffsetIndex, TimeIndex
from format.layout import TopicPartition
from format.txn_index import AbortedTxn, parse_aborted_txns

log = logging.getLogger(__name__)

# What one task of either stage reads, at least (a segment or group larger than this is a task alone).
DEFAULT_TASK_BYTES = 256 * 1024 * 1024
SEGMENT_FILE_SUFFIXES = (layout.LOG_FILE_SUFFIX, layout.INDEX_FILE_SUFFIX, layout.TIME_INDEX_FILE_SUFFIX,
                         layout.TXN_INDEX_FILE_SUFFIX)


class CompactionError(RuntimeError):
    """The job cannot run as asked (a topic that is not compacted, a log dir in use)."""


# --- listing -------------------------------------------------------------------


def _mtime_ms(entry: Mapping) -> int | None:
    value = entry.get("mtime", entry.get("LastModified", entry.get("last_modified")))
    if value is None:
        return None
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(float(value) * 1000)


def list_files(fs, directory: str) -> dict[str, Mapping]:
    """File name -> listing entry (size, modification time) of a directory, fresh."""
    fs.invalidate_cache(directory)
    try:
        entries = fs.ls(directory, detail=True)
    except FileNotFoundError:
        return {}
    return {e["name"].rstrip("/").rsplit("/", 1)[-1]: e for e in entries if e.get("type") != "directory"}


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


def _open_records(fs, path: str, size: int | None) -> FileRecords:
    if is_local(fs):
        return FileRecords.open(path, writable=False)
    return FileRecords.open_fs(fs, path, size)


def _segment_path(directory: str, fs, base_offset: int, suffix: str = layout.LOG_FILE_SUFFIX) -> str:
    return join(fs, directory, layout.filename_prefix_from_offset(base_offset) + suffix)


def largest_timestamp(fs, directory: str, segment: RemoteSegment) -> int:
    """A segment's largest timestamp (its time index's last entry, then the batches after it),
    or its modification time when it has none, as ``LogSegment.largest_timestamp``."""
    try:
        data = fs.cat_file(_segment_path(directory, fs, segment.base_offset, layout.TIME_INDEX_FILE_SUFFIX))
        last = TimeIndex.from_bytes(segment.base_offset, data).last_entry
    except FileNotFoundError:
        last = None
    start = 0
    best = -1
    if last is not None and last.timestamp >= 0:
        best = last.timestamp
        try:
            index = OffsetIndex.from_bytes(segment.base_offset, fs.cat_file(
                _segment_path(directory, fs, segment.base_offset, layout.INDEX_FILE_SUFFIX)))
            start = index.lookup(last.offset).position
        except FileNotFoundError:
            start = 0
    records = _open_records(fs, _segment_path(directory, fs, segment.base_offset), segment.size)
    try:
        for _, header in records.batch_headers(start):
            best = max(best, header.max_timestamp)
    finally:
        records.close()
    if best >= 0:
        return best
    return segment.last_modified_ms if segment.last_modified_ms is not None else -1


def first_batch_timestamp(fs, directory: str, segment: RemoteSegment) -> int:
    records = _open_records(fs, _segment_path(directory, fs, segment.base_offset), segment.size)
    try:
        first = next(records.batch_headers(), None)
    finally:
        records.close()
    return -1 if first is None else first[1].max_timestamp


# --- the lease and recovery ------------------------------------------------------


DEFAULT_LEASE_MS = 60_000


class LockFileLease:
    """The right to swap segments in a log dir no broker is running on.

    A local log dir is leased by its lock file, as an embedded broker holds
    it: a running broker holding it makes the job fail at once (unless it is
    reached through ``BrokerLease``), and no broker can start (and remove the
    job's ``.cleaned`` files) while the job runs. A log dir on object storage
    has no running owner and is not locked. The driver swaps the cleaned
    segments in itself, by Kafka's renames, and settles what an interrupted
    swap left before planning.
    """

    settles_leftovers = True

    def __init__(self, fs, root: str):
        self.fs = fs
        self.root = root
        self._lock = None

    def __enter__(self) -> "LockFileLease":
        if is_local(self.fs):
            try:
                self._lock = LogDirLock(self.root)
            except LogDirInUseError as exc:
                raise CompactionError(f"cannot compact {self.root}: {exc}; a running broker owns it: pass its "
                                      f"listener as bootstrap (--bootstrap HOST:PORT) to compact through it, "
                                      f"or stop it") from None
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def swap(self, plan: PartitionPlan, results: Sequence["GroupResult"]) -> list[str]:
        """Swap the partition's cleaned groups in; returns the replaced files to delete."""
        return swap_partition(self.fs, self.root, plan, results)


class BrokerLease:
    """The right to swap segments in a log dir a running broker owns, held against that broker
    through its admin API (seglog's CompactionLease request): the broker pauses its own cleaner on
    the leased partitions, the lease is renewed in the background every third of ``lease_ms``
    (a job that dies lets it lapse and the broker resumes cleaning), and the broker, which has the
    logs open, swaps the job's cleaned segments in (ReplaceSegments) and moves its checkpoint."""

    settles_leftovers = False  # the owner settles its own directory when it loads it

    def __init__(self, bootstrap: str, partitions: Sequence[TopicPartition], lease_ms: int = DEFAULT_LEASE_MS,
                 client_factory: Callable[[str], object] | None = None):
        from broker_core.client.protocol_client import ProtocolClient

        self.bootstrap = bootstrap
        self.partitions = list(partitions)
        self.lease_ms = lease_ms
        self.lease_id = f"seglog-compaction-{uuid.uuid4()}"
        self._client_factory = client_factory or ProtocolClient
        self._client = None
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost: str | None = None  # why the lease was lost, if it was

    def _send(self, api_key, body: dict) -> dict:
        with self._send_lock:
            return self._client.send(api_key, body, version=0)

    def _lease(self, operation: int, topics: list | None = None) -> dict:
        return self._send(SeglogApiKey.COMPACTION_LEASE, {"lease_id": self.lease_id, "operation": operation,
                                                          "lease_ms": self.lease_ms, "topics": topics or []})

    def __enter__(self) -> "BrokerLease":
        self._client = self._client_factory(self.bootstrap)
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        try:
            response = self._lease(ACQUIRE, [{"name": t, "partitions": sorted(ps)}
                                                   for t, ps in sorted(by_topic.items())])
            if response["error_code"]:
                refused = [f"{t['name']}-{p['partition_index']}: {_error_text(p)}" for t in response["topics"]
                           for p in t["partitions"] if p["error_code"]]
                raise CompactionError(f"the broker at {self.bootstrap} refused to lease "
                                      f"{'; '.join(refused) or _error_text(response)}")
        except BaseException:
            self._client.close()
            raise
        self._renewer = threading.Thread(target=self._renew, name="compaction-lease", daemon=True)
        self._renewer.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_ms / 3000):
            try:
                response = self._lease(RENEW)
            except Exception as exc:  # a later renewal may still get through before the lease lapses
                log.warning("renewing compaction lease %s failed: %s", self.lease_id, exc)
                continue
            if response["error_code"]:
                self.lost = _error_text(response)
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(10)
        try:
            if self.lost is None:
                self._lease(RELEASE)
        except Exception as error:  # the lease lapses on its own
            log.warning("releasing compaction lease %s failed: %s", self.lease_id, error)
        finally:
            self._client.close()

    def swap(self, plan: PartitionPlan, results: Sequence["GroupResult"]) -> list[str]:
        """Ask the broker to swap the partition's cleaned groups in; it deletes the replaced files."""
        if self.lost is not None:
            raise CompactionError(f"{plan.topic_partition}: the lease on the broker at {self.bootstrap} was lost "
                                  f"({self.lost}); nothing was swapped in")
        segments = [{"base_offset": r.base_offset, "replaced_base_offsets": list(r.replaced)}
                    for r in sorted(results, key=lambda r: r.base_offset)]
        tp = plan.topic_partition
        response = self._send(SeglogApiKey.REPLACE_SEGMENTS, {"lease_id": self.lease_id, "topics": [
            {"name": tp.topic, "partitions": [{"partition_index": tp.partition,
                                               "cleaned_through_offset": plan.first_uncleanable_offset,
                                               "segments": segments}]}]})
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                if partition["error_code"]:
                    raise CompactionError(f"{tp}: the broker at {self.bootstrap} did not swap the cleaned "
                                          f"segments in: {_error_text(partition)}")
        return []


def _error_text(entry: Mapping) -> str:
    from broker_core.errors import error_for_code

    name = getattr(error_for_code(entry["error_code"]), "name", str(entry["error_code"]))
    message = entry.get("error_message")
    return f"{name}" + (f" ({message})" if message else "")


def compaction_lease(directory, topics: Sequence[str], bootstrap: str | None = None,
                     lease_ms: int = DEFAULT_LEASE_MS):
    """The lease the job holds on ``directory`` (a ``LogDirectory``): against the broker at
    ``bootstrap`` when one runs on it, else the log dir's lock file."""
    if bootstrap is None:
        return LockFileLease(directory.fs, directory.root)
    present = directory.topics(include_internal=True)
    return BrokerLease(bootstrap, [TopicPartition(t, p) for t in topics for p in present.get(t, ())], lease_ms)


def _rename(fs, source: str, target: str) -> None:
    """One rename of the swap protocol (a copy and a delete on object storage)."""
    if is_local(fs):
        os.replace(source, target)
    else:
        fs.mv(source, target)


def _fsync_dir(fs, directory: str) -> None:
    if is_local(fs):
        from format.checkpoint import fsync_dir

        fsync_dir(directory)


def recover_partition(fs, directory: str) -> int:
    """Settle the ``.cleaned`` / ``.swap`` / ``.deleted`` files an interrupted swap left, by the
    log loader's rules; returns how many files were removed or renamed."""
    files = list_files(fs, directory)

    def next_offset(name: str) -> int:
        records = _open_records(fs, join(fs, directory, name), int(files[name].get("size") or 0))
        try:
            return records.next_offset(layout.offset_from_file_name(name))
        finally:
            records.close()

    plan = plan_swap_recovery(sorted(files), next_offset)
    for name in plan.delete:
        try:
            fs.rm_file(join(fs, directory, name))
        except FileNotFoundError:
            pass
    for source, target in plan.rename:
        _rename(fs, join(fs, directory, source), join(fs, directory, target))
    if plan.delete or plan.rename:
        _fsync_dir(fs, directory)
        log.info("%s: settled an interrupted swap (%d removed, %d renamed)", directory, len(plan.delete),
                 len(plan.rename))
    return len(plan.delete) + len(plan.rename)


# --- planning -----------------------------------------------------------------------


def topic_overrides(fs, root: str) -> dict[str, dict[str, str]]:
    """Each topic's configuration overrides, from seglog's topic store in the log dir."""
    return {name: dict(topic.config) for name, topic in read_topics(fs, root).items()}


def read_checkpoint(fs, path: str) -> dict[TopicPartition, int]:
    try:
        text = fs.cat_file(path).decode("utf-8")
    except FileNotFoundError:
        return {}
    return parse_offset_checkpoint(text, path)


def write_checkpoint(fs, path: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Kafka's checkpoint text, replaced whole (atomically on local disk, as one object on S3)."""
    if is_local(fs):
        OffsetCheckpointFile(path).write(offsets)
        return
    fs.pipe_file(path, render_offset_checkpoint(offsets, path).encode("utf-8"))


@dataclass(frozen=True)
class GroupSource:
    base_offset: int
    size: int
    upper_bound_offset: int
    last_modified_ms: int | None


@dataclass(frozen=True)
class PartitionPlan:
    """What the job will do to one partition."""

    topic_partition: TopicPartition
    directory: str
    config: LogConfig
    segments: tuple[RemoteSegment, ...]
    first_dirty_offset: int
    first_uncleanable_offset: int
    groups: tuple[tuple[GroupSource, ...], ...]
    txn_indexes: tuple[tuple[int, tuple[AbortedTxn, ...]], ...]

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic_partition.topic, self.topic_partition.partition)

    @property
    def dirty_segments(self) -> list[RemoteSegment]:
        return segments_overlapping(self.segments, self.first_dirty_offset, self.first_uncleanable_offset)

    @property
    def bytes_before(self) -> int:
        return sum(s.size for s in self.segments)


def plan_partition(fs, directory: str, tp: TopicPartition, config: LogConfig, *, log_start_offset: int,
                   log_end_offset: int, last_clean_offset: int | None, now_ms: int) -> PartitionPlan | None:
    """The broker cleaner's decision for this partition (dirty ratio aside: the job cleans what it
    is asked to); None when nothing is cleanable."""
    segments = remote_segments(list_files(fs, directory))
    if not segments:
        return None
    offsets = cleanable_offsets(segments, log_start_offset=log_start_offset, log_end_offset=log_end_offset,
                                last_stable_offset=log_end_offset,
                                min_compaction_lag_ms=config.min_compaction_lag_ms,
                                last_clean_offset=last_clean_offset, now_ms=now_ms,
                                largest_timestamp=lambda s: largest_timestamp(fs, directory, s))
    first_uncleanable, cleanable = calculate_cleanable_bytes(segments, offsets.first_dirty_offset,
                                                             offsets.first_uncleanable_dirty_offset)
    if cleanable == 0:
        return None
    cleanable_segments = [s for s in segments[:-1] if s.base_offset < first_uncleanable]
    next_base = {s.base_offset: segments[i + 1].base_offset for i, s in enumerate(segments[:-1])}
    by_base = {s.base_offset: s for s in cleanable_segments}
    groups = group_segments_by_size([s.sizes() for s in cleanable_segments], config.segment_bytes,
                                    config.segment_index_bytes, first_uncleanable)
    txn_indexes = []
    for s in segments:
        entries: tuple[AbortedTxn, ...] = ()
        if s.txn_index_size:
            path = _segment_path(directory, fs, s.base_offset, layout.TXN_INDEX_FILE_SUFFIX)
            entries = tuple(parse_aborted_txns(fs.cat_file(path), path))
        txn_indexes.append((s.base_offset, entries))
    sources = tuple(tuple(GroupSource(g.base_offset, g.size, next_base[g.base_offset],
                                      by_base[g.base_offset].last_modified_ms) for g in group) for group in groups)
    return PartitionPlan(tp, directory, config, tuple(segments), offsets.first_dirty_offset, first_uncleanable,
                         sources, tuple(txn_indexes))


def plan_compaction(url: str, topics: Sequence[str], *, storage_options: Mapping | None = None,
                    now_ms: int, broker_config: Mapping[str, object] | None = None,
                    settle_leftovers: bool = True) -> list[PartitionPlan]:
    """Plan every partition of ``topics`` in the log dir at ``url`` (partitions with nothing to
    clean are left out). Topics must exist and be compacted. With ``settle_leftovers`` an
    interrupted swap's files are settled first (not under a running broker, which owns them)."""
    from format.log_dir import LogDirectory

    directory = LogDirectory(url, storage_options)
    fs, root = directory.fs, directory.root
    defaults = BrokerConfig.from_props(dict(broker_config or {})).log_config_defaults()
    overrides = topic_overrides(fs, root)
    present = directory.topics(include_internal=True)
    checkpoint = read_checkpoint(fs, join(fs, root, layout.CLEANER_OFFSET_CHECKPOINT_FILE))
    starts = directory.log_start_offsets()
    plans = []
    for topic in topics:
        if topic not in present:
            raise CompactionError(f"topic {topic!r} has no partition in {url}")
        config = defaults.with_overrides(overrides.get(topic, {}))
        if not config.compact:
            raise CompactionError(f"topic {topic!r} has cleanup.policy={','.join(config.cleanup_policy)}; only "
                                  f"topics whose cleanup.policy includes compact are compacted")
        for partition in present[topic]:
            tp = TopicPartition(topic, partition)
            if settle_leftovers:
                recover_partition(fs, directory.partition_dir(tp))
            info = directory.describe(tp, starts)
            plan = plan_partition(fs, directory.partition_dir(tp), tp, config,
                                  log_start_offset=info.log_start_offset, log_end_offset=info.log_end_offset,
                                  last_clean_offset=checkpoint.get(tp), now_ms=now_ms)
            if plan is not None:
                plans.append(plan)
    return plans


# --- stage 1: the latest offset of every key ---------------------------------------------


@dataclass(frozen=True)
class MapTask:
    """Consecutive segments of one partition for one stage-1 task: the keys of the cleanable ones
    are read, the headers of the others."""

    key: tuple[str, int]
    directory: str
    segments: tuple[RemoteSegment, ...]
    cleanable: tuple[bool, ...]
    start_offset: int  # the first dirty offset
    aborted: tuple[AbortedTxn, ...]


@dataclass
class MapPiece:
    """Part of a partition's stage-1 result: the latest offset of each dirty key, every other keyed
    record (the candidates of ``broker_core.log.cleaner.survivors``), where each batch lies, and the
    producer batches seen."""

    mapped: KeyOffsets
    candidates: KeyOffsets
    batches: BatchIndex
    events: list[ProducerEvent] = field(default_factory=list)
    bytes_read: int = 0
    segments: int = 0
    cpu_s: float = 0.0  # CPU time the tasks spent

    @property
    def keys(self) -> int:
        return len(self.mapped)


def _bundles(items: Sequence, size: Callable[[object], int], target: int) -> list[list]:
    """Consecutive items in bundles of about ``target`` bytes (an item larger than that is a bundle
    alone): a Spark task costs a fixed tenth of a second or so, so tasks much smaller than that
    waste the cores, and a small remainder joins the bundle before it."""
    out: list[list] = []
    current: list = []
    held = 0
    for item in items:
        current.append(item)
        held += size(item)
        if held >= target:
            out.append(current)
            current, held = [], 0
    if current:
        if out and held < target // 2:
            out[-1].extend(current)
        else:
            out.append(current)
    return out


def map_tasks(plans: Iterable[PartitionPlan], target_bytes: int = DEFAULT_TASK_BYTES) -> list[MapTask]:
    tasks = []
    for plan in plans:
        cleanable = {s.base_offset for s in plan.segments
                     if s.base_offset < plan.first_uncleanable_offset and s is not plan.segments[-1]}
        aborted = tuple(collect_aborted_transactions([(b, list(e)) for b, e in plan.txn_indexes],
                                                     plan.first_dirty_offset, plan.first_uncleanable_offset))
        for bundle in _bundles(plan.segments, lambda s: s.size, target_bytes):
            tasks.append(MapTask(plan.key, plan.directory, tuple(bundle),
                                 tuple(s.base_offset in cleanable for s in bundle), plan.first_dirty_offset, aborted))
    return tasks


def _map_segment(fs, task: MapTask, segment: RemoteSegment, cleanable: bool, builder: KeyMapBuilder,
                 events: list[ProducerEvent], batches: list, chunk_bytes: int) -> int:
    records = _open_records(fs, _segment_path(task.directory, fs, segment.base_offset), segment.size)
    read = 0
    try:
        if not cleanable:
            events.extend(header_events(records))
            return 0
        aborted = aborted_intervals(task.aborted)
        for chunk_position, data in read_chunks(records, 0, chunk_bytes):
            builder.add(*map_chunk(data, chunk_position, task.start_offset, lambda h: is_aborted(h, aborted),
                                   events, segment.base_offset, batches, records.path))
            read += len(data)
    finally:
        records.close()
    return read


def run_map_task(task: MapTask, url: str, storage_options: Mapping | None = None,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> tuple[tuple[str, int], MapPiece]:
    """Stage 1 on some segments of a partition: the keys of the cleanable ones (the dirty keys
    reduced to their latest offset), and the producer batches of all."""
    started = time.process_time()
    fs, _ = filesystem_for(url, storage_options)
    builder = KeyMapBuilder()
    events: list[ProducerEvent] = []
    batches: list[tuple[int, int, int, int, int]] = []
    read = sum(_map_segment(fs, task, segment, cleanable, builder, events, batches, chunk_bytes)
               for segment, cleanable in zip(task.segments, task.cleanable))
    mapped, candidates = builder.result()
    return task.key, MapPiece(mapped, candidates, BatchIndex.of(batches), events, read, len(task.segments),
                              time.process_time() - started)


def merge_pieces(a: MapPiece, b: MapPiece) -> MapPiece:
    started = time.process_time()
    mapped = KeyOffsets.concat([a.mapped, b.mapped]).latest_per_key()
    return MapPiece(mapped, KeyOffsets.concat([a.candidates, b.candidates]),
                    BatchIndex.concat([a.batches, b.batches]),
                    a.events + b.events,
                    a.bytes_read + b.bytes_read, a.segments + b.segments,
                    a.cpu_s + b.cpu_s + time.process_time() - started)


# --- stage 2: rewriting groups ------------------------------------------------------------


@dataclass(frozen=True)
class CleanTask:
    key: tuple[str, int]
    directory: str
    config: LogConfig
    groups: tuple[tuple[GroupSource, ...], ...]  # cleaned in order, with one transaction state
    upper_bound_offset: int
    txn_indexes: tuple[tuple[int, tuple[AbortedTxn, ...]], ...]
    first_dirty_offset: int

    @property
    def offset_range(self) -> tuple[int, int]:
        """[first, end) of the offsets its groups hold."""
        return self.groups[0][0].base_offset, self.groups[-1][-1].upper_bound_offset


@dataclass(frozen=True)
class CleanInput:
    """What a stage-2 task gets from stage 1: the surviving offsets of its range, the producers'
    last batches, and either the runs of batches worth reading (per segment: those holding a
    survivor, a producer's last batch or the round's last) or, for a partition with transactions
    (whose state must see every batch), that it cleans the whole partition reading everything."""

    survivors: np.ndarray
    producers: dict[int, LastRecord]
    whole_partition: bool
    reads: dict[int, list[tuple[int, int]]] | None = None


@dataclass(frozen=True)
class GroupResult:
    """A cleaned group waiting to be swapped in."""

    key: tuple[str, int]
    base_offset: int
    replaced: tuple[int, ...]
    bytes_before: int
    bytes_after: int
    cleaned_files: tuple[str, ...]  # names, in the partition directory, ending .cleaned
    messages_read: int = 0
    messages_written: int = 0
    cpu_s: float = 0.0


def clean_tasks(plan: PartitionPlan, whole_partition: bool, target_bytes: int = DEFAULT_TASK_BYTES
                ) -> list[CleanTask]:
    """Tasks of consecutive groups of about ``target_bytes``, or one for the whole partition (a
    partition with transactions: the transaction state must walk its groups in order)."""
    def task(groups) -> CleanTask:
        return CleanTask(plan.key, plan.directory, plan.config, tuple(groups), plan.first_uncleanable_offset,
                         plan.txn_indexes, plan.first_dirty_offset)

    if whole_partition:
        return [task(plan.groups)]
    return [task(bundle) for bundle in _bundles(plan.groups, lambda g: sum(s.size for s in g), target_bytes)]


def clean_inputs(piece: MapPiece, tasks: Sequence[CleanTask], now_ms: int,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> list[CleanInput]:
    """Stage 1's result for a partition cut into the inputs of its stage-2 tasks (``tasks``, in
    offset order): one per task, or, when the partition holds transactions, everything for the
    first task, which then cleans the whole partition. Producers expire as the broker's cleaner
    has them expire (``producer.id.expiration.ms`` by ``now_ms``)."""
    survivors = survivor_offsets(piece.mapped, piece.candidates)
    state = ProducerStateBuilder().add_all(piece.events)
    producers = state.last_records(now_ms, producer_id_expiration_ms)
    if state.has_transactions:
        return [CleanInput(survivors, producers, True)]
    # Without transactions a batch keeps something only if it holds a survivor, or is kept empty
    # as its producer's last batch or as the one ending the round: the others need not be read.
    kept_whole = [p.last_data_offset for p in producers.values() if p.last_data_offset is not None]
    batches = piece.batches.take(np.argsort(piece.batches.base_offset, kind="stable"))  # pieces merge in any order
    worth_reading = batches.holding(np.union1d(survivors, np.array(kept_whole + [tasks[-1].upper_bound_offset - 1],
                                                                          dtype=np.int64)))
    out = []
    for task in tasks:
        first, end = task.offset_range
        cut = survivors[np.searchsorted(survivors, first):np.searchsorted(survivors, end)]
        mine = worth_reading & (batches.base_offset >= first) & (batches.last_offset < end)
        out.append(CleanInput(cut, producers, False, batches.take(mine).read_ranges(chunk_bytes)))
    return out


def run_clean_task(task: CleanTask, given: CleanInput, url: str, now_ms: int,
                   storage_options: Mapping | None = None,
                   chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> list[GroupResult]:
    """Stage 2: clean each group of the task into ``.cleaned`` files beside the originals."""
    fs, _ = filesystem_for(url, storage_options)
    local = is_local(fs)
    started = time.process_time()
    ctx = FilterContext(SurvivorOffsets(given.survivors, task.upper_bound_offset - 1), now_ms,
                        task.config.delete_retention_ms, task.upper_bound_offset, given.producers,
                        CleanedTransactionMetadata())
    txn_indexes = [(b, list(e)) for b, e in task.txn_indexes]
    results = []
    for group in task.groups:
        work_dir = task.directory if local else tempfile.mkdtemp(prefix="seglog-cleaned-")
        try:
            dest = new_cleaned_segment(work_dir, group[0].base_offset, task.config)
            sources = [SourceSegment(s.base_offset, _open_records(fs, _segment_path(task.directory, fs, s.base_offset),
                                                                  s.size), s.upper_bound_offset) for s in group]
            stats = CleanerStats()
            try:
                clean_group(sources, dest, ctx, txn_indexes,
                            last_modified_ms=group[-1].last_modified_ms if local else None,
                            chunk_bytes=chunk_bytes, stats=stats, reads=given.reads)
            except BaseException:
                dest.delete()
                raise
            finally:
                for source in sources:
                    source.records.close()
            dest.close()
            prefix = layout.filename_prefix_from_offset(group[0].base_offset)
            names = [prefix + suffix + layout.CLEANED_FILE_SUFFIX for suffix in SEGMENT_FILE_SUFFIXES
                     if os.path.exists(os.path.join(work_dir, prefix + suffix + layout.CLEANED_FILE_SUFFIX))]
            if not local:
                for name in names:
                    fs.put_file(os.path.join(work_dir, name), join(fs, task.directory, name))
            results.append(GroupResult(task.key, group[0].base_offset, tuple(s.base_offset for s in group),
                                       sum(s.size for s in group), stats.bytes_written, tuple(names),
                                       stats.messages_read, stats.messages_written,
                                       time.process_time() - started))
            started = time.process_time()
        finally:
            if not local:
                shutil.rmtree(work_dir, ignore_errors=True)
    return results


# --- the swap, on the driver ------------------------------------------------------------


def swap_group(fs, directory: str, result: GroupResult, files: Mapping[str, Mapping]) -> list[str]:
    """Swap one cleaned group in, in the broker's order (see ``Log.replace_segments``); returns
    the ``.deleted`` files left to remove."""
    swapped = []
    for name in result.cleaned_files:
        target = name[:-len(layout.CLEANED_FILE_SUFFIX)] + layout.SWAP_FILE_SUFFIX
        _rename(fs, join(fs, directory, name), join(fs, directory, target))
        swapped.append(target)
    _fsync_dir(fs, directory)
    doomed = []
    for base in result.replaced:
        prefix = layout.filename_prefix_from_offset(base)
        for suffix in SEGMENT_FILE_SUFFIXES:
            if prefix + suffix in files:
                target = prefix + suffix + layout.DELETED_FILE_SUFFIX
                _rename(fs, join(fs, directory, prefix + suffix), join(fs, directory, target))
                doomed.append(target)
    _fsync_dir(fs, directory)
    for name in swapped:
        _rename(fs, join(fs, directory, name), join(fs, directory, name[:-len(layout.SWAP_FILE_SUFFIX)]))
    _fsync_dir(fs, directory)
    return doomed


def swap_partition(fs, root: str, plan: PartitionPlan, results: Sequence[GroupResult]) -> list[str]:
    """Swap a partition's cleaned groups in and move its cleaner checkpoint to the end of the
    cleaned range; returns the paths of the replaced files, to delete once every swap is done."""
    files = list_files(fs, plan.directory)
    doomed = []
    for result in sorted(results, key=lambda r: r.base_offset):
        missing = [n for n in result.cleaned_files if n not in files]
        if missing:
            raise CompactionError(f"{plan.topic_partition}: cleaned files {missing} are gone from {plan.directory}; "
                                  f"was the log dir opened by a broker during the job?")
        doomed.extend(join(fs, plan.directory, n) for n in swap_group(fs, plan.directory, result, files))
    path = join(fs, root, layout.CLEANER_OFFSET_CHECKPOINT_FILE)
    checkpoint = read_checkpoint(fs, path)
    checkpoint[plan.topic_partition] = plan.first_uncleanable_offset
    write_checkpoint(fs, path, checkpoint)
    return doomed


def delete_files(fs, paths: Iterable[str]) -> None:
    for path in paths:
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass


@dataclass(frozen=True)
class PartitionReport:
    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int

    @property
    def reduction(self) -> float:
        return 1 - self.bytes_after / self.bytes_before if self.bytes_before else 0.0


def report_partition(plan: PartitionPlan, results: Sequence[GroupResult]) -> PartitionReport:
    """What the job did to one partition: its segments and bytes as planned, and once its cleaned
    groups (``results``) replace the segments they were cleaned from. The same figures as the
    stage-2 line's; what a broker appends meanwhile is not the job's doing."""
    mine = [r for r in results if r.key == plan.key]
    return PartitionReport(plan.topic_partition, plan.first_dirty_offset, plan.first_uncleanable_offset,
                           len(plan.segments), len(plan.segments) - sum(len(r.replaced) for r in mine) + len(mine),
                           plan.bytes_before,
                           plan.bytes_before - sum(r.bytes_before for r in mine) + sum(r.bytes_after for r in mine))


def format_report(reports: Sequence[PartitionReport]) -> list[str]:
    rows = [("PARTITION", "CLEANED-OFFSETS", "SEGMENTS", "BYTES-BEFORE", "BYTES-AFTER", "REDUCTION")]
    for r in reports:
        rows.append((str(r.topic_partition), f"{r.first_dirty_offset}..{r.end_offset}",
                     f"{r.segments_before} -> {r.segments_after}", f"{r.bytes_before:,}", f"{r.bytes_after:,}",
                     f"{100 * r.reduction:.1f}%"))
    before = sum(r.bytes_before for r in reports)
    after = sum(r.bytes_after for r in reports)
    rows.append(("total", "", "", f"{before:,}", f"{after:,}",
                 f"{100 * (1 - after / before):.1f}%" if before else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


ProgressFn = Callable[[str], None]
