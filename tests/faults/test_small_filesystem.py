"""The ``small_filesystem`` fixture: a tmpfs and the fault layer fill up the same way, byte for byte."""

from __future__ import annotations

import errno
import os

import pytest

SIZE = 1 << 20


def write_until_full(path: str, chunk: int) -> int:
    """Write ``chunk``-byte pieces to a new file until the filesystem refuses one; returns the bytes written."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    written = 0
    try:
        with pytest.raises(OSError) as full:
            for _ in range(SIZE):
                written += os.write(fd, b"x" * chunk)
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return written


def test_writes_fill_the_filesystem_to_its_size_with_a_short_write_and_then_fail_with_enospc(small_filesystem):
    disk = small_filesystem.mount("1m")
    assert os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize == SIZE
    assert write_until_full(os.path.join(disk, "filler"), 10_000) == SIZE  # the last write was cut short
    assert os.statvfs(disk).f_bavail == 0
    with open(os.path.join(disk, "checkpoint.tmp"), "wb", buffering=0) as f:  # a Python file object, too
        with pytest.raises(OSError) as full:
            f.write(b"0\n1\n")
        assert full.value.errno == errno.ENOSPC


def test_a_sparse_file_grows_on_a_full_filesystem_but_its_holes_cannot_be_written_or_allocated(small_filesystem):
    disk = small_filesystem.mount("1m")
    write_until_full(os.path.join(disk, "filler"), 4096)
    fd = os.open(os.path.join(disk, "sparse"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, 10 * SIZE)
        assert os.fstat(fd).st_size == 10 * SIZE
        with pytest.raises(OSError) as full:
            os.pwrite(fd, b"entry", 8192)
        assert full.value.errno == errno.ENOSPC
        with pytest.raises(OSError) as full:
            os.posix_fallocate(fd, 0, 4096)
        assert full.value.errno == errno.ENOSPC
        os.fsync(fd)
    finally:
        os.close(fd)


def test_a_resized_filesystem_takes_writes_again_and_shrinking_a_file_frees_its_blocks(small_filesystem):
    disk = small_filesystem.mount("1m")
    filler = os.path.join(disk, "filler")
    write_until_full(filler, 4096)
    os.truncate(filler, SIZE // 2)
    assert os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize == SIZE // 2
    small_filesystem.resize(disk, "2m")
    assert os.statvfs(disk).f_blocks * os.statvfs(disk).f_frsize == 2 * SIZE
    assert write_until_full(os.path.join(disk, "more"), 4096) == SIZE + SIZE // 2
