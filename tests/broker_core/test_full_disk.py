"""A full disk is a storage error, not a crash: the embedded broker and the CLI on a small filesystem
(a tmpfs, and the fault layer of ``tests/faults``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker_core import Broker
from broker_core.errors import KafkaStorageError
from format.layout import TopicPartition

SEGLOG = os.path.join(os.path.dirname(sys.executable), "seglog")
SMALL_SEGMENTS = {"log.segment.bytes": 262144}


def fill(broker: Broker, topic: str) -> list[bytes]:
    """Produce numbered 10 kB values to partition 0 until the disk is full; returns those acknowledged."""
    acknowledged = []
    with pytest.raises(KafkaStorageError) as refusal:
        for n in range(10_000):
            value = b"%08d" % n + b"." * 10_000
            broker.produce(topic, [value], partition=0)
            acknowledged.append(value)
    assert "No space left on device" in str(refusal.value)
    return acknowledged


def test_an_append_on_a_full_disk_takes_its_log_dir_offline_and_the_other_dir_keeps_accepting(
        tmp_path, small_filesystem):
    full_dir = os.path.join(small_filesystem.mount("2m"), "logs")
    with Broker([full_dir, str(tmp_path / "other")], SMALL_SEGMENTS) as broker:
        broker.create_topic("filling", 1)
        broker.create_topic("elsewhere", 1)
        acknowledged = fill(broker, "filling")
        with pytest.raises(KafkaStorageError, match=f"log dir {full_dir} is offline"):
            broker.produce("filling", [b"x"], partition=0)
        assert broker.produce("elsewhere", [b"y"])[0].offset == 0
        fetched, offset = [], 0
        while offset < broker.list_offsets("filling", 0, "latest").offset:
            records = broker.fetch("filling", 0, offset).decoded()
            fetched += [r.value for r in records]
            offset = records[-1].offset + 1
        assert fetched == acknowledged
        # No new partition goes to an offline dir.
        broker.create_topic("later", 1)
        assert os.path.isdir(tmp_path / "other" / "later-0")
    with Broker([full_dir, str(tmp_path / "other")], SMALL_SEGMENTS) as broker:
        assert broker.list_offsets("filling", 0, "latest").offset == len(acknowledged)


def test_reading_commands_on_a_full_disk_read_as_usual(small_filesystem):
    d = os.path.join(small_filesystem.mount("2m"), "logs")
    with Broker(d, SMALL_SEGMENTS) as broker:
        broker.create_topic("filling", 1)
        acknowledged = fill(broker, "filling")
    described = subprocess.run([SEGLOG, "topics", "describe", "--log-dir", d, "--topic", "filling"],
                               capture_output=True, text=True, timeout=120)
    assert described.returncode == 0, f"exit {described.returncode} (135 is SIGBUS): {described.stderr}"
    assert f"LogEndOffset: {len(acknowledged)}" in described.stdout
    consumed = subprocess.run([SEGLOG, "consume", "--log-dir", d, "--topic", "filling", "--from-beginning",
                               "--max-messages", str(len(acknowledged))], capture_output=True, text=True,
                              timeout=120)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [v.decode() for v in acknowledged]
    segment = os.path.join(d, "filling-0", "00000000000000000000.log")
    dumped = subprocess.run([SEGLOG, "dump", segment], capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr


def test_a_failing_fsync_takes_its_log_dir_offline_and_background_work_goes_on(tmp_path, small_filesystem):
    from broker_core.clock import MockTime

    if not hasattr(small_filesystem, "fail_fsync"):
        pytest.skip("a tmpfs cannot fail fsync; the fault layer can")
    failing = small_filesystem.mount("64m")
    failing_dir, other_dir = os.path.join(failing, "logs"), str(tmp_path / "other")
    clock = MockTime()
    with Broker([failing_dir, other_dir], {"log.flush.interval.ms": 1000}, clock=clock,
                background=False) as broker:
        broker.create_topic("failing", 1)
        broker.create_topic("healthy", 1)
        assert os.path.dirname(broker.log_manager.get_log(TopicPartition("failing", 0)).dir) == failing_dir
        broker.produce("failing", [b"a"], partition=0)
        broker.produce("healthy", [b"b"], partition=0)
        small_filesystem.fail_fsync(failing)
        clock.sleep(2000)
        broker.tick()  # the time-based flush meets the failing disk
        assert broker.log_manager.dir_failures.offline(failing_dir) is not None
        with pytest.raises(KafkaStorageError, match=f"log dir {failing_dir} is offline"):
            broker.produce("failing", [b"c"], partition=0)
        assert broker.log_manager.get_log(TopicPartition("healthy", 0)).recovery_point == 1  # flushed
        assert broker.produce("healthy", [b"d"])[0].offset == 1
        assert [r.value for r in broker.fetch("failing", 0, 0).decoded()] == [b"a"]
    assert not os.path.exists(os.path.join(failing_dir, ".kafka_cleanshutdown"))
    assert os.path.exists(os.path.join(other_dir, ".kafka_cleanshutdown"))
