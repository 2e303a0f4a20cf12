"""Topics as Delta tables: a streaming query from the ``seglog`` source into a Delta table, each record
exactly once.

    from connector import tables
    query = tables.sync(spark, table="/data/tables/orders", topic="orders", log_dir="/data/logs",
                        value_format="json")
    query.awaitTermination()

Each micro-batch goes through ``foreachBatch``:

1. values are decoded (``value_schema``): ``raw`` as a binary column, JSON into
   top-level columns; values that do not decode go to the dead-letter table with
   their topic, partition, offset, timestamp, key, value and the reason;
2. ``append``: every record a row (Delta's ``mergeSchema`` adds new JSON
   fields); ``upsert``: the batch reduced to the latest record per key
   (``latest_per_key``) and MERGEd on (topic, key), a tombstone deleting the row
   (new JSON fields are added first with ``ALTER TABLE ... ADD COLUMNS``);
3. every table commit is an idempotent Delta write keyed to the query's id and the
   batch id (``txnAppId``/``txnVersion`` on a DataFrame write, the session's
   ``spark.databricks.delta.write.txnAppId``/``txnVersion`` for MERGE): a batch
   that Spark runs again after a crash — committed to the table, not yet marked
   done in the checkpoint — is skipped by Delta, not written twice;
4. with an upkeep schedule (``--optimize-interval``), OPTIMIZE compacts the table's small
   files after a batch once the interval has passed, and VACUUM (``--vacuum-retain``)
   removes the files no version within the retention needs;
5. only after the batch is done does the source commit the consumer group
   ``seglog-tables-<table>`` to the batch's end offsets (its ``groupId``), so the
   group's lag is the table's, in ``seglog groups`` and every Kafka tool.

Where the query resumes is its checkpoint (``<table>/_seglog/checkpoint``).
Only this module and ``tables_job`` import Spark; the rest are plain functions.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from typing import Callable, Mapping

import fsspec

from format.fs import is_local_url

from .client_options import security_props
from .option_error import SeglogOptionError
from .sink_transaction import pause_at
from .table_options import DATE_COLUMN, SyncOptions, parse_sync_options
from .table_storage import fsspec_options
from .value_schema import (CORRUPT_RECORD, KAFKA_COLUMNS, column_name, describe_json_error, merge_schemas,
                           value_schema_of_table)

log = logging.getLogger(__name__)

DEAD_LETTER_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "error")
_TEXT = "__value_text"
_PARSED = "__value"
_TOMBSTONE = "__tombstone"


def cleanup_policies(*, topic: str | None = None, topic_pattern: str | None = None, log_dir: str | None = None,
                     bootstrap: str | None = None, client_props: Mapping[str, str] | None = None) -> dict[str, str]:
    """``cleanup.policy`` of each topic synced, from the local log dir's topic metadata (beside a running broker
    too) or from the broker at ``bootstrap``; topics not found are left out."""
    def wanted(name: str) -> bool:
        return name == topic if topic is not None else re.fullmatch(topic_pattern, name) is not None

    if bootstrap is not None:
        from .client_options import open_broker

        with open_broker(bootstrap, client_props or {}) as broker:
            return {name: broker.describe_topic(name).config.get("cleanup.policy", "delete")
                    for name in broker.list_topics() if wanted(name)}
    if not is_local_url(log_dir):
        raise SeglogOptionError(f"--mode: give it for a log dir in a bucket ({log_dir}): the topics' "
                                f"cleanup.policy, which decides it otherwise, is read from a local log dir or a "
                                f"broker")
    from broker_core.config import BrokerConfig
    from broker_core.log.topic_store import TopicStore

    root = log_dir.removeprefix("file://")
    defaults = BrokerConfig.from_props({"log.dirs": root}).log_config_defaults()
    return {t.name: ",".join(defaults.with_overrides(t.config).cleanup_policy)
            for t in TopicStore([root]).all() if wanted(t.name)}


def sync(spark, table: str, *, topic: str | None = None, topic_pattern: str | None = None,
         log_dir: str | None = None, bootstrap: str | None = None, mode: str | None = None,
         value_format: str = "raw", trigger: str = "available-now", partition_by: str | None = DATE_COLUMN,
         checkpoint: str | None = None, dead_letter_table: str | None = None,
         max_offsets_per_trigger: int | None = None, optimize_interval: str | None = None,
         vacuum_retain_hours: float | None = None, storage_options: Mapping[str, str] | None = None,
         source_options: Mapping[str, str] | None = None):
    """Start the streaming query that keeps the Delta table ``table`` fed from ``topic`` (or the topics
    matching ``topic_pattern``); returns the ``StreamingQuery``. ``mode`` defaults to ``upsert`` for a
    compacted topic, else ``append``. ``storage_options`` (``key``, ``secret``, ``endpoint_url``, ...) reach
    a table in a bucket (set on the session's Hadoop configuration; Hadoop's S3A on ``spark.jars``) and a
    log dir in one. See ``table_options`` for the other settings."""
    policies = {} if mode is not None else cleanup_policies(
        topic=topic, topic_pattern=topic_pattern, log_dir=log_dir, bootstrap=bootstrap,
        client_props=security_props(source_options or {}))
    options = parse_sync_options(table=table, topic=topic, topic_pattern=topic_pattern, log_dir=log_dir,
                                 bootstrap=bootstrap, mode=mode, cleanup_policies=policies,
                                 value_format=value_format, trigger=trigger, partition_by=partition_by,
                                 checkpoint=checkpoint, dead_letter_table=dead_letter_table,
                                 max_offsets_per_trigger=max_offsets_per_trigger,
                                 optimize_interval=optimize_interval, vacuum_retain_hours=vacuum_retain_hours,
                                 storage_options=storage_options, source_options=source_options)
    return start(spark, options)


def start(spark, options: SyncOptions):
    """The streaming query of a checked sync."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for name, value in options.hadoop_conf.items():
        hadoop.set(name, value)
    records = spark.readStream.format("seglog").options(**options.source_options).load()
    return (records.writeStream.foreachBatch(BatchWriter(options))
            .option("checkpointLocation", options.checkpoint)
            .trigger(**options.trigger.spark_arguments())
            .start())


def query_id(checkpoint: str, storage_options: Mapping[str, str] | None = None) -> str:
    """The streaming query's id, as its checkpoint keeps it across restarts (``<checkpoint>/metadata``)."""
    metadata = checkpoint.rstrip("/") + "/metadata"
    with fsspec.open(metadata, "r", **fsspec_options(checkpoint, storage_options or {})) as f:
        return json.loads(f.readline())["id"]


def latest_per_key(rows):
    """The rows that have the highest offset of their (topic, key): what a compacted topic keeps of the
    batch (a tombstone among them deletes the key). Keys compare per topic, so topics of a pattern stay
    apart."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    newest_first = Window.partitionBy("topic", "key").orderBy(F.col("offset").desc())
    return rows.withColumn("__rank", F.row_number().over(newest_first)).where("__rank = 1").drop("__rank")


# How many tasks Spark lists a table's files in (VACUUM's listing); 10000 unless set.
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


@contextlib.contextmanager
def _listing_parallelism(spark):
    """Spark's file listing in as many tasks as the session has cores, unless the user set it: its default
    of 10,000 tasks turns a VACUUM of a few files into a minute of empty tasks on a small cluster."""
    if spark.conf.get(_LISTING_PARALLELISM, None) is not None:
        yield
        return
    spark.conf.set(_LISTING_PARALLELISM, str(spark.sparkContext.defaultParallelism))
    try:
        yield
    finally:
        spark.conf.unset(_LISTING_PARALLELISM)


def _quoted(path: str) -> str:
    return ".".join(f"`{part.replace('`', '``')}`" for part in path.split("."))


class BatchWriter:
    """The ``foreachBatch`` function: one micro-batch into the table (and the dead-letter table)."""

    def __init__(self, options: SyncOptions, clock: Callable[[], float] = time.time):
        self.options = options
        self.clock = clock
        self._app_id: str | None = None
        self._last_optimize_ms: int | None = None

    @property
    def reserved(self) -> tuple[str, ...]:
        return KAFKA_COLUMNS + ((DATE_COLUMN,) if self.options.partition_by == DATE_COLUMN else ())

    def __call__(self, batch, batch_id: int) -> None:
        if self._app_id is None:
            self._app_id = query_id(self.options.checkpoint, self.options.storage_options)
        spark = batch.sparkSession
        batch = batch.persist()
        try:
            rows, dead = self._decode(spark, batch)
            # Dead letters first: a crash before the table commit runs the batch again, and Delta skips
            # the dead-letter commit it already has.
            self._write_dead_letters(dead, batch_id)
            pause_at("tables-dead-letters-committed")
            if self.options.mode == "append":
                wrote = self._append(rows, batch_id)
            else:
                wrote = self._upsert(spark, rows, batch_id)
            # Spark is not told yet: the batch is not marked done, the group not committed.
            pause_at("tables-table-committed")
            if wrote and self.options.upkeep is not None:
                self._upkeep(spark)
        finally:
            batch.unpersist()

    # decoding

    def _table_schema(self, spark):
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(spark, self.options.table):
            return None
        return spark.read.format("delta").load(self.options.table).schema

    def _value_schema_of_table(self, spark) -> dict | None:
        schema = self._table_schema(spark)
        return None if schema is None else value_schema_of_table(schema.jsonValue(), self.reserved)

    def _decode(self, spark, batch):
        """(rows in the table's columns plus ``__tombstone``, dead letters) of one batch."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType, StructField, StructType

        value_format = self.options.value_format
        kafka = [F.col(c) for c in KAFKA_COLUMNS]
        date = [F.to_date("timestamp").alias(DATE_COLUMN)] if self.options.partition_by == DATE_COLUMN else []
        tombstone = F.col("value").isNull().alias(_TOMBSTONE)
        if not value_format.is_json:
            rows = batch.select(F.col("value"), *kafka, *date, tombstone)
            return self._keyless_to_dead_letters(rows, None)
        text = batch.withColumn(_TEXT, F.col("value").cast("string"))
        if value_format.evolves:
            table = self._value_schema_of_table(spark)
            present = text.where(F.col("value").isNotNull()).select(_TEXT)
            inferred = spark.read.json(present).schema.jsonValue() if not present.isEmpty() else None
            merge = merge_schemas(table, inferred or {"type": "struct", "fields": []})
            if merge.added:
                log.info("%s: new value fields %s", self.options.table, ", ".join(merge.added))
            for path, table_type, batch_type in merge.conflicts:
                log.warning("%s: field %s is %s in the table, %s in this batch: values that do not fit go to "
                            "the dead-letter table", self.options.table, path, table_type, batch_type)
            value_schema = merge.schema
        else:
            value_schema = value_format.schema
        parse = StructType.fromJson(value_schema).add(StructField(CORRUPT_RECORD, StringType()))
        parsed = text.withColumn(_PARSED, F.from_json(_TEXT, parse, {"mode": "PERMISSIVE",
                                                                     "columnNameOfCorruptRecord": CORRUPT_RECORD}))
        bad = F.col("value").isNotNull() & (F.col(_PARSED).isNull() | F.col(f"{_PARSED}.{CORRUPT_RECORD}").isNotNull())
        fields = [F.col(f"{_PARSED}.`{f['name']}`").alias(column_name(f["name"], self.reserved))
                  for f in value_schema["fields"]]
        rows = parsed.where(~bad).select(*fields, *kafka, *date, tombstone)
        schema_text = json.dumps(value_schema)
        describe = F.udf(lambda value: describe_json_error(value, json.loads(schema_text)), StringType(),
                         useArrow=False)
        dead = parsed.where(bad).select("topic", "partition", "offset", "timestamp", "key", "value",
                                        describe(F.col(_TEXT)).alias("error"))
        rows, keyless = self._keyless_to_dead_letters(rows, dead)
        return rows, keyless

    def _keyless_to_dead_letters(self, rows, dead):
        """In upsert mode a record without a key has no row to update: it is a dead letter too."""
        from pyspark.sql import functions as F

        if self.options.mode != "upsert":
            return rows, dead
        keyless = (rows.where(F.col("key").isNull()).select(
            "topic", "partition", "offset", "timestamp", "key",
            F.lit(None).cast("binary").alias("value"),
            F.lit("no key: an upsert table holds one row per key").alias("error")))
        return rows.where(F.col("key").isNotNull()), keyless if dead is None else dead.unionByName(keyless)

    # writing

    def _write_dead_letters(self, dead, batch_id: int) -> None:
        if dead is None or dead.isEmpty():
            return
        (dead.write.format("delta").mode("append").option("txnAppId", self._app_id)
         .option("txnVersion", batch_id).save(self.options.dead_letter_table))

    def _append(self, rows, batch_id: int) -> bool:
        rows = rows.drop(_TOMBSTONE)
        if rows.isEmpty():
            return False
        (rows.write.format("delta").mode("append").option("txnAppId", self._app_id).option("txnVersion", batch_id)
         .option("mergeSchema", "true").partitionBy(*self.options.partition_columns).save(self.options.table))
        return True

    def _upsert(self, spark, rows, batch_id: int) -> bool:
        from delta.tables import DeltaTable

        if rows.isEmpty():
            return False
        latest = latest_per_key(rows)
        table = self.options.table
        if not DeltaTable.isDeltaTable(spark, table):
            (latest.where(~latest[_TOMBSTONE]).drop(_TOMBSTONE).write.format("delta").mode("append")
             .option("txnAppId", self._app_id).option("txnVersion", batch_id)
             .partitionBy(*self.options.partition_columns).save(table))
            return True
        self._add_new_columns(spark, latest)
        columns = [c for c in latest.columns if c != _TOMBSTONE]
        assignments = {f"`{c}`": f"s.`{c}`" for c in columns}
        conf = spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", self._app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        conf.set("spark.databricks.delta.write.txnVersion.autoReset.enabled", "true")
        try:
            (DeltaTable.forPath(spark, table).alias("t")
             .merge(latest.alias("s"), "t.topic = s.topic AND t.key = s.key")
             .whenMatchedDelete(condition=f"s.{_TOMBSTONE}")
             .whenMatchedUpdate(set=assignments)
             .whenNotMatchedInsert(condition=f"NOT s.{_TOMBSTONE}", values=assignments)
             .execute())
        finally:
            conf.unset("spark.databricks.delta.write.txnAppId")
            conf.unset("spark.databricks.delta.write.txnVersion")
        return True

    # upkeep

    def _upkeep(self, spark) -> None:
        """OPTIMIZE (and VACUUM) the table when the upkeep schedule says it is time. The last OPTIMIZE is
        looked up in the table's history once, so a restarted job keeps the schedule."""
        from delta.tables import DeltaTable

        upkeep, table = self.options.upkeep, self.options.table
        if not DeltaTable.isDeltaTable(spark, table):
            return
        now_ms = int(self.clock() * 1000)
        if self._last_optimize_ms is None:
            # The schedule goes on from the last OPTIMIZE, or starts now.
            history = DeltaTable.forPath(spark, table).history(100).where("operation = 'OPTIMIZE'")
            last = history.selectExpr("max(unix_millis(timestamp))").first()[0]
            self._last_optimize_ms = last if last is not None else now_ms
        if not upkeep.due(self._last_optimize_ms, now_ms):
            return
        spark.sql(f"OPTIMIZE delta.`{table}`")
        if upkeep.vacuum_retain_hours is not None:
            with _listing_parallelism(spark):
                spark.sql(f"VACUUM delta.`{table}` RETAIN {upkeep.vacuum_retain_hours} HOURS")
        self._last_optimize_ms = now_ms
        log.info("%s: optimized%s", table, " and vacuumed" if upkeep.vacuum_retain_hours is not None else "")

    def _add_new_columns(self, spark, rows) -> None:
        """Columns of ``rows`` the table lacks, added before the MERGE (which assigns columns by name). A
        crash after this and before the MERGE leaves only the columns: they are there when the batch runs
        again."""
        existing = {f.name.lower() for f in self._table_schema(spark).fields}
        new = [f for f in rows.schema.fields if f.name != _TOMBSTONE and f.name.lower() not in existing]
        if new:
            ddl = ", ".join(f"{_quoted(f.name)} {f.dataType.simpleString()}" for f in new)
            spark.sql(f"ALTER TABLE delta.`{self.options.table}` ADD COLUMNS ({ddl})")
            log.info("%s: added columns %s", self.options.table, ddl)

