"""A topic into a Delta table as a Spark job (``seglog tables sync`` runs it through spark-submit):

    spark-submit --properties-file spark_conf/spark-defaults.conf --jars "$(ls .jvm/spark/*.jar | paste -sd,)" \\
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \\
        connector/tables_job.py --table /data/tables/orders --topic orders --log-dir /data/logs \\
        --value-format json --trigger available-now

The arguments are ``seglog tables sync``'s; the query runs until its trigger is
done (``once``, ``available-now``) or, with ``processing-time=…``, until the job is
stopped. ``connector.tables`` does the work.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # spark-submit puts this file's directory first on sys.path, where connector's modules would
    # shadow top-level ones; the package is imported from the project root instead.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    if os.path.dirname(_here) not in sys.path:
        sys.path.insert(0, os.path.dirname(_here))

import argparse
import logging
from typing import Sequence

from broker_core.cli.table_sync_arguments import add_sync_arguments
from broker_core.key_values import parse_key_values
from connector.option_error import SeglogOptionError

DELTA_CONF = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
              "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """``--source-option``s, after the client properties of ``--command-config`` as the source's ``kafka.*``
    options (as Spark's Kafka source takes them); a ``--source-option`` of the same name wins."""
    from broker_core.client.client_security import read_client_properties
    from broker_core.errors import InvalidConfigurationError
    from connector.client_options import PREFIX, SECURITY_KEYS

    options: dict[str, str] = {}
    if args.command_config:
        try:
            props = read_client_properties(args.command_config)
        except InvalidConfigurationError as exc:
            raise SeglogOptionError(str(exc)) from None
        options.update({PREFIX + key: value for key, value in props.items() if key in SECURITY_KEYS})
    options.update(parse_key_values(args.source_option, "--source-option"))
    return options


def sync_settings(args: argparse.Namespace) -> dict:
    """The keyword arguments of ``connector.tables.sync`` for parsed sync arguments."""
    return dict(table=args.table, topic=args.topic, topic_pattern=args.topic_pattern, log_dir=args.log_dir,
                bootstrap=args.bootstrap, mode=args.mode, value_format=args.value_format, trigger=args.trigger,
                partition_by=args.partition_by, checkpoint=args.checkpoint,
                dead_letter_table=args.dead_letter_table, max_offsets_per_trigger=args.max_offsets_per_trigger,
                optimize_interval=args.optimize_interval, vacuum_retain_hours=args.vacuum_retain,
                storage_options=parse_key_values(args.storage, "--storage"),
                source_options=source_options(args))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tables_job", description="A topic into a Delta table, exactly once.")
    add_sync_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    from pyspark.sql import SparkSession

    from connector import tables

    builder = SparkSession.builder.appName(f"seglog tables sync {args.table}")
    for key, value in DELTA_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        query = tables.sync(spark, **sync_settings(args))
    except SeglogOptionError as exc:
        print(f"seglog tables sync: {exc}", file=sys.stderr)
        return 2
    print(f"syncing into {args.table} (query {query.id}); Ctrl-C stops", file=sys.stderr, flush=True)
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
