"""``seglog tables`` at work: the sync started as a Spark job, and the tables fed listed and described.

A table fed by a sync is known by its consumer group, ``seglog-tables-<table>``
(``table_options``): listing the groups of a log dir or broker lists the tables,
with their topics and lag; the Delta log (read with delta-rs, no Spark) gives
the last commit, the row count and the schema. No Spark is imported here: the
sync is a child process (spark-submit).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass

from broker_core.cli.arguments import CommandError, UsageError
from broker_core.cli.broker_access import open_broker
from broker_core.cli.compact_command import spark_submit_prefix
from broker_core.cli.tables import aligned
from broker_core.cli.table_sync_arguments import sync_argv
from broker_core.key_values import parse_key_values

from .option_error import SeglogOptionError
from .table_options import SyncOptions, group_id_for, parse_sync_options, table_of_group
from .table_storage import delta_rs_options
from .tables_job import DELTA_CONF as DELTA_SESSION_CONF, sync_settings
from .value_schema import type_name

TABLES_JOB_MODULE = "connector.tables_job"
DELTA_CONF = tuple(f"{name}={value}" for name, value in DELTA_SESSION_CONF.items())


def _absolute(location: str | None) -> str | None:
    return location if location is None or "://" in location else os.path.abspath(location)


def sync_command(args: argparse.Namespace, options: SyncOptions) -> tuple[list[str], str]:
    """The spark-submit command of the sync job (``options``, its settings checked), and the directory to run
    it from."""
    from jvm.classpath import JarsMissingError, spark_jars

    spec = importlib.util.find_spec(TABLES_JOB_MODULE)
    job = spec.origin
    root = os.path.dirname(os.path.dirname(os.path.abspath(job)))
    for name in ("table", "log_dir", "checkpoint", "dead_letter_table"):
        setattr(args, name, _absolute(getattr(args, name)))
    try:
        jars = spark_jars(s3=bool(options.hadoop_conf))
    except JarsMissingError as exc:
        raise CommandError(f"Delta Lake's or Hadoop S3A's jars are missing: {exc}") from None
    command = spark_submit_prefix(root, master=args.master, conf=[*DELTA_CONF, *(args.conf or ())])
    return command + ["--jars", jars, job, *sync_argv(args)], root


def check_sync(args: argparse.Namespace) -> SyncOptions:
    """The sync's settings checked here, before spark-submit starts a JVM: a usage error names the option."""
    try:
        return parse_sync_options(**sync_settings(args))
    except SeglogOptionError as exc:
        raise UsageError(str(exc)) from None


def run_sync(args: argparse.Namespace) -> int:
    command, root = sync_command(args, check_sync(args))
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.call(command, cwd=root, env=env)


@dataclass(frozen=True)
class TableSummary:
    """What a Delta table's log says of it."""

    version: int
    last_commit_ms: int
    operation: str
    rows: int
    schema: tuple[tuple[str, str], ...]  # (column, type)

    @property
    def last_commit(self) -> str:
        moment = datetime.datetime.fromtimestamp(self.last_commit_ms / 1000, datetime.timezone.utc)
        return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _type_text(data_type) -> str:
    """A delta-rs type as Spark's DDL shows it (``long``, ``array<struct<key:string,value:binary>>``)."""
    kind = getattr(data_type, "type", None)
    if isinstance(kind, str) and kind not in ("array", "map", "struct"):
        return kind
    return type_name(json.loads(data_type.to_json()))


def _table_storage(args: argparse.Namespace) -> dict[str, str]:
    """``--storage`` as delta-rs takes it."""
    try:
        return delta_rs_options(parse_key_values(args.storage, "--storage"))
    except SeglogOptionError as exc:
        raise UsageError(str(exc)) from None


def table_summary(table: str, storage_options: dict[str, str] | None = None) -> TableSummary | None:
    """The table's version, last commit, row count (from the files' statistics) and schema; None where no
    Delta table is (yet)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(table, storage_options):
        return None
    delta = DeltaTable(table, storage_options=storage_options)
    last = delta.history(1)[0]
    adds = delta.get_add_actions(flatten=True)
    rows = sum(n or 0 for n in adds.column("num_records").to_pylist()) if adds.num_rows else 0
    schema = tuple((f.name, _type_text(f.type)) for f in delta.schema().fields)
    return TableSummary(delta.version(), int(last["timestamp"]), str(last.get("operation", "")), rows, schema)


def _fed_tables(args: argparse.Namespace) -> list[str]:
    from broker_core import group_offsets

    if args.bootstrap:
        with open_broker(args) as broker:
            groups = broker.list_groups()
    else:
        groups = group_offsets.list_groups(args.log_dir)
    return [t for t in map(table_of_group, groups) if t is not None]


def _group(args: argparse.Namespace, table: str):
    from broker_core import group_offsets

    if args.bootstrap:
        with open_broker(args) as broker:
            return broker.describe_group(group_id_for(table))
    return group_offsets.describe_consumer_group(args.log_dir, group_id_for(table))


def _lag(description) -> int | None:
    lags = [p.lag for p in description.partitions]
    return None if any(lag is None for lag in lags) else sum(lags)


def list_tables(args: argparse.Namespace) -> int:
    storage = _table_storage(args)
    rows: list[tuple] = [("TABLE", "TOPIC", "LAG", "VERSION", "LAST-COMMIT", "ROWS")]
    for table in _fed_tables(args):
        group = _group(args, table)
        summary = table_summary(table, storage)
        topics = ",".join(sorted({p.topic for p in group.partitions})) or None
        rows.append((table, topics, _lag(group), *((summary.version, summary.last_commit, summary.rows)
                                                   if summary else (None, None, None))))
    if len(rows) == 1:
        print("No tables are fed from here.")
        return 0
    print("\n".join(aligned(rows)))
    return 0


def describe_table(args: argparse.Namespace) -> int:
    from broker_core.errors import GroupIdNotFoundError

    table = _absolute(args.table)
    storage = _table_storage(args)
    summary = table_summary(table, storage)
    try:
        group = _group(args, table)
    except GroupIdNotFoundError:
        raise CommandError(f"no table {table} is fed from here: there is no consumer group "
                           f"{group_id_for(table)!r}") from None
    print(f"Table: {table}")
    print(f"Group: {group.group}")
    print(f"Topic: {','.join(sorted({p.topic for p in group.partitions}))}\tLag: {_lag(group)}")
    if summary is None:
        print("Version: -\t(no commit yet)")
    else:
        print(f"Version: {summary.version}\tLastCommit: {summary.last_commit}\tOperation: {summary.operation}\t"
              f"Rows: {summary.rows}")
        print("Schema:")
        print("\n".join("  " + line for line in aligned(summary.schema)))
    print("\n" + "\n".join(aligned([("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")]
                                   + [(p.topic, p.partition, p.current_offset, p.log_end_offset, p.lag)
                                      for p in group.partitions])))
    return 0


def optimize_table(args: argparse.Namespace) -> int:
    """OPTIMIZE (bin-packing small files) and, with ``--vacuum-retain``, VACUUM, with delta-rs."""
    from deltalake import DeltaTable

    table = _absolute(args.table)
    storage = _table_storage(args)
    if not DeltaTable.is_deltatable(table, storage):
        raise CommandError(f"{table} is not a Delta table")
    delta = DeltaTable(table, storage_options=storage)
    metrics = delta.optimize.compact()
    print(f"Optimized {table}: {metrics['numFilesRemoved']} files compacted into {metrics['numFilesAdded']} "
          f"(version {delta.version()}).")
    if args.vacuum_retain is not None:
        removed = delta.vacuum(retention_hours=int(args.vacuum_retain), dry_run=False,
                               enforce_retention_duration=False)
        print(f"Vacuumed {table}: {len(removed)} files no version within {args.vacuum_retain:g} hours needs "
              f"were removed.")
    return 0


def run_tables(args: argparse.Namespace) -> int:
    if args.action == "sync":
        return run_sync(args)
    if args.action == "list":
        return list_tables(args)
    if args.action == "optimize":
        return optimize_table(args)
    return describe_table(args)
