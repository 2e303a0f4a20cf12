"""Stage 2 of the job, rewriting segment groups: a task per ~256 MiB of groups, or one per partition
holding transactions.

``clean_inputs`` turns a partition's stage-1 result into the offsets that
survive (``survivors``), cut by the offset ranges of its stage-2 tasks, with
the runs of batches worth reading. Each group is then cleaned by the broker's
own ``clean_group``, records chosen by offset, into ``.cleaned`` files beside
the originals (built locally and uploaded for object storage); a partition
with transactions is cleaned whole, in order, since its transaction state
runs through the log.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from format import layout
from format.fs import filesystem_for, is_local, join
from format.txn_index import AbortedTxn

from ....config import LogConfig
from ..cleaner import (DEFAULT_CHUNK_BYTES, DEFAULT_PRODUCER_ID_EXPIRATION_MS, CleanerStats, SourceSegment, clean_group,
                       new_cleaned_segment)
from ..filter import FilterContext
from ..survivors import SurvivorOffsets, survivor_offsets
from ..transactions import CleanedTransactionMetadata, LastRecord, ProducerStateBuilder
from .map_stage import MapPiece
from .partition_plan import DEFAULT_TASK_BYTES, GroupSource, PartitionPlan, task_bundles
from .remote_segments import SEGMENT_FILE_SUFFIXES, open_records, segment_path


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
    return [task(bundle) for bundle in task_bundles(plan.groups, lambda g: sum(s.size for s in g), target_bytes)]


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
            sources = [SourceSegment(s.base_offset, open_records(fs, segment_path(task.directory, fs, s.base_offset),
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
