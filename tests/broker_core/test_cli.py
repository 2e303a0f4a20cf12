import inspect
import re
import signal
import time

import pytest

from broker_core import Broker
from broker_core.cli import main as seglog
from broker_core.cli import report_error

from cli_kit import SeglogProcess, run, start_broker
from transactions_kit import TransactionalWriter, write_mixed_transactions

# A Python exception's class name as a message would show it: "ValueError", "OSError", "KeyError" ...
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")


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
                         "--key-separator", "=", "--timeout-ms", "0")
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
    (["topics", "create", "--topic", "x", "--replication-factor", "3"],
     "INVALID_REPLICATION_FACTOR: Unable to replicate the partition 3 time(s)"),
])
def test_errors_print_one_line_and_exit_non_zero(tmp_path, args, message):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as b:
        b.create_topic("events", 1)
    code, out, err = run(*args[:1], *(args[1:2] if args[0] == "topics" else []), "--log-dir", d,
                         *(args[2:] if args[0] == "topics" else args[1:]))
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and message in err
    assert "Traceback" not in err and not CLASS_NAME.search(err)


def test_a_log_dir_owned_by_a_running_broker_is_refused_to_writing_commands(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False):
        code, _, err = run("topics", "create", "--log-dir", d, "--topic", "t")
    assert code == 1 and "in use by another broker" in err and len(err.strip().splitlines()) == 1


# --- errors for people ------------------------------------------------------------------------


@pytest.mark.parametrize("args, code, message", [
    (["dump", "{d}/00000000000000000000.log"], 1, "{d}/00000000000000000000.log: No such file or directory"),
    (["consume", "--log-dir", "{d}", "--topic", "events", "--offset", "3"], 2, "--offset needs --partition"),
    (["groups", "describe", "--log-dir", "{d}"], 2, "groups describe needs --group"),
    (["groups", "reset-offsets", "--log-dir", "{d}", "--group", "g", "--topic", "events:x", "--to-earliest"], 2,
     "events:x"),
], ids=["a missing file", "options that exclude each other", "a missing option", "a bad partition list"])
def test_errors_print_no_python_class_names_and_name_the_file_at_fault(tmp_path, args, code, message):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as b:
        b.create_topic("events", 1)
    result, _, err = run(*(a.format(d=d) for a in args))
    assert result == code
    assert err.strip().splitlines() == [err.strip()] and message.format(d=d) in err
    assert not CLASS_NAME.search(err) and "Errno" not in err


def test_an_unexpected_error_prints_one_line_with_a_hint_for_the_traceback(capsys, monkeypatch):
    assert report_error("topics", KeyError("retention.ms")) == 1
    err = capsys.readouterr().err
    assert err == "seglog topics: unexpected error: 'retention.ms' (run with SEGLOG_DEBUG=1 for the traceback)\n"
    monkeypatch.setenv("SEGLOG_DEBUG", "1")
    try:
        raise KeyError("retention.ms")
    except KeyError as exc:
        assert report_error("topics", exc) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("for the traceback)\n")


def test_a_garbage_meta_properties_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "meta.properties").write_bytes(b"\xff\xfe\x00\x13garbage\x00")
    code, _, err = run("broker", "--log-dir", str(tmp_path), "--listeners", "PLAINTEXT://127.0.0.1:0",
                       "--log-level", "WARNING", timeout=60)
    assert code == 1
    assert err.strip().splitlines() == [f"seglog broker: INVALID_CONFIG: {tmp_path}/meta.properties: not a "
                                        f"properties file: byte 0xff at position 0 is not text"]


# --- produce says how many records it wrote -----------------------------------------------------


def test_produce_reports_how_many_records_it_wrote_also_when_it_fails(tmp_path):
    d = str(tmp_path / "logs")
    assert run("topics", "create", "--log-dir", d, "--topic", "orders")[0] == 0
    lines = "".join(f"k{i}:v{i}\n" for i in range(1200)) + "no separator here\n" + "k:after\n"
    code, _, err = run("produce", "--log-dir", d, "--topic", "orders", "--key-separator", ":", stdin=lines)
    assert code == 1
    assert err.strip().splitlines() == ["seglog produce: Produced 1200 records to orders before failing: line 1201 "
                                        "has no key separator ':': 'no separator here'"]
    with Broker(d, background=False) as b:
        assert b.list_offsets("orders", 0, "latest").offset == 1200


def test_produce_to_a_missing_topic_reports_that_it_wrote_nothing(tmp_path):
    d = str(tmp_path / "logs")
    assert run("topics", "create", "--log-dir", d, "--topic", "orders")[0] == 0
    code, _, err = run("produce", "--log-dir", d, "--topic", "missing", stdin="a\n")
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert err.startswith("seglog produce: Produced 0 records to missing before failing: UNKNOWN_TOPIC_OR_PARTITION")


def test_produce_prints_a_progress_line_on_long_input(tmp_path):
    d = str(tmp_path / "logs")
    assert run("topics", "create", "--log-dir", d, "--topic", "orders")[0] == 0
    lines = "".join(f"event {i}\n" for i in range(20_000))
    code, _, err = run("produce", "--log-dir", d, "--topic", "orders", "--batch-size", "100",
                       "--reporting-interval", "1", stdin=lines)
    assert code == 0
    *progress, last = err.strip().splitlines()
    assert last == "Produced 20000 records to orders."
    assert progress and all(re.fullmatch(r"Produced [\d,]+ records \([\d,]+/s\) to orders so far", line)
                            for line in progress)
    counts = [int(line.split()[1].replace(",", "")) for line in progress]
    assert counts == sorted(counts) and 0 < counts[0] and counts[-1] <= 20_000
    # A short run says nothing but its count.
    code, _, err = run("produce", "--log-dir", d, "--topic", "orders", stdin="one\ntwo\n")
    assert (code, err) == (0, "Produced 2 records to orders.\n")


# --- consume follows the log, as Kafka's console consumer --------------------------------------


def fill(d: str, count: int, topic: str = "events") -> None:
    with Broker(d, background=False) as b:
        b.create_topic(topic, 1)
        b.produce(topic, [b"m%d" % i for i in range(count)], partition=0)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_consume_follows_the_log_until_interrupted_then_prints_the_count(tmp_path, signum):
    d = str(tmp_path / "logs")
    fill(d, 5)
    consumer = SeglogProcess("consume", "--log-dir", d, "--topic", "events", "--from-beginning")
    try:
        assert consumer.wait_for_lines(5) == [f"m{i}" for i in range(5)]
        assert consumer.still_running_after(1.0)  # at the end of the log it waits for more
    finally:
        code = consumer.finish(signum)
    assert code == 0
    assert consumer.err == ["Processed a total of 5 messages"]


def test_consume_with_max_messages_waits_for_that_many(tmp_path):
    d = str(tmp_path / "logs")
    fill(d, 3)
    consumer = SeglogProcess("consume", "--log-dir", d, "--topic", "events", "--from-beginning",
                             "--max-messages", "5")
    try:
        assert consumer.wait_for_lines(3) == ["m0", "m1", "m2"]
        assert consumer.still_running_after(1.0)
    finally:
        code = consumer.finish(signal.SIGTERM)
    assert code == 0 and consumer.err == ["Processed a total of 3 messages"]


def test_consume_with_max_messages_minus_one_has_no_limit(tmp_path):
    d = str(tmp_path / "logs")
    fill(d, 20)
    code, out, err = run("consume", "--log-dir", d, "--topic", "events", "--from-beginning", "--max-messages", "-1",
                         "--timeout-ms", "200")
    assert code == 0 and out.splitlines() == [f"m{i}" for i in range(20)]
    assert err == "Processed a total of 20 messages\n"


def test_consume_with_timeout_ms_ends_when_no_message_came_for_that_long(tmp_path):
    d = str(tmp_path / "logs")
    fill(d, 4)
    started = time.monotonic()
    code, out, err = run("consume", "--log-dir", d, "--topic", "events", "--from-beginning", "--timeout-ms", "1500")
    elapsed = time.monotonic() - started
    assert code == 0 and out.splitlines() == ["m0", "m1", "m2", "m3"]
    assert err == "Processed a total of 4 messages\n"
    assert 1.5 <= elapsed < 60


def test_consume_prints_a_progress_line_on_a_big_range_when_its_output_is_not_a_terminal(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as b:
        b.create_topic("events", 1, {"segment.bytes": 100_000})
        for first in range(0, 30_000, 1000):
            b.produce("events", [b"m%d" % i for i in range(first, first + 1000)], partition=0)
    code, out, err = run("consume", "--log-dir", d, "--topic", "events", "--from-beginning", "--timeout-ms", "0",
                         "--reporting-interval", "1")
    assert code == 0 and len(out.splitlines()) == 30_000
    *progress, last = err.strip().splitlines()
    assert last == "Processed a total of 30000 messages"
    assert progress and all(re.fullmatch(r"Processed [\d,]+ messages \([\d,]+/s\) so far", line) for line in progress)


READ_ONLY_OPEN = "read_only" in inspect.signature(Broker.__init__).parameters


@pytest.mark.skipif(not READ_ONLY_OPEN, reason="following a log dir that another process appends to needs the "
                                               "read-only open of log dirs (Broker(log_dir, read_only=True))")
def test_consume_from_a_log_dir_follows_what_another_process_appends(tmp_path):
    d = str(tmp_path / "logs")
    fill(d, 2)
    consumer = SeglogProcess("consume", "--log-dir", d, "--topic", "events", "--from-beginning")
    try:
        assert consumer.wait_for_lines(2) == ["m0", "m1"]
        code, _, err = run("produce", "--log-dir", d, "--topic", "events", stdin="later 1\nlater 2\n")
        assert code == 0, err
        assert consumer.wait_for_lines(4)[2:] == ["later 1", "later 2"]
    finally:
        code = consumer.finish(signal.SIGINT)
    assert code == 0 and consumer.err == ["Processed a total of 4 messages"]


def test_consume_through_a_running_seglog_broker_follows_new_records(tmp_path):
    broker, bootstrap = start_broker(str(tmp_path / "logs"))
    try:
        assert run("topics", "create", "--bootstrap", bootstrap, "--topic", "events", "--partitions", "2")[0] == 0
        assert run("produce", "--bootstrap", bootstrap, "--topic", "events", "--partition", "0",
                   stdin="a\nb\n")[0] == 0
        consumer = SeglogProcess("consume", "--bootstrap", bootstrap, "--topic", "events", "--from-beginning")
        try:
            assert consumer.wait_for_lines(2) == ["a", "b"]
            assert run("produce", "--bootstrap", bootstrap, "--topic", "events", "--partition", "1",
                       stdin="c\nd\ne\n")[0] == 0
            assert consumer.wait_for_lines(5)[2:] == ["c", "d", "e"]
            assert consumer.still_running_after(0.5)
        finally:
            code = consumer.finish(signal.SIGINT)
        assert code == 0 and consumer.err == ["Processed a total of 5 messages"]
    finally:
        assert broker.finish(signal.SIGTERM) == 0


def test_a_broker_that_cannot_be_reached_is_named_in_the_error(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on once it is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = run("consume", "--bootstrap", f"127.0.0.1:{port}", "--topic", "events", timeout=60)
    assert code == 1
    assert err == f"seglog consume: the broker at 127.0.0.1:{port}: Connection refused\n"


def test_consume_reports_the_count_in_its_one_error_line_when_the_broker_goes_away(tmp_path):
    broker, bootstrap = start_broker(str(tmp_path / "logs"))
    try:
        assert run("topics", "create", "--bootstrap", bootstrap, "--topic", "events")[0] == 0
        assert run("produce", "--bootstrap", bootstrap, "--topic", "events", stdin="a\nb\n")[0] == 0
        consumer = SeglogProcess("consume", "--bootstrap", bootstrap, "--topic", "events", "--from-beginning")
        try:
            assert consumer.wait_for_lines(2) == ["a", "b"]
        finally:
            assert broker.finish(signal.SIGTERM) == 0
            code = consumer.finish(None)
    finally:
        broker.close()
    assert code == 1
    assert len(consumer.err) == 1
    assert consumer.err[0].startswith(f"seglog consume: Processed a total of 2 messages before failing: the broker "
                                      f"at {bootstrap}")


def test_consume_with_isolation_level_read_committed_prints_only_committed_records(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as b:
        b.create_topic("txns", 1, {"segment.bytes": "600"})
        writer = write_mixed_transactions(TransactionalWriter(b, "txns"))
        committed, data = writer.committed_values(), writer.data_values()
    code, out, err = run("consume", "--log-dir", d, "--topic", "txns", "--from-beginning", "--timeout-ms", "0",
                         "--isolation-level", "read_committed")
    assert code == 0, err
    assert out.splitlines() == committed and f"Processed a total of {len(committed)} messages" in err
    code, out, _ = run("consume", "--log-dir", d, "--topic", "txns", "--from-beginning", "--timeout-ms", "0")
    assert code == 0 and out.splitlines() == data  # read_uncommitted, Kafka's default: no marker printed
    code, _, err = run("consume", "--log-dir", d, "--topic", "txns", "--isolation-level", "dirty")
    assert code == 2 and "--isolation-level" in err


def test_consume_read_committed_from_a_log_dir_waits_at_an_open_transaction_until_it_ends(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as b:
        b.create_topic("txns", 1)
        writer = write_mixed_transactions(TransactionalWriter(b, "txns"))
        committed = writer.committed_values()
        consumer = SeglogProcess("consume", "--log-dir", d, "--topic", "txns", "--from-beginning",
                                 "--isolation-level", "read_committed")
        try:
            assert consumer.wait_for_lines(len(committed)) == committed
            assert consumer.still_running_after(0.5) and consumer.out == committed  # held at the open one
            writer.end(5, commit=True)
            everything = writer.committed_values()
            assert consumer.wait_for_lines(len(everything)) == everything
        finally:
            code = consumer.finish(signal.SIGINT)
    assert code == 0 and consumer.err == [f"Processed a total of {len(everything)} messages"]


def test_consume_read_committed_through_a_running_broker_prints_only_committed_records(tmp_path):
    from tests.broker_core.server.server_kit import start_broker as start_broker_server

    server = start_broker_server(tmp_path / "logs")
    try:
        server.broker.create_topic("txns", 1)
        writer = write_mixed_transactions(TransactionalWriter(server.broker, "txns"))
        code, out, err = run("consume", "--bootstrap", server.bootstrap_servers, "--topic", "txns",
                             "--from-beginning", "--timeout-ms", "2000", "--isolation-level", "read_committed")
        assert code == 0, err
        assert out.splitlines() == writer.committed_values()
    finally:
        server.shutdown()
