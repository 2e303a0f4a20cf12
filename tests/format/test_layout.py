"""Names on disk: topic rules, partition directories, segment file names."""

from __future__ import annotations

import pytest

from format.errors import InvalidTopicError
from format.layout import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_FILE_SUFFIX,
    CLEANER_OFFSET_CHECKPOINT_FILE,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LEADER_EPOCH_CHECKPOINT_FILE,
    LOCK_FILE,
    LOG_FILE_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    META_PROPERTIES_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    SegmentFiles,
    TopicPartition,
    deleted_dir_name,
    filename_prefix_from_offset,
    future_dir_name,
    has_collision,
    has_collision_chars,
    is_deleted_dir,
    is_future_dir,
    is_index_file_name,
    is_log_file_name,
    is_stray_dir,
    is_valid_topic_name,
    log_file_name,
    offset_from_file_name,
    offset_index_file_name,
    parse_partition_dir,
    partition_dir_name,
    strip_transient_suffix,
    time_index_file_name,
    txn_index_file_name,
    validate_topic_name,
)

# --- topic names ----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["orders", "my-topic", "a.b_c-D9", "__consumer_offsets", "x" * 249, "...", "-"],
)
def test_legal_topic_names_pass(name):
    validate_topic_name(name)
    assert is_valid_topic_name(name)


@pytest.mark.parametrize(
    "name, message",
    [
        ("", "can't be empty"),
        (".", "cannot be '.' or '..'"),
        ("..", "cannot be '.' or '..'"),
        ("x" * 250, "longer than 249 characters"),
        ("my topic", "character other than ASCII alphanumerics"),
        ("topic/1", "character other than ASCII alphanumerics"),
        ("topic:1", "character other than ASCII alphanumerics"),
        ("tópico", "character other than ASCII alphanumerics"),
        ("topic\n", "character other than ASCII alphanumerics"),
    ],
)
def test_illegal_topic_names_are_rejected_with_a_reason(name, message):
    with pytest.raises(InvalidTopicError, match=message):
        validate_topic_name(name)
    assert not is_valid_topic_name(name)


def test_collision_chars_are_dot_and_underscore():
    assert has_collision_chars("a.b")
    assert has_collision_chars("a_b")
    assert not has_collision_chars("a-b")
    assert has_collision("metrics.raw", "metrics_raw")
    assert not has_collision("metrics.raw", "metrics-raw")


# --- partition directories ------------------------------------------------


def test_topic_partition_prints_as_kafka_does():
    tp = TopicPartition("my-topic", 12)
    assert str(tp) == "my-topic-12"
    assert partition_dir_name(tp) == "my-topic-12"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("my-topic-12", TopicPartition("my-topic", 12)),
        ("orders-0", TopicPartition("orders", 0)),
        ("a-b-c-3", TopicPartition("a-b-c", 3)),
        ("__consumer_offsets-49", TopicPartition("__consumer_offsets", 49)),
        ("t.x-7", TopicPartition("t.x", 7)),
        ("orders--1", TopicPartition("orders-", 1)),  # a topic may end in '-'
        ("/var/lib/seglog/orders-2", TopicPartition("orders", 2)),
    ],
)
def test_partition_dir_splits_on_the_last_dash(name, expected):
    assert parse_partition_dir(name) == expected


def test_partition_dir_name_round_trips():
    tp = TopicPartition("a-b-1", 4)
    assert parse_partition_dir(partition_dir_name(tp)) == tp


@pytest.mark.parametrize(
    "name",
    ["orders", "orders-", "-3", "orders-x", "orders-1.5", "my topic-1", "", "orders-٣"],
)
def test_names_that_are_not_partition_dirs_raise_value_error(name):
    with pytest.raises(ValueError):
        parse_partition_dir(name)


def test_deleted_future_and_stray_dirs_are_recognised_and_refused():
    uuid = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    deleted = f"orders-3.{uuid}-delete"
    future = f"orders-3.{uuid}-future"
    stray = f"orders-3.{uuid}-stray"
    assert is_deleted_dir(deleted) and not is_future_dir(deleted)
    assert is_future_dir(future) and not is_deleted_dir(future)
    assert is_stray_dir(stray)
    assert not is_deleted_dir("orders-3") and not is_future_dir("orders-3")
    for name in (deleted, future, stray):
        with pytest.raises(ValueError, match="deleted, future or stray"):
            parse_partition_dir(name)


def test_a_topic_named_like_a_suffix_is_still_a_live_partition():
    assert parse_partition_dir("delete-0") == TopicPartition("delete", 0)
    assert not is_deleted_dir("x-delete-0")


def test_deleted_dir_name_is_capped_to_a_legal_file_name():
    uuid = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    assert deleted_dir_name(TopicPartition("orders", 3), uuid) == f"orders-3.{uuid}-delete"
    assert future_dir_name(TopicPartition("orders", 3), uuid) == f"orders-3.{uuid}-future"
    long_name = deleted_dir_name(TopicPartition("x" * 249, 1000), uuid)
    assert len(long_name) == 255
    assert is_deleted_dir(long_name)


# --- segment files --------------------------------------------------------


def test_file_names_are_twenty_digit_zero_padded_offsets():
    assert filename_prefix_from_offset(0) == "00000000000000000000"
    assert filename_prefix_from_offset(123) == "00000000000000000123"
    assert filename_prefix_from_offset(2**63 - 1) == "09223372036854775807"
    assert log_file_name(123) == "00000000000000000123.log"
    assert offset_index_file_name(123) == "00000000000000000123.index"
    assert time_index_file_name(123) == "00000000000000000123.timeindex"
    assert txn_index_file_name(123) == "00000000000000000123.txnindex"


def test_negative_offset_has_no_file_name():
    with pytest.raises(ValueError, match="-1"):
        filename_prefix_from_offset(-1)


def test_suffixes_are_kafkas():
    assert (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX) == (
        ".log",
        ".index",
        ".timeindex",
        ".txnindex",
    )
    assert (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX) == (".deleted", ".cleaned", ".swap")


@pytest.mark.parametrize(
    "name, offset",
    [
        ("00000000000000000123.log", 123),
        ("00000000000000000123.log.deleted", 123),
        ("00000000000000000000.index.swap", 0),
        ("00000000000000004096.timeindex.cleaned", 4096),
        ("/data/orders-0/00000000000000000007.txnindex", 7),
    ],
)
def test_offset_is_parsed_from_any_segment_file_name(name, offset):
    assert offset_from_file_name(name) == offset


@pytest.mark.parametrize("name", ["leader-epoch-checkpoint", ".log", "abc.log", "-1.log"])
def test_file_not_named_by_an_offset_raises(name):
    with pytest.raises(ValueError):
        offset_from_file_name(name)


@pytest.mark.parametrize(
    "name, stripped",
    [
        ("00000000000000000123.log.deleted", "00000000000000000123.log"),
        ("00000000000000000123.index.cleaned", "00000000000000000123.index"),
        ("00000000000000000123.timeindex.swap", "00000000000000000123.timeindex"),
        ("00000000000000000123.log", "00000000000000000123.log"),
    ],
)
def test_strip_transient_suffix(name, stripped):
    assert strip_transient_suffix(name) == stripped


def test_file_kind_predicates():
    assert is_log_file_name("00000000000000000000.log")
    assert not is_log_file_name("00000000000000000000.log.deleted")
    assert is_index_file_name("00000000000000000000.index")
    assert is_index_file_name("00000000000000000000.timeindex")
    assert is_index_file_name("00000000000000000000.txnindex")
    assert not is_index_file_name("00000000000000000000.log")


def test_segment_files_gives_the_four_paths():
    files = SegmentFiles("/data/orders-0", 42)
    assert files.log == "/data/orders-0/00000000000000000042.log"
    assert files.offset_index == "/data/orders-0/00000000000000000042.index"
    assert files.time_index == "/data/orders-0/00000000000000000042.timeindex"
    assert files.txn_index == "/data/orders-0/00000000000000000042.txnindex"
    assert files.all() == (files.log, files.offset_index, files.time_index, files.txn_index)


def test_segment_files_work_with_fsspec_urls_and_path_objects(tmp_path):
    assert SegmentFiles("s3://bucket/log/orders-0", 0).log == "s3://bucket/log/orders-0/00000000000000000000.log"
    assert SegmentFiles(tmp_path, 1).log == f"{tmp_path}/00000000000000000001.log"


def test_checkpoint_and_marker_names_are_kafkas():
    assert RECOVERY_POINT_CHECKPOINT_FILE == "recovery-point-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT_FILE == "log-start-offset-checkpoint"
    assert REPLICATION_OFFSET_CHECKPOINT_FILE == "replication-offset-checkpoint"
    assert CLEANER_OFFSET_CHECKPOINT_FILE == "cleaner-offset-checkpoint"
    assert LEADER_EPOCH_CHECKPOINT_FILE == "leader-epoch-checkpoint"
    assert META_PROPERTIES_FILE == "meta.properties"
    assert LOCK_FILE == ".lock"
    assert CLEAN_SHUTDOWN_FILE == ".kafka_cleanshutdown"


def test_set_aside_files_are_named_by_their_segment_file_and_position():
    from format.layout import is_set_aside_file_name, set_aside_file_name, set_aside_source_name

    name = set_aside_file_name("00000000000000001200.log", 4840)
    assert name == "00000000000000001200.log.4840.corrupt" and is_set_aside_file_name(name)
    assert set_aside_file_name("00000000000000001200.log", 4840, 2) == "00000000000000001200.log.4840-2.corrupt"
    assert set_aside_source_name(name) == "00000000000000001200.log"
    assert not name.endswith(LOG_FILE_SUFFIX) and not is_index_file_name(name)
