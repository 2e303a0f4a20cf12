"""What planning a ``format("seglog")`` query imports. Spark plans each query in Python workers of its own (the
data source made and its schema taken, the reader made, filters pushed, partitions planned), forked afresh for a
new session and after a minute idle, each importing ``pyspark_seglog``: what only the reading tasks need (Arrow,
numpy, the record decoder, CRC-32C) must not be imported there."""

import json
import subprocess
import sys

from tests.connector.conftest import T0, produce_numbered

# What only a task reading records needs: Arrow and its kernels, numpy, the decoders of whole chunks of batches
# into Arrow, the task's read. (Planning walks batch headers, checks the CRC of the log's last batch and, to
# find an offset by timestamp, decodes the records of one batch, one at a time: ``format.record``.)
READING_ONLY = ("pyarrow", "pyarrow.compute", "numpy", "format.arrow", "format.batch_table", "format.varint_arrays",
                "format.aborted_filter", "connector.reading", "connector.partition_read")

_PLAN = """
import datetime as dt, json, sys
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual
import pyspark_seglog
from connector.options import parse_options
from connector.source import PushdownBatchReader

options = {"path": sys.argv[1], "subscribe": "orders", "startingOffsets": "earliest"}
source = pyspark_seglog.DefaultSource(options)
schema = source.schema()
planned = {"plain": len(source.reader(schema).partitions())}
pushed = PushdownBatchReader(parse_options(options, streaming=False))
remaining = pushed.pushFilters([EqualTo(("partition",), 1),
                                GreaterThanOrEqual(("timestamp",), dt.datetime.fromtimestamp(int(sys.argv[2]) / 1000,
                                                                                             dt.timezone.utc))])
planned["pushed"] = len(pushed.partitions())
stream = source.streamReader(schema)
start = stream.initialOffset()
planned["stream"] = len(stream.partitions(start, stream.latestOffset(start, stream.getDefaultReadLimit())))
print(json.dumps({"planned": planned, "remaining": len(list(remaining)), "modules": sorted(sys.modules)}))
"""


def _plan_in_a_fresh_interpreter(log_dir: str, cut_ms: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _PLAN, log_dir, str(cut_ms)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_planning_a_batch_or_streaming_query_imports_nothing_only_reading_tasks_need(tmp_path):
    log_dir = str(tmp_path / "logs")
    produce_numbered(log_dir, "orders", 2, 300, batch=10, config={"segment.bytes": 4096, "index.interval.bytes": 256})
    found = _plan_in_a_fresh_interpreter(log_dir, T0 + 250 * 1000)
    assert found["planned"] == {"plain": 2, "pushed": 1, "stream": 2}
    assert found["remaining"] == 0
    assert [m for m in READING_ONLY if m in found["modules"]] == []


def test_a_reader_planned_without_the_reading_modules_still_reads_every_record(tmp_path):
    """The check above holds because reading loads its modules where it reads, not because they went away."""
    log_dir = str(tmp_path / "logs")
    produce_numbered(log_dir, "orders", 1, 30, batch=10)
    code = ("import sys, pyspark_seglog\n"
            "source = pyspark_seglog.DefaultSource({'path': sys.argv[1], 'subscribe': 'orders'})\n"
            "reader = source.reader(source.schema())\n"
            "rows = sum(b.num_rows for p in reader.partitions() for b in reader.read(p))\n"
            "print(rows, 'pyarrow' in sys.modules, 'format.arrow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, log_dir], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["30", "True", "True"]
