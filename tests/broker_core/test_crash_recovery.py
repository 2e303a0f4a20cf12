"""Kill a producing broker with SIGKILL at random moments; check what recovery keeps."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from broker_core import Broker
from format.file_records import FileRecords
from format.layout import TopicPartition

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
TRIALS = 24


def check_log_is_whole(broker, flushed):
    log = broker.log_manager.get_log(TopicPartition("events", 0))
    assert log.log_end_offset >= flushed, f"lost flushed data: end {log.log_end_offset} < flushed {flushed}"
    expected = 0
    for segment in log.segments:
        assert segment.base_offset == expected or segment.size == 0 or segment.base_offset <= expected
        records = FileRecords.open(segment.log.path, writable=False)
        try:
            end = 0
            positions = {}
            for batch in records.batches(validate=True, stop_at_partial=False):
                h = batch.header
                assert h.base_offset == expected, (segment, h.base_offset, expected)
                for r in batch.records():
                    assert r.offset == expected
                    assert r.value[:12] == b"%012d" % expected, (r.offset, r.value[:12])
                    expected += 1
                positions[batch.position] = h.last_offset
                end = batch.position + h.size_in_bytes
            assert end == segment.size, "the segment does not end on a batch boundary"
        finally:
            records.close()
        for n in range(segment.offset_index.entries):
            entry = segment.offset_index.entry(n)
            assert positions.get(entry.position) == entry.offset, f"index entry {entry} disagrees with the log"
        last_time = segment.time_index.last_entry
        if last_time.timestamp >= 0:
            assert segment.base_offset <= last_time.offset < expected
    assert expected == log.log_end_offset


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_flushed(tmp_path):
    rng = random.Random(2026)
    log_dir = str(tmp_path / "logs")
    marker = str(tmp_path / "flushed")
    env = dict(os.environ, PYTHONPATH=ROOT)
    flushed = 0
    for trial in range(TRIALS):
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "crash_producer.py"), log_dir, marker,
                                 str(trial)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            # Some kills land during start-up and recovery, most while producing.
            if rng.random() < 0.8:
                line = proc.stdout.readline()
                assert line.strip() == b"ready", proc.stderr.read().decode()
            time.sleep(rng.uniform(0.02, 0.6))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
            proc.stderr.close()
        if os.path.exists(marker):
            with open(marker) as f:
                flushed = max(flushed, int(f.read()))
        with Broker(log_dir, {"log.segment.bytes": "20000", "log.index.interval.bytes": "512"},
                    background=False) as broker:
            if "events" in broker.list_topics():
                check_log_is_whole(broker, flushed)
    assert flushed > 0


def test_a_corrupt_byte_in_a_flushed_segment_is_reported_not_served(tmp_path):
    from broker_core.errors import CorruptMessageError
    from format.record import SimpleRecord

    log_dir = str(tmp_path / "logs")
    with Broker(log_dir, {"log.segment.bytes": "4000"}, background=False) as broker:
        broker.create_topic("events", 1)
        for i in range(30):
            broker.produce("events", [SimpleRecord(b"%012d" % (i * 5 + j) + b"x" * 100) for j in range(5)],
                           partition=0)
        segments = broker.log_manager.get_log(TopicPartition("events", 0)).segments
        victim = segments[1]
        path, base = victim.log.path, victim.base_offset
    with open(path, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0x01]))
    with Broker(log_dir, {"log.segment.bytes": "4000"}, background=False) as broker:
        assert broker.fetch("events", 0, 0).records  # earlier data still served
        with pytest.raises(CorruptMessageError) as err:
            broker.fetch("events", 0, base)
        assert path in str(err.value) and "position 0" in str(err.value)
