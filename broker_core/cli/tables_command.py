"""``seglog tables``: topics as Delta tables.

    seglog tables sync --table URL --topic T | --topic-pattern REGEX  --log-dir D | --bootstrap H:P
                       [--value-format raw|json|json-schema=FILE] [--mode append|upsert]
                       [--trigger once|available-now|processing-time=30s] [--partition-by COLUMN|none]
                       [--master M] [--conf KEY=VALUE ...]
    seglog tables list --log-dir D | --bootstrap H:P          the tables fed, their topic, lag, version, rows
    seglog tables describe --table URL --log-dir D | --bootstrap H:P
    seglog tables optimize --table URL [--vacuum-retain HOURS]   OPTIMIZE (small-file compaction) and VACUUM now

``sync`` runs the connector's job (``connector/tables_job.py``) through
spark-submit with Delta Lake's jars; ``list`` and ``describe`` find the tables by
their consumer groups (``seglog-tables-<table>``) and read the Delta logs with
delta-rs, without Spark; ``optimize`` compacts and vacuums a table with
delta-rs. This package does not import the connector: the command hands the
parsed arguments to ``connector.tables_cli`` when it runs.
"""

from __future__ import annotations

import argparse

from .table_sync_arguments import add_sync_arguments

def run(args: argparse.Namespace) -> int:
    from connector.tables_cli import run_tables  # the Spark side; it starts spark-submit, imports no Spark

    return run_tables(args)


def add_parser(commands, with_log_dir) -> None:
    tables = commands.add_parser("tables", help="topics as Delta tables: sync, list, describe")
    actions = tables.add_subparsers(dest="action", required=True)
    sync = actions.add_parser("sync", help="feed a Delta table from a topic (a Spark job)")
    add_sync_arguments(sync)
    sync.add_argument("--master", help="the Spark master (default: spark-submit's, local[*])")
    sync.add_argument("--conf", action="append", metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    listing = actions.add_parser("list", help="the tables fed from this log dir's or broker's topics")
    with_log_dir(listing)
    listing.add_argument("--storage", action="append", metavar="KEY=VALUE",
                         help="a filesystem option for the tables, e.g. endpoint_url=http://127.0.0.1:8333")
    describe = actions.add_parser("describe", help="one table: its group's lag, last commit, rows and schema")
    with_log_dir(describe)
    describe.add_argument("--table", required=True, help="the Delta table")
    describe.add_argument("--storage", action="append", metavar="KEY=VALUE",
                          help="a filesystem option for the table")
    optimize = actions.add_parser("optimize", help="compact a table's small files now (OPTIMIZE), and VACUUM")
    optimize.add_argument("--table", required=True, help="the Delta table")
    optimize.add_argument("--vacuum-retain", type=float, metavar="HOURS",
                          help="then VACUUM, keeping files removed less than HOURS ago (Delta's default 168)")
    optimize.add_argument("--storage", action="append", metavar="KEY=VALUE",
                          help="a filesystem option for the table")
    tables.set_defaults(run=run)
