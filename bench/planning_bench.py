"""CPU seconds of planning a ``format("seglog")`` query in a cold Spark Python planning worker, per worker.

Spark 4.2 plans a Python data source's query in Python workers, one daemon per worker module
(``pyspark.sql.worker.*``) forking a child per concurrent call; a child is reused by the next query while it is
warm (``spark.python.worker.reuse``, true by default) and is killed after a minute idle, so a session's first
query, and the first after a pause, pays for a fresh child: importing the worker module, then the connector
(``pyspark_seglog``, or ``connector.source`` where the pickled ``DataSource`` is loaded: the same imports), then
the calls. Each run here is such a child: a fresh interpreter that imports
``pyspark.daemon`` (untimed: the daemon has it before it forks), then, timed apart, the worker module,
``pyspark_seglog`` and the calls of that worker:

- ``lookup_data_sources``: no call, the import alone (once a session, finding ``pyspark_*`` modules);
- ``create_data_source``: the data source and its ``schema()`` (at ``load()`` or ``CREATE VIEW``);
- ``plan_data_source_read``: ``reader()`` and ``partitions()`` (a query without pushdown);
- ``data_source_pushdown_filters``: ``reader()``, ``pushFilters()`` (a ``timestamp >=`` filter) and
  ``partitions()`` (with ``spark.sql.python.filterPushdown.enabled``).

A topic of 4 partitions, 100,000 records (``pushdown_bench``'s records). Medians of ``--runs`` runs.
``--source DIR`` runs the children on another checkout's ``format``/``connector`` (to compare revisions).

Run ``python bench/planning_bench.py``; ``--quick`` for a smoke run, ``--markdown`` for rows to paste into
BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (argument_parser, date_and_command, environment, log, print_environment,  # noqa: E402
                          print_header, print_markdown_header, print_markdown_row, scratch_directory)
from pushdown_bench import PARTITIONS, TOPIC, write_log  # noqa: E402

RECORDS = 100_000
WORKERS = ("lookup_data_sources", "create_data_source", "plan_data_source_read", "data_source_pushdown_filters")
MODULES = ("numpy", "pyarrow", "pyarrow.compute", "fsspec", "format.arrow")

# One planning worker's child: what it imports, then seglog's share of its work. argv: worker, log dir, cut (ms).
_CHILD = """
import importlib, json, sys, time
import pyspark.daemon
worker, path, cut = sys.argv[1], sys.argv[2], int(sys.argv[3])
start = time.process_time()
importlib.import_module("pyspark.sql.worker." + worker)
imported = time.process_time()
import pyspark_seglog
connector = time.process_time()
import datetime as dt
from pyspark.sql.datasource import GreaterThanOrEqual
source = pyspark_seglog.DefaultSource({"path": path, "subscribe": "%s"})
if worker == "lookup_data_sources":
    pass
elif worker == "create_data_source":
    source.schema()
elif worker == "plan_data_source_read":
    source.reader(None).partitions()
else:
    from connector.options import parse_options
    from connector.source import PushdownBatchReader
    reader = PushdownBatchReader(parse_options(dict(source.options), streaming=False))
    reader.pushFilters([GreaterThanOrEqual(("timestamp",), dt.datetime.fromtimestamp(cut / 1000, dt.timezone.utc))])
    reader.partitions()
done = time.process_time()
print(json.dumps({"worker": imported - start, "import": connector - imported, "calls": done - connector,
                  "loaded": [m for m in %r if m in sys.modules]}))
""" % (TOPIC, MODULES)


def median(runs: list[dict], figure: str) -> float:
    return statistics.median(r[figure] for r in runs)


def run_child(worker: str, log_dir: str, cut_ms: int, source: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, "-c", _CHILD, worker, log_dir, str(cut_ms)], capture_output=True,
                          text=True, cwd=source, env=env, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {worker} child failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    p = argument_parser(__doc__, "3 runs", pin=False)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   help="the checkout whose format/connector the children run (default: this one)")
    args = p.parse_args(argv)
    if args.quick:
        args.runs = 3
    source = os.path.abspath(args.source)
    with scratch_directory("seglog-planning-bench-", None) as root:
        log_dir = os.path.join(root, "logs")
        log(f"writing {RECORDS:,} records over {PARTITIONS} partitions")
        _, cut_ms = write_log(log_dir, RECORDS // PARTITIONS)
        figures = {}
        for worker in WORKERS:
            log(f"  {worker}: {args.runs} runs")
            runs = [run_child(worker, log_dir, cut_ms, source) for _ in range(args.runs)]
            figures[worker] = runs
    env = environment([("source", source), ("log", f"{RECORDS:,} records, {PARTITIONS} partitions")],
                      with_memory=False)
    print_environment(env)
    print()
    print_header(f"{'planning worker':<30} {'worker import s':>15} {'seglog import s':>15} {'calls s':>8} "
                 f"{'loaded by then'}")
    for worker, runs in figures.items():
        print(f"{worker:<30} {median(runs, 'worker'):>15.3f} {median(runs, 'import'):>15.3f} "
              f"{median(runs, 'calls'):>8.3f} {', '.join(runs[0]['loaded']) or '-'}")
    if args.markdown:
        day, command = date_and_command(env)
        print_markdown_header(("planning worker (cold child)", "its own imports: CPU s (median)",
                               "importing `pyspark_seglog`: CPU s (median)", "seglog's calls: CPU s (median)",
                               "loaded by then", "command", "date"))
        for worker, runs in figures.items():
            print_markdown_row((f"`{worker}`", f"{median(runs, 'worker'):.3f}", f"{median(runs, 'import'):.3f}",
                                f"{median(runs, 'calls'):.3f}", ", ".join(runs[0]["loaded"]) or "-",
                                f"`{command}`", day))
    return 0


if __name__ == "__main__":
    sys.exit(main())
