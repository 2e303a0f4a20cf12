"""``Broker(log_dirs, read_only=True)``: reading a log dir without owning it."""

import os
import subprocess
import sys

import pytest

from broker_core import Broker
from broker_core.cli import main as seglog
from broker_core.errors import LogDirNotFoundError, LogDirReadOnlyError
from format import layout
from format.checkpoint import OffsetCheckpointFile
from format.file_handles import default_cache
from format.layout import TopicPartition

from log_dir_kit import (batch_positions, numbered, poke, produce_numbered, read_only_mount,
                         records_at_true_offsets, snapshot)

TP = TopicPartition("events", 0)
SEGLOG = os.path.join(os.path.dirname(sys.executable), "seglog")


def make_log_dir(d, total=1000, config=None):
    with Broker(d, config or {}, background=False) as broker:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", total, 10, pad=30)


def test_a_read_only_broker_takes_no_lock_and_writes_nothing_even_after_an_unclean_shutdown(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    os.remove(os.path.join(d, layout.CLEAN_SHUTDOWN_FILE))
    os.remove(os.path.join(d, layout.LOCK_FILE))
    before = snapshot(d)
    with Broker(d, read_only=True) as broker:
        assert broker.list_offsets("events", 0, "latest").offset == 1000
        assert records_at_true_offsets(broker.fetch("events", 0, 0).decoded())
        assert broker.unreadable() == {}
    assert snapshot(d) == before


def test_write_methods_of_a_read_only_broker_fail_with_a_clear_error(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    with Broker(d, read_only=True) as broker:
        for write in (lambda: broker.produce("events", [b"x"]), lambda: broker.create_topic("other", 1),
                      lambda: broker.delete_topic("events"), lambda: broker.create_partitions("events", 2),
                      lambda: broker.alter_topic_config("events", {"retention.ms": 1}),
                      lambda: broker.commit_offsets("g", {TP: 1}), lambda: broker.delete_group("g")):
            with pytest.raises(LogDirReadOnlyError) as err:
                write()
            assert "read-only" in str(err.value) and d in str(err.value)


def test_a_read_only_broker_never_creates_a_missing_log_dir(tmp_path):
    d = str(tmp_path / "missing")
    with pytest.raises(LogDirNotFoundError) as err:
        Broker(d, read_only=True)
    assert d in str(err.value) and not os.path.exists(d)


def test_reading_commands_never_create_a_missing_log_dir(tmp_path, capsys):
    d = str(tmp_path / "missing")
    assert seglog(["topics", "list", "--log-dir", d]) == 1
    assert seglog(["consume", "--log-dir", d, "--topic", "events", "--from-beginning"]) == 1
    assert "does not exist" in capsys.readouterr().err and not os.path.exists(d)


def test_a_read_only_broker_reads_beside_a_running_broker_and_sees_what_it_appends_and_rolls(tmp_path):
    d = str(tmp_path / "logs")
    config = {"log.segment.bytes": "3000"}
    with Broker(d, config, background=False) as owner:
        owner.create_topic("events", 1)
        produce_numbered(owner, "events", 100, 10, pad=30)
        with Broker(d, read_only=True) as reader:
            assert reader.list_offsets("events", 0, "latest").offset == 100
            for first in range(100, 400, 10):
                owner.produce("events", numbered(first, 10, 30), partition=0)
            assert len(owner.log_manager.get_log(TP).segments) > 3
            assert reader.list_offsets("events", 0, "latest").offset == 400
            described = reader.describe_topic("events").partitions[0]
            assert (described.log_end_offset, described.segments) == (400, len(owner.log_manager.get_log(TP).segments))
            served = []
            position = 0
            while position < 400:
                records = reader.fetch("events", 0, position).decoded(position)
                served.extend(records)
                position = records[-1].offset + 1
            assert [r.offset for r in served] == list(range(400)) and records_at_true_offsets(served)
            # retention removes the first segments under the reader
            owner.log_manager.get_log(TP).delete_old_segments(lambda s, following: following is not None
                                                              and following.base_offset <= 200, "test")
            owner.log_manager.scheduler.run_all()
            assert reader.list_offsets("events", 0, "earliest").offset >= 100
            assert records_at_true_offsets(reader.fetch("events", 0, 300).decoded(300))


def test_a_read_only_fetch_in_a_segment_the_owners_retention_removed_since_moves_on_to_what_is_left(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, {"log.segment.bytes": "3000"}, background=False) as owner:
        owner.create_topic("events", 1)
        produce_numbered(owner, "events", 400, 10, pad=30)
        with Broker(d, read_only=True) as reader:
            assert reader.list_offsets("events", 0, "latest").offset == 400
            owner_log = owner.log_manager.get_log(TP)
            owner_log.delete_old_segments(lambda s, following: following is not None
                                          and following.base_offset <= 200, "test")
            owner.log_manager.scheduler.run_all()
            default_cache().close_all()  # the reader's descriptors of the removed files are gone too
            records = reader.fetch("events", 0, 50).decoded(50)
            assert records[0].offset == owner_log.log_start_offset and records_at_true_offsets(records)


def test_reading_commands_work_beside_a_running_seglog_broker_holding_the_lock(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    with Broker(d, background=False):  # holds the lock, as `seglog broker` does
        result = subprocess.run([SEGLOG, "topics", "describe", "--log-dir", d], capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0 and "LogEndOffset: 1000" in result.stdout, result.stderr
        result = subprocess.run([SEGLOG, "consume", "--log-dir", d, "--topic", "events", "--partition", "0",
                                 "--offset", "990", "--max-messages", "3"], capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0 and result.stdout.split() == ["990" + "." * 30, "991" + "." * 30,
                                                                    "992" + "." * 30], result.stderr


def test_reading_commands_work_on_a_read_only_filesystem(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    os.remove(os.path.join(d, layout.CLEAN_SHUTDOWN_FILE))  # unclean: recovery would want to write
    with read_only_mount(d, str(tmp_path / "ro")) as ro:
        if ro is None:
            pytest.skip("cannot mount a read-only bind mount here")
        for args in (["topics", "list"], ["topics", "describe"],
                     ["consume", "--topic", "events", "--from-beginning", "--max-messages", "5"]):
            result = subprocess.run([SEGLOG, *args[:2 if args[0] == "topics" else 1], "--log-dir", ro,
                                     *args[2 if args[0] == "topics" else 1:]], capture_output=True, text=True,
                                    timeout=120)
            assert result.returncode == 0, (args, result.stderr)


def test_a_read_only_broker_stops_before_a_corrupt_batch_and_reports_it(tmp_path):
    d = str(tmp_path / "logs")
    make_log_dir(d)
    os.remove(os.path.join(d, layout.CLEAN_SHUTDOWN_FILE))
    OffsetCheckpointFile(os.path.join(d, layout.RECOVERY_POINT_CHECKPOINT_FILE)).write({TP: 0})
    path = os.path.join(d, "events-0", layout.log_file_name(0))
    position, base, _ = batch_positions(path)[40]
    poke(path, position + 70, b"\x00")
    before = snapshot(d)
    with Broker(d, read_only=True) as broker:
        assert broker.list_offsets("events", 0, "latest").offset == base
        [(tp, unreadable)] = broker.unreadable().items()
        assert tp == TP and unreadable.path == path and unreadable.position == position
        assert unreadable.size == os.path.getsize(path) - position and "CRC mismatch" in unreadable.reason
        assert unreadable.records == 1000 - base
    assert snapshot(d) == before


def test_a_read_only_broker_over_a_replicated_log_dir_stops_at_the_checkpointed_high_watermark(tmp_path):
    from broker_core.config import BrokerConfig
    from broker_core.log.log_manager import LogManager

    d = str(tmp_path / "logs")
    make_log_dir(d, total=100)
    owner = LogManager(BrokerConfig(log_dirs=(d,)), sole_replica=False)  # a broker in cluster mode
    owner.load_logs()
    try:
        owner.get_log(TP).update_high_watermark(40)  # where the in-sync replicas are
        owner.checkpoint_high_watermarks()
        with Broker(d, read_only=True) as reader:
            assert reader.list_offsets("events", 0, "latest").offset == 40
            fetched = reader.fetch("events", 0, 0, max_bytes=1 << 20)
            assert ([r.offset for r in fetched.decoded()], fetched.high_watermark) == (list(range(40)), 40)
            assert reader.fetch("events", 0, 40).records == b""
            result = subprocess.run([SEGLOG, "consume", "--log-dir", d, "--topic", "events", "--from-beginning",
                                     "--timeout-ms", "500"], capture_output=True, text=True, timeout=120)
            assert result.returncode == 0 and result.stdout.split() == [f"{n}" + "." * 30 for n in range(40)], \
                result.stderr
            owner.get_log(TP).maybe_increment_high_watermark(70)
            owner.checkpoint_high_watermarks()
            assert [r.offset for r in reader.fetch("events", 0, 40, max_bytes=1 << 20).decoded()] == list(
                range(40, 70))
            assert reader.list_offsets("events", 0, "latest").offset == 70
    finally:
        owner.shutdown()
