import io
import os
import subprocess
import sys

import pytest

from broker_core import Broker
from broker_core.cli import main as seglog

SEGLOG = os.path.join(os.path.dirname(sys.executable), "seglog")


def run(*args, stdin=""):
    result = subprocess.run([SEGLOG, *args], input=stdin, capture_output=True, text=True, timeout=120)
    return result.returncode, result.stdout, result.stderr


def test_topics_create_list_describe_alter_delete(tmp_path, capsys):
    d = str(tmp_path / "logs")
    assert seglog(["topics", "create", "--log-dir", d, "--topic", "orders", "--partitions", "3",
                   "--config", "retention.ms=1000"]) == 0
    assert seglog(["topics", "create", "--log-dir", d, "--topic", "audit"]) == 0
    assert seglog(["topics", "list", "--log-dir", d]) == 0
    assert seglog(["topics", "alter", "--log-dir", d, "--topic", "orders", "--partitions", "4",
                   "--config", "cleanup.policy=compact", "--delete-config", "retention.ms"]) == 0
    assert seglog(["topics", "describe", "--log-dir", d, "--topic", "orders"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["Created topic orders.", "Created topic audit.", "audit", "orders"]
    describe = [line for line in out if "Topic: orders" in line]
    assert "PartitionCount: 4" in describe[0] and "Configs: cleanup.policy=compact" in describe[0]
    assert len(describe) == 5
    assert seglog(["topics", "delete", "--log-dir", d, "--topic", "audit"]) == 0
    with Broker(d, background=False) as b:
        assert b.list_topics() == ["orders"]


def test_produce_and_consume_round_trip_with_keys(tmp_path):
    d = str(tmp_path / "logs")
    assert run("topics", "create", "--log-dir", d, "--topic", "events", "--partitions", "2")[0] == 0
    lines = "".join(f"user-{i % 3}:click {i}\n" for i in range(10))
    code, _, err = run("produce", "--log-dir", d, "--topic", "events", "--key-separator", ":", stdin=lines)
    assert code == 0 and "Produced 10 records" in err
    code, out, err = run("consume", "--log-dir", d, "--topic", "events", "--from-beginning", "--print-key",
                         "--key-separator", "=")
    assert code == 0 and "Processed a total of 10 messages" in err
    assert sorted(out.splitlines()) == sorted(f"user-{i % 3}=click {i}" for i in range(10))


def test_consume_from_a_partition_and_offset_with_a_limit(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as b:
        b.create_topic("events", 1)
        b.produce("events", [b"m%d" % i for i in range(20)], partition=0)
    code, out, _ = run("consume", "--log-dir", d, "--topic", "events", "--partition", "0", "--offset", "12",
                       "--max-messages", "3")
    assert code == 0 and out.splitlines() == ["m12", "m13", "m14"]


@pytest.mark.parametrize("args, message", [
    (["consume", "--topic", "missing", "--from-beginning"], "UNKNOWN_TOPIC_OR_PARTITION"),
    (["topics", "create", "--topic", "bad/name"], "INVALID_TOPIC_EXCEPTION"),
    (["consume", "--topic", "events", "--partition", "0", "--offset", "99"], "OFFSET_OUT_OF_RANGE"),
    (["topics", "create", "--topic", "x", "--config", "segment.bytes=1"], "segment.bytes"),
])
def test_errors_print_one_line_and_exit_non_zero(tmp_path, args, message):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as b:
        b.create_topic("events", 1)
    code, out, err = run(*args[:1], *(args[1:2] if args[0] == "topics" else []), "--log-dir", d,
                         *(args[2:] if args[0] == "topics" else args[1:]))
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and message in err
    assert "Traceback" not in err


def test_a_log_dir_owned_by_a_running_broker_is_refused_to_writing_commands(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False):
        code, _, err = run("topics", "create", "--log-dir", d, "--topic", "t")
    assert code == 1 and "in use by another broker" in err and len(err.strip().splitlines()) == 1
