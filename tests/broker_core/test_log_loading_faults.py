"""Opening a damaged log dir: nothing destroyed, nothing served at a wrong offset, cut bytes set aside."""

import logging
import os
import shutil

import pytest

from broker_core import Broker
from broker_core.cli import main as seglog
from broker_core.errors import CorruptMessageError, OffsetOutOfRangeError
from format import layout
from format.checkpoint import OffsetCheckpointFile
from format.errors import CheckpointError
from format.layout import TopicPartition

from log_dir_kit import batch_positions, poke, produce_numbered, records_at_true_offsets, snapshot

TP = TopicPartition("events", 0)


def partition_dir(d):
    return os.path.join(d, "events-0")


def set_aside_files(d):
    return sorted(n for n in os.listdir(partition_dir(d)) if layout.is_set_aside_file_name(n))


def fetch_everything(broker, start=0):
    """Every record from ``start`` to the log end, fetch after fetch, as a consumer reads."""
    out = []
    position = start
    end = broker.list_offsets("events", 0, "latest").offset
    while position < end:
        records = broker.fetch("events", 0, position).decoded(position)
        if not records:
            break
        out.extend(records)
        position = records[-1].offset + 1
    return out


def test_a_failed_open_writes_nothing_and_the_next_open_keeps_the_log_start_offset_and_still_recovers(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", 5000, 100)
        active = broker.log_manager.get_log(TP).active_segment.log.path
        torn = open(active, "rb").read()[-50:]
    # DeleteRecords (or Kafka) moved the log start offset inside the first segment...
    OffsetCheckpointFile(os.path.join(d, layout.LOG_START_OFFSET_CHECKPOINT_FILE)).write({TP: 3000})
    # ...then the broker died mid-append: no marker, a torn batch at the end...
    os.remove(os.path.join(d, layout.CLEAN_SHUTDOWN_FILE))
    with open(active, "ab") as f:
        f.write(torn)
    # ...and the recovery-point checkpoint holds garbage.
    with open(os.path.join(d, layout.RECOVERY_POINT_CHECKPOINT_FILE), "w") as f:
        f.write("0\n1\nevents zero 12\n")
    before = snapshot(d)

    with pytest.raises(CheckpointError) as err:
        Broker(d, background=False)
    assert layout.RECOVERY_POINT_CHECKPOINT_FILE in str(err.value) and "line 3" in str(err.value)
    after = snapshot(d)
    assert sorted(after) == sorted(before)  # no marker, no new checkpoint
    assert [p for p in after if after[p] != before[p] and p != layout.LOCK_FILE] == []

    OffsetCheckpointFile(os.path.join(d, layout.RECOVERY_POINT_CHECKPOINT_FILE)).write({TP: 4000})
    with Broker(d, background=False) as broker:
        [p] = broker.describe_topic("events").partitions
        assert (p.log_start_offset, p.log_end_offset) == (3000, 5000)
        assert records_at_true_offsets(fetch_everything(broker, 3000))
    assert set_aside_files(d) == [os.path.basename(active) + f".{len(open(active, 'rb').read())}.corrupt"]


def relabel_batch_1220_as_1200(tmp_path):
    """A log dir of 2000 records whose batch 1220..1224 claims 1200..1204: bytes 0-7 of a batch
    (its baseOffset) lie outside its CRC. Returns the log dir, the segment and the batch's position."""
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", 2000, 5, pad=60)
        path = broker.log_manager.get_log(TP).active_segment.log.path
    position = next(p for p, base, _ in batch_positions(path) if base == 1220)
    poke(path, position, (1200).to_bytes(8, "big"))
    return d, path, position


def test_a_corrupted_base_offset_is_never_served_at_a_wrong_offset(tmp_path):
    d, path, _ = relabel_batch_1220_as_1200(tmp_path)

    with Broker(d, background=False) as broker:
        served, error = [], None
        position_read = 0
        while position_read < 2000:
            try:
                records = broker.fetch("events", 0, position_read).decoded(position_read)
            except CorruptMessageError as exc:
                error = exc
                break
            served.extend(records)
            position_read = records[-1].offset + 1
        assert records_at_true_offsets(served)
        assert len({r.offset for r in served}) == len(served)
        assert error is not None and path in str(error) and "position" in str(error)
        assert served[-1].offset < 1220


def test_seglog_dump_exits_1_naming_the_file_and_position_of_a_base_offset_out_of_order(tmp_path, capsys):
    _, path, position = relabel_batch_1220_as_1200(tmp_path)
    assert seglog(["dump", path]) == 1
    out = capsys.readouterr().out
    assert f"{path}: position {position}: batch offsets 1200..1204 do not follow offset 1219" in out


def test_a_reading_command_after_an_unclean_shutdown_cuts_nothing_and_the_owner_sets_the_cut_bytes_aside(
        tmp_path, capsys, caplog):
    d = str(tmp_path / "logs")
    with Broker(d, {"log.segment.bytes": "20000"}, background=False) as broker:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", 3000, 20, pad=40)
        segments = broker.log_manager.get_log(TP).segments
        victim = segments[1]
        path, later = victim.log.path, [s.log.path for s in segments[2:]]
    os.remove(os.path.join(d, layout.CLEAN_SHUTDOWN_FILE))
    OffsetCheckpointFile(os.path.join(d, layout.RECOVERY_POINT_CHECKPOINT_FILE)).write({TP: 0})
    position, _, size = batch_positions(path)[10]
    poke(path, position + 70, b"\xff")  # inside the records: a CRC mismatch
    before = snapshot(d)
    victim_size = os.path.getsize(path)

    assert seglog(["topics", "describe", "--log-dir", d, "--topic", "events"]) == 0
    out = capsys.readouterr().out
    assert snapshot(d) == before  # the reading command wrote nothing, cut nothing
    assert "LogEndOffset: " in out

    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="broker_core.log.log_loader"):
        with Broker(d, {"log.segment.bytes": "20000"}, background=False) as broker:
            log = broker.log_manager.get_log(TP)
            end = log.log_end_offset
            assert records_at_true_offsets(fetch_everything(broker))
    first_lost = [base for p, base, _ in batch_positions(path + f".{position}.corrupt")][0]
    assert end == first_lost
    # nothing deleted: the cut bytes and the later segments are beside the log, byte for byte
    assert set_aside_files(d) == sorted([os.path.basename(path) + f".{position}.corrupt"]
                                        + [os.path.basename(p) + ".0.corrupt" for p in later])
    moved = open(path + f".{position}.corrupt", "rb").read()
    assert before["events-0/" + os.path.basename(path)][0] == open(path, "rb").read() + moved
    for p in later:
        assert open(p + ".0.corrupt", "rb").read() == before["events-0/" + os.path.basename(p)][0]
    [event] = [r for r in caplog.records if "recovery moved" in r.getMessage()]
    message = event.getMessage()
    assert event.levelno == logging.ERROR
    assert f"moved {victim_size - position} bytes" in message and f"{len(later)} later segments" in message
    assert "records" in message and "CRC mismatch" in message


def test_a_torn_active_segment_behind_a_clean_shutdown_marker_is_recovered_and_produce_continues(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", 4920, 40, pad=60)
        path = broker.log_manager.get_log(TP).active_segment.log.path
    position, base, size = batch_positions(path)[-1]
    with open(path, "r+b") as f:
        f.truncate(position + size // 2)  # the last batch torn, the index still pointing past it
    with Broker(d, background=False) as broker:
        assert broker.list_offsets("events", 0, "latest").offset == base
        broker.produce("events", [b"after"], partition=0)
        assert broker.fetch("events", 0, base).decoded()[0].value == b"after"
        assert records_at_true_offsets(fetch_everything(broker)[:base])
    assert set_aside_files(d) == [os.path.basename(path) + f".{position}.corrupt"]


def test_an_unclean_restart_does_not_warn_about_offsets_not_strictly_increasing(tmp_path, caplog):
    d = str(tmp_path / "logs")
    crashed = str(tmp_path / "crashed")
    broker = Broker(d, {"log.index.interval.bytes": "100"}, background=False)
    try:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", 500, 10, pad=40)
        broker.log_manager.get_log(TP).flush()
        shutil.copytree(d, crashed)  # what a SIGKILL leaves: preallocated indexes, no marker
    finally:
        broker.close()
    os.remove(os.path.join(crashed, layout.LOCK_FILE))
    with caplog.at_level(logging.WARNING):
        with Broker(crashed, {"log.index.interval.bytes": "100"}, background=False) as reopened:
            assert reopened.list_offsets("events", 0, "latest").offset == 500
    assert [r.getMessage() for r in caplog.records if "strictly increasing" in r.getMessage()] == []


def test_reads_past_a_corrupted_base_offset_fail_rather_than_skip(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", 100, 5)
        path = broker.log_manager.get_log(TP).active_segment.log.path
    position = next(p for p, base, _ in batch_positions(path) if base == 50)
    poke(path, position, (70).to_bytes(8, "big"))  # jumps ahead: 70..74 twice
    with Broker(d, background=False) as broker:
        with pytest.raises((CorruptMessageError, OffsetOutOfRangeError)):
            for start in range(0, 100):
                records = broker.fetch("events", 0, start).decoded(start)
                assert records_at_true_offsets(records), start


def test_swap_recovery_never_touches_set_aside_files():
    from broker_core.log.log_loader import plan_swap_recovery

    names = ["00000000000000000000.log.swap", "00000000000000000000.log", "00000000000000000010.log.0.corrupt",
             "00000000000000000005.log.120.corrupt"]
    plan = plan_swap_recovery(names, lambda name: 20)
    assert plan.delete == ("00000000000000000000.log",)
    assert plan.rename == (("00000000000000000000.log.swap", "00000000000000000000.log"),)
