"""Checkpoint files: Kafka's text format, atomic replacement, malformed content."""

from __future__ import annotations

import os

import pytest

from format.checkpoint import (
    CheckpointFile,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    parse_offset_checkpoint,
    render_offset_checkpoint,
)
from format.errors import CheckpointError
from format.layout import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    TopicPartition,
)


@pytest.fixture
def offsets_path(tmp_path):
    return str(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE)


@pytest.fixture
def epochs_path(tmp_path):
    return str(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)


def write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


OFFSETS = {
    TopicPartition("orders", 0): 120,
    TopicPartition("orders", 1): 0,
    TopicPartition("__consumer_offsets", 37): 9_000_000_000,
}


def test_offset_checkpoint_writes_kafkas_text_format(offsets_path):
    OffsetCheckpointFile(offsets_path).write(OFFSETS)
    assert read_text(offsets_path) == "0\n3\norders 0 120\norders 1 0\n__consumer_offsets 37 9000000000\n"


def test_offset_checkpoint_round_trips(offsets_path):
    checkpoint = OffsetCheckpointFile(offsets_path)
    checkpoint.write(OFFSETS)
    assert checkpoint.read() == OFFSETS


def test_offset_checkpoint_reads_a_file_written_by_kafka(offsets_path):
    write_text(offsets_path, "0\n2\nmy-topic 12 345\nother.topic 0 7\n")
    assert OffsetCheckpointFile(offsets_path).read() == {
        TopicPartition("my-topic", 12): 345,
        TopicPartition("other.topic", 0): 7,
    }


def test_offset_checkpoint_text_renders_and_parses_without_a_file(offsets_path):
    text = render_offset_checkpoint(OFFSETS, "s3://bucket/logs/cleaner-offset-checkpoint")
    assert text == "0\n3\norders 0 120\norders 1 0\n__consumer_offsets 37 9000000000\n"
    assert parse_offset_checkpoint(text, "s3://bucket/logs/cleaner-offset-checkpoint") == OFFSETS
    OffsetCheckpointFile(offsets_path).write(OFFSETS)
    assert OffsetCheckpointFile(offsets_path).render(OFFSETS) == read_text(offsets_path) == text


def test_offset_checkpoint_text_that_cannot_be_written_names_its_source():
    with pytest.raises(CheckpointError, match=r"s3://bucket/logs/cleaner-offset-checkpoint: cannot write entry .*"
                                              r"'my topic' is empty or contains whitespace"):
        render_offset_checkpoint({TopicPartition("my topic", 0): 1}, "s3://bucket/logs/cleaner-offset-checkpoint")
    with pytest.raises(CheckpointError, match=r"s3://bucket/x: line 2: count says 2 entries but the file holds 1"):
        parse_offset_checkpoint("0\n2\norders 0 1\n", "s3://bucket/x")


def test_missing_checkpoint_reads_empty(offsets_path, epochs_path):
    assert OffsetCheckpointFile(offsets_path).read() == {}
    assert LeaderEpochCheckpointFile(epochs_path).read() == []
    assert not os.path.exists(offsets_path)


@pytest.mark.parametrize("text", ["", "0\n"])
def test_empty_or_version_only_checkpoint_reads_empty_as_kafka_does(offsets_path, text):
    write_text(offsets_path, text)
    assert OffsetCheckpointFile(offsets_path).read() == {}


def test_empty_mapping_writes_a_zero_count(offsets_path):
    OffsetCheckpointFile(offsets_path).write({})
    assert read_text(offsets_path) == "0\n0\n"
    assert OffsetCheckpointFile(offsets_path).read() == {}


def test_write_replaces_previous_content_and_leaves_no_tmp(offsets_path, tmp_path):
    checkpoint = OffsetCheckpointFile(offsets_path)
    checkpoint.write(OFFSETS)
    checkpoint.write({TopicPartition("orders", 0): 121})
    assert checkpoint.read() == {TopicPartition("orders", 0): 121}
    assert sorted(os.listdir(tmp_path)) == [RECOVERY_POINT_CHECKPOINT_FILE]


def test_write_without_sync_is_still_atomic(offsets_path, tmp_path):
    OffsetCheckpointFile(offsets_path).write(OFFSETS, sync=False)
    assert OffsetCheckpointFile(offsets_path).read() == OFFSETS
    assert not os.path.exists(offsets_path + ".tmp")


def test_unwritable_entry_leaves_the_old_file_untouched(offsets_path, tmp_path):
    checkpoint = OffsetCheckpointFile(offsets_path)
    checkpoint.write(OFFSETS)
    with pytest.raises(CheckpointError, match=rf"{RECOVERY_POINT_CHECKPOINT_FILE}.*'bad topic'"):
        checkpoint.write({TopicPartition("bad topic", 0): 1})
    assert checkpoint.read() == OFFSETS
    assert sorted(os.listdir(tmp_path)) == [RECOVERY_POINT_CHECKPOINT_FILE]


def test_stale_tmp_from_a_crash_is_ignored_and_replaced(offsets_path):
    write_text(offsets_path + ".tmp", "0\n1\nhalf")
    checkpoint = OffsetCheckpointFile(offsets_path)
    assert checkpoint.read() == {}
    checkpoint.write(OFFSETS)
    assert checkpoint.read() == OFFSETS
    assert not os.path.exists(offsets_path + ".tmp")


@pytest.mark.parametrize(
    "text, message",
    [
        ("1\n0\n", "line 1: unrecognized checkpoint version 1"),
        ("x\n0\n", "line 1: malformed version 'x'"),
        ("0\ntwo\n", "line 2: malformed entry count 'two'"),
        ("0\n2\norders 0 1\n", "line 2: count says 2 entries but the file holds 1"),
        ("0\n1\norders 0 1\norders 1 2\n", "line 2: count says 1 entries but the file holds 2"),
        ("0\n1\norders 0\n", "line 3: malformed entry 'orders 0'"),
        ("0\n1\norders zero 1\n", "line 3: malformed entry 'orders zero 1'"),
        ("0\n2\norders 0 1\n\n", "line 4: malformed entry ''"),
        ("0\n1\norders 0 +1\n", "line 3: malformed entry"),
    ],
)
def test_malformed_checkpoint_names_file_and_line(offsets_path, text, message):
    write_text(offsets_path, text)
    with pytest.raises(CheckpointError) as e:
        OffsetCheckpointFile(offsets_path).read()
    assert offsets_path in str(e.value)
    assert message in str(e.value)


def test_non_utf8_checkpoint_is_malformed(offsets_path):
    with open(offsets_path, "wb") as f:
        f.write(b"0\n1\n\xff 0 1\n")
    with pytest.raises(CheckpointError, match="UTF-8"):
        OffsetCheckpointFile(offsets_path).read()


def test_crlf_line_endings_are_accepted(offsets_path):
    write_text(offsets_path, "0\r\n1\r\norders 3 4\r\n")
    with open(offsets_path, "rb") as f:
        assert b"\r\n" in f.read()
    assert OffsetCheckpointFile(offsets_path).read() == {TopicPartition("orders", 3): 4}


def test_leader_epoch_checkpoint_round_trips_in_kafkas_format(epochs_path):
    entries = [EpochEntry(0, 0), EpochEntry(3, 150), EpochEntry(4, 900)]
    checkpoint = LeaderEpochCheckpointFile(epochs_path)
    checkpoint.write(entries)
    assert read_text(epochs_path) == "0\n3\n0 0\n3 150\n4 900\n"
    assert checkpoint.read() == entries


def test_leader_epoch_checkpoint_rejects_a_three_field_line(epochs_path):
    write_text(epochs_path, "0\n1\n1 2 3\n")
    with pytest.raises(CheckpointError, match="line 3"):
        LeaderEpochCheckpointFile(epochs_path).read()


class _WordFormatter:
    def to_line(self, entry: str) -> str:
        return entry

    def from_line(self, line: str) -> str:
        if not line.isalpha():
            raise ValueError("not a word")
        return line


def test_generic_checkpoint_file_uses_its_formatter_and_version(tmp_path):
    path = str(tmp_path / "words")
    checkpoint = CheckpointFile(path, 2, _WordFormatter())
    checkpoint.write(["alpha", "beta"])
    assert read_text(path) == "2\n2\nalpha\nbeta\n"
    assert checkpoint.read() == ["alpha", "beta"]
    with pytest.raises(CheckpointError, match="span lines"):
        checkpoint.write(["two\nlines"])
