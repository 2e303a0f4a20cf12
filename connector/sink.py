"""The ``seglog`` sink: ``df.write.format("seglog")`` and ``writeStream.format("seglog")``.

Columns and options follow Spark's Kafka sink, so a pipeline moves by changing
``format("kafka")`` to ``format("seglog")``:

    (df.selectExpr("key", "value").write.format("seglog")
       .option("path", "/data/logs").option("topic", "orders").mode("append").save())

* ``value`` (binary or string, required; null writes a tombstone), ``key``
  (binary or string, optional, nullable), ``topic`` (string; the option
  ``topic`` overrides it), ``partition`` (int; null or absent: Kafka's
  partitioner, murmur2 of the key and sticky for null keys), ``headers``
  (``array<struct<key: string, value: binary>>``; string values go as UTF-8)
  and ``timestamp`` (timestamp; otherwise the broker's time). Other columns
  are ignored.
* Options: ``path`` (the local log directory, required), ``topic``,
  ``compression`` (or Kafka's ``kafka.compression.type``: none, gzip, snappy,
  lz4, zstd; default none), and the broker settings that govern a missing
  topic, with Kafka's names and defaults: ``auto.create.topics.enable``
  (true: a topic written to is created) and ``num.partitions`` (1).

How a write runs. One process owns a log directory (the broker's lock file)
and Spark's tasks run in separate Python workers, so tasks never open a
broker. Each task stages the sink columns of its Arrow batches in an Arrow IPC
file under ``<path>/.seglog-staging/<writer id>/<file id>.arrow`` and returns
the file's name; the driver's ``commit`` opens the embedded ``Broker``, checks
every destination (a missing topic is created when auto.create.topics.enable
is true and refused otherwise; partitions must be in range) before appending
anything, then creates the missing topics and produces the records
in batches of up to 10,000 records and 1 MiB (less when the topic's
``max.message.bytes`` is lower), and deletes the staging files; ``abort``
deletes them. So the executors must reach the log directory's filesystem
(local mode, or a shared mount), and no broker may hold the directory while a
write commits. A driver that dies mid-write leaves its staging files; the next
write removes them (``connector.staging``).

Guarantees. A batch ``write`` is at least once, as Spark's Kafka sink: a
commit that fails midway (a crash, a full disk) leaves the records appended so
far. With the option ``transactional.id`` (``kafka.transactional.id``) it is one
transaction: all of it commits, or nothing does for ``read_committed`` readers.

``writeStream`` is exactly once. Spark runs a micro-batch's tasks in parallel on
executors and then calls the driver's ``commit(messages, batchId)`` once; the
tasks only stage rows, and the driver writes the whole micro-batch in one
transaction of a transactional id named for the query
(``connector.sink_transaction``), committing ``batchId`` in it as the offset of
the query's group for every partition it wrote. The data and the batch id are
thus one atomic step: a driver killed before it leaves an open transaction
that the next run's producer (same transactional id, new epoch) aborts before
it writes, and a replayed micro-batch whose batch id the group holds already
is skipped. Executors never produce, so no partial task output is ever visible.

With ``kafka.bootstrap.servers`` (or ``bootstrap``) the driver writes through
that broker (a running ``seglog broker`` holds the log dir's lock) with the
protocol's transactional producer (``RemoteBroker.producer``); tasks still stage
under ``path``.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (ArrayType, BinaryType, ByteType, DataType, IntegerType, LongType, ShortType,
                               StringType, StructType, TimestampType)

from broker_core import Broker
from broker_core.client.remote_broker import RemoteBroker
from broker_core.client.remote_producer import RemoteProducer
from broker_core.producer import Producer
from broker_core.errors import UnknownTopicOrPartitionError
from format import layout
from format.compression import CompressionType
from format.errors import InvalidTopicError, UnsupportedCompressionError
from format.layout import TopicPartition
from format.log_dir import LogDirectory
from format.record import Header, SimpleRecord

from .client_options import client_security, open_broker, security_props
from .options import SeglogOptionError, _bootstrap
from .sink_transaction import (SinkTransaction, committed_batch_id, pause_at,
                               query_transaction, transactional_id_option)
from .staging import (StagedBatches, new_staging_dir, read_staged, reclaim_staging, remove_staging,
                      stage_batches, staged_messages)

log = logging.getLogger(__name__)

SINK_COLUMNS = ("key", "value", "topic", "partition", "headers", "timestamp")
# Records per produce call: large batches, bounded memory on the driver.
CHUNK_ROWS = 10_000
# Bytes per batch when the topic allows more: the Java producer's default
# max.request.size, and the broker's default max.message.bytes.
MAX_BATCH_BYTES = 1024 * 1024
_BATCH_HEADER_BYTES = 61
# A record's framing beyond its payload: length, attributes, timestamp and
# offset deltas, key and value lengths, header count (varints at their widest).
_RECORD_OVERHEAD = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_OVERHEAD = 10
_READER_OPTIONS = ("subscribe", "subscribepattern", "assign")


class SinkDataError(ValueError):
    """A row the sink cannot write; the message names the column."""


# --- options and schema (driver) -------------------------------------------------


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options and which of its columns the input has."""

    log_dir: str
    topic: str | None
    compression: CompressionType
    columns: tuple[str, ...]  # the sink columns present in the input, in SINK_COLUMNS order
    broker_config: Mapping[str, str] = field(default_factory=dict)  # auto.create.topics.enable, num.partitions
    transaction: SinkTransaction | None = None  # None: at-least-once, plain appends
    bootstrap: str | None = None  # the broker that owns log_dir (host:port): commits go through it
    # kafka.security.protocol, kafka.ssl.*, kafka.sasl.* without the prefix: how bootstrap is reached.
    client_props: Mapping[str, str] = field(default_factory=dict, repr=False)


def _type_name(data_type: DataType) -> str:
    return data_type.simpleString()


def _is_bytes_like(data_type: DataType) -> bool:
    return isinstance(data_type, (BinaryType, StringType))


def _is_headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in data_type.elementType.fields}
    return (set(fields) == {"key", "value"} and isinstance(fields["key"], StringType)
            and _is_bytes_like(fields["value"]))


def local_log_dir(path: str | None, *, may_create: bool = False) -> str:
    """The local directory a ``path`` option names; the embedded broker writes only local files.

    With ``may_create`` (topics are auto-created) a missing directory is created by the broker.
    """
    if not path or not path.strip():
        raise SeglogOptionError("option path is required: the local log directory to append to")
    if "://" in path:
        scheme, rest = path.split("://", 1)
        if scheme.lower() not in ("file", "local"):
            raise SeglogOptionError(f"option path={path!r}: the seglog sink appends through the embedded broker, "
                                    f"which writes local files only; give a local log directory")
        path = rest
    if os.path.exists(path) and not os.path.isdir(path):
        raise SeglogOptionError(f"option path={path!r} is a file, not a log directory")
    if not may_create and not os.path.isdir(path):
        raise SeglogOptionError(f"option path={path!r}: log directory does not exist (create its topics "
                                f"first, or leave auto.create.topics.enable true)")
    return os.path.abspath(path)


_BROKER_OPTIONS = ("auto.create.topics.enable", "num.partitions")


def _broker_config(opts: Mapping[str, str]) -> dict[str, str]:
    """The broker settings among the options, checked as the broker checks them."""
    from broker_core.config import BrokerConfig
    from broker_core.errors import InvalidConfigurationError

    given = {name: opts[name] for name in _BROKER_OPTIONS if name in opts}
    try:
        BrokerConfig.from_props({**given, "log.dirs": "."})
    except InvalidConfigurationError as exc:
        raise SeglogOptionError(f"option {exc}") from None
    return given


def auto_creates_topics(broker_config: Mapping[str, str]) -> bool:
    return broker_config.get("auto.create.topics.enable", "true").strip().lower() == "true"


def check_schema(schema: StructType, topic_option: str | None) -> tuple[str, ...]:
    """The sink columns ``schema`` has, checked as Spark's Kafka sink checks them."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise SeglogOptionError(f"column value is required (the record value, binary or string); the input "
                                f"has {', '.join(types) or 'no columns'}")
    for name in ("key", "value"):
        if name in types and not _is_bytes_like(types[name]):
            raise SeglogOptionError(f"column {name} must be binary or string, not {_type_name(types[name])}")
    if topic_option is None:
        if "topic" not in types:
            raise SeglogOptionError("no topic: give the option topic or a topic column (string)")
        if not isinstance(types["topic"], StringType):
            raise SeglogOptionError(f"column topic must be string, not {_type_name(types['topic'])}")
    if "partition" in types and not isinstance(types["partition"], (IntegerType, ShortType, ByteType, LongType)):
        raise SeglogOptionError(f"column partition must be int, not {_type_name(types['partition'])}")
    if "headers" in types and not _is_headers_type(types["headers"]):
        raise SeglogOptionError(f"column headers must be array<struct<key:string,value:binary>>, not "
                                f"{_type_name(types['headers'])}")
    if "timestamp" in types and not isinstance(types["timestamp"], TimestampType):
        raise SeglogOptionError(f"column timestamp must be timestamp, not {_type_name(types['timestamp'])}")
    # The option overrides the column, as in Spark's Kafka sink.
    return tuple(c for c in SINK_COLUMNS if c in types and not (c == "topic" and topic_option is not None))


def parse_sink_options(options: Mapping[str, str], schema: StructType, overwrite: bool,
                       streaming: bool = False) -> SinkOptions:
    """Check options, save mode and input columns; raise SeglogOptionError naming the first bad one.

    A streaming write is transactional, named for its query; a batch write only with the option
    ``transactional.id``."""
    opts = {k.lower(): v for k, v in options.items()}
    if overwrite:
        raise SeglogOptionError("save mode overwrite is not supported: a topic is append-only; use mode append")
    for name in _READER_OPTIONS:
        if name in opts:
            raise SeglogOptionError(f"option {name} is for reading; the sink takes the option topic "
                                    f"or a topic column")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise SeglogOptionError("option topic is empty")
    compression_name = opts.get("compression", opts.get("kafka.compression.type", "none"))
    try:
        compression = CompressionType.from_name(compression_name)
    except UnsupportedCompressionError:
        raise SeglogOptionError(f"option compression must be one of none, gzip, snappy, lz4, zstd, not "
                                f"{compression_name!r}") from None
    columns = check_schema(schema, topic)
    broker_config = _broker_config(opts)
    log_dir = local_log_dir(opts.get("path"), may_create=auto_creates_topics(broker_config))
    if topic is not None:
        _check_topic(log_dir, topic, broker_config)
    if streaming:
        transaction = query_transaction(opts)
    else:
        given = transactional_id_option(opts)
        transaction = None if given is None else SinkTransaction(given, given)
    bootstrap = _bootstrap(opts)
    client_props = security_props(opts)
    if bootstrap is not None:
        client_security(client_props)  # a bad security option fails before any task runs
    return SinkOptions(log_dir, topic, compression, columns, broker_config, transaction, bootstrap, client_props)


def _check_topic(log_dir: str, topic: str, broker_config: Mapping[str, str]) -> None:
    # Fails the write before any task runs; the commit checks again under the broker.
    try:
        layout.validate_topic_name(topic)
    except InvalidTopicError as exc:
        raise SeglogOptionError(f"option topic: {exc}") from None
    if not auto_creates_topics(broker_config) and topic not in LogDirectory(log_dir).topics(include_internal=True):
        raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist in {log_dir} and option "
                                           f"auto.create.topics.enable is false")


# --- Arrow to records (plain functions) -------------------------------------------------


def _bytes_list(column: pa.Array) -> list[bytes | None]:
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary())  # UTF-8 bytes, as Spark's Kafka sink sends strings
    return column.to_pylist()


def _timestamps_ms(column: pa.Array) -> list[int | None]:
    ticks = column.cast(pa.int64())
    lowest = pc.min(ticks).as_py()
    if lowest is not None and lowest < 0:
        raise SinkDataError(f"column timestamp holds {pc.min(column).as_py()}, before 1970: Kafka timestamps "
                            f"are not negative")
    unit = column.type.unit
    if unit == "s":
        return pc.multiply(ticks, 1000).to_pylist()
    # Integer division truncates, which is flooring for the non-negative values left.
    return pc.divide(ticks, {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]).to_pylist()


def _headers_list(column: pa.Array) -> list[tuple[Header, ...]]:
    out = []
    for row in column.to_pylist():
        if not row:
            out.append(())
            continue
        headers = []
        for h in row:
            if h is None or h["key"] is None:
                raise SinkDataError("column headers holds a header without a key; Kafka header keys are not null")
            value = h["value"]
            headers.append(Header(h["key"], value.encode() if isinstance(value, str) else value))
        out.append(tuple(headers))
    return out


def records_from_arrow(batch: pa.RecordBatch, topic_option: str | None
                       ) -> dict[str, list[tuple[int | None, SimpleRecord]]]:
    """The records of ``batch`` by topic, in row order, each with its partition (None: the partitioner's)."""
    n = batch.num_rows
    names = set(batch.schema.names)
    if "value" not in names:
        raise SinkDataError("column value is missing")
    values = _bytes_list(batch.column("value"))
    keys = _bytes_list(batch.column("key")) if "key" in names else [None] * n
    partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
    timestamps = _timestamps_ms(batch.column("timestamp")) if "timestamp" in names else [None] * n
    headers = _headers_list(batch.column("headers")) if "headers" in names else [()] * n
    if topic_option is not None:
        topics: list[str] | None = None
    elif "topic" not in names:
        raise SinkDataError("no topic: give the option topic or a topic column")
    else:
        column = batch.column("topic")
        if column.null_count:
            raise SinkDataError("column topic holds null; set a topic on every row or use the option topic")
        topics = column.to_pylist()
    out: dict[str, list[tuple[int | None, SimpleRecord]]] = {}
    for i in range(n):
        topic = topic_option if topics is None else topics[i]
        out.setdefault(topic, []).append(
            (partitions[i], SimpleRecord(values[i], keys[i], timestamps[i], headers[i])))
    return out


def destinations(batch: pa.RecordBatch, topic_option: str | None) -> dict[str, tuple[int, int] | None]:
    """Each topic ``batch`` writes to, with the lowest and highest explicit partition (None: none given)."""
    has_partition = "partition" in batch.schema.names
    if topic_option is not None:
        if not has_partition:
            return {topic_option: None}
        span = pc.min_max(batch.column("partition"))
        low, high = span["min"].as_py(), span["max"].as_py()
        return {topic_option: None if low is None else (low, high)}
    if batch.column("topic").null_count:
        raise SinkDataError("column topic holds null; set a topic on every row or use the option topic")
    partitions = batch.column("partition").cast(pa.int64()) if has_partition else pa.nulls(batch.num_rows,
                                                                                          pa.int64())
    table = pa.table({"topic": batch.column("topic"), "partition": partitions})
    grouped = table.group_by("topic").aggregate([("partition", "min"), ("partition", "max")])
    return {topic: None if low is None else (low, high)
            for topic, low, high in zip(grouped["topic"].to_pylist(), grouped["partition_min"].to_pylist(),
                                        grouped["partition_max"].to_pylist())}


def record_size(record: SimpleRecord) -> int:
    """An upper bound of the record's encoded size in a batch."""
    size = _RECORD_OVERHEAD + len(record.key or b"") + len(record.value or b"")
    for h in record.headers:
        size += _HEADER_OVERHEAD + len(h.key.encode()) + len(h.value or b"")
    return size


# --- producing (driver) -------------------------------------------------------


class _BatchingProducer:
    """Buffers records per topic and partition and produces them in large batches."""

    def __init__(self, broker: Broker | RemoteBroker, compression: CompressionType,
                 producer: Producer | RemoteProducer | None = None):
        self.broker = broker
        self.produce = broker.produce if producer is None else producer.produce
        self.compression = compression
        self._buffers: dict[tuple[str, int | None], list[SimpleRecord]] = {}
        self._bytes: dict[tuple[str, int | None], int] = {}
        self._limits: dict[str, int] = {}
        self.written: set[TopicPartition] = set()  # where records went

    def _limit(self, topic: str) -> int:
        if topic not in self._limits:
            allowed = _max_message_bytes(self.broker, topic) - _BATCH_HEADER_BYTES
            self._limits[topic] = max(1, min(MAX_BATCH_BYTES, allowed))
        return self._limits[topic]

    def add(self, topic: str, partition: int | None, record: SimpleRecord) -> None:
        dest = (topic, partition)
        size = record_size(record)
        buffer = self._buffers.setdefault(dest, [])
        if buffer and (len(buffer) >= CHUNK_ROWS or self._bytes[dest] + size > self._limit(topic)):
            self._flush(dest)
            buffer = self._buffers.setdefault(dest, [])
        buffer.append(record)
        self._bytes[dest] = self._bytes.get(dest, 0) + size

    def _flush(self, dest: tuple[str, int | None]) -> None:
        records = self._buffers.pop(dest, [])
        self._bytes.pop(dest, None)
        if records:
            landed = self.produce(dest[0], records, partition=dest[1], compression=self.compression)
            self.written.update(TopicPartition(m.topic, m.partition) for m in landed)

    def flush(self) -> None:
        for dest in list(self._buffers):
            self._flush(dest)


def _max_message_bytes(broker: Broker | RemoteBroker, topic: str) -> int:
    if isinstance(broker, Broker):
        return broker.log_config(topic).max_message_bytes
    return broker.max_message_bytes(topic)


def _missing_topics(broker: Broker | RemoteBroker, found: Mapping[str, tuple[int, int] | None],
                    broker_config: Mapping[str, str], where: str) -> list[str]:
    """The topics written to that do not exist yet: to be created, as Kafka's
    auto.create.topics.enable does, or refused. Nothing is created here."""
    existing = set(broker.list_topics())
    missing = sorted(t for t in found if t not in existing)
    if missing and not auto_creates_topics(broker_config):
        raise UnknownTopicOrPartitionError(f"topic {missing[0]!r} does not exist in {where} "
                                           f"and option auto.create.topics.enable is false")
    for topic in missing:
        try:
            layout.validate_topic_name(topic)
        except InvalidTopicError as exc:
            raise SinkDataError(f"column topic: {exc}") from None
    for topic, span in sorted(found.items()):
        if topic in missing:
            # What the embedded broker creates; a running broker's own num.partitions is not on the wire
            # (its Produce answers UNKNOWN_TOPIC_OR_PARTITION for a partition beyond it).
            count = (broker.config.num_partitions if isinstance(broker, Broker)
                     else int(broker_config.get("num.partitions", 2 ** 31 - 1)))
        else:
            count = broker.partitions_for(topic)
        if span is not None:
            for p in span:
                if not 0 <= p < count:
                    raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {p} (it has {count}); "
                                                       f"see column partition")
    return missing


def produce_staged(log_dir: str, staged: Sequence[StagedBatches], topic_option: str | None,
                   compression: CompressionType, broker_config: Mapping[str, str] | None = None,
                   transaction: SinkTransaction | None = None, bootstrap: str | None = None,
                   client_props: Mapping[str, str] | None = None) -> int:
    """Append the staged rows, in task order, through the embedded broker (or the running broker at
    ``bootstrap``, reached with the security options ``client_props``); returns the records written.

    Every destination is checked before the first append or topic creation, so
    a refused topic or an unknown partition writes nothing. With ``transaction``
    the rows go in one transaction of its transactional id, committed with the
    batch id (if any) as the offset of its group; a batch id the group has
    committed already writes nothing (returns 0).
    """
    staged = [s for s in staged if s.path is not None and s.rows]
    if not staged:
        return 0  # an empty micro-batch needs no broker (and no lock)
    broker_config = dict(broker_config or {})
    if bootstrap is not None:
        broker: Broker | RemoteBroker = open_broker(bootstrap, client_props or {})
        num_partitions = broker_config.get("num.partitions")
        create = functools.partial(broker.create_topic, partitions=None if num_partitions is None
                                   else int(num_partitions))
    else:
        broker = Broker(log_dir, broker_config, background=False)
        create = broker.create_topic  # num.partitions of them, the topic defaults
    with broker:
        found = _staged_destinations(staged, topic_option)
        producer = None
        if transaction is not None:
            # First: fences a crashed run's producer and aborts its open transaction, so the
            # group's batch id read next is the last one committed.
            producer = broker.producer(transaction.transactional_id)
            if _committed_already(broker.committed_offsets(transaction.group_id), transaction):
                return 0
        for topic in _missing_topics(broker, found, broker_config, bootstrap or log_dir):
            create(topic)
        if producer is None:
            return _append_staged(_BatchingProducer(broker, compression), staged, topic_option)
        producer.begin_transaction()
        try:
            batching = _BatchingProducer(broker, compression, producer)
            written = _append_staged(batching, staged, topic_option)
            if transaction.batch_id is not None:
                producer.send_offsets_to_transaction(transaction.group_id,
                                                     {tp: transaction.batch_id for tp in batching.written})
            pause_at("before-commit")
        except BaseException:
            producer.abort_transaction()
            raise
        producer.commit_transaction()
        pause_at("after-commit")
    return written


def _staged_destinations(staged: Sequence[StagedBatches], topic_option: str | None
                         ) -> dict[str, tuple[int, int] | None]:
    found: dict[str, tuple[int, int] | None] = {}
    for s in staged:
        for batch in read_staged(s.path):
            for topic, span in destinations(batch, topic_option).items():
                known = found.get(topic)
                if span is None or known is None:
                    found[topic] = span if known is None else known
                else:
                    found[topic] = (min(known[0], span[0]), max(known[1], span[1]))
    return found


def _committed_already(offsets: Mapping[TopicPartition, object], transaction: SinkTransaction) -> bool:
    """Whether the group committed ``transaction``'s micro-batch (or a later one) before."""
    if transaction.batch_id is None:
        return False
    last = committed_batch_id(offsets)
    if last is None or last < transaction.batch_id:
        return False
    log.info("transactional id %r: micro-batch %d is committed already (group %r is at %d); not writing it "
             "again", transaction.transactional_id, transaction.batch_id, transaction.group_id, last)
    return True


def _append_staged(producer: _BatchingProducer, staged: Sequence[StagedBatches], topic_option: str | None) -> int:
    written = 0
    for s in staged:
        for batch in read_staged(s.path):
            for start in range(0, batch.num_rows, CHUNK_ROWS):
                for topic, records in records_from_arrow(batch.slice(start, CHUNK_ROWS), topic_option).items():
                    for partition, record in records:
                        producer.add(topic, partition, record)
                    written += len(records)
    producer.flush()
    return written


# --- the Spark adapters -----------------------------------------------------------


class _SinkBase:
    streaming = False

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool):
        self.options = parse_sink_options(options, schema, overwrite, self.streaming)
        # Spark creates the writer on the driver before any task runs: the place to clear what writes
        # whose driver died left behind.
        reclaim_staging(self.options.log_dir)
        self.staging_dir = new_staging_dir(self.options.log_dir)

    def _write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatches:
        return stage_batches(iterator, self.staging_dir, self.options.columns)

    def _commit(self, messages: Sequence[WriterCommitMessage | None], batch_id: int | None = None) -> None:
        staged = staged_messages(messages)
        transaction = self.options.transaction
        if transaction is not None and batch_id is not None:
            transaction = transaction.with_batch(batch_id)
        try:
            pause_at("before-write")
            produce_staged(self.options.log_dir, staged, self.options.topic, self.options.compression,
                           self.options.broker_config, transaction, self.options.bootstrap, self.options.client_props)
        finally:
            self._clean(messages)

    def _clean(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        # Removing whole directories also clears files of failed task attempts,
        # which sent no message.
        remove_staging({os.path.dirname(s.path) for s in staged_messages(messages)}, self.options.log_dir)


class SeglogWriter(_SinkBase, DataSourceArrowWriter):
    """Batch writes: tasks stage Arrow files, the driver appends them at commit."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatches:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages)
        remove_staging([self.staging_dir], self.options.log_dir)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # The writer that planned the tasks is the one that aborts, so its
        # directory holds every attempt's file.
        remove_staging([self.staging_dir], self.options.log_dir)


class SeglogStreamWriter(_SinkBase, DataSourceStreamArrowWriter):
    """Micro-batch writes: each micro-batch's staged files are appended at its commit, in one
    transaction with its batch id (see ``connector.sink_transaction``).

    Spark builds a new writer for each commit, so the staging directory comes
    from the messages; micro-batches of one query run one after another, so
    none of the query's tasks is staging while its directory is removed.
    """

    streaming = True

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedBatches:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._clean(messages)
