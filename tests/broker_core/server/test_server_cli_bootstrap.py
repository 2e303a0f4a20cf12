"""The ``seglog`` admin commands with ``--bootstrap``: through a running broker instead of its log dir."""

from __future__ import annotations

import io
import sys
import time

from kafka.structs import OffsetAndMetadata

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
                         "--print-key", "--key-separator", ":", "--timeout-ms", "0")
    assert code == 0 and sorted(out.split()) == ["a:1", "b:2", "c:3"]
    assert run(capsys, "topics", "alter", "--bootstrap", bootstrap, "--topic", "cli", "--partitions", "3")[0] == 0
    code, out, _ = run(capsys, "topics", "describe", "--bootstrap", bootstrap, "--topic", "cli")
    assert "PartitionCount: 3" in out
    assert run(capsys, "topics", "delete", "--bootstrap", bootstrap, "--topic", "cli")[0] == 0
    assert run(capsys, "topics", "list", "--bootstrap", bootstrap)[1] == ""


def test_errors_come_back_as_kafka_errors_on_one_line(bootstrap, capsys):
    code, _, err = run(capsys, "topics", "delete", "--bootstrap", bootstrap, "--topic", "missing")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "groups", "describe", "--bootstrap", bootstrap, "--group", "nobody")
    assert code == 1 and "GROUP_ID_NOT_FOUND" in err and len(err.strip().splitlines()) == 1


def test_log_dir_and_bootstrap_exclude_each_other(bootstrap, tmp_path, capsys):
    try:
        cli.main(["topics", "list", "--bootstrap", bootstrap, "--log-dir", str(tmp_path)])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("argparse accepted both --log-dir and --bootstrap")


# Long enough for kafka-python's first metadata answer to arrive before it leads the
# first assignment: without the topic's partitions it assigns nothing, and its
# metadata-triggered rejoin may then drop the next assignment (kafka-python 3.0.12).
REBALANCE_DELAY_MS = 500


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("Consumer group")]


def test_groups_through_a_running_broker_show_live_members_and_lag(tmp_path, capsys):
    from kafka import KafkaConsumer

    from server_kit import start_broker

    server = start_broker(tmp_path / "logs", **{"group.initial.rebalance.delay.ms": REBALANCE_DELAY_MS})
    bootstrap = server.bootstrap_servers
    try:
        run(capsys, "topics", "create", "--bootstrap", bootstrap, "--topic", "orders", "--partitions", "2")
        assert run(capsys, "produce", "--bootstrap", bootstrap, "--topic", "orders", "--partition", "0",
                   stdin=b"a\nb\nc\n")[0] == 0
        consumer = KafkaConsumer("orders", bootstrap_servers=bootstrap, group_id="app", client_id="app-1",
                                 auto_offset_reset="earliest", enable_auto_commit=False, request_timeout_ms=10_000)
        try:
            deadline = time.monotonic() + 20
            while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
                consumer.poll(200)
            assert len(consumer.assignment()) == 2
            consumer.commit({tp: OffsetAndMetadata(1, "", -1) for tp in consumer.assignment()
                             if tp.partition == 0})
            assert run(capsys, "groups", "list", "--bootstrap", bootstrap)[1].split() == ["app"]
            code, out, _ = run(capsys, "groups", "describe", "--bootstrap", bootstrap, "--group", "app")
            rows = table(out)
            assert code == 0 and rows[0][-3:] == ["CONSUMER-ID", "HOST", "CLIENT-ID"]
            assert [r[:6] for r in rows[1:]] == [["app", "orders", "0", "1", "3", "2"],
                                                 ["app", "orders", "1", "-", "0", "-"]]
            assert {r[7] for r in rows[1:]} == {"/127.0.0.1"} and {r[8] for r in rows[1:]} == {"app-1"}
            code, out, _ = run(capsys, "groups", "describe", "--bootstrap", bootstrap, "--group", "app",
                               "--members")
            assert table(out)[1][-2:] == ["2", "orders(0,1)"]
            code, out, _ = run(capsys, "groups", "describe", "--bootstrap", bootstrap, "--group", "app", "--state")
            assert table(out)[1][1:] == ["range", "Stable", "1"]
            code, _, err = run(capsys, "groups", "reset-offsets", "--bootstrap", bootstrap, "--group", "app",
                               "--topic", "orders", "--to-earliest", "--execute")
            assert code == 1 and "inactive" in err
        finally:
            consumer.close()  # leaves the group: it is Empty now
        code, out, _ = run(capsys, "groups", "reset-offsets", "--bootstrap", bootstrap, "--group", "app",
                           "--topic", "orders:0", "--to-latest", "--execute")
        assert code == 0 and table(out)[1] == ["app", "orders", "0", "3"]
        code, out, _ = run(capsys, "groups", "describe", "--bootstrap", bootstrap, "--group", "app")
        assert "has no active members" in out and table(out)[1][:6] == ["app", "orders", "0", "3", "3", "0"]
        assert run(capsys, "groups", "delete", "--bootstrap", bootstrap, "--group", "app")[0] == 0
        assert run(capsys, "groups", "list", "--bootstrap", bootstrap)[1] == ""
    finally:
        server.shutdown(timeout_ms=10_000)


def test_describe_from_the_log_dir_shows_the_last_stored_generation(tmp_path, capsys):
    from kafka import KafkaConsumer

    from server_kit import start_broker

    server = start_broker(tmp_path / "logs", **{"group.initial.rebalance.delay.ms": REBALANCE_DELAY_MS})
    bootstrap = server.bootstrap_servers
    consumer = None
    try:
        run(capsys, "topics", "create", "--bootstrap", bootstrap, "--topic", "orders", "--partitions", "2")
        consumer = KafkaConsumer("orders", bootstrap_servers=bootstrap, group_id="app", client_id="app-1",
                                 enable_auto_commit=False, request_timeout_ms=10_000)
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(200)
        assert len(consumer.assignment()) == 2
    finally:
        server.shutdown(timeout_ms=10_000)  # the member is still in the stored generation
        if consumer is not None:
            consumer.close(autocommit=False, timeout_ms=100)
    code, out, _ = cli.main(["groups", "describe", "--log-dir", str(tmp_path / "logs"), "--group", "app",
                             "--members"]), *capsys.readouterr()
    assert code == 0 and table(out)[1][3:] == ["app-1", "2", "orders(0,1)"]
