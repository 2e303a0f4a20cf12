"""No command can brick a log dir: topic creation is checked first and all-or-nothing, and a
process serves thousands of partitions within a small descriptor limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from broker_core import Broker
from broker_core.errors import KafkaStorageError, PolicyViolationError
from broker_core.log.topic_store import STORE_FILE, PendingChange, TopicStore

SEGLOG = os.path.join(os.path.dirname(sys.executable), "seglog")


def seglog(preexec, *args, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([SEGLOG, *args], input=stdin, capture_output=True, text=True, timeout=300,
                          preexec_fn=preexec)


def partition_dirs(log_dir, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(log_dir) if n.startswith(f"{topic}-"))


def test_a_topic_over_max_partitions_is_refused_before_anything_is_created_and_the_dir_keeps_working(
        tmp_path, descriptor_limit):
    d = str(tmp_path / "logs")
    limit = descriptor_limit(256)
    refused = seglog(limit, "topics", "create", "--log-dir", d, "--topic", "big", "--partitions", "100000")
    assert refused.returncode == 1
    assert "100000 new partitions" in refused.stderr and "max.partitions=20000" in refused.stderr
    assert partition_dirs(d, "big") == []
    assert seglog(limit, "topics", "create", "--log-dir", d, "--topic", "small", "--partitions", "2").returncode == 0
    listed = seglog(limit, "topics", "list", "--log-dir", d)
    assert listed.returncode == 0 and listed.stdout.split() == ["small"]


@pytest.mark.slow
def test_thousands_of_partitions_are_created_produced_read_deleted_and_reopened_within_256_descriptors(
        tmp_path, descriptor_limit):
    d, limit, partitions = str(tmp_path / "logs"), descriptor_limit(256), 3000
    created = seglog(limit, "topics", "create", "--log-dir", d, "--topic", "big", "--partitions", str(partitions))
    assert created.returncode == 0, created.stderr
    lines = "".join(f"key-{n}:value-{n}\n" for n in range(6000))
    produced = seglog(limit, "produce", "--log-dir", d, "--topic", "big", "--key-separator", ":", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    consumed = seglog(limit, "consume", "--log-dir", d, "--topic", "big", "--from-beginning",
                      "--max-messages", "6000")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == sorted(f"value-{n}" for n in range(6000))
    described = seglog(limit, "topics", "describe", "--log-dir", d, "--topic", "big")
    assert described.returncode == 0, described.stderr
    assert described.stdout.count("Partition:") == partitions
    assert sum(int(part.split()[0]) for part in described.stdout.split("LogEndOffset: ")[1:]) == 6000
    deleted = seglog(limit, "topics", "delete", "--log-dir", d, "--topic", "big")
    assert deleted.returncode == 0, deleted.stderr
    assert partition_dirs(d, "big") == []
    reopened = seglog(limit, "topics", "list", "--log-dir", d)
    assert reopened.returncode == 0 and reopened.stdout.split() == []


@pytest.mark.slow
def test_a_creation_killed_half_way_is_rolled_back_at_the_next_open(tmp_path):
    d = str(tmp_path / "logs")
    creating = subprocess.Popen([SEGLOG, "topics", "create", "--log-dir", d, "--topic", "big",
                                 "--partitions", "8000"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while (not os.path.isdir(d) or len(partition_dirs(d, "big")) < 100) and creating.poll() is None:
        assert time.monotonic() < deadline, "no partition directory appeared"
        time.sleep(0.05)
    creating.send_signal(signal.SIGKILL)
    creating.wait(30)
    assert creating.returncode == -signal.SIGKILL, "the creation finished before it could be interrupted"
    assert 0 < len(partition_dirs(d, "big")) < 8000
    with Broker(d) as broker:
        assert broker.list_topics() == []
        assert broker.log_manager.all_logs() == {}
        assert broker.topics.pending() == []
        broker.create_topic("big", 3)
        assert broker.describe_topic("big").partition_count == 3
    assert partition_dirs(d, "big") == ["big-0", "big-1", "big-2"]


def test_a_deletion_interrupted_after_it_was_recorded_is_finished_at_the_next_open(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d) as broker:
        broker.create_topic("doomed", 3)
        broker.create_topic("kept", 1)
        broker.produce("doomed", [b"a", b"b", b"c"])
        meta = broker.topics.get("doomed")
    # What a crash right after the deletion was recorded leaves.
    TopicStore([d]).begin(PendingChange(PendingChange.DELETE, meta, meta.partitions))
    with Broker(d) as broker:
        assert broker.list_topics() == ["kept"]
        assert sorted(str(tp) for tp in broker.log_manager.all_logs()) == ["kept-0"]
    assert partition_dirs(d, "doomed") == []


def test_topics_delete_removes_a_topic_saved_with_partitions_that_were_never_created(tmp_path, descriptor_limit):
    d = str(tmp_path / "logs")
    with Broker(d) as broker:
        broker.create_topic("big", 5)
    # What the topic store looked like after `topics create --partitions 100000` failed half-way
    # in earlier versions: the topic saved whole, few of its directories made.
    path = os.path.join(d, STORE_FILE)
    with open(path) as f:
        doc = json.load(f)
    doc["topics"][0]["partitions"] = 100000
    with open(path, "w") as f:
        json.dump(doc, f)
    limit = descriptor_limit(256)
    listed = seglog(limit, "topics", "list", "--log-dir", d)
    assert listed.returncode == 0 and listed.stdout.split() == ["big"]
    assert "99995 of its 100000 partitions have no directory" in listed.stderr
    deleted = seglog(limit, "topics", "delete", "--log-dir", d, "--topic", "big")
    assert deleted.returncode == 0, deleted.stderr
    assert partition_dirs(d, "big") == []
    assert seglog(limit, "topics", "list", "--log-dir", d).stdout.split() == []


def test_max_partitions_counts_every_topic_and_refuses_a_creation_whole(tmp_path):
    with Broker(str(tmp_path), {"max.partitions": 10}) as broker:
        broker.create_topic("a", 6)
        with pytest.raises(PolicyViolationError, match=r"5 new partitions would make 11 on this broker, "
                                                       r"more than max.partitions=10 \(it holds 6\)"):
            broker.create_topic("b", 5)
        with pytest.raises(PolicyViolationError, match="max.partitions=10"):
            broker.create_partitions("a", 11)
        assert broker.list_topics() == ["a"]
        assert partition_dirs(tmp_path, "b") == []
        broker.create_partitions("a", 10)
        assert broker.describe_topic("a").partition_count == 10


def test_a_creation_the_log_dir_has_no_inodes_for_is_refused_before_anything_is_created(small_tmpfs):
    d = small_tmpfs.mount("4m,nr_inodes=64")
    with Broker(d) as broker:
        with pytest.raises(KafkaStorageError, match=r"topic 'big': 20 partitions need 100 inodes, "
                                                    r"the log dirs \(.*\) have \d+ free"):
            broker.create_topic("big", 20)
        assert broker.list_topics() == []
        assert partition_dirs(d, "big") == []
        broker.create_topic("small", 2)
        assert broker.describe_topic("small").partition_count == 2
