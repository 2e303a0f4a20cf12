"""``seglog compact``: the broker's cleaner run once from the command line."""

import os

import pytest

from broker_core import Broker
from broker_core.cli import main
from broker_core.compact_command import spark_submit_command
from format.layout import TopicPartition

from cleaner_kit import read_from


def fill(log_dir: str) -> None:
    with Broker(log_dir, background=False) as broker:
        broker.create_topic("table", 2, {"cleanup.policy": "compact", "segment.bytes": 800})
        broker.create_topic("events", 1)
        for i in range(120):
            broker.produce("table", [(b"key-%d" % (i % 5), b"value-%04d" % i)], partition=i % 2)
            broker.produce("events", [(b"e", b"%d" % i)])


def test_compact_cleans_every_compacted_partition_and_prints_a_summary(tmp_path, capsys):
    d = str(tmp_path / "logs")
    fill(d)
    assert main(["compact", "--log-dir", d]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines[0].split() == ["PARTITION", "CLEANED-OFFSETS", "BYTES-BEFORE", "BYTES-AFTER", "REDUCTION"]
    assert [line.split()[0] for line in lines[1:4]] == ["table-0", "table-1", "total"]
    assert "events" not in out.out
    assert "table-0: offsets 0.." in out.err and "Compacted 2 partitions" in out.out
    with Broker(d, background=False) as broker:
        for p in range(2):
            lg = broker.log_manager.get_log(TopicPartition("table", p))
            below_head = [r for r in read_from(lg) if r.offset < lg.active_segment.base_offset]
            assert len({r.key for r in below_head}) == len(below_head)  # one record per key left


def test_compacting_a_topic_that_is_not_compacted_is_refused(tmp_path, capsys):
    d = str(tmp_path / "logs")
    fill(d)
    assert main(["compact", "--log-dir", d, "--topic", "events"]) == 1
    assert "cleanup.policy=delete" in capsys.readouterr().err


def test_compact_with_spark_runs_the_job_through_spark_submit():
    command, root = spark_submit_command("/data/logs", ["a", "b"], master="local[2]", storage=["anon=true"])
    assert os.path.basename(command[0]) == "spark-submit"
    assert command[command.index("--properties-file") + 1] == os.path.join(root, "spark_conf", "spark-defaults.conf")
    job = command[command.index("--master") + 2]
    assert job == os.path.join(root, "connector", "compaction_job.py") and os.path.exists(job)
    assert command[-6:] == ["--path", "/data/logs", "--topics", "a,b", "--storage", "anon=true"]


def test_compact_with_spark_beside_a_running_broker_hands_the_job_its_listener(tmp_path, capsys):
    command, _ = spark_submit_command("/data/logs", ["a"], bootstrap="127.0.0.1:9092")
    assert command[-2:] == ["--bootstrap", "127.0.0.1:9092"]
    # Without --spark there is nothing to lease: a running broker cleans its own logs.
    assert main(["compact", "--log-dir", str(tmp_path), "--bootstrap", "127.0.0.1:9092"]) == 2  # a usage error
    assert "--bootstrap go with --spark" in capsys.readouterr().err


def test_key_value_options_are_parsed_in_one_place_naming_the_option():
    from broker_core.key_values import parse_key_values

    assert parse_key_values([" a = 1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    assert parse_key_values(None) == {}
    with pytest.raises(ValueError, match="--storage expects key=value"):
        parse_key_values(["nokey"], "--storage")
    with pytest.raises(ValueError, match="--config"):
        parse_key_values(["=v"])
