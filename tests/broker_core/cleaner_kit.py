"""Logs to compact and Kafka's compaction guarantees as checks, for the cleaner tests of both cleaners
(the broker's and the distributed one the Spark compaction job runs)."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.config import BrokerConfig, LogConfig
from broker_core.log.cleaner import LogCleaner
from broker_core.log.log import Log
from format.compression import CompressionType
from format.file_records import FileRecords
from format.layout import TopicPartition
from format.record import Record, SimpleRecord
from format.record_batch import RecordBatch, build_batch, iter_batches

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
TP = TopicPartition("table", 0)
# The settings of ``table``, the compacted topic ``fill`` writes into a log dir.
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": 1500, "index.interval.bytes": 256,
                "delete.retention.ms": 60_000, "file.delete.delay.ms": 0}


def compact_config(**overrides) -> LogConfig:
    props = {"cleanup.policy": "compact", "segment.bytes": 2000, "index.interval.bytes": 256,
             "delete.retention.ms": 60_000, "min.cleanable.dirty.ratio": 0.01, "file.delete.delay.ms": 0}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return LogConfig.from_props(props)


def open_log(root, clock: MockTime, config: LogConfig | None = None, tp: TopicPartition = TP, **kwargs) -> Log:
    """The log of ``tp`` under ``root`` (compacted unless ``config`` says otherwise)."""
    directory = os.path.join(str(root), str(tp))
    return Log.open(directory, config or compact_config(), clock=clock, **kwargs)


def cleaner_for(logs: dict[TopicPartition, Log] | Log, clock: MockTime, **broker_props) -> LogCleaner:
    if isinstance(logs, Log):
        logs = {logs.topic_partition: logs}
    dirs = sorted({os.path.dirname(lg.dir) for lg in logs.values()})
    props = {"log.dirs": ",".join(dirs), "log.cleaner.dedupe.buffer.size": 1 << 20}
    props.update(broker_props)
    return LogCleaner(BrokerConfig.from_props(props), dirs, lambda: dict(logs), clock)


@dataclass
class Produced:
    """What was written: the record at every offset (None for a control batch's)."""

    records: dict[int, tuple[bytes | None, bytes | None] | None] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    txn_offsets: dict[int, set[int]] = field(default_factory=dict)  # producer id -> offsets in transactions
    sequences: dict[int, int] = field(default_factory=dict)  # producer id -> its next sequence here

    def next_sequence(self, producer_id: int, count: int) -> int:
        """The base sequence of a batch of ``count`` records: an idempotent producer's batches follow on."""
        base = self.sequences.get(producer_id, 0)
        self.sequences[producer_id] = base + count
        return base

    def final_values(self) -> dict[bytes, tuple[int, bytes | None]]:
        out = {}
        for offset in sorted(self.records):
            if offset in self.aborted or self.records[offset] is None:
                continue
            key, value = self.records[offset]
            out[key] = (offset, value)
        return out


def produce(log: Log, produced: Produced, clock: MockTime, pairs, **batch_kwargs) -> list[int]:
    """Append one batch of (key, value) pairs; returns their offsets."""
    records = [SimpleRecord(v, k, clock.milliseconds()) for k, v in pairs]
    info = log.append(build_batch(records, **batch_kwargs), from_client=not batch_kwargs.get("is_transactional"))
    offsets = list(range(info.first_offset, info.first_offset + len(records)))
    for offset, (k, v) in zip(offsets, pairs):
        produced.records[offset] = (k, v)
    if batch_kwargs.get("is_transactional"):
        produced.txn_offsets.setdefault(batch_kwargs["producer_id"], set()).update(offsets)
    return offsets


def end_transaction(log: Log, produced: Produced, clock: MockTime, producer_id: int, commit: bool,
                    first_offset: int, epoch: int = 0) -> int:
    """Write a COMMIT or ABORT marker as a transaction coordinator would (the log indexes an abort)."""
    info = log.append_control_marker(producer_id, epoch, 0, commit)
    produced.records[info.first_offset] = None
    if not commit:
        produced.aborted.update(o for o, r in produced.records.items() if first_offset <= o < info.first_offset
                                and r is not None and o in produced.txn_offsets.get(producer_id, ()))
    return info.first_offset


def all_batches(log: Log) -> list[RecordBatch]:
    out = []
    for segment in log.segments:
        records = FileRecords.open(segment.log.path, writable=False)
        try:
            out.extend(RecordBatch(bytes(b.buffer), b.header, b.position, b.path)
                       for b in records.batches(validate=True, stop_at_partial=False))
        finally:
            records.close()
    return out


def read_from(log: Log, offset: int = 0, *, with_control: bool = False) -> list[Record]:
    """Everything a consumer fetching from ``offset`` to the log end gets, in order."""
    out: list[Record] = []
    position = offset
    while position < log.log_end_offset:
        data = log.read(position, 1 << 20).records
        batches = list(iter_batches(data))
        if not batches:
            break
        for batch in batches:
            if with_control or not batch.header.is_control:
                out.extend(r for r in batch.records() if r.offset >= position)
            position = batch.header.next_offset
    return out


def check_guarantees(produced: Produced, log: Log) -> list[Record]:
    """Kafka's guarantees for a compacted log read from offset 0:

    * offsets only grow, and each record is the one written at its offset (offsets never change);
    * for every key the last record read is its final value, and a key's values come in the order
      they were written (never an older value after a newer one);
    * a key whose final record is a tombstone shows that tombstone or nothing.
    """
    # Aborted records are what a read_committed consumer skips; the cleaner removes them too.
    records = [r for r in read_from(log, 0) if r.offset not in produced.aborted]
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must be strictly increasing"
    last_seen: dict[bytes, int] = {}
    for r in records:
        assert r.offset in produced.records and produced.records[r.offset] == (r.key, r.value), \
            f"offset {r.offset} holds {(r.key, r.value)}, written was {produced.records.get(r.offset)}"
        assert last_seen.get(r.key, -1) < r.offset
        last_seen[r.key] = r.offset
    final = produced.final_values()
    seen = {}
    for r in records:
        seen[r.key] = (r.offset, r.value)
    for key, (offset, value) in final.items():
        if value is None:
            assert key not in seen or seen[key] == (offset, None), f"key {key!r}: {seen.get(key)} after its tombstone"
        else:
            assert seen.get(key) == (offset, value), f"key {key!r}: read {seen.get(key)}, final is {(offset, value)}"
    return records


def fill(log_dir: str, clock: MockTime, produced: dict, *, partitions: int = 3, batches: int = 40, keys: int = 25,
         seed: int = 1, transactions: bool = False) -> None:
    """Keyed writes (tombstones, lz4 batches, an idempotent producer) into ``table``; with
    ``transactions``, partition 0 also gets committed and aborted transactions."""
    rng = random.Random(seed)
    with Broker(log_dir, clock=clock, background=False) as broker:
        if "table" not in broker.list_topics():
            broker.create_topic("table", partitions, TOPIC_CONFIG)
        for p in range(partitions):
            log = broker.log_manager.get_log(TopicPartition("table", p))
            done = produced.setdefault(p, Produced())
            for i in range(batches):
                pairs = [(b"k%d" % rng.randrange(keys), None if rng.random() < 0.1 else b"v%d" % rng.randrange(10**6))
                         for _ in range(rng.randrange(1, 6))]
                kind = rng.random()
                if kind < 0.2:
                    produce(log, done, clock, pairs, compression=CompressionType.LZ4)
                elif kind < 0.3:
                    produce(log, done, clock, pairs, producer_id=100 + p, producer_epoch=0,
                            base_sequence=done.next_sequence(100 + p, len(pairs)))
                elif transactions and p == 0 and kind < 0.45:
                    first = produce(log, done, clock, pairs, producer_id=7, producer_epoch=0, is_transactional=True,
                                    base_sequence=done.next_sequence(7, len(pairs)))[0]
                    end_transaction(log, done, clock, 7, commit=rng.random() < 0.5, first_offset=first)
                else:
                    produce(log, done, clock, pairs)
                clock.sleep(50)
            log.roll()


def check_all(log_dir: str, produced: dict, clock: MockTime) -> dict[int, list]:
    out = {}
    with Broker(log_dir, clock=clock, background=False) as broker:
        for p, done in produced.items():
            out[p] = check_guarantees(done, broker.log_manager.get_log(TopicPartition("table", p)))
    return out
