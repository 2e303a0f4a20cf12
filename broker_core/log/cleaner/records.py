"""The records of a run of batches as columns, and the 128-bit key hash the cleaner maps keys by.

The cleaner looks at every record twice (once to map keys to their latest
offset, once to decide what survives), so both passes decode a chunk of
batches at once with numpy: where every record starts and ends, its offset,
its timestamp, where its key lies and whether its value is null. Nothing
here copies a key or a value; the survivors are later cut out of the same
bytes.

Kafka maps a key by its MD5 digest; seglog maps it by a 128-bit hash computed
for a whole column of keys at once (eight key bytes per round, two 64-bit
lanes, a murmur-style finaliser). Like MD5 in Kafka, the hash only has to
make two live keys of one partition colliding too unlikely to matter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from format.arrow import locate_records  # the record walk shared with the Arrow decoder
from format.compression import CompressionType
from format.errors import CorruptRecordError
from format.record_batch import RECORDS_OFFSET, RecordBatch, TimestampType
from format.varint_arrays import decode_varints_at

_U64 = np.uint64
_C1 = _U64(0x87C37B91114253D5)
_C2 = _U64(0x4CF5AD432745937F)
_F1 = _U64(0xFF51AFD7ED558CCD)
_F2 = _U64(0xC4CEB9FE1A85EC53)
_SEED1 = _U64(0x736567_6C6F67_3031)  # "seglog01"
_SEED2 = _U64(0x6B65795F68617368)  # "key_hash"


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U64(r)) | (x >> _U64(64 - r))


def _fmix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _U64(33))
    x = x * _F1
    x = x ^ (x >> _U64(33))
    x = x * _F2
    return x ^ (x >> _U64(33))


_BYTE_MASKS = np.array([(1 << (8 * r)) - 1 for r in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def _words(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every 8-byte little-endian word of ``data`` by its starting byte (an unaligned strided view,
    no copy), and the bytes past the last full word, zero-padded, for words that run off the end."""
    n = len(data)
    if n >= 8:
        view = np.ndarray(shape=(n - 7,), dtype="<u8", buffer=data, strides=(1,))
    else:
        view = np.zeros(0, dtype="<u8")
    tail = np.frombuffer(bytes(data[max(0, n - 7):]) + bytes(15), dtype=np.uint8)
    return view, tail


def key_hashes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 128-bit hash (two uint64 halves) of each key ``data[start:start+length]``.

    ``data`` is a uint8 array. Keys are read eight bytes per round, little
    endian, the last word zero-padded; the length is mixed in, so keys that
    differ only by trailing zero bytes hash apart. Deterministic across
    processes and machines (no per-process seed), as the Spark job needs.
    """
    n = len(starts)
    lengths = lengths.astype(np.int64, copy=False)
    h1 = np.full(n, _SEED1, dtype=np.uint64) ^ (lengths.astype(np.uint64) * _C2)
    h2 = np.full(n, _SEED2, dtype=np.uint64) ^ (lengths.astype(np.uint64) * _C1)
    words = (lengths + 7) // 8
    view, tail = _words(data)
    last_full = len(view)  # words starting at or past this position run off the end of data
    tail_base = max(0, len(data) - 7)
    active = np.flatnonzero(words > 0)
    r = 0
    with np.errstate(over="ignore"):
        while active.size:
            at = starts[active] + 8 * r
            inside = at < last_full
            if inside.all():
                w = view[at]
            else:
                w = np.empty(len(at), dtype=np.uint64)
                w[inside] = view[at[inside]]
                off = at[~inside] - tail_base
                w[~inside] = np.ndarray(shape=(len(tail) - 7,), dtype="<u8", buffer=tail, strides=(1,))[off]
            w &= _BYTE_MASKS[np.minimum(lengths[active] - 8 * r, 8)]
            k1 = _rotl(w * _C1, 31) * _C2
            a = _rotl(h1[active] ^ k1, 27) + h2[active]
            a = a * _U64(5) + _U64(0x52DCE729)
            k2 = _rotl(w * _C2, 33) * _C1
            b = _rotl(h2[active] ^ k2, 31) + a
            b = b * _U64(5) + _U64(0x38495AB5)
            h1[active] = a
            h2[active] = b
            r += 1
            active = active[words[active] > r]
        h1 = h1 + h2
        h2 = h2 + h1
        h1 = _fmix(h1)
        h2 = _fmix(h2)
        h1 = h1 + h2
        h2 = h2 + h1
    return h1, h2


def hash_keys(keys: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``key_hashes`` of a list of keys (tests and tools; the cleaner hashes in place)."""
    data = np.frombuffer(b"".join(keys) or b"\0", dtype=np.uint8)
    lengths = np.array([len(k) for k in keys], dtype=np.int64)
    starts = np.zeros(len(keys), dtype=np.int64)
    if len(keys) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    return key_hashes(data, starts, lengths)


@dataclass
class RecordColumns:
    """Every record of some batches of a chunk, one array entry per record, in offset order.

    Positions (``start``, ``end``, ``offset_delta_at``, ``key_start``) index
    ``arena``: the chunk itself when its batches are uncompressed, otherwise
    the records sections of the batches laid end to end, decompressed.
    """

    arena: bytes
    batch: np.ndarray  # index into the batches the columns were built from
    start: np.ndarray  # where the record's length prefix starts
    end: np.ndarray  # one past its last byte
    attributes: np.ndarray
    offset_delta_at: np.ndarray  # where its offsetDelta varint starts: the bytes from here on never change
    offset: np.ndarray
    timestamp: np.ndarray
    key_start: np.ndarray
    key_length: np.ndarray  # -1: null key
    value_length: np.ndarray  # -1: null value (a tombstone)
    batch_first: np.ndarray  # index of each batch's first record (len = batches + 1)

    @property
    def size(self) -> int:
        return len(self.offset)

    @property
    def has_key(self) -> np.ndarray:
        return self.key_length >= 0

    @property
    def is_tombstone(self) -> np.ndarray:
        return self.value_length < 0

    def hashes(self, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Key hashes of the records selected by ``which`` (indices or a mask); their keys must not be null."""
        data = np.frombuffer(self.arena, dtype=np.uint8)
        return key_hashes(data, self.key_start[which], self.key_length[which])


def _empty_columns(arena: bytes, batches: int) -> RecordColumns:
    z = np.zeros(0, dtype=np.int64)
    return RecordColumns(arena, z, z, z, z, z, z, z, z, z, z, np.zeros(batches + 1, dtype=np.int64))


def decode_columns(data, batches: list[RecordBatch], base_position: int, path: str | None = None
                   ) -> RecordColumns:
    """Decode the records of ``batches`` (all inside ``data``, which starts at file position
    ``base_position``) into columns. Batches without records contribute none."""
    sections = []
    pieces = []
    compressed = False
    for i, batch in enumerate(batches):
        h = batch.header
        if h.records_count <= 0:
            sections.append(None)
            continue
        lat = h.max_timestamp if h.timestamp_type == TimestampType.LOG_APPEND_TIME else -1
        if h.compression_type == CompressionType.NONE:
            start = batch.position - base_position + RECORDS_OFFSET
            end = batch.position - base_position + h.size_in_bytes
            pieces.append(None)
        else:
            compressed = True
            records = bytes(batch.records_bytes())
            start, end = 0, len(records)
            pieces.append(records)
        sections.append([start, end, h.records_count, h.base_offset, h.base_timestamp, lat, batch.position, i])
    live = [s for s in sections if s is not None]
    counts = np.zeros(len(batches), dtype=np.int64)
    for s in live:
        counts[s[7]] = s[2]
    batch_first = np.zeros(len(batches) + 1, dtype=np.int64)
    np.cumsum(counts, out=batch_first[1:])
    if compressed:
        # Lay every records section end to end, the uncompressed ones copied out of the chunk.
        view = memoryview(data)
        parts = []
        cursor = 0
        for s, piece in zip(live, pieces):
            part = piece if piece is not None else view[s[0]:s[1]]
            size = len(part)
            parts.append(part)
            s[0], s[1] = cursor, cursor + size
            cursor += size
        arena = b"".join(parts)
    else:
        arena = data if isinstance(data, bytes) else bytes(data)
    if not live:
        return _empty_columns(arena, len(batches))
    frames = locate_records(arena, [s[:7] for s in live], path)
    A = np.frombuffer(arena, dtype=np.uint8)
    length, p = decode_varints_at(A, frames.starts, 5)
    end = p + length
    attributes = A[p].astype(np.int64)
    ts_delta, p = decode_varints_at(A, p + 1, 10)
    offset_delta_at = p
    offset_delta, p = decode_varints_at(A, p, 5)
    key_length, p = decode_varints_at(A, p, 5)
    key_start = p
    p = p + np.maximum(key_length, 0)
    if (p > end).any() or (key_length < -1).any():
        bad = int(np.flatnonzero((p > end) | (key_length < -1))[0])
        raise CorruptRecordError("record key runs past the end of its record", path=path,
                                 position=int(frames.last_position[bad]))
    value_length, p = decode_varints_at(A, p, 5)
    if (p + np.maximum(value_length, 0) > end).any() or (value_length < -1).any():
        bad = int(np.flatnonzero((p + np.maximum(value_length, 0) > end) | (value_length < -1))[0])
        raise CorruptRecordError("record value runs past the end of its record", path=path,
                                 position=int(frames.last_position[bad]))
    lat = frames.log_append_time
    timestamp = np.where(lat >= 0, lat, frames.base_timestamp + ts_delta)
    batch_of = np.repeat(np.arange(len(batches), dtype=np.int64), counts)
    return RecordColumns(arena, batch_of, frames.starts, end, attributes, offset_delta_at,
                         frames.base_offset + offset_delta, timestamp, key_start, key_length, value_length,
                         batch_first)
