"""The ``seglog`` admin commands with ``--bootstrap``: through a running broker instead of its log dir."""

from __future__ import annotations

import io
import sys

from broker_core import cli


def run(capsys, *argv: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        code = cli.main(list(argv))
    finally:
        sys.stdin = sys.__stdin__
    out, err = capsys.readouterr()
    return code, out, err


def test_topics_produce_and_consume_through_a_running_broker(bootstrap, capsys):
    assert run(capsys, "topics", "create", "--bootstrap", bootstrap, "--topic", "cli", "--partitions", "2",
               "--config", "retention.ms=60000")[0] == 0
    code, out, _ = run(capsys, "topics", "list", "--bootstrap", bootstrap)
    assert (code, out.split()) == (0, ["cli"])
    code, _, err = run(capsys, "produce", "--bootstrap", bootstrap, "--topic", "cli", "--key-separator", ":",
                       stdin=b"a:1\nb:2\nc:3\n")
    assert code == 0 and "Produced 3 records" in err
    code, out, _ = run(capsys, "topics", "describe", "--bootstrap", bootstrap, "--topic", "cli")
    assert code == 0 and "PartitionCount: 2" in out and "retention.ms=60000" in out
    assert sum(int(line.split("LogEndOffset: ")[1].split()[0]) for line in out.splitlines()[1:]) == 3
    code, out, err = run(capsys, "consume", "--bootstrap", bootstrap, "--topic", "cli", "--from-beginning",
                         "--print-key", "--key-separator", ":")
    assert code == 0 and sorted(out.split()) == ["a:1", "b:2", "c:3"]
    assert run(capsys, "topics", "alter", "--bootstrap", bootstrap, "--topic", "cli", "--partitions", "3")[0] == 0
    code, out, _ = run(capsys, "topics", "describe", "--bootstrap", bootstrap, "--topic", "cli")
    assert "PartitionCount: 3" in out
    assert run(capsys, "topics", "delete", "--bootstrap", bootstrap, "--topic", "cli")[0] == 0
    assert run(capsys, "topics", "list", "--bootstrap", bootstrap)[1] == ""


def test_errors_come_back_as_kafka_errors_on_one_line(bootstrap, capsys):
    code, _, err = run(capsys, "topics", "delete", "--bootstrap", bootstrap, "--topic", "missing")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "groups", "list", "--bootstrap", bootstrap)
    assert code == 1 and "--log-dir" in err


def test_log_dir_and_bootstrap_exclude_each_other(bootstrap, tmp_path, capsys):
    try:
        cli.main(["topics", "list", "--bootstrap", bootstrap, "--log-dir", str(tmp_path)])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("argparse accepted both --log-dir and --bootstrap")
