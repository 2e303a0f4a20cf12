"""Segment files under a bounded descriptor cache, and segment files on a full filesystem."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest

from format.file_handles import FileHandleCache, open_descriptors
from format.file_records import FileRecords
from format.index import OffsetIndex
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches
from format.segment import LogSegment


def _batch(base_offset: int, value: bytes) -> bytes:
    return build_batch([SimpleRecord(value, b"k")], base_offset=base_offset, default_timestamp=1_700_000_000_000)


def _values(data: bytes) -> list[bytes]:
    return [r.value for b in iter_batches(data) for r in b.records()]


def test_hundreds_of_segments_hold_no_more_descriptors_than_the_cache_allows(tmp_path):
    cache = FileHandleCache(capacity=8)
    before = open_descriptors()
    segments = [LogSegment.open(tmp_path / f"p-{n}", 0, index_interval_bytes=0, handles=cache)
                for n in range(300) if not os.makedirs(tmp_path / f"p-{n}")]
    for n, segment in enumerate(segments):
        segment.append(_batch(0, b"first-%d" % n))
        segment.append(_batch(1, b"second-%d" % n))
    assert open_descriptors() - before <= 8
    for n, segment in enumerate(segments):
        assert _values(segment.read(1, 4096).records) == [b"second-%d" % n]
        assert segment.offset_index.lookup(1).offset == 1
    assert open_descriptors() - before <= 8
    assert cache.evictions > 0
    for segment in segments:
        segment.close()
    assert open_descriptors() == before and cache.open_count == 0


def test_an_evicted_log_file_is_reopened_under_the_name_it_was_renamed_to(tmp_path):
    cache = FileHandleCache(capacity=1)
    records = FileRecords.open(tmp_path / "a.log", handles=cache)
    records.append(_batch(0, b"kept"))
    records.rename_to(str(tmp_path / "a.log.deleted"))
    other = FileRecords.open(tmp_path / "b.log", handles=cache)  # evicts a.log's descriptor
    assert not cache.is_open(records._reader)
    assert _values(records.read(0, 4096)) == [b"kept"]
    other.close()
    records.close()


def test_an_evicted_log_file_removed_meanwhile_is_not_created_again(tmp_path):
    cache = FileHandleCache(capacity=1)
    records = FileRecords.open(tmp_path / "a.log", handles=cache)
    records.append(_batch(0, b"gone"))
    FileRecords.open(tmp_path / "b.log", handles=cache).close()
    os.remove(tmp_path / "a.log")
    with pytest.raises(FileNotFoundError):
        records.read(0, 4096)
    assert not (tmp_path / "a.log").exists()


def test_a_closed_log_file_refuses_reads_with_its_name(tmp_path):
    records = FileRecords.open(tmp_path / "a.log", handles=FileHandleCache(capacity=4))
    records.append(_batch(0, b"x"))
    records.close()
    with pytest.raises(ValueError, match="a.log: the file is closed"):
        records.read(0, 4096)


def _fill(directory: str) -> None:
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError) as full:
            while True:
                os.write(fd, b"x" * 4096)
        assert full.value.errno == errno.ENOSPC
    finally:
        os.close(fd)


_FILL_AND_APPEND = textwrap.dedent("""
    import errno, os, sys
    from format.index import OffsetIndex
    directory = sys.argv[1]
    index = OffsetIndex(os.path.join(directory, "00000000000000000000.index"), 0)
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 4096)
    except OSError:
        os.close(fd)
    appended = 0
    try:
        for n in range(index.max_entries):
            index.append(n, n * 100)
            appended += 1
    except OSError as exc:
        print(errno.errorcode[exc.errno], appended, index.entries)
""")


def test_an_index_written_on_a_full_filesystem_raises_enospc_instead_of_killing_the_process(small_filesystem):
    directory = small_filesystem.mount("1m")
    done = subprocess.run([sys.executable, "-c", _FILL_AND_APPEND, directory], capture_output=True, text=True,
                          timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert done.returncode == 0, f"exit {done.returncode} (-7 is SIGBUS): {done.stderr}"
    code, appended, entries = done.stdout.split()
    assert code == "ENOSPC"
    assert int(appended) == int(entries)  # the entry that did not fit is not counted


def test_a_segment_append_that_runs_out_of_space_leaves_the_segment_as_it_was(small_filesystem):
    directory = small_filesystem.mount("1m")
    segment = LogSegment.open(directory, 0, index_interval_bytes=1000, handles=FileHandleCache(capacity=8))
    offset = 0
    with pytest.raises(OSError) as failure:
        while True:
            segment.append(_batch(offset, os.urandom(3000)))
            offset += 1
    assert failure.value.errno == errno.ENOSPC
    assert os.path.getsize(segment.log.path) == segment.size
    assert segment.read_next_offset() == offset
    assert segment.offset_index.last_offset < offset
    assert segment.offset_index.lookup(offset).position < segment.size
    assert len(_values(segment.read(0, segment.size).records)) == offset
    segment.offset_index.sanity_check()
    segment.close()


def test_an_index_on_a_full_filesystem_still_grows_sparse_and_trims(small_filesystem):
    directory = small_filesystem.mount("1m")
    _fill(directory)
    index = OffsetIndex(os.path.join(directory, "00000000000000000000.index"), 0, max_index_size=1 << 20)
    assert index.max_entries == (1 << 20) // 8
    index.close()
    assert os.path.getsize(os.path.join(directory, "00000000000000000000.index")) == 0
