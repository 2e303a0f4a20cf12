"""Listing a log directory from its files: live partition directories, segments, the log start and end offsets."""

import os

from format import layout, log_dir
from format.checkpoint import OffsetCheckpointFile
from format.fs import filesystem_for
from format.layout import TopicPartition
from format.log_dir import LogDirectory, SegmentInfo
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


def test_kafkas_internal_topics_are_left_out_unless_asked_for(tmp_path):
    for name in ("orders-0", "orders-1", "__consumer_offsets-0", "__transaction_state-3"):
        os.makedirs(tmp_path / name)
    directory = LogDirectory(str(tmp_path))
    assert directory.topics() == {"orders": [0, 1]}
    assert directory.topics(include_internal=True) == {"__consumer_offsets": [0], "__transaction_state": [3],
                                                       "orders": [0, 1]}


def test_a_partitions_log_start_offset_is_its_checkpoint_held_between_its_segments_and_its_end(tmp_path):
    write_segment(tmp_path / "orders-0", 0, 5)
    write_segment(tmp_path / "orders-0", 5, 3)
    write_segment(tmp_path / "orders-1", 0, 4)
    write_segment(tmp_path / "orders-2", 10, 2)
    OffsetCheckpointFile(str(tmp_path / layout.LOG_START_OFFSET_CHECKPOINT_FILE)).write(
        {TopicPartition("orders", 0): 6, TopicPartition("orders", 1): 99, TopicPartition("orders", 2): 3})
    directory = LogDirectory(str(tmp_path))
    infos = directory.describe_all(directory.partitions())
    assert [(i.log_start_offset, i.log_end_offset) for i in infos.values()] == [(6, 8), (4, 4), (10, 12)]
    first = infos[TopicPartition("orders", 0)]
    assert [s.base_offset for s in first.segments] == [0, 5]
    assert first.size == sum(os.path.getsize(tmp_path / "orders-0" / layout.log_file_name(b)) for b in (0, 5))


def test_a_half_written_log_start_checkpoint_is_ignored_and_the_segments_stand_in(tmp_path):
    write_segment(tmp_path / "orders-0", 5, 3)
    (tmp_path / layout.LOG_START_OFFSET_CHECKPOINT_FILE).write_text("0\n2\norders 0 7\n")
    directory = LogDirectory(str(tmp_path))
    assert directory.log_start_offsets() == {}
    assert directory.describe(TopicPartition("orders", 0)).log_start_offset == 5


def test_a_single_brokers_log_dir_is_read_to_the_log_end_whatever_its_high_watermark_checkpoint_says(tmp_path):
    write_segment(tmp_path / "orders-0", 0, 8)
    OffsetCheckpointFile(str(tmp_path / layout.REPLICATION_OFFSET_CHECKPOINT_FILE)).write(
        {TopicPartition("orders", 0): 3})  # up to replica.high.watermark.checkpoint.interval.ms behind
    directory = LogDirectory(str(tmp_path))
    assert directory.high_watermarks() is None
    info = directory.describe(TopicPartition("orders", 0), last_stable=True)
    assert (info.log_end_offset, info.high_watermark, info.committed_end_offset, info.latest_offset) == (8, None, 8, 8)


def test_a_replicated_log_dir_is_read_to_its_checkpointed_high_watermark_held_between_log_start_and_end(tmp_path):
    for p, records in enumerate((8, 8, 8)):
        write_segment(tmp_path / f"orders-{p}", 0, records)
    OffsetCheckpointFile(str(tmp_path / layout.LOG_START_OFFSET_CHECKPOINT_FILE)).write(
        {TopicPartition("orders", 2): 2})
    OffsetCheckpointFile(str(tmp_path / layout.REPLICATION_OFFSET_CHECKPOINT_FILE)).write(
        {TopicPartition("orders", 0): 5, TopicPartition("orders", 1): 50})
    (tmp_path / layout.REPLICATED_MARKER_FILE).write_bytes(b"")
    directory = LogDirectory(str(tmp_path))
    assert log_dir.is_replicated(directory.fs, directory.root)
    infos = directory.describe_all(directory.partitions(), last_stable=True)
    # orders-1's checkpoint is past its end; orders-2 is not checkpointed yet: nothing committed beyond its start.
    assert [(i.log_end_offset, i.high_watermark, i.last_stable_offset, i.latest_offset) for i in infos.values()] == [
        (8, 5, 5, 5), (8, 8, 8, 8), (8, 2, 2, 2)]
    uncommitted = directory.describe(TopicPartition("orders", 0))
    assert (uncommitted.last_stable_offset, uncommitted.latest_offset) == (None, 5)

