"""Whether the process and its log dirs can hold new partitions, checked before any is created.

A partition directory starts as five inodes (the directory, ``.log``,
``.index``, ``.timeindex``, ``partition.metadata``) and about 8 KiB of blocks;
creating one takes a handful of descriptors at once (its files are then closed
while idle by the handle cache, so the partitions a process holds do not add
up against ``RLIMIT_NOFILE``). A creation the log dirs cannot hold is refused
whole, naming what is short, instead of failing half-way through.
"""

from __future__ import annotations

import os
from typing import Iterable

from format.file_handles import FileHandleCache, default_cache, descriptor_limit, open_descriptors

from ..errors import KafkaStorageError

INODES_PER_PARTITION = 5
BYTES_PER_PARTITION = 8 * 1024
# Open at once while one partition is created: its three segment files, a temporary
# partition.metadata, the directory being synced, and the topic store being written.
DESCRIPTORS_PER_CREATION = 8


def check_room_for_partitions(partitions: int, log_dirs: Iterable[str], what: str,
                              handles: FileHandleCache | None = None) -> None:
    """Raise KafkaStorageError (naming ``what``) unless ``partitions`` new partition
    directories fit: free descriptors, and inodes and space across ``log_dirs``."""
    if partitions <= 0:
        return
    dirs = list(log_dirs)
    if not dirs:
        raise KafkaStorageError(f"{what}: no log dir is online")
    handles = handles or default_cache()
    limit, in_use = descriptor_limit(), open_descriptors()
    # Idle segment files give their descriptors back when asked to.
    if limit - in_use + handles.open_count < DESCRIPTORS_PER_CREATION:
        raise KafkaStorageError(
            f"{what}: {in_use} of the {limit} file descriptors this process may open (RLIMIT_NOFILE) are in use, "
            f"creating partitions needs {DESCRIPTORS_PER_CREATION} free; close connections or raise the limit "
            f"(ulimit -n)")
    inodes = space = 0
    inodes_known = False
    for d in dirs:
        stats = os.statvfs(d)
        if stats.f_files:  # 0: the filesystem does not count inodes (btrfs...)
            inodes_known = True
            inodes += stats.f_favail
        space += stats.f_bavail * stats.f_frsize
    if inodes_known and inodes < partitions * INODES_PER_PARTITION:
        raise KafkaStorageError(f"{what}: {partitions} partitions need {partitions * INODES_PER_PARTITION} inodes, "
                                f"the log dirs ({', '.join(dirs)}) have {inodes} free")
    if space < partitions * BYTES_PER_PARTITION:
        raise KafkaStorageError(f"{what}: {partitions} partitions need {partitions * BYTES_PER_PARTITION} bytes, "
                                f"the log dirs ({', '.join(dirs)}) have {space} free")
