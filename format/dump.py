"""Human-readable dumps of segment files, in the spirit of Kafka's DumpLogSegments.

Each function yields lines and never stops at a bad CRC: it reports it
(``isvalid: false``) and moves on, so one damaged batch does not hide the rest.
The same goes for offsets, which lie outside the CRC: a batch that does not
start above the batch before, starts below the segment's base offset (its file
name), or disagrees with the segment's ``.index`` is reported with its file and
position. A length or magic that makes the rest of the file unreadable ends the
dump with an error line. ``DumpResult.corrupt`` tells the caller to exit
non-zero. Nothing is written: files are opened read-only.

A ``RecordDecoder`` turns a record's key and value into the text printed for
them (what Kafka's ``--transaction-log-decoder`` does for
``__transaction_state``); the decoders of internal topics live with the
code that owns their records, not here. ``.snapshot`` files print one line
per producer, as Kafka's DumpLogSegments prints them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

from . import layout
from .errors import CorruptIndexError, CorruptRecordError, UnsupportedCompressionError
from .file_records import FileRecords
from .index import OffsetIndex, TimeIndex
from .offset_order import OffsetOrder
from .producer_snapshot import CorruptSnapshotError, ProducerSnapshotEntry, decode_snapshot
from .record_batch import RecordBatch, TimestampType
from .txn_index import parse_aborted_txns

if TYPE_CHECKING:
    from .segment_reader import SegmentReader


#: A record's key and value (None when null) -> the text printed after ``key:`` and ``payload:``
#: (None: nothing printed for it).
RecordDecoder = Callable[[bytes | None, bytes | None], tuple[str | None, str | None]]

_INT_MAX = 2**31 - 1


@dataclass
class DumpResult:
    lines: list[str] = field(default_factory=list)
    corrupt: bool = False


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _payload(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()


def describe_batch(batch: RecordBatch, valid: bool) -> str:
    h = batch.header
    horizon = h.delete_horizon_ms if h.has_delete_horizon_ms else "none"
    ts_name = "LogAppendTime" if h.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"
    try:
        codec = h.compression_type.name.lower()
    except UnsupportedCompressionError:
        codec = f"unknown({h.attributes & 0x07})"  # a damaged batch: its CRC tells
    return (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_flag(h.is_transactional)} isControl: {_flag(h.is_control)} "
            f"deleteHorizonMs: {horizon} position: {batch.position} {ts_name}: {h.max_timestamp} "
            f"size: {h.size_in_bytes} magic: {h.magic} compresscodec: {codec} "
            f"crc: {h.crc} isvalid: {_flag(valid)}")


def dump_log(path: str, print_data: bool = False, decoder: RecordDecoder | None = None) -> DumpResult:
    result = DumpResult([f"Dumping {path}"])
    base = layout.offset_from_file_name(os.path.basename(path))
    result.lines.append(f"Log starting offset: {base}")
    records = FileRecords.open(path, writable=False)
    order = OffsetOrder(path, base)
    walked: dict[int, tuple[int, int]] = {}  # position -> (base offset, last offset)
    try:
        for batch in records.batches(stop_at_partial=False):
            h = batch.header
            valid = batch.compute_checksum() == h.crc
            result.lines.append(describe_batch(batch, valid))
            walked[batch.position] = (h.base_offset, h.last_offset)
            try:
                order.check(batch.position, h.base_offset, h.last_offset)
            except CorruptRecordError as exc:
                result.corrupt = True
                result.lines.append(f"  Offsets out of order at {exc}")
                order.last_offset = h.last_offset
            if not valid:
                result.corrupt = True
                result.lines.append(f"  CRC mismatch at {path} position {batch.position}: stored "
                                    f"0x{h.crc:08x}, computed 0x{batch.compute_checksum():08x}")
                continue
            if print_data or decoder is not None:
                result.lines.extend(_record_lines(batch, decoder))
    except CorruptRecordError as exc:
        result.corrupt = True
        result.lines.append(f"Found corruption: {exc}")
    finally:
        records.close()
    for line in _index_disagreements(path, base, walked):
        result.corrupt = True
        result.lines.append(line)
    return result


def dump_segment(reader: SegmentReader, location: str, print_data: bool = False,
                 decoder: RecordDecoder | None = None, *, from_offset: int | None = None,
                 until_offset: int | None = None) -> DumpResult:
    """The batches of a segment read through ``reader`` (a remote tier's object, a file of a log dir on any
    filesystem), printed as ``dump_log`` prints a local ``.log``; only those from the one holding
    ``from_offset`` and starting below ``until_offset`` when given (the part of a segment a log reads)."""
    result = DumpResult([f"Dumping {location}", f"Log starting offset: {reader.base_offset}"])
    start = reader.base_offset if from_offset is None else from_offset
    if start != reader.base_offset:
        result.lines.append(f"Starting at offset {start} (the offsets below it are read from the segment before)")
    try:
        for _, _, batches in reader.read_chunks(start, until_offset):
            for batch in batches:
                valid = batch.compute_checksum() == batch.header.crc
                result.lines.append(describe_batch(batch, valid))
                if not valid:
                    result.corrupt = True
                    result.lines.append(f"  CRC mismatch at {location} position {batch.position}: stored "
                                        f"0x{batch.header.crc:08x}, computed 0x{batch.compute_checksum():08x}")
                elif print_data or decoder is not None:
                    result.lines.extend(_record_lines(batch, decoder))
    except CorruptRecordError as exc:
        result.corrupt = True
        result.lines.append(f"Found corruption: {exc}")
    return result


def _index_disagreements(path: str, base: int, walked: dict[int, tuple[int, int]]) -> Iterator[str]:
    """Entries of the segment's ``.index`` that the batches of its ``.log`` contradict: an entry
    (O, P) needs a batch starting at P whose offsets begin at or below O, and a batch from there
    on ending at O."""
    index_path = os.path.join(os.path.dirname(path), layout.offset_index_file_name(base))
    if layout.strip_transient_suffix(os.path.basename(path)) != layout.log_file_name(base) or \
            not os.path.exists(index_path):
        return
    try:
        index = OffsetIndex(index_path, base, writable=False)
    except (OSError, ValueError):
        return
    try:
        positions = sorted(walked)
        ends = {position: last for position, (_, last) in walked.items()}
        for n in range(index.entries):
            entry = index.entry(n)
            at = walked.get(entry.position)
            if at is None:
                yield (f"  Index entry {n} of {index_path} maps offset {entry.offset} to position "
                       f"{entry.position}, where no batch of {path} starts")
                continue
            later = (ends[p] for p in positions if p >= entry.position)
            if at[0] > entry.offset or entry.offset not in later:
                yield (f"  Offsets disagree with the index at {path}: position {entry.position}: batch offsets "
                       f"{at[0]}..{at[1]}, but entry {n} of {index_path} maps offset {entry.offset} there")
    finally:
        index.close()


def _record_lines(batch: RecordBatch, decoder: RecordDecoder | None = None) -> Iterator[str]:
    h = batch.header
    ts_name = "LogAppendTime" if h.timestamp_type == TimestampType.LOG_APPEND_TIME else "CreateTime"
    marker = batch.end_txn_marker() if h.is_control else None
    for i, record in enumerate(batch.records()):
        sequence = -1 if h.base_sequence < 0 else (h.base_sequence + record.offset - h.base_offset)
        line = (f"| offset: {record.offset} {ts_name}: {record.timestamp} "
                f"keySize: {-1 if record.key is None else len(record.key)} "
                f"valueSize: {-1 if record.value is None else len(record.value)} sequence: {sequence} "
                f"headerKeys: [{','.join(hd.key for hd in record.headers)}]")
        if marker is not None and i == 0:
            line += f" endTxnMarker: {marker.control_type.name} coordinatorEpoch: {marker.coordinator_epoch}"
        elif decoder is not None:
            key, payload = decoder(record.key, record.value)
            if key is not None:
                line += f" key: {key}"
            if payload is not None:
                line += f" payload: {payload}"
        else:
            if record.key is not None:
                line += f" key: {_payload(record.key)}"
            line += f" payload: {_payload(record.value)}"
        yield line


def _dump_index(path: str, index_class, describe) -> DumpResult:
    base = layout.offset_from_file_name(os.path.basename(path))
    result = DumpResult([f"Dumping {path}"])
    index = index_class(path, base, writable=False)
    try:
        for n in range(index.entries):
            result.lines.append(describe(index.entry(n)))
        index.sanity_check()
    except CorruptIndexError as exc:
        result.corrupt = True
        result.lines.append(f"Found corruption: {exc}")
    finally:
        index.close()
    return result


def dump_offset_index(path: str) -> DumpResult:
    return _dump_index(path, OffsetIndex, lambda e: f"offset: {e.offset} position: {e.position}")


def dump_time_index(path: str) -> DumpResult:
    return _dump_index(path, TimeIndex, lambda e: f"timestamp: {e.timestamp} offset: {e.offset}")


def dump_txn_index(path: str) -> DumpResult:
    result = DumpResult([f"Dumping {path}"])
    try:
        with open(path, "rb") as f:
            for txn in parse_aborted_txns(f.read(), path):
                result.lines.append(f"version: {txn.version} producerId: {txn.producer_id} "
                                    f"firstOffset: {txn.first_offset} lastOffset: {txn.last_offset} "
                                    f"lastStableOffset: {txn.last_stable_offset}")
    except CorruptIndexError as exc:
        result.corrupt = True
        result.lines.append(f"Found corruption: {exc}")
    return result


def _first_sequence(last_sequence: int, offset_delta: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``: sequences wrap at Integer.MAX_VALUE."""
    if last_sequence < offset_delta:
        return _INT_MAX - (offset_delta - last_sequence) + 1
    return last_sequence - offset_delta


def describe_producer(entry: ProducerSnapshotEntry) -> str:
    """One producer of a ``.snapshot``, as Kafka's DumpLogSegments prints it (Java's OptionalLong text
    for an open transaction's first offset; the last batch only when the producer wrote one)."""
    txn_first = (f"OptionalLong[{entry.current_txn_first_offset}]" if entry.current_txn_first_offset >= 0
                 else "OptionalLong.empty")
    line = (f"producerId: {entry.producer_id} producerEpoch: {entry.epoch} coordinatorEpoch: "
            f"{entry.coordinator_epoch} currentTxnFirstOffset: {txn_first} lastTimestamp: {entry.timestamp} ")
    if entry.last_offset >= 0:
        line += (f"firstSequence: {_first_sequence(entry.last_sequence, entry.offset_delta)} lastSequence: "
                 f"{entry.last_sequence} lastOffset: {entry.last_offset} offsetDelta: {entry.offset_delta} "
                 f"timestamp: {entry.timestamp}")
    return line


def dump_producer_snapshot(path: str) -> DumpResult:
    result = DumpResult([f"Dumping {path}"])
    with open(path, "rb") as f:
        data = f.read()
    try:
        result.lines.extend(describe_producer(entry) for entry in decode_snapshot(data, path))
    except CorruptSnapshotError as exc:
        result.corrupt = True
        result.lines.append(f"Found corruption: {exc}")
    return result


def dump_file(path: str, print_data: bool = False, decoder: RecordDecoder | None = None) -> DumpResult:
    """Dump one segment file, chosen by its suffix (transient suffixes ignored; bytes recovery
    set aside read as the file they came from, positions counted in the set-aside file); a
    ``decoder`` prints the records of a ``.log`` (and implies ``print_data``)."""
    name = layout.strip_transient_suffix(layout.set_aside_source_name(os.path.basename(path)))
    if name.endswith(layout.LOG_FILE_SUFFIX):
        return dump_log(path, print_data, decoder)
    if name.endswith(layout.PRODUCER_SNAPSHOT_FILE_SUFFIX):
        return dump_producer_snapshot(path)
    if name.endswith(layout.INDEX_FILE_SUFFIX):
        return dump_offset_index(path)
    if name.endswith(layout.TIME_INDEX_FILE_SUFFIX):
        return dump_time_index(path)
    if name.endswith(layout.TXN_INDEX_FILE_SUFFIX):
        return dump_txn_index(path)
    return DumpResult([f"Ignoring unknown file {path}"], corrupt=True)
