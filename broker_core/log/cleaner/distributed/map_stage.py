"""Stage 1 of the job, the latest offset of every key: a task per ~256 MiB of a partition's segments.

The keys of the cleanable segments are hashed; those of the dirty section are
reduced to their latest offset, the others kept as candidates; every segment
also reports the headers of its producers' batches. Pieces of one partition
merge (``merge_pieces``) in any order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from format.fs import filesystem_for
from format.txn_index import AbortedTxn

from ..cleaner import DEFAULT_CHUNK_BYTES, aborted_intervals, header_events, is_aborted, read_chunks
from ..survivors import BatchIndex, KeyMapBuilder, KeyOffsets, map_chunk
from ..transactions import ProducerEvent, collect_aborted_transactions
from .partition_plan import DEFAULT_TASK_BYTES, PartitionPlan, task_bundles
from .remote_segments import RemoteSegment, open_records, segment_path


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


def map_tasks(plans: Iterable[PartitionPlan], target_bytes: int = DEFAULT_TASK_BYTES) -> list[MapTask]:
    tasks = []
    for plan in plans:
        cleanable = {s.base_offset for s in plan.segments
                     if s.base_offset < plan.first_uncleanable_offset and s is not plan.segments[-1]}
        aborted = tuple(collect_aborted_transactions([(b, list(e)) for b, e in plan.txn_indexes],
                                                     plan.first_dirty_offset, plan.first_uncleanable_offset))
        for bundle in task_bundles(plan.segments, lambda s: s.size, target_bytes):
            tasks.append(MapTask(plan.key, plan.directory, tuple(bundle),
                                 tuple(s.base_offset in cleanable for s in bundle), plan.first_dirty_offset, aborted))
    return tasks


def _map_segment(fs, task: MapTask, segment: RemoteSegment, cleanable: bool, builder: KeyMapBuilder,
                 events: list[ProducerEvent], batches: list, chunk_bytes: int) -> int:
    records = open_records(fs, segment_path(task.directory, fs, segment.base_offset), segment.size)
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
