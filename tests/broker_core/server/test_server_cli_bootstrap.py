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


# --- topics alter and describe through a running broker ----------------------------------------


def overrides_of(bootstrap: str, topic: str) -> dict[str, str]:
    from broker_core.client.remote_broker import RemoteBroker

    with RemoteBroker(bootstrap) as remote:
        return remote.describe_topic(topic).config


def test_topics_alter_through_bootstrap_sets_the_config(bootstrap, capsys):
    run(capsys, "topics", "create", "--bootstrap", bootstrap, "--topic", "t", "--config", "segment.bytes=4096")
    code, out, err = run(capsys, "topics", "alter", "--bootstrap", bootstrap, "--topic", "t",
                         "--config", "retention.ms=60000", "--config", "cleanup.policy=compact")
    assert (code, err) == (0, "") and "Altered topic t." in out
    assert overrides_of(bootstrap, "t") == {"segment.bytes": "4096", "retention.ms": "60000",
                                            "cleanup.policy": "compact"}
    code, out, _ = run(capsys, "topics", "describe", "--bootstrap", bootstrap, "--topic", "t")
    assert "Configs: cleanup.policy=compact,retention.ms=60000,segment.bytes=4096" in out


def test_topics_alter_through_bootstrap_deletes_a_config_back_to_the_default(bootstrap, capsys):
    run(capsys, "topics", "create", "--bootstrap", bootstrap, "--topic", "t", "--config", "retention.ms=60000",
        "--config", "segment.bytes=4096")
    assert run(capsys, "topics", "alter", "--bootstrap", bootstrap, "--topic", "t",
               "--delete-config", "retention.ms")[0] == 0
    assert overrides_of(bootstrap, "t") == {"segment.bytes": "4096"}


def test_topics_alter_through_bootstrap_with_a_bad_value_fails_naming_the_key_and_changes_nothing(bootstrap, capsys):
    run(capsys, "topics", "create", "--bootstrap", bootstrap, "--topic", "t")
    code, out, err = run(capsys, "topics", "alter", "--bootstrap", bootstrap, "--topic", "t",
                         "--config", "retention.ms=60000", "--config", "segment.bytes=-5")
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "-5" in err and "segment.bytes" in err
    assert overrides_of(bootstrap, "t") == {}


def test_topics_alter_through_bootstrap_of_an_unknown_topic_fails_naming_it(bootstrap, capsys):
    code, _, err = run(capsys, "topics", "alter", "--bootstrap", bootstrap, "--topic", "missing",
                       "--config", "retention.ms=60000")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and "'missing'" in err


def test_topic_configs_change_through_alter_configs_on_a_broker_without_incremental_alter_configs(bootstrap):
    from broker_core.client.remote_broker import RemoteBroker
    from broker_core.protocol import ApiKey

    with RemoteBroker(bootstrap) as remote:
        remote.create_topic("t", 1, {"retention.ms": 60000, "segment.bytes": 4096})
        # What an older broker's ApiVersions answer lacks.
        del remote.client.broker_versions[int(ApiKey.INCREMENTAL_ALTER_CONFIGS)]
        overrides = remote.alter_topic_config("t", {"cleanup.policy": "compact"}, ["segment.bytes"])
    # AlterConfigs replaces every override: the one kept went along with the change.
    assert overrides == {"retention.ms": "60000", "cleanup.policy": "compact"}


def test_topics_describe_through_bootstrap_prints_real_sizes(broker_server, capsys):
    import os

    bootstrap = broker_server.bootstrap_servers
    run(capsys, "topics", "create", "--bootstrap", bootstrap, "--topic", "t", "--partitions", "2")
    lines = b"".join(b"k%d:%s\n" % (i, b"v" * (50 + i)) for i in range(40))
    assert run(capsys, "produce", "--bootstrap", bootstrap, "--topic", "t", "--key-separator", ":",
               stdin=lines)[0] == 0
    code, out, _ = run(capsys, "topics", "describe", "--bootstrap", bootstrap, "--topic", "t")
    assert code == 0
    log_dir = broker_server.broker.log_manager.log_dirs[0]
    rows = out.splitlines()[1:]
    assert len(rows) == 2
    for row in rows:
        fields = dict(f.split(": ", 1) for f in row.strip().split("\t"))
        assert "-1" not in fields.values()
        partition_dir = os.path.join(log_dir, f"t-{fields['Partition']}")
        on_disk = sum(os.path.getsize(os.path.join(partition_dir, f)) for f in os.listdir(partition_dir)
                      if f.endswith(".log"))
        assert int(fields["Size"]) == on_disk > 0
        assert "Segments" not in fields  # no Kafka API tells it: left out rather than made up
    assert sum(int(dict(f.split(": ", 1) for f in r.strip().split("\t"))["LogEndOffset"]) for r in rows) == 40
