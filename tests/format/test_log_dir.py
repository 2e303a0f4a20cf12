"""Listing a log directory from its files: live partition directories, segments, the log end offset."""

import os

from format import layout, log_dir
from format.fs import filesystem_for
from format.layout import TopicPartition
from format.log_dir import SegmentInfo
from format.record import SimpleRecord
from format.record_batch import build_batch
from format.segment import LogSegment


def write_segment(directory, base_offset: int, records: int) -> None:
    os.makedirs(directory, exist_ok=True)
    segment = LogSegment.open(str(directory), base_offset)
    if records:
        segment.append(build_batch([SimpleRecord(b"v%d" % i, None, 1_000 + i) for i in range(records)],
                                   base_offset=base_offset))
    segment.close()


def test_only_live_partition_directories_are_listed_in_topic_and_partition_order(tmp_path):
    for name in ("orders-10", "orders-2", "audit-0", layout.deleted_dir_name(TopicPartition("orders", 3), "abc"),
                 layout.future_dir_name(TopicPartition("orders", 4), "def"), "not-a-partition-x", "orders-5.tmp"):
        os.makedirs(tmp_path / name)
    (tmp_path / "orders-7").write_text("a file, not a directory")
    fs, root = filesystem_for(str(tmp_path))
    assert log_dir.partitions(fs, root) == [TopicPartition("audit", 0), TopicPartition("orders", 2),
                                            TopicPartition("orders", 10)]


def test_a_directory_that_does_not_exist_lists_nothing(tmp_path):
    fs, root = filesystem_for(str(tmp_path / "gone"))
    assert log_dir.partitions(fs, root) == [] and log_dir.segments(fs, root) == []


def test_segments_are_listed_in_offset_order_and_a_swap_file_stands_in_only_when_asked(tmp_path):
    directory = tmp_path / "orders-0"
    write_segment(directory, 0, 5)
    write_segment(directory, 5, 3)
    write_segment(directory, 8, 0)
    os.rename(directory / layout.log_file_name(5), directory / (layout.log_file_name(5) + layout.SWAP_FILE_SUFFIX))
    (directory / (layout.log_file_name(0) + layout.SWAP_FILE_SUFFIX)).write_bytes(b"")  # the .log wins over it
    fs, path = filesystem_for(str(directory))
    assert [(s.base_offset, s.swapped) for s in log_dir.segments(fs, path)] == [(0, False), (8, False)]
    swapped = log_dir.segments(fs, path, swapped=True)
    assert [(s.base_offset, s.file_name) for s in swapped] == [
        (0, "00000000000000000000.log"), (5, "00000000000000000005.log.swap"), (8, "00000000000000000008.log")]
    assert swapped[0].size == os.path.getsize(directory / layout.log_file_name(0))


def test_the_log_end_offset_follows_the_last_complete_batch(tmp_path):
    directory = tmp_path / "orders-0"
    write_segment(directory, 0, 5)
    write_segment(directory, 5, 3)
    fs, path = filesystem_for(str(directory))
    assert log_dir.log_end_offset(fs, path, log_dir.segments(fs, path)) == 8
    with open(directory / layout.log_file_name(5), "ab") as f:
        f.write(b"\x00" * 20)  # a torn tail is not data yet
    assert log_dir.log_end_offset(fs, path, log_dir.segments(fs, path)) == 8


def test_a_just_rolled_empty_segment_ends_the_log_at_its_base_offset(tmp_path):
    directory = tmp_path / "orders-0"
    write_segment(directory, 0, 5)
    write_segment(directory, 5, 0)
    fs, path = filesystem_for(str(directory))
    listed = log_dir.segments(fs, path)
    assert listed[-1] == SegmentInfo(5, 0)
    assert log_dir.log_end_offset(fs, path, listed) == 5
