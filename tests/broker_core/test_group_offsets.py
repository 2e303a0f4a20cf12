import json
import os
import subprocess
import sys

import pytest

from broker_core import Broker
from broker_core.cli import main as seglog
from broker_core.clock import MockTime
from broker_core.coordinator.group import OffsetAndMetadata
from broker_core.coordinator.group.broker_store import ensure_offsets_topic
from broker_core.errors import (GroupIdNotFoundError, InvalidRequestError, LogDirInUseError,
                                OffsetMetadataTooLargeError, OffsetOutOfRangeError, UnknownTopicOrPartitionError)
from broker_core.group_offsets import (commit_offsets, delete_group, describe_consumer_group, list_groups,
                                       read_committed_offsets, read_offsets_topic, reset_offsets)
from broker_core.offsets_topic import (OFFSETS_TOPIC, GroupMetadataKey, GroupMetadataValue, encode_group_metadata,
                                       partition_for_group)
from format.fs import filesystem_for, storage_options_from
from format.layout import TopicPartition as TP
from format.record import SimpleRecord
from format.record_batch import build_batch
from offsets_kit import commit_in_transaction, end_transaction

SEGLOG = os.path.join(os.path.dirname(sys.executable), "seglog")
PARTITIONS = 5  # offsets.topic.num.partitions for these tests: small, quick to create
CONFIG = {"offsets.topic.num.partitions": PARTITIONS}
NOW = 1_700_000_000_000


def open_broker(d, **kwargs):
    return Broker(d if isinstance(d, list) else str(d), CONFIG, clock=MockTime(current_time_ms=NOW),
                  background=False, **kwargs)


def groups_on_distinct_partitions(n):
    found = {}
    for i in range(100):
        found.setdefault(partition_for_group(f"group-{i}", PARTITIONS), f"group-{i}")
    assert len(found) >= n
    return [found[p] for p in sorted(found)][:n]


@pytest.fixture()
def log_dir(tmp_path):
    d = tmp_path / "logs"
    with open_broker(d) as b:
        b.create_topic("orders", 3)
        b.produce("orders", [b"o%d" % i for i in range(10)], partition=0)
        b.produce("orders", [b"o%d" % i for i in range(4)], partition=1)
    return str(d)


# --- the topic ---------------------------------------------------------------------


def test_the_offsets_topic_is_created_compacted_with_the_configured_partitions(tmp_path):
    with Broker(str(tmp_path / "logs"), {**CONFIG, "offsets.topic.segment.bytes": 1 << 20},
                background=False) as b:
        assert ensure_offsets_topic(b) == PARTITIONS
        assert ensure_offsets_topic(b) == PARTITIONS  # a second call keeps the topic
        description = b.describe_topic(OFFSETS_TOPIC)
    assert description.partition_count == PARTITIONS
    assert description.config == {"cleanup.policy": "compact", "segment.bytes": str(1 << 20),
                                  "compression.type": "producer"}


def test_a_commit_lands_in_the_groups_partition(log_dir):
    with open_broker(log_dir) as b:
        commit_offsets(b, "orders-app", {TP("orders", 0): 4})
        ends = {p.partition: p.log_end_offset for p in b.describe_topic(OFFSETS_TOPIC).partitions}
    wanted = partition_for_group("orders-app", PARTITIONS)
    assert ends == {p: 1 if p == wanted else 0 for p in range(PARTITIONS)}


# --- commit and read back --------------------------------------------------------------


def test_committed_offsets_read_back_from_the_files(log_dir):
    with open_broker(log_dir) as b:
        commit_offsets(b, "app", {TP("orders", 0): 3, TP("orders", 1): 1}, metadata="run-1")
    assert read_committed_offsets(None, log_dir) == {"app": {
        TP("orders", 0): OffsetAndMetadata(3, "run-1", NOW, None),
        TP("orders", 1): OffsetAndMetadata(1, "run-1", NOW, None)}}


def test_the_latest_commit_wins(log_dir):
    with open_broker(log_dir) as b:
        commit_offsets(b, "app", {TP("orders", 0): 3, TP("orders", 1): 1})
        commit_offsets(b, "app", {TP("orders", 0): 7}, metadata="second", timestamp_ms=NOW + 5)
        commit_offsets(b, "app", {TP("orders", 0): 5}, metadata="third", timestamp_ms=NOW + 9)
    offsets = read_committed_offsets(None, log_dir, "app")["app"]
    assert offsets == {TP("orders", 0): OffsetAndMetadata(5, "third", NOW + 9),
                       TP("orders", 1): OffsetAndMetadata(1, "", NOW)}


def test_tombstones_delete_the_groups_offsets(log_dir):
    with open_broker(log_dir) as b:
        commit_offsets(b, "app", {TP("orders", 0): 3, TP("orders", 1): 1})
        commit_offsets(b, "other", {TP("orders", 0): 2})
        delete_group(b, "app")
        assert b.committed_offsets("app") == {}
        assert b.list_groups() == ["other"]
        with pytest.raises(GroupIdNotFoundError, match="'app'"):
            delete_group(b, "app")
    assert read_committed_offsets(None, log_dir) == {"other": {TP("orders", 0): OffsetAndMetadata(2, "", NOW)}}


def test_a_group_committed_again_after_deletion_starts_afresh(log_dir):
    with open_broker(log_dir) as b:
        commit_offsets(b, "app", {TP("orders", 0): 3, TP("orders", 1): 1})
        b.delete_group("app")
        commit_offsets(b, "app", {TP("orders", 1): 2})
        assert b.committed_offsets("app") == {TP("orders", 1): OffsetAndMetadata(2, "", NOW)}


def test_several_groups_on_different_partitions_are_read_apart(log_dir):
    groups = groups_on_distinct_partitions(3)
    with open_broker(log_dir) as b:
        for i, group in enumerate(groups):
            b.commit_offsets(group, {TP("orders", 0): i + 1})
        b.commit_offsets(groups[0], {TP("orders", 2): 0})
    everything = read_committed_offsets(None, log_dir)
    assert everything == {
        groups[0]: {TP("orders", 0): OffsetAndMetadata(1, "", NOW), TP("orders", 2): OffsetAndMetadata(0, "", NOW)},
        groups[1]: {TP("orders", 0): OffsetAndMetadata(2, "", NOW)},
        groups[2]: {TP("orders", 0): OffsetAndMetadata(3, "", NOW)}}
    for group in groups:
        assert read_committed_offsets(None, log_dir, group) == {group: everything[group]}
    assert list_groups(log_dir) == sorted(groups)


def test_reading_one_group_reads_only_its_partition(log_dir):
    groups = groups_on_distinct_partitions(2)
    with open_broker(log_dir) as b:
        for group in groups:
            b.commit_offsets(group, {TP("orders", 0): 1})
    wanted = partition_for_group(groups[1], PARTITIONS)
    # Damage every other offsets partition: reading the group must not notice.
    for p in range(PARTITIONS):
        if p != wanted:
            with open(os.path.join(log_dir, f"{OFFSETS_TOPIC}-{p}", "00000000000000000000.log"), "wb") as f:
                f.write(b"\xff" * 100)
    assert read_committed_offsets(None, log_dir, groups[1]) == {
        groups[1]: {TP("orders", 0): OffsetAndMetadata(1, "", NOW)}}


def test_commits_spread_over_many_segments_replay_in_offset_order(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, {**CONFIG, "offsets.topic.segment.bytes": 300}, clock=MockTime(current_time_ms=NOW),
                background=False) as b:
        b.create_topic("orders", 2)
        for i in range(40):
            b.commit_offsets("app", {TP("orders", i % 2): i})
        partition = partition_for_group("app", PARTITIONS)
        assert b.describe_topic(OFFSETS_TOPIC).partitions[partition].segments > 5
    assert {tp.partition: c.offset for tp, c in read_committed_offsets(None, d, "app")["app"].items()} == \
        {0: 38, 1: 39}


def test_a_cleaned_segment_waiting_as_swap_file_is_read(log_dir):
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 2})
    directory = os.path.join(log_dir, f"{OFFSETS_TOPIC}-{partition_for_group('app', PARTITIONS)}")
    # The moment of a cleaner swap when the old segment is gone and the cleaned one not yet renamed.
    os.rename(os.path.join(directory, "00000000000000000000.log"),
              os.path.join(directory, "00000000000000000000.log.swap"))
    assert read_committed_offsets(None, log_dir, "app") == {"app": {TP("orders", 0): OffsetAndMetadata(2, "", NOW)}}


def test_an_unknown_group_reads_as_no_offsets(log_dir):
    with open_broker(log_dir) as b:
        assert b.committed_offsets("nobody") == {}
    assert read_committed_offsets(None, log_dir, "nobody") == {}


def test_committed_offsets_survive_a_broker_restart(log_dir):
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 6}, metadata="m")
    with open_broker(log_dir) as b:
        assert b.committed_offsets("app") == {TP("orders", 0): OffsetAndMetadata(6, "m", NOW)}
        b.commit_offsets("app", {TP("orders", 0): 8})
    with open_broker(log_dir) as b:
        assert b.committed_offsets("app")[TP("orders", 0)].offset == 8


def test_offsets_are_read_while_a_broker_holds_the_directory(log_dir):
    reader = ("import json, sys; from broker_core.group_offsets import read_committed_offsets, list_groups; "
              "offsets = read_committed_offsets(None, sys.argv[1], 'app'); "
              "print(json.dumps({'groups': list_groups(sys.argv[1]), "
              "'offsets': {str(tp): c.offset for tp, c in offsets['app'].items()}}))")
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 2, TP("orders", 1): 4})
        with pytest.raises(LogDirInUseError):
            open_broker(log_dir)  # the broker holds the lock...
        result = subprocess.run([sys.executable, "-c", reader, log_dir], capture_output=True, text=True,
                                timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        assert result.returncode == 0, result.stderr  # ...and readers need none
        assert json.loads(result.stdout) == {"groups": ["app"], "offsets": {"orders-0": 2, "orders-1": 4}}
        b.commit_offsets("app", {TP("orders", 0): 9})
        # The broker reads its own commits back from the files too.
        assert b.committed_offsets("app")[TP("orders", 0)].offset == 9


def test_reading_a_kafka_log_dir_without_seglogs_topic_store(log_dir):
    # Kafka keeps topic metadata elsewhere; the partition count then comes from the directories.
    group = groups_on_distinct_partitions(PARTITIONS)[-1]
    with open_broker(log_dir) as b:
        b.commit_offsets(group, {TP("orders", 1): 3})
    os.remove(os.path.join(log_dir, "seglog-topics.json"))
    assert read_committed_offsets(None, log_dir, group) == {group: {TP("orders", 1): OffsetAndMetadata(3, "", NOW)}}


def test_a_broker_with_several_log_dirs_finds_groups_in_each(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    groups = groups_on_distinct_partitions(PARTITIONS)
    with open_broker(dirs) as b:
        b.create_topic("orders", 1)
        for group in groups:
            b.commit_offsets(group, {TP("orders", 0): 0})
        found_in = {d: os.listdir(d) for d in dirs}
        assert all(any(n.startswith(OFFSETS_TOPIC) for n in names) for names in found_in.values())
        assert b.list_groups() == sorted(groups)
        for group in groups:
            assert b.committed_offsets(group) == {TP("orders", 0): OffsetAndMetadata(0, "", NOW)}


def test_offsets_committed_in_a_transaction_count_once_committed(log_dir):
    orders_0 = TP("orders", 0)
    with open_broker(log_dir) as b:
        commit_in_transaction(b, "txn-app", {orders_0: 5}, producer_id=1)
        assert b.committed_offsets("txn-app") == {}  # open transaction: not yet
        end_transaction(b, "txn-app", 1)
        assert b.committed_offsets("txn-app")[orders_0].offset == 5
        commit_in_transaction(b, "txn-app", {orders_0: 9}, producer_id=2)
        end_transaction(b, "txn-app", 2, commit=False)
        assert b.committed_offsets("txn-app")[orders_0].offset == 5
        # A plain commit appended after a transaction's commit record wins over it.
        commit_in_transaction(b, "txn-app", {orders_0: 7}, producer_id=3)
        b.commit_offsets("txn-app", {orders_0: 8})
        end_transaction(b, "txn-app", 3)
        assert b.committed_offsets("txn-app")[orders_0].offset == 8


def test_a_transaction_committed_after_a_plain_commit_of_an_older_record_applies(log_dir):
    orders_0, orders_1 = TP("orders", 0), TP("orders", 1)
    with open_broker(log_dir) as b:
        b.commit_offsets("txn-app", {orders_0: 2, orders_1: 2})
        commit_in_transaction(b, "txn-app", {orders_0: 6, orders_1: 6}, producer_id=1)
        # Newer than the transaction's record of orders-0 only.
        b.commit_offsets("txn-app", {orders_0: 4})
        end_transaction(b, "txn-app", 1)
        assert {tp: o.offset for tp, o in b.committed_offsets("txn-app").items()} == {orders_0: 4, orders_1: 6}


def test_a_transaction_open_in_one_partition_is_not_ended_by_a_marker_in_another(log_dir):
    first, second = groups_on_distinct_partitions(2)
    with open_broker(log_dir) as b:
        commit_in_transaction(b, first, {TP("orders", 0): 3}, producer_id=1)
        commit_in_transaction(b, second, {TP("orders", 0): 4}, producer_id=1)
        end_transaction(b, second, 1)
        loaded = read_offsets_topic(None, log_dir)
    assert {g: {tp: o.offset for tp, o in offsets.items()} for g, offsets in loaded.offsets.items()} == {
        second: {TP("orders", 0): 4}}


def test_group_metadata_records_are_replayed(log_dir):
    value = GroupMetadataValue("consumer", 4, "range", None, NOW, ())
    with open_broker(log_dir) as b:
        ensure_offsets_topic(b)
        key_bytes, value_bytes = encode_group_metadata(GroupMetadataKey("classic"), value)
        b.produce_batches(OFFSETS_TOPIC, partition_for_group("classic", PARTITIONS),
                          build_batch([SimpleRecord(value_bytes, key_bytes, NOW)]))
        assert b.list_groups() == ["classic"]  # a group with metadata but no offsets yet
        b.delete_group("classic")
        assert b.list_groups() == []
    loaded = read_offsets_topic(None, log_dir)
    assert loaded.groups == {} and loaded.offsets == {}


# --- checks ---------------------------------------------------------------------------


def test_reset_offsets_must_stay_within_the_log(log_dir):
    with open_broker(log_dir) as b:
        reset_offsets(b, "app", {TP("orders", 0): 10, TP("orders", 1): 0})
        assert {tp: c.offset for tp, c in b.committed_offsets("app").items()} == {TP("orders", 0): 10,
                                                                                 TP("orders", 1): 0}
        with pytest.raises(OffsetOutOfRangeError, match=r"offset 11 for orders-0 is outside the log \[0, 10\]"):
            reset_offsets(b, "app", {TP("orders", 0): 11})
        with pytest.raises(UnknownTopicOrPartitionError):
            reset_offsets(b, "app", {TP("orders", 7): 0})


def test_negative_offsets_and_oversized_metadata_are_refused(log_dir):
    with open_broker(log_dir) as b:
        with pytest.raises(InvalidRequestError, match="offset -1 for orders-0 is negative"):
            b.commit_offsets("app", {TP("orders", 0): -1})
        with pytest.raises(OffsetMetadataTooLargeError, match="4097 characters"):
            b.commit_offsets("app", {TP("orders", 0): 1}, metadata="x" * 4097)
        assert b.list_groups() == []


def test_describe_reports_lag_against_the_log_end(log_dir):
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 4, TP("orders", 1): 4, TP("gone", 0): 1})
    rows = describe_consumer_group(log_dir, "app").partitions
    assert [(r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag) for r in rows] == [
        ("gone", 0, 1, None, None), ("orders", 0, 4, 10, 6), ("orders", 1, 4, 4, 0)]
    with pytest.raises(GroupIdNotFoundError):
        describe_consumer_group(log_dir, "nobody")


def test_committed_offsets_are_read_from_an_s3_bucket(log_dir, s3_bucket):
    bucket, options = s3_bucket
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 3})
        b.commit_offsets("app", {TP("orders", 0): 5})
    opts = storage_options_from({f"storage.{k}": v for k, v in options.items()})
    fs, root = filesystem_for(f"s3://{bucket}/logs", opts)
    for dirpath, _, names in os.walk(log_dir):
        for name in names:
            local = os.path.join(dirpath, name)
            fs.put_file(local, f"{root}/{os.path.relpath(local, log_dir)}")
    url = f"s3://{bucket}/logs"
    assert read_committed_offsets(None, url, "app", storage_options=opts) == {
        "app": {TP("orders", 0): OffsetAndMetadata(5, "", NOW)}}
    assert list_groups(url, opts) == ["app"]


# --- the CLI ---------------------------------------------------------------------------


def table(out: str) -> list[list[str]]:
    lines = [line.split() for line in out.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells[:2] == ["GROUP", "TOPIC"])
    return lines[start:]


def test_cli_describe_shows_the_lag_of_each_partition(log_dir, capsys):
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 4, TP("orders", 1): 1})
    assert seglog(["groups", "describe", "--log-dir", log_dir, "--group", "app"]) == 0
    rows = table(capsys.readouterr().out)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                       "HOST", "CLIENT-ID"]
    assert rows[1:] == [["app", "orders", "0", "4", "10", "6", "-", "-", "-"],
                        ["app", "orders", "1", "1", "4", "3", "-", "-", "-"]]


def test_cli_list_and_describe_work_beside_a_running_broker(log_dir):
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 9})
        b.commit_offsets("audit", {TP("orders", 1): 0})
        listed = subprocess.run([SEGLOG, "groups", "list", "--log-dir", log_dir], capture_output=True, text=True,
                                timeout=60)
        described = subprocess.run([SEGLOG, "groups", "describe", "--log-dir", log_dir, "--group", "app"],
                                   capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and listed.stdout.splitlines() == ["app", "audit"]
    assert described.returncode == 0, described.stderr
    assert table(described.stdout)[1] == ["app", "orders", "0", "9", "10", "1", "-", "-", "-"]


def test_cli_reset_offsets_is_a_dry_run_until_executed(log_dir, capsys):
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 4, TP("orders", 1): 1})
    assert seglog(["groups", "reset-offsets", "--log-dir", log_dir, "--group", "app", "--topic", "orders",
                   "--to-latest"]) == 0
    captured = capsys.readouterr()
    assert table(captured.out) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["app", "orders", "0", "10"],
                                   ["app", "orders", "1", "4"], ["app", "orders", "2", "0"]]
    assert "--execute" in captured.err
    assert {tp.partition: c.offset for tp, c in read_committed_offsets(None, log_dir, "app")["app"].items()} == \
        {0: 4, 1: 1}
    assert seglog(["groups", "reset-offsets", "--log-dir", log_dir, "--group", "app", "--topic", "orders:0",
                   "--to-earliest", "--execute"]) == 0
    assert table(capsys.readouterr().out)[1:] == [["app", "orders", "0", "0"]]
    assert seglog(["groups", "reset-offsets", "--log-dir", log_dir, "--group", "app", "--topic", "orders:1",
                   "--to-offset", "99", "--execute"]) == 0
    captured = capsys.readouterr()
    assert table(captured.out)[1:] == [["app", "orders", "1", "4"]]  # clamped to the log end
    assert "Value will be set to 4" in captured.err
    assert {tp.partition: c.offset for tp, c in read_committed_offsets(None, log_dir, "app")["app"].items()} == \
        {0: 0, 1: 4}


def test_cli_delete_removes_the_group(log_dir, capsys):
    with open_broker(log_dir) as b:
        b.commit_offsets("app", {TP("orders", 0): 4})
    assert seglog(["groups", "delete", "--log-dir", log_dir, "--group", "app"]) == 0
    assert seglog(["groups", "list", "--log-dir", log_dir]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["Deletion of requested consumer groups ('app') was successful."]


@pytest.mark.parametrize("args, code, message", [
    (["describe", "--group", "nobody"], 1, "GROUP_ID_NOT_FOUND"),
    (["delete", "--group", "nobody"], 1, "GROUP_ID_NOT_FOUND"),
    (["describe"], 2, "needs --group"),  # a command line that cannot work: 2, as argparse exits
    (["reset-offsets", "--group", "app", "--topic", "orders"], 2, "needs --to-earliest"),
    (["reset-offsets", "--group", "app", "--topic", "missing", "--to-latest"], 1, "UNKNOWN_TOPIC_OR_PARTITION"),
])
def test_cli_group_errors_print_one_line_and_exit_1_or_2_for_usage(log_dir, args, code, message):
    result = subprocess.run([SEGLOG, "groups", args[0], "--log-dir", log_dir, *args[1:]], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == code
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
