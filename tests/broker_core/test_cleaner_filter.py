"""The survivor rules on single batches, and the bytes that replace a batch."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.log.cleaner.filter import FilterContext, MapLatest, empty_batch, filter_chunk
from broker_core.log.cleaner.offset_map import OffsetMap
from broker_core.log.cleaner.records import hash_keys
from broker_core.log.cleaner.transactions import CleanedTransactionMetadata, LastRecord
from format.compression import CompressionType
from format.record import Header, SimpleRecord
from format.record_batch import BatchHeader, TimestampType, build_batch, iter_batches

T0 = 1_767_225_600_000
RETENTION = 86_400_000


def offset_map(latest: dict[bytes, int], latest_offset: int) -> OffsetMap:
    keys = list(latest)
    h1, h2 = hash_keys(keys)
    return OffsetMap.holding(h1, h2, np.array([latest[k] for k in keys], dtype=np.int64), latest_offset)


def context(latest: dict[bytes, int], latest_offset: int, *, now: int = T0, upper: int = 10**9,
            producers=None) -> FilterContext:
    return FilterContext(MapLatest(offset_map(latest, latest_offset)), now, RETENTION, upper, producers or {},
                         CleanedTransactionMetadata())


def clean(batches: list[bytes], ctx: FilterContext) -> list:
    data = b"".join(batches)
    return list(iter_batches(filter_chunk(data, 0, ctx).output))


def test_a_batch_whose_records_all_survive_is_copied_unchanged():
    batch = build_batch([SimpleRecord(b"a", b"k1", T0), SimpleRecord(b"b", b"k2", T0 + 1)], base_offset=10)
    out = filter_chunk(batch, 0, context({b"k1": 10, b"k2": 11}, 11)).output
    assert out == batch


def test_a_partly_kept_batch_is_rewritten_as_kafkas_builder_writes_the_survivors():
    records = [SimpleRecord(b"v%d" % i, b"k%d" % (i % 3), T0 + 10 * i, (Header("h", b"x"),)) for i in range(6)]
    batch = build_batch(records, base_offset=100, producer_id=7, producer_epoch=2, base_sequence=40,
                        partition_leader_epoch=3)
    out = filter_chunk(batch, 0, context({b"k0": 103, b"k1": 104, b"k2": 105}, 200)).output
    expected = build_batch(records[3:], base_offset=100, offsets=[103, 104, 105], last_offset_delta=5,
                           producer_id=7, producer_epoch=2, base_sequence=40, partition_leader_epoch=3)
    assert out == expected


def test_the_first_survivors_timestamp_becomes_the_base_timestamp():
    records = [SimpleRecord(b"old", b"a", T0), SimpleRecord(b"new", b"b", T0 + 5000)]
    out = clean([build_batch(records)], context({b"a": 9, b"b": 1}, 9))
    assert out[0].header.base_timestamp == T0 + 5000
    assert [(r.offset, r.timestamp) for r in out[0].records()] == [(1, T0 + 5000)]


def test_compressed_and_log_append_time_batches_are_rebuilt_the_same_way():
    records = [SimpleRecord(b"v%d" % i, b"k%d" % i, T0 + i) for i in range(4)]
    latest = {b"k0": 50, b"k1": 1, b"k2": 50, b"k3": 3}
    lz4 = build_batch(records, compression=CompressionType.LZ4)
    assert filter_chunk(lz4, 0, context(latest, 50)).output == build_batch(
        [records[1], records[3]], offsets=[1, 3], last_offset_delta=3, compression=CompressionType.LZ4)
    appended = T0 + 999
    lat = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=appended)
    assert filter_chunk(lat, 0, context(latest, 50)).output == build_batch(
        [SimpleRecord(r.value, r.key, appended) for r in (records[1], records[3])], offsets=[1, 3],
        last_offset_delta=3, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=appended)


def test_records_past_the_maps_latest_offset_and_unmapped_keys_survive():
    records = [SimpleRecord(b"x", b"a", T0), SimpleRecord(b"y", b"b", T0), SimpleRecord(b"z", b"a", T0)]
    out = clean([build_batch(records)], context({b"a": 1}, 1))  # "a" was mapped at 1 (map stopped there)
    assert [(r.offset, r.key) for r in out[0].records()] == [(1, b"b"), (2, b"a")]


def test_keyless_records_are_removed():
    out = clean([build_batch([SimpleRecord(b"x", None, T0), SimpleRecord(b"y", b"k", T0)])],
                context({b"k": 1}, 5))
    assert [r.key for r in out[0].records()] == [b"k"]


def test_a_tombstone_gets_a_delete_horizon_on_its_first_clean_and_goes_after_it():
    batch = build_batch([SimpleRecord(b"v", b"k", T0), SimpleRecord(None, b"k", T0 + 1),
                         SimpleRecord(b"w", b"other", T0 + 2)])
    first = filter_chunk(batch, 0, context({b"k": 1, b"other": 2}, 2, now=T0 + 10)).output
    assert first == build_batch([SimpleRecord(None, b"k", T0 + 1), SimpleRecord(b"w", b"other", T0 + 2)],
                                offsets=[1, 2], last_offset_delta=2, delete_horizon_ms=T0 + 10 + RETENTION)
    header = BatchHeader.parse(first)
    assert header.delete_horizon_ms == T0 + 10 + RETENTION
    # Record timestamps are kept although the base timestamp now holds the horizon.
    assert [r.timestamp for r in next(iter_batches(first)).records()] == [T0 + 1, T0 + 2]
    # Still within the horizon: copied as it is.
    assert filter_chunk(first, 0, context({b"k": 1, b"other": 2}, 2, now=T0 + RETENTION)).output == first
    # Past it: the tombstone goes, the horizon stays on the batch.
    after = clean([first], context({b"k": 1, b"other": 2}, 2, now=T0 + 10 + RETENTION))
    assert [(r.offset, r.value) for r in after[0].records()] == [(2, b"w")]
    assert after[0].header.delete_horizon_ms == T0 + 10 + RETENTION


def test_a_batch_left_empty_goes_unless_it_is_its_producers_last_or_ends_the_round():
    records = [SimpleRecord(b"v", b"k", T0)] * 3
    plain = build_batch(records, base_offset=0)
    assert clean([plain], context({b"k": 50}, 50)) == []
    idempotent = build_batch(records, base_offset=0, producer_id=9, producer_epoch=4, base_sequence=12)
    out = filter_chunk(idempotent, 0, context({b"k": 50}, 50, producers={9: LastRecord(2, 4)})).output
    assert out == empty_batch(BatchHeader.parse(idempotent))
    h = BatchHeader.parse(out)
    assert (h.records_count, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence,
            h.max_timestamp, h.base_timestamp) == (0, 2, 9, 4, 12, T0, -1)
    assert next(iter_batches(out)).is_valid()
    # Not its producer's last batch any more: dropped.
    assert clean([idempotent], context({b"k": 50}, 50, producers={9: LastRecord(40, 4)})) == []
    # The batch ending the cleaning round keeps the log's last offset.
    kept = clean([plain], context({b"k": 50}, 50, upper=3))
    assert kept[0].header.records_count == 0 and kept[0].header.last_offset == 2


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from([None, b"a", b"b", b"c", b"d"]), st.booleans()),
                         min_size=1, max_size=6), min_size=1, max_size=12),
       st.integers(0, 30), st.integers(0, 40))
def test_skipping_dirty_batches_without_a_mapped_offset_changes_nothing(batches, first_dirty, stop):
    # A log of batches, the map of the keys in [first_dirty, latest] as the broker would build it.
    data, offset, latest = [], 0, {}
    for records in batches:
        data.append(build_batch([SimpleRecord(None if tomb else b"v", key, T0) for key, tomb in records],
                                base_offset=offset))
        offset += len(records)
    whole = b"".join(data)
    log_records = [(r.offset, r.key) for b in iter_batches(whole) for r in b.records()]
    last_mapped = min(max(first_dirty, stop), offset - 1)
    for o, key in log_records:
        if key is not None and first_dirty <= o <= last_mapped:
            latest[key] = o
    plain = context(latest, last_mapped, now=T0 + 5)
    shortcut = context(latest, last_mapped, now=T0 + 5)
    shortcut.latest = MapLatest(shortcut.latest.offset_map, first_dirty)
    assert filter_chunk(whole, 0, shortcut).output == filter_chunk(whole, 0, plain).output
