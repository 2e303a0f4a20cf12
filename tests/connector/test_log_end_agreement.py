"""The CLI, the broker and Spark report one log end, whatever state the files are in."""

from __future__ import annotations

import os
import re

from broker_core import Broker
from broker_core.cli import main as seglog
from format import layout
from format.file_records import FileRecords
from format.index import OffsetIndex
from format.layout import TopicPartition
from format.record import SimpleRecord


def spark_end(spark, log_dir: str) -> tuple[int, int, int]:
    """(log end in the offsets view, records read, their largest offset + 1) through Spark."""
    view = (spark.read.format("seglog").option("path", log_dir).option("view", "offsets")
            .option("subscribe", "events").load().collect())
    rows = spark.read.format("seglog").option("path", log_dir).option("subscribe", "events").load()
    stats = rows.selectExpr("count(*) AS n", "max(offset) AS top").collect()[0]
    return view[0]["log_end_offset"], stats["n"], stats["top"] + 1


def cli_end(log_dir: str, capsys) -> int:
    assert seglog(["topics", "describe", "--log-dir", log_dir, "--topic", "events"]) == 0
    return int(re.search(r"LogEndOffset: (\d+)", capsys.readouterr().out).group(1))


def test_a_torn_active_segment_behind_a_clean_shutdown_marker_has_one_log_end_for_cli_broker_and_spark(
        tmp_path, spark, capsys):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("events", 1)
        for first in range(0, 4960, 40):
            broker.produce("events", [SimpleRecord(b"%d" % n + b"." * 60) for n in range(first, first + 40)],
                           partition=0)
    partition_dir = os.path.join(d, "events-0")
    log_path = os.path.join(partition_dir, layout.log_file_name(0))
    index = OffsetIndex(os.path.join(partition_dir, layout.offset_index_file_name(0)), 0, writable=False)
    last_entry = index.entry(index.entries - 1)
    index.close()
    # Torn under a clean-shutdown marker: the file ends inside the batch before the last index entry's.
    records = FileRecords.open(log_path, writable=False)
    torn_position, torn_base = [(p, h.base_offset) for p, h in records.batch_headers()
                                if p < last_entry.position][-1]
    records.close()
    with open(log_path, "r+b") as f:
        f.truncate(last_entry.position - 10)
    assert os.path.exists(os.path.join(d, layout.CLEAN_SHUTDOWN_FILE))

    assert cli_end(d, capsys) == torn_base
    assert spark_end(spark, d) == (torn_base, torn_base, torn_base)
    with Broker(d, background=False) as broker:
        assert broker.list_offsets("events", 0, "latest").offset == torn_base
        broker.produce("events", [SimpleRecord(b"%d" % torn_base)], partition=0)
    assert cli_end(d, capsys) == torn_base + 1
    assert spark_end(spark, d) == (torn_base + 1, torn_base + 1, torn_base + 1)
    assert [n for n in os.listdir(partition_dir) if layout.is_set_aside_file_name(n)] == [
        f"{layout.log_file_name(0)}.{torn_position}.corrupt"]


def test_the_spark_views_open_nothing_for_writing(tmp_path, spark):
    d = str(tmp_path / "logs")
    with Broker(d, background=False) as broker:
        broker.create_topic("events", 1)
        broker.produce("events", [SimpleRecord(b"v%d" % n) for n in range(10)], partition=0)
        broker.commit_offsets("etl", {TopicPartition("events", 0): 4})
    before = {os.path.join(r, n): os.stat(os.path.join(r, n)).st_mtime_ns for r, _, ns in os.walk(d) for n in ns}
    for view in ("offsets", "groups", "segments"):
        assert spark.read.format("seglog").option("path", d).option("view", view).load().collect()
    after = {os.path.join(r, n): os.stat(os.path.join(r, n)).st_mtime_ns for r, _, ns in os.walk(d) for n in ns}
    assert after == before
