"""What a topic-to-Delta-table sync is asked to do, checked once before Spark starts.

``seglog tables sync``, ``connector.tables.sync`` and ``connector/tables_job.py``
all go through ``parse_sync_options``; every problem is a ``SeglogOptionError``
naming the option (as the command line spells it) and the value that was wrong.

Where things go, for a table at ``TABLE``:

- the streaming query's checkpoint: ``TABLE/_seglog/checkpoint`` (inside the
  table's directory, which Delta readers and ``VACUUM`` leave alone: its name
  starts with an underscore);
- records that do not decode: the dead-letter Delta table ``TABLE/_seglog/dead_letters``;
- the table's progress: the consumer group ``seglog-tables-TABLE``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping

from broker_core.cli.table_sync_arguments import DATE_COLUMN
from format.fs import is_local_url

from .option_error import SeglogOptionError
from .options import _duration_ms
from .table_storage import check_storage, hadoop_conf, is_s3
from .value_schema import ValueFormat, parse_value_format

MODES = ("append", "upsert")
TRIGGERS = ("once", "available-now", "processing-time=<interval>")
GROUP_PREFIX = "seglog-tables-"
SYNC_DIR = "_seglog"
NO_PARTITIONING = "none"


@dataclass(frozen=True)
class Trigger:
    """When micro-batches run: ``once``, ``available-now`` or every ``processing_time_ms``."""

    kind: str  # "once" | "available-now" | "processing-time"
    processing_time_ms: int | None = None

    def spark_arguments(self) -> dict:
        """The keyword arguments of ``DataStreamWriter.trigger``."""
        if self.kind == "once":
            return {"once": True}
        if self.kind == "available-now":
            return {"availableNow": True}
        return {"processingTime": f"{self.processing_time_ms} milliseconds"}


def parse_trigger(text: str) -> Trigger:
    value = text.strip().lower()
    if value in ("once", "available-now"):
        return Trigger(value)
    name, _, interval = value.partition("=")
    if name == "processing-time" and interval:
        ms = _duration_ms({"--trigger processing-time": interval}, "--trigger processing-time", 0)
        if ms <= 0:
            raise SeglogOptionError(f"--trigger {text}: the interval must be longer than 0")
        return Trigger("processing-time", ms)
    raise SeglogOptionError(f"--trigger must be one of {', '.join(TRIGGERS)} (e.g. processing-time=30s), "
                            f"not {text!r}")


def table_url(table: str) -> str:
    """The table's location as the sync names it: an absolute path for a local table, else the URL."""
    if not table or not table.strip():
        raise SeglogOptionError("--table is empty: give the Delta table's location (a path or a URL)")
    table = table.strip()
    if "://" in table:
        scheme = table.split("://", 1)[0]
        if scheme == "file":
            return os.path.abspath(table[len("file://"):])
        return table.rstrip("/")
    return os.path.abspath(table)


def group_id_for(table: str) -> str:
    """The consumer group whose committed offsets are the table's progress."""
    return GROUP_PREFIX + table_url(table)


def table_of_group(group_id: str) -> str | None:
    """The table a ``seglog-tables-…`` group feeds; None for any other group."""
    return group_id[len(GROUP_PREFIX):] if group_id.startswith(GROUP_PREFIX) else None


def _inside(table: str, *parts: str) -> str:
    return "/".join([table.rstrip("/"), SYNC_DIR, *parts])


def resolve_mode(given: str | None, cleanup_policies: Mapping[str, str]) -> str:
    """``given``, else ``upsert`` where every topic synced is compacted (``cleanup.policy`` holds ``compact``)
    and ``append`` otherwise."""
    if given is not None:
        mode = given.strip().lower()
        if mode not in MODES:
            raise SeglogOptionError(f"--mode must be one of {', '.join(MODES)}, not {given!r}")
        return mode
    compacted = [t for t, policy in cleanup_policies.items() if "compact" in policy.split(",")]
    return "upsert" if cleanup_policies and len(compacted) == len(cleanup_policies) else "append"


@dataclass(frozen=True)
class Upkeep:
    """OPTIMIZE (small-file compaction) after a micro-batch once ``interval_ms`` passed since the last one,
    then VACUUM keeping ``vacuum_retain_hours`` of history (None: no VACUUM)."""

    interval_ms: int
    vacuum_retain_hours: float | None = None

    def due(self, last_optimize_ms: int, now_ms: int) -> bool:
        return now_ms - last_optimize_ms >= self.interval_ms


def parse_upkeep(optimize_interval: str | None, vacuum_retain_hours: float | None) -> Upkeep | None:
    if optimize_interval is None:
        if vacuum_retain_hours is not None:
            raise SeglogOptionError("--vacuum-retain goes with --optimize-interval (VACUUM runs after OPTIMIZE)")
        return None
    ms = _duration_ms({"--optimize-interval": optimize_interval}, "--optimize-interval", 0)
    if ms <= 0:
        raise SeglogOptionError(f"--optimize-interval must be longer than 0, not {optimize_interval!r}")
    if vacuum_retain_hours is not None and vacuum_retain_hours < 0:
        raise SeglogOptionError(f"--vacuum-retain must be 0 hours or more, not {vacuum_retain_hours}")
    return Upkeep(ms, vacuum_retain_hours)


@dataclass(frozen=True)
class SyncOptions:
    """One sync, checked. ``source_options`` are the ``seglog`` source's options (path or
    kafka.bootstrap.servers, subscribe or subscribePattern, ...)."""

    table: str
    mode: str
    value_format: ValueFormat
    trigger: Trigger
    partition_by: str | None
    checkpoint: str
    dead_letter_table: str
    group_id: str
    source_options: Mapping[str, str] = field(default_factory=dict)
    upkeep: Upkeep | None = None
    # The object store's settings (seglog's names) where the table, its checkpoint or dead letters are in one.
    storage_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def locations(self) -> tuple[str, str, str]:
        return self.table, self.checkpoint, self.dead_letter_table

    @property
    def hadoop_conf(self) -> dict[str, str]:
        """What Spark's Hadoop configuration needs to reach the sync's locations (none on a local disk)."""
        return hadoop_conf(self.storage_options) if any(map(is_s3, self.locations)) else {}

    @property
    def partition_columns(self) -> list[str]:
        return [self.partition_by] if self.partition_by else []


def parse_sync_options(*, table: str, topic: str | None = None, topic_pattern: str | None = None,
                       log_dir: str | None = None, bootstrap: str | None = None, mode: str | None = None,
                       cleanup_policies: Mapping[str, str] | None = None, value_format: str = "raw",
                       trigger: str = "available-now", partition_by: str | None = DATE_COLUMN,
                       checkpoint: str | None = None, dead_letter_table: str | None = None,
                       max_offsets_per_trigger: int | None = None, optimize_interval: str | None = None,
                       vacuum_retain_hours: float | None = None,
                       storage_options: Mapping[str, str] | None = None,
                       source_options: Mapping[str, str] | None = None) -> SyncOptions:
    """Check a sync's settings; ``cleanup_policies`` (topic -> ``cleanup.policy``) decides the default mode."""
    url = table_url(table)
    if (topic is None) == (topic_pattern is None):
        raise SeglogOptionError("give one of --topic or --topic-pattern")
    if topic is not None and (not topic.strip() or "," in topic):
        raise SeglogOptionError(f"--topic must name one topic (--topic-pattern for several), not {topic!r}")
    if topic_pattern is not None:
        try:
            re.compile(topic_pattern)
        except re.error as exc:
            raise SeglogOptionError(f"--topic-pattern {topic_pattern!r} is not a regular expression: {exc}") \
                from None
    if (log_dir is None) == (bootstrap is None):
        raise SeglogOptionError("give one of --log-dir (the topic's log directory) or --bootstrap (a running "
                                "broker, host:port)")
    if max_offsets_per_trigger is not None and max_offsets_per_trigger <= 0:
        raise SeglogOptionError(f"--max-offsets-per-trigger must be a positive integer, not "
                                f"{max_offsets_per_trigger}")
    partition = None
    if partition_by is not None and partition_by.strip().lower() != NO_PARTITIONING:
        partition = partition_by.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", partition):
            raise SeglogOptionError(f"--partition-by must be a column name ({DATE_COLUMN}, partition, a value "
                                    f"field) or {NO_PARTITIONING}, not {partition_by!r}")
    source = {"startingOffsets": "earliest", "includeHeaders": "true",
              **({"subscribe": topic.strip()} if topic is not None else {"subscribePattern": topic_pattern}),
              **({"path": log_dir} if log_dir is not None else {"kafka.bootstrap.servers": bootstrap})}
    if max_offsets_per_trigger is not None:
        source["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
    storage = dict(storage_options or {})
    check_storage(storage)
    if log_dir is not None and not is_local_url(log_dir):
        source.update({f"storage.{name}": value for name, value in storage.items()})
    source.update(source_options or {})
    group = GROUP_PREFIX + url
    source["groupId"] = group
    # The checkpoint decides where a restarted query goes on; the group only shows it.
    return SyncOptions(table=url, mode=resolve_mode(mode, cleanup_policies or {}),
                       value_format=parse_value_format(value_format), trigger=parse_trigger(trigger),
                       partition_by=partition, checkpoint=checkpoint or _inside(url, "checkpoint"),
                       dead_letter_table=dead_letter_table or _inside(url, "dead_letters"), group_id=group,
                       source_options=source, upkeep=parse_upkeep(optimize_interval, vacuum_retain_hours),
                       storage_options=storage)
