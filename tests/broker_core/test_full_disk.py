"""A full disk is a storage error, not a crash: the embedded broker and the CLI on a small filesystem
(a tmpfs, and the fault layer of ``tests/faults``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker_core import Broker
from broker_core.errors import KafkaStorageError

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
