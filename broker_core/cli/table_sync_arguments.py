"""The arguments of a topic-to-Delta-table sync: ``seglog tables sync``'s, and the Spark job's it starts."""

from __future__ import annotations

import argparse
import os

from .broker_access import add_command_config_argument

DATE_COLUMN = "date"


def add_sync_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of a sync: ``seglog tables sync``'s and the Spark job's."""
    parser.add_argument("--table", required=True,
                        help="the Delta table: a path, or an s3:// (s3a://) URL with --storage")
    topics = parser.add_mutually_exclusive_group(required=True)
    topics.add_argument("--topic", help="the topic to sync")
    topics.add_argument("--topic-pattern", metavar="REGEX", help="sync every topic whose name matches")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--log-dir", help="the topic's log directory (a path, file:// or s3:// URL)")
    source.add_argument("--bootstrap", metavar="HOST:PORT", help="a running broker to read the topic from")
    parser.add_argument("--mode", choices=("append", "upsert"),
                        help="append: every record a row; upsert: the latest value per key, a tombstone deletes "
                             "(default: upsert for a cleanup.policy=compact topic, else append)")
    parser.add_argument("--value-format", default="raw", metavar="raw|json|json-schema=FILE",
                        help="how values become columns (default raw: one binary column, value)")
    parser.add_argument("--trigger", default="available-now", metavar="once|available-now|processing-time=INTERVAL",
                        help="when micro-batches run (default available-now: what is there now, then stop)")
    parser.add_argument("--partition-by", default=DATE_COLUMN, metavar="COLUMN|none",
                        help=f"the table's partition column (default {DATE_COLUMN}: the record's date, UTC)")
    parser.add_argument("--checkpoint", help="the query's checkpoint (default TABLE/_seglog/checkpoint)")
    parser.add_argument("--dead-letter-table",
                        help="where records that do not decode go (default TABLE/_seglog/dead_letters)")
    parser.add_argument("--max-offsets-per-trigger", type=int, metavar="N", help="records per micro-batch at most")
    parser.add_argument("--optimize-interval", metavar="DURATION",
                        help="run OPTIMIZE (small-file compaction) on the table after a micro-batch when this long "
                             "has passed since the last one, e.g. 1h (default: never)")
    parser.add_argument("--vacuum-retain", type=float, metavar="HOURS",
                        help="with --optimize-interval: VACUUM after each OPTIMIZE, keeping files removed less "
                             "than HOURS ago (Delta refuses less than 168 unless told otherwise)")
    parser.add_argument("--storage", action="append", metavar="KEY=VALUE",
                        help="an object store setting for a table (and log dir) in a bucket: key, secret, token, "
                             "endpoint_url (repeatable)")
    parser.add_argument("--source-option", action="append", metavar="KEY=VALUE",
                        help="an option of the seglog source, e.g. kafka.security.protocol=SSL (repeatable)")
    add_command_config_argument(parser)


def sync_argv(args: argparse.Namespace) -> list[str]:
    """``add_sync_arguments``' arguments of ``args`` as a command line again (for the Spark job)."""
    argv = ["--table", args.table]
    for flag in ("topic", "topic_pattern", "log_dir", "bootstrap", "mode", "value_format", "trigger",
                 "partition_by", "checkpoint", "dead_letter_table", "max_offsets_per_trigger", "optimize_interval",
                 "vacuum_retain"):
        value = getattr(args, flag)
        if value is not None:
            argv += ["--" + flag.replace("_", "-"), str(value)]
    for item in args.storage or ():
        argv += ["--storage", item]
    for item in args.source_option or ():
        argv += ["--source-option", item]
    if args.command_config:
        argv += ["--command-config", os.path.abspath(args.command_config)]
    return argv
