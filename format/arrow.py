"""Decoding batches into Arrow with the schema of Spark's Kafka source.

The batches' headers come as numpy columns (``batch_table``): which batches
are decoded is decided with masks, and the CRC is the only call per batch.
Records are length-prefixed and sequential, so finding where each starts is
serial within a batch: the batches are walked side by side, one numpy step
per record position (``locate``), and one by one in Python only where few are
left. Every field is then decoded for all records at once with numpy, and
keys, values and header parts are gathered out of the batch bytes by one
Arrow ``take`` over a binary array whose offsets alternate between the gaps
and the wanted slices, so no payload byte passes through Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .aborted_filter import aborted_batch_mask
from .batch_table import BatchTable, walk_batches
from .errors import CorruptRecordError
from .record_batch import RECORDS_OFFSET
from .txn_index import AbortedTxn
from .varint_arrays import decode_varints_at

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def kafka_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema matching Spark's Kafka source columns."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


@dataclass
class RecordFrames:
    """Where each record starts in the arena, and its batch's fields repeated per record."""

    starts: np.ndarray
    base_offset: np.ndarray
    base_timestamp: np.ndarray
    log_append_time: np.ndarray  # -1 where the batch uses CreateTime
    last_position: np.ndarray  # the file position of each record's batch, for errors


# Below this many batches walked side by side, a numpy step costs more than
# the Python loop it replaces.
_LOCKSTEP_MIN_WIDTH = 64


def _frame_starts(data: bytes, pos: int, count: int, out: list) -> int:
    """Append the start of each of ``count`` records from ``pos``; return where they end."""
    append = out.append
    for _ in range(count):
        append(pos)
        b = data[pos]
        if b < 0x80:
            pos += 1 + (b >> 1)
            continue
        b2 = data[pos + 1]
        if b2 < 0x80:
            pos += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
            continue
        raw, shift, i = 0, 0, pos
        while True:
            c = data[i]
            raw |= (c & 0x7F) << shift
            i += 1
            if c < 0x80 or i - pos >= 5:
                break
            shift += 7
        pos = i + (raw >> 1)
    return pos


def _record_advances() -> np.ndarray:
    """How far a record's length varint moves the walk, by its first two bytes read as one
    little-endian uint16: the varint's size plus the length it holds, walked as if positive;
    ``_LONG_LENGTH`` (past any records section) where the varint runs past two bytes."""
    pair = np.arange(1 << 16, dtype=np.int64)
    b0, b1 = pair & 0xFF, pair >> 8
    one = 1 + (b0 >> 1)
    two = 2 + (((b0 & 0x7F) | (b1 << 7)) >> 1)
    return np.where(b0 < 0x80, one, np.where(b1 < 0x80, two, _LONG_LENGTH))


def _byte_pairs(A: np.ndarray) -> np.ndarray:
    """Every two adjacent bytes of ``A`` as a little-endian uint16, position by position: a view,
    so one gather reads both bytes of a length varint."""
    return np.ndarray(shape=(max(len(A) - 1, 0),), dtype="<u2", buffer=A, strides=(1,))


_LONG_LENGTH = 1 << 40
_CHECK_EVERY = 8
# Records under 8 KiB have one- or two-byte length varints: one lookup per step of the walk.
_ADVANCES_BY_PAIR = _record_advances()


def locate_records(data: bytes, sections: list, path: str | None) -> RecordFrames:
    """``locate`` over ``sections``: per batch, [records start, records end, record count, base offset,
    base timestamp, LogAppendTime or -1, file position] (more items are ignored)."""
    table = np.array([s[:7] for s in sections], dtype=np.int64).reshape(len(sections), 7)
    return locate(data, *table.T, path=path)


def locate(data: bytes, begin: np.ndarray, finish: np.ndarray, counts: np.ndarray, base_offset: np.ndarray,
           base_timestamp: np.ndarray, log_append_time: np.ndarray, file_position: np.ndarray,
           path: str | None) -> RecordFrames:
    """Find every record's start, given per batch where its records section begins and ends in
    ``data`` and how many records it holds: batches are walked side by side with numpy while
    there are enough of them, and one by one in Python for the rest.

    The batches are taken most records first, so those still being walked at a
    step are a prefix of them and every step works on slices. Odd (negative)
    zigzag lengths are walked as if positive; the field decoder rejects them
    afterwards.
    """
    A = np.frombuffer(data, dtype=np.uint8)
    count = len(begin)
    out_base = np.zeros(count, dtype=np.int64)
    np.cumsum(counts[:-1], out=out_base[1:])
    starts = np.empty(int(counts.sum()), dtype=np.int64)
    order = np.argsort(-counts, kind="stable")
    left = counts[order]  # records per batch, most first
    pos = begin[order]  # where each batch's next record starts
    limit = finish[order]
    slot = out_base[order]  # where each batch's next start goes in ``starts``
    step = 0
    width = int(np.count_nonzero(left > 0))
    records_left = left.tolist()
    # The starts of each step side by side, the batches still walked first: a step adds the advances to
    # its starts where the next step's go, so a walk's positions are never copied. The room for one more
    # step holds the ends of the batches the last step finished.
    walked = np.empty(len(starts) + width, dtype=np.int64)
    walked[:width] = pos[:width]
    widths = []  # how many batches each step walked
    done = 0
    pairs = _byte_pairs(A)
    # Whether a batch ran past its records section is checked every few steps and where batches finish;
    # one that did sends the walk back to the last check, to go on checking every step.
    checked = (done, width, step)
    careful = False
    while width >= _LOCKSTEP_MIN_WIDTH:
        at = walked[done:done + width]
        try:
            advance = _ADVANCES_BY_PAIR.take(pairs[at])
        except IndexError:
            if not careful:
                (done, width, step), careful = checked, True
                del widths[step:]
                continue
            break  # a batch ran to the end of the data: walked one by one below, which names it
        following = walked[done + width:done + 2 * width]
        np.add(at, advance, out=following)
        finished = width
        while finished and records_left[finished - 1] <= step + 1:
            finished -= 1
        if careful or finished != width or step % _CHECK_EVERY == 0:
            if (following > limit[:width]).any():
                if not careful:
                    (done, width, step), careful = checked, True
                    del widths[step:]
                    continue
                if advance.max() < _LONG_LENGTH:
                    break  # a batch overran its records section: walked one by one below, which names it
                try:
                    value, after = decode_varints_at(A, at, 5)
                except CorruptRecordError:
                    break
                np.add(after, np.where(value < 0, -value - 1, value), out=following)
                if (following > limit[:width]).any():
                    break
            checked = (done + width, finished, step + 1)
        widths.append(width)
        done += width
        step += 1
        if finished != width:
            pos[finished:width] = following[finished:width]  # walked to their ends
            width = finished
    pos[:width] = walked[done:done + width]
    if widths:
        steps = np.repeat(np.arange(len(widths)), widths)
        firsts = np.zeros(len(widths), dtype=np.int64)
        np.cumsum(widths[:-1], out=firsts[1:])
        batch = np.arange(len(steps)) - np.repeat(firsts, widths)
        starts[slot[batch] + steps] = walked[:len(steps)]
    for s in np.flatnonzero(left > step).tolist():
        found_starts: list[int] = []
        try:
            pos[s] = _frame_starts(data, int(pos[s]), int(left[s]) - step, found_starts)
        except IndexError:
            pos[s] = -1  # a record ran past the end of the data: the count check below names its batch
            continue
        starts[slot[s] + step:slot[s] + left[s]] = found_starts
    pos[order] = pos.copy()  # back in the batches' order
    bad = np.flatnonzero(pos != finish)
    if bad.size:
        b = int(bad[0])
        raise CorruptRecordError(
            f"record count mismatch: the batch declares {int(counts[b])} records but its record lengths "
            f"do not add up to its {int(finish[b] - begin[b])}-byte records section", path=path,
            position=int(file_position[b]))
    return RecordFrames(starts, np.repeat(base_offset, counts), np.repeat(base_timestamp, counts),
                        np.repeat(log_append_time, counts), np.repeat(file_position, counts))


def _binary_from_slices(arena: pa.Buffer, starts: np.ndarray, lengths: np.ndarray,
                        valid: np.ndarray | None, value_type: pa.DataType) -> pa.Array:
    """Copy arena[start:start+length] for each slice, in order, into one binary array."""
    n = len(starts)
    wide = len(arena) >= (1 << 31) - 1
    offsets = np.empty(2 * n + 2, dtype=np.int64 if wide else np.int32)
    offsets[0] = 0
    offsets[1:-1:2] = starts
    offsets[2:-1:2] = starts + lengths
    offsets[-1] = len(arena)
    spread = pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), 2 * n + 1,
                                   [None, pa.py_buffer(offsets), arena])
    # The odd elements: indices in bounds by construction.
    taken = pc.take(spread, pa.array(np.arange(1, 2 * n, 2, dtype=np.int32)), boundscheck=False)
    if wide:
        taken = taken.cast(pa.binary())
    validity = None
    null_count = 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        null_count = int(n - np.count_nonzero(valid))
    buffers = taken.buffers()
    return pa.Array.from_buffers(value_type, n, [validity, buffers[1], buffers[2]], null_count=null_count)


def _check_within(ends: np.ndarray, limits: np.ndarray, what: str, frames: RecordFrames, path) -> None:
    bad = np.flatnonzero(ends > limits)
    if bad.size:
        raise CorruptRecordError(f"{what} runs past the end of its record (record at offset delta position "
                                 f"{int(frames.starts[bad[0]])})", path=path,
                                 position=int(frames.last_position[bad[0]]))


def _headers(A: np.ndarray, arena: pa.Buffer, pos: np.ndarray, counts: np.ndarray, body_end: np.ndarray,
             frames: RecordFrames, path) -> pa.Array:
    n = len(counts)
    if counts.size and counts.min() < 0:
        raise CorruptRecordError("negative header count", path=path,
                                 position=int(frames.last_position[np.flatnonzero(counts < 0)[0]]))
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    total = int(list_offsets[-1])
    key_start = np.empty(total, dtype=np.int64)
    key_len = np.empty(total, dtype=np.int64)
    value_start = np.empty(total, dtype=np.int64)
    value_len = np.empty(total, dtype=np.int64)
    rnd = 0
    active = np.flatnonzero(counts > 0)
    pos = pos.copy()
    while active.size:
        p = pos[active]
        klen, p = decode_varints_at(A, p, 5)
        kstart = p
        p = p + klen
        vlen, p = decode_varints_at(A, p, 5)
        vstart = p
        p = p + np.maximum(vlen, 0)
        if (klen < 0).any() or (vlen < -1).any():
            bad = active[np.flatnonzero((klen < 0) | (vlen < -1))[0]]
            raise CorruptRecordError("invalid header length", path=path, position=int(frames.last_position[bad]))
        slot = list_offsets[active] + rnd
        key_start[slot], key_len[slot] = kstart, klen
        value_start[slot], value_len[slot] = vstart, vlen
        pos[active] = p
        rnd += 1
        active = active[counts[active] > rnd]
    _check_within(pos, body_end, "headers", frames, path)
    has = counts > 0
    if has.any() and (pos[has] != body_end[has]).any():
        bad = np.flatnonzero(has & (pos != body_end))[0]
        raise CorruptRecordError("record length does not match its fields", path=path,
                                 position=int(frames.last_position[bad]))
    keys = _binary_from_slices(arena, key_start, key_len, None, pa.string())
    values = _binary_from_slices(arena, value_start, np.maximum(value_len, 0), value_len >= 0, pa.binary())
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE.value_type))
    validity = None
    null_count = 0
    if not has.all():
        validity = pa.py_buffer(np.packbits(has, bitorder="little"))
        null_count = int(n - np.count_nonzero(has))
    return pa.Array.from_buffers(HEADER_TYPE, n, [validity, pa.py_buffer(list_offsets)], null_count=null_count,
                                 children=[entries])


def decode_to_arrow(buf, *, topic: str, partition: int, from_offset: int | None = None,
                    until_offset: int | None = None, include_headers: bool = False,
                    path: str | None = None, base_position: int = 0, validate: bool = True,
                    stop_at_partial: bool = True, table: BatchTable | None = None,
                    aborted_transactions: Sequence[AbortedTxn] | None = None) -> pa.RecordBatch:
    """Decode the complete batches of ``buf`` into one Arrow record batch.

    Keeps records with ``from_offset <= offset < until_offset`` and skips control
    batches (transaction markers are not data) and, read_committed, the batches of
    ``aborted_transactions`` (``aborted_filter``). A torn batch at the end of
    ``buf`` is where decoding stops. With ``validate``, every batch's CRC is
    checked and a mismatch raises CorruptRecordError naming ``path`` and the
    batch's position (``base_position`` + its offset in ``buf``). ``table``:
    the batches of ``buf`` when the caller has walked them already.
    """
    data = buf if isinstance(buf, bytes) else bytes(buf)
    if table is None:
        table = walk_batches(data, path=path, base_position=base_position, stop_at_partial=stop_at_partial,
                             until_offset=until_offset)
    if until_offset is not None:
        past = np.flatnonzero(table.base_offsets >= until_offset)
        if past.size:
            table = table[:int(past[0])]  # what follows the first batch at or past it is not read
    if validate:
        table.ensure_valid()
    counts = table.headers["records_count"].astype(np.int64)
    wanted = ~table.is_control & (counts != 0)
    if from_offset is not None:
        wanted &= table.last_offsets >= from_offset
    if aborted_transactions and wanted.any():
        candidates = np.flatnonzero(wanted)
        aborted = aborted_batch_mask(table.headers["producer_id"][candidates].astype(np.int64),
                                     table.base_offsets[candidates], table.is_transactional[candidates],
                                     aborted_transactions)
        wanted[candidates[aborted]] = False
    if not wanted.all():
        table, counts = table[wanted], counts[wanted]
    h = table.headers
    log_append_time = np.where(table.is_log_append_time, h["max_timestamp"], -1).astype(np.int64)
    begin = table.positions + RECORDS_OFFSET
    finish = table.ends
    arena_bytes = data
    compressed = table.is_compressed
    if compressed.any():
        # Decompressed sections live elsewhere: lay every records section end to end.
        view = memoryview(data)
        parts = [table.batch(i).records_bytes() if packed else view[b:f]
                 for i, (packed, b, f) in enumerate(zip(compressed.tolist(), begin.tolist(), finish.tolist()))]
        finish = np.cumsum([len(part) for part in parts], dtype=np.int64)
        begin = finish - [len(part) for part in parts]
        arena_bytes = b"".join(parts)
    frames = locate(arena_bytes, begin, finish, counts, table.base_offsets, h["base_timestamp"].astype(np.int64),
                    log_append_time, table.file_positions, path)
    return _build(arena_bytes, frames, topic, partition, from_offset, until_offset, include_headers, path)


def _build(arena_bytes: bytes, frames: RecordFrames, topic: str, partition: int, from_offset, until_offset,
           include_headers: bool, path) -> pa.RecordBatch:
    A = np.frombuffer(arena_bytes, dtype=np.uint8)
    arena = pa.py_buffer(arena_bytes)
    length, p = decode_varints_at(A, frames.starts, 5)
    body_end = p + length
    p = p + 1  # record attributes, unused
    ts_delta, p = decode_varints_at(A, p, 10)
    offset_delta, p = decode_varints_at(A, p, 5)
    offsets = frames.base_offset + offset_delta
    keep = None
    if len(offsets) and ((from_offset is not None and offsets.min() < from_offset)
                         or (until_offset is not None and offsets.max() >= until_offset)):
        keep = np.ones(len(offsets), dtype=bool)
        if from_offset is not None:
            keep &= offsets >= from_offset
        if until_offset is not None:
            keep &= offsets < until_offset
    if keep is not None:
        offsets, ts_delta, p, body_end = offsets[keep], ts_delta[keep], p[keep], body_end[keep]
        frames = RecordFrames(frames.starts[keep], frames.base_offset[keep], frames.base_timestamp[keep],
                         frames.log_append_time[keep], frames.last_position[keep])
    key_len, p = decode_varints_at(A, p, 5)
    key_start = p
    key_size = np.maximum(key_len, 0)
    p = p + key_size
    key_end = p
    try:
        value_len, p = decode_varints_at(A, p, 5)
    except CorruptRecordError:
        _check_within(key_end, body_end, "key", frames, path)  # the key ran past its record first
        raise
    value_start = p
    value_size = np.maximum(value_len, 0)
    p = p + value_size
    if (p > body_end).any():  # the value ends past its record, or the key already did
        _check_within(key_end, body_end, "key", frames, path)
        _check_within(p, body_end, "value", frames, path)
    n = len(offsets)
    lat = frames.log_append_time
    log_append = lat >= 0
    if log_append.any():
        timestamps = np.where(log_append, lat, frames.base_timestamp + ts_delta)
    else:
        timestamps = frames.base_timestamp + ts_delta
    timestamps *= 1000
    timestamp_type = log_append.astype(np.int32)
    topic_bytes = topic.encode("utf-8")
    columns = [
        _binary_from_slices(arena, key_start, key_size, key_len >= 0, pa.binary()),
        _binary_from_slices(arena, value_start, value_size, value_len >= 0, pa.binary()),
        pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)
                                                                * len(topic_bytes)),
                                               pa.py_buffer(topic_bytes * n)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, partition, dtype=np.int32))]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.ascontiguousarray(offsets))]),
        pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(timestamps)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(timestamp_type)]),
    ]
    if include_headers:
        header_count, p = decode_varints_at(A, p, 5) if n else (np.zeros(0, np.int64), p)
        columns.append(_headers(A, arena, p, header_count, body_end, frames, path))
    return pa.RecordBatch.from_arrays(columns, schema=kafka_schema(include_headers))
