"""Swapping cleaned segments in by Kafka's renames, on storage no broker has open, and settling a swap cut short.

A cleaned group's ``.cleaned`` files become ``.swap``, the segments it
replaces become ``.deleted``, and the ``.swap`` files lose their suffix, each
step made durable before the next (``Log.replace_segments``' order), so a
crash at any point leaves files the log loader, or ``recover_partition``
before the next run, settles one way or the other. On object storage a
rename is a copy and a delete.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from format import layout
from format.checkpoint import OffsetCheckpointFile, fsync_dir, render_offset_checkpoint
from format.fs import is_local, join
from format.layout import TopicPartition
from format.log_dir import read_offset_checkpoint

from ...log_loader import plan_swap_recovery
from . import CompactionError
from .remote_segments import SEGMENT_FILE_SUFFIXES, list_files, open_records

if TYPE_CHECKING:
    from .clean_stage import GroupResult
    from .partition_plan import PartitionPlan

log = logging.getLogger(__name__)


def _rename(fs, source: str, target: str) -> None:
    """One rename of the swap protocol (a copy and a delete on object storage)."""
    if is_local(fs):
        os.replace(source, target)
    else:
        fs.mv(source, target)


def _fsync_dir(fs, directory: str) -> None:
    if is_local(fs):
        fsync_dir(directory)


def recover_partition(fs, directory: str) -> int:
    """Settle the ``.cleaned`` / ``.swap`` / ``.deleted`` files an interrupted swap left, by the
    log loader's rules; returns how many files were removed or renamed."""
    files = list_files(fs, directory)

    def next_offset(name: str) -> int:
        records = open_records(fs, join(fs, directory, name), int(files[name].get("size") or 0))
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


def write_checkpoint(fs, path: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Kafka's checkpoint text, replaced whole (atomically on local disk, as one object on S3)."""
    if is_local(fs):
        OffsetCheckpointFile(path).write(offsets)
        return
    fs.pipe_file(path, render_offset_checkpoint(offsets, path).encode("utf-8"))


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
    checkpoint = read_offset_checkpoint(fs, path)
    checkpoint[plan.topic_partition] = plan.first_uncleanable_offset
    write_checkpoint(fs, path, checkpoint)
    return doomed


def delete_files(fs, paths: Iterable[str]) -> None:
    for path in paths:
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass
