"""``seglog compact``: the broker's cleaner run once from the command line."""

import os
import re
import subprocess

import pytest

from broker_core import Broker
from broker_core.cli import main
from broker_core.cli.compact_command import spark_submit_command
from format.layout import TopicPartition

from cleaner_kit import read_from
from cli_kit import SEGLOG


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
    import connector.compaction_job

    assert job == connector.compaction_job.__file__ and os.path.dirname(os.path.dirname(job)) == root
    assert command[-6:] == ["--path", "/data/logs", "--topics", "a,b", "--storage", "anon=true"]


def test_compact_with_spark_beside_a_running_broker_hands_the_job_its_listener(tmp_path, capsys):
    command, _ = spark_submit_command("/data/logs", ["a"], bootstrap="127.0.0.1:9092")
    assert command[-2:] == ["--bootstrap", "127.0.0.1:9092"]
    # Without --spark there is nothing to lease: a running broker cleans its own logs.
    assert main(["compact", "--log-dir", str(tmp_path), "--bootstrap", "127.0.0.1:9092"]) == 2  # a usage error
    assert "--bootstrap go with --spark" in capsys.readouterr().err


def test_compact_with_spark_hands_the_job_the_command_config_of_a_secured_listener(tmp_path, capsys):
    command, _ = spark_submit_command("/data/logs", ["a"], bootstrap="127.0.0.1:9093", command_config="client.properties")
    assert command[-4:] == ["--bootstrap", "127.0.0.1:9093", "--command-config", os.path.abspath("client.properties")]
    # The job reads the file before Spark starts: a bad one stops it naming the setting.
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_TLS\n")
    from connector.compaction_job import main as job_main

    assert job_main(["--path", str(tmp_path), "--topics", "a", "--bootstrap", "127.0.0.1:9093",
                     "--command-config", str(config)]) == 1
    assert "configuration security.protocol" in capsys.readouterr().err


def test_key_value_options_are_parsed_in_one_place_naming_the_option():
    from broker_core.key_values import parse_key_values

    assert parse_key_values([" a = 1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    assert parse_key_values(None) == {}
    with pytest.raises(ValueError, match="--storage expects key=value"):
        parse_key_values(["nokey"], "--storage")
    with pytest.raises(ValueError, match="--config"):
        parse_key_values(["=v"])


STAGE_TWO = re.compile(r"\[compaction\] stage 2/2 done: (\d+) segments rewritten into (\d+), ([\d,]+) -> ([\d,]+) "
                       r"bytes \(the partitions: ([\d,]+) -> ([\d,]+) bytes\)")


def number(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.slow
def test_compact_with_spark_prints_stage_two_figures_that_agree_with_its_summary_table(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("table", 2, {"cleanup.policy": "compact", "segment.bytes": 2000})
        for i in range(300):
            broker.produce("table", [(b"k%d" % (i % 17), b"v" * 30)], partition=i % 2)
    assert main(["compact", "--log-dir", d]) == 0  # a clean section before the dirty one
    with Broker(d, background=False) as broker:
        for i in range(150):  # dirty segments, and an active segment that is never cleaned
            broker.produce("table", [(b"k%d" % (i % 17), b"w" * 30)], partition=i % 2)
    result = subprocess.run([SEGLOG, "compact", "--spark", "--log-dir", d, "--master", "local[2]",
                             "--conf", "spark.ui.enabled=false"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    segments_rewritten, segments_written, rewritten_before, rewritten_after, before, after = STAGE_TWO.search(
        result.stdout).groups()
    header = lines.index(next(line for line in lines if line.startswith("PARTITION")))
    columns = lines[header].split()
    rows = {line.split()[0]: line for line in lines[header + 1:header + 4]}
    total = rows["total"].split()
    assert (number(total[-3]), number(total[-2])) == (number(before), number(after))
    # The partitions lose exactly what the rewritten segments lose.
    assert number(before) - number(after) == number(rewritten_before) - number(rewritten_after) > 0
    with Broker(d, background=False) as broker:
        described = {f"table-{p.partition}": p for p in broker.describe_topic("table").partitions}
    for name in ("table-0", "table-1"):
        row = dict(zip(columns, re.split(r"\s{2,}", rows[name])))
        assert number(row["BYTES-AFTER"]) == described[name].size_bytes
        assert int(row["SEGMENTS"].split(" -> ")[1]) == described[name].segments
    assert sum(number(dict(zip(columns, re.split(r"\s{2,}", rows[n])))["BYTES-BEFORE"])
               for n in ("table-0", "table-1")) == number(before)


def test_compact_prints_progress_lines_where_standard_error_is_not_a_terminal(tmp_path, capsys):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("table", 1, {"cleanup.policy": "compact", "segment.bytes": 20_000})
        for first in range(0, 20_000, 500):
            broker.produce("table", [(b"key-%d" % (i % 50), b"value-%06d" % i) for i in range(first, first + 500)])
    assert main(["compact", "--log-dir", d, "--reporting-interval", "1"]) == 0
    err = capsys.readouterr().err.splitlines()
    progress = [line for line in err if re.fullmatch(r"table-0: [\d.]+% of [\d.]+ MB after \d+ s", line)]
    assert progress and err[-1].startswith("table-0: offsets 0..")
    shares = [float(line.split()[1].rstrip("%")) for line in progress]
    assert shares == sorted(shares) and shares[-1] <= 100
    # The default interval leaves a short clean with its one line.
    fill(str(tmp_path / "other"))
    assert main(["compact", "--log-dir", str(tmp_path / "other")]) == 0
    assert all(line.startswith("table-") and "cleaned" in line for line in capsys.readouterr().err.splitlines())
