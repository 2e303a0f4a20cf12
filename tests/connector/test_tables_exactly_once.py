"""A Delta table sync neither loses nor duplicates a row whatever point it dies at: a micro-batch run again
after its table commit is skipped by Delta (its query id and batch id are in the table), and the
consumer group ``seglog-tables-<table>`` is committed only after the table."""

from __future__ import annotations

import json
import os
import random
import time

import pytest
from deltalake import DeltaTable

from broker_core import group_offsets
from format.layout import TopicPartition
from tests.connector.tables_kit import (as_json, delta_rs_rows, expected_upsert, kill_session, produce_values,
                                        run_sync, seglog, spark_rows, start_seglog, wait_for_file)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def forget_last_batch(table: str) -> int:
    """The checkpoint's mark of the last micro-batch removed, as if the query died after the table commit
    and before Spark marked the batch done; the batch's id."""
    commits = os.path.join(table, "_seglog", "checkpoint", "commits")
    last = max(int(name) for name in os.listdir(commits) if name.isdigit())
    os.remove(os.path.join(commits, str(last)))
    os.remove(os.path.join(commits, f".{last}.crc"))
    return last


def committed(log_dir: str, table: str) -> dict[TopicPartition, int]:
    groups = group_offsets.read_committed_offsets(None, log_dir, f"seglog-tables-{table}")
    return {tp: c.offset for tp, c in groups.get(f"seglog-tables-{table}", {}).items()}


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_a_batch_run_again_after_its_table_commit_is_not_written_twice(spark, tmp_path, mode):
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "orders")
    records = [(f"k{n % 4}".encode(), as_json(n=n)) for n in range(12)]
    produce_values(log_dir, "orders", records)
    settings = dict(topic="orders", log_dir=log_dir, value_format="json", mode=mode, max_offsets_per_trigger=5)
    run_sync(spark, table, **settings)
    versions = DeltaTable(table).version()
    forget_last_batch(table)
    run_sync(spark, table, **settings)  # the forgotten batch runs again
    assert DeltaTable(table).version() == versions  # and Delta skipped it
    produce_values(log_dir, "orders", [(b"k9", as_json(n=12))], first_n=12)
    run_sync(spark, table, **settings)
    if mode == "append":
        expected = [(n, n) for n in range(13)]
    else:
        expected = [(8, 8), (9, 9), (10, 10), (11, 11), (12, 12)]
    assert spark_rows(spark, table, ["offset", "n"]) == expected
    assert delta_rs_rows(table, ["offset", "n"]) == expected
    assert committed(log_dir, table) == {TopicPartition("orders", 0): 13}


def test_a_sync_killed_between_the_table_commit_and_the_group_commit_goes_on_without_duplicates(spark, tmp_path):
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "orders")
    produce_values(log_dir, "orders", [(f"k{n}".encode(), as_json(n=n)) for n in range(10)])
    marker = str(tmp_path / "paused")
    argv = ["tables", "sync", "--table", table, "--topic", "orders", "--log-dir", log_dir, "--value-format", "json",
            "--max-offsets-per-trigger", "4", "--master", "local[2]"]
    sync = start_seglog(*argv, env=dict(os.environ, SEGLOG_SINK_PAUSE=f"tables-table-committed:{marker}"))
    try:
        wait_for_file(marker, sync)
    finally:
        kill_session(sync)
    # The first batch is in the table; the group is still where the batch started.
    assert delta_rs_rows(table, ["offset", "n"]) == [(n, n) for n in range(4)]
    assert committed(log_dir, table) == {TopicPartition("orders", 0): 0}
    # The same sync goes on from the killed job's checkpoint, here in the test's session.
    run_sync(spark, table, topic="orders", log_dir=log_dir, value_format="json", max_offsets_per_trigger=4)
    assert delta_rs_rows(table, ["offset", "n"]) == [(n, n) for n in range(10)]
    assert committed(log_dir, table) == {TopicPartition("orders", 0): 10}


KILLS = 5


def wait_for_new_batch(table: str, sync, timeout_s: float = 300) -> None:
    """Until the sync plans a micro-batch it had not planned before (a new file in its checkpoint's
    offsets), or ends."""
    offsets = os.path.join(table, "_seglog", "checkpoint", "offsets")
    known = set(os.listdir(offsets)) if os.path.isdir(offsets) else set()
    deadline = time.monotonic() + timeout_s
    while sync.poll() is None and not (os.path.isdir(offsets) and set(os.listdir(offsets)) - known):
        assert time.monotonic() < deadline, f"the sync planned no micro-batch in {timeout_s} s"
        time.sleep(0.1)


@pytest.mark.long
def test_a_sync_killed_at_random_points_again_and_again_leaves_the_table_exactly_as_the_topic_implies(tmp_path):
    """An upsert sync of JSON values, tombstones and bad records, SIGKILLed at random moments (seeded) while
    more records arrive, then run to its end: the latest value per key, each bad record once."""
    rng = random.Random(20)
    log_dir, table = str(tmp_path / "logs"), str(tmp_path / "accounts")
    argv = ["tables", "sync", "--table", table, "--topic", "accounts", "--log-dir", log_dir, "--value-format",
            "json", "--mode", "upsert", "--max-offsets-per-trigger", "6", "--master", "local[2]",
            # Delta rebuilds its log state in 50 tasks and MERGE shuffles into 8 partitions unless told:
            # on local[2], with a few rows a batch, 2 are enough.
            "--conf", "spark.databricks.delta.snapshotPartitions=2", "--conf", "spark.sql.shuffle.partitions=2"]
    records: list[tuple[int, int, bytes | None, bytes | None]] = []
    bad: list[int] = []
    kills = 0
    for attempt in range(3 * KILLS):
        if kills == KILLS:
            break
        batch = []
        for _ in range(18):
            n = len(records) + len(batch)
            key = f"a{rng.randrange(12)}".encode()
            roll = rng.random()
            value = None if roll < 0.15 else b"{broken" if roll < 0.2 else as_json(balance=n)
            batch.append((key, value))
        first = len(records)
        produce_values(log_dir, "accounts", batch, config={"cleanup.policy": "compact"}, first_n=first)
        records += [(0, first + i, key, value) for i, (key, value) in enumerate(batch)]
        bad += [first + i for i, (_, value) in enumerate(batch) if value == b"{broken"]
        sync = start_seglog(*argv)
        try:
            # Killed at a random moment after a micro-batch began: planning, decoding, writing, committing.
            wait_for_new_batch(table, sync)
            time.sleep(rng.uniform(0, 4))
            kills += sync.poll() is None
        finally:
            kill_session(sync)
    assert kills == KILLS, f"only {kills} of the runs were still going when killed"
    # The run to the end takes what is left in one micro-batch: the limit is a source option, not part of
    # the checkpoint, so a restart may change it (as with Spark's Kafka source).
    limit = argv.index("--max-offsets-per-trigger")
    done = seglog(*argv[:limit], *argv[limit + 2:], timeout=1200)
    assert done.returncode == 0, done.stderr[-5000:]
    good = [(p, o, k, v) for p, o, k, v in records if o not in bad]
    expected = sorted((key, offset, json.loads(value)["balance"])
                      for key, (_, offset, value) in expected_upsert(good).items())
    assert delta_rs_rows(table, ["key", "offset", "balance"]) == expected
    assert delta_rs_rows(f"{table}/_seglog/dead_letters", ["offset"]) == [(o,) for o in bad]
    assert committed(log_dir, table) == {TopicPartition("accounts", 0): len(records)}
