import struct

import pytest
from hypothesis import given, settings, strategies as st

from format.compression import CompressionType
from format.control import ControlRecordType, EndTransactionMarker
from format.errors import CorruptRecordError, InvalidRecordError
from format.record import Header, SimpleRecord
from format.record_batch import (
    HEADER, RECORDS_OFFSET, BatchHeader, RecordBatch, TimestampType, build_batch, build_end_txn_marker_batch,
    batch_spans, crc32c, iter_batches, set_base_offset, set_log_append_time, set_partition_leader_epoch)

CODECS = list(CompressionType)


def records_equal(decoded, written, base_offset=0):
    assert len(decoded) == len(written)
    for i, (got, want) in enumerate(zip(decoded, written)):
        assert got.offset == base_offset + i
        assert (got.key, got.value, got.timestamp, got.headers) == (want.key, want.value, want.timestamp,
                                                                  tuple(want.headers))


def test_header_is_61_bytes():
    assert HEADER.size == RECORDS_OFFSET == 61


@pytest.mark.parametrize("codec", CODECS)
def test_every_field_round_trips(codec):
    records = [
        SimpleRecord(b"value", b"key", 1_700_000_000_000, (Header("h1", b"v1"), Header("h2", None))),
        SimpleRecord(None, None, 1_700_000_000_005),
        SimpleRecord(b"", b"", 1_699_999_999_000),  # empty key and value; negative timestamp delta
        SimpleRecord(b"x" * 100_000, b"k" * 1000, 1_700_000_000_001, tuple(Header(f"h{i}", b"y" * i)
                                                                         for i in range(50))),
    ]
    data = build_batch(records, base_offset=42, compression=codec, producer_id=7, producer_epoch=3,
                       base_sequence=11, partition_leader_epoch=5)
    batch = RecordBatch(data)
    batch.ensure_valid()
    h = batch.header
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (42, 3, 4)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 3, 11, 14)
    assert h.partition_leader_epoch == 5
    assert h.base_timestamp == 1_700_000_000_000
    assert h.max_timestamp == 1_700_000_000_005
    assert h.compression_type == codec
    assert h.timestamp_type == TimestampType.CREATE_TIME
    records_equal(batch.records(), records, 42)


def test_uncompressed_batch_layout_is_kafkas_byte_for_byte():
    data = build_batch([SimpleRecord(b"v", b"k", 1000)], base_offset=0)
    # Header fields in Kafka's order, big-endian.
    fields = struct.unpack_from(">qiibIhiqqqhii", data)
    assert fields[0] == 0 and fields[1] == len(data) - 12 and fields[3] == 2
    assert fields[4] == crc32c(data[21:])
    # length 8 (zigzag 16), attrs 0, ts delta 0, offset delta 0, key len 1, 'k', value len 1, 'v', 0 headers
    assert data[61:] == bytes([16, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([0])


def test_offset_deltas_near_the_int32_limit():
    limit = (1 << 31) - 1
    records = [SimpleRecord(b"a", timestamp=1), SimpleRecord(b"b", timestamp=2)]
    data = build_batch(records, base_offset=10, offsets=[10, 10 + limit])
    batch = RecordBatch(data)
    batch.ensure_valid()
    assert [r.offset for r in batch.records()] == [10, 10 + limit]
    assert batch.header.last_offset == 10 + limit
    with pytest.raises(InvalidRecordError):
        build_batch(records, base_offset=0, offsets=[0, limit + 1])


def test_compacted_batch_keeps_gaps_and_its_offset_span():
    records = [SimpleRecord(b"a", timestamp=1), SimpleRecord(b"c", timestamp=3)]
    batch = RecordBatch(build_batch(records, base_offset=100, offsets=[101, 105], last_offset_delta=9))
    batch.ensure_valid()
    assert [r.offset for r in batch.records()] == [101, 105]
    assert batch.header.next_offset == 110


def test_empty_batch_keeps_its_offsets():
    batch = RecordBatch(build_batch([], base_offset=5, last_offset_delta=3, producer_id=9))
    batch.ensure_valid()
    assert batch.records() == [] and batch.header.last_offset == 8


def test_log_append_time_stamps_every_record_with_the_batch_time():
    data = bytearray(build_batch([SimpleRecord(b"a", timestamp=1), SimpleRecord(b"b", timestamp=2)]))
    set_log_append_time(data, 0, 5000)
    batch = RecordBatch(bytes(data))
    batch.ensure_valid()
    assert batch.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records()] == [5000, 5000]


def test_base_offset_and_leader_epoch_rewrites_keep_the_crc_valid():
    data = bytearray(build_batch([SimpleRecord(b"a", timestamp=1)]))
    set_base_offset(data, 0, 123456789)
    set_partition_leader_epoch(data, 0, 7)
    batch = RecordBatch(bytes(data))
    batch.ensure_valid()
    assert batch.header.base_offset == 123456789 and batch.header.partition_leader_epoch == 7
    assert batch.records()[0].offset == 123456789


@pytest.mark.parametrize("control_type", [ControlRecordType.COMMIT, ControlRecordType.ABORT])
def test_transaction_markers_round_trip(control_type):
    marker = EndTransactionMarker(control_type, coordinator_epoch=17)
    batch = RecordBatch(build_end_txn_marker_batch(marker, producer_id=3, producer_epoch=1, base_offset=9,
                                                   timestamp=100))
    batch.ensure_valid()
    assert batch.header.is_control and batch.header.is_transactional
    assert batch.end_txn_marker() == marker
    key = batch.records()[0].key
    assert key == struct.pack(">hh", 0, int(control_type))
    assert batch.records()[0].value == struct.pack(">hi", 0, 17)


def test_delete_horizon_replaces_the_base_timestamp():
    batch = RecordBatch(build_batch([SimpleRecord(None, b"k", 1000)], delete_horizon_ms=99_999))
    assert batch.header.has_delete_horizon_ms and batch.header.delete_horizon_ms == 99_999
    assert batch.records()[0].timestamp == 1000


def test_iteration_walks_headers_without_decoding():
    parts = [build_batch([SimpleRecord(b"v%d" % i, timestamp=i)] * (i + 1), base_offset=i * 10) for i in range(5)]
    data = b"".join(parts)
    batches = list(iter_batches(data))
    assert [b.header.base_offset for b in batches] == [0, 10, 20, 30, 40]
    assert [b.position for b in batches] == [sum(len(p) for p in parts[:i]) for i in range(5)]
    assert all(isinstance(b.buffer, memoryview) and b.buffer.obj is data for b in batches)


def test_iteration_stops_at_a_torn_tail_or_reports_it():
    data = build_batch([SimpleRecord(b"a", timestamp=1)]) * 2
    torn = data[:-3]
    assert len(list(iter_batches(torn))) == 1
    with pytest.raises(CorruptRecordError) as err:
        list(iter_batches(torn, stop_at_partial=False, path="x.log", base_position=1000))
    assert err.value.path == "x.log" and err.value.position == 1000 + len(data) // 2
    assert "truncated" in str(err.value)


def test_batch_spans_walk_the_batches_iter_batches_walks_and_stop_at_a_torn_tail():
    parts = [build_batch([SimpleRecord(b"v%d" % i, timestamp=i)] * (i + 1), base_offset=i * 10) for i in range(5)]
    data = b"".join(parts)[:-3]  # the last batch torn
    spans = list(batch_spans(data))
    assert spans == [(b.position, b.size_in_bytes, b.header.base_offset, b.header.last_offset, b.header.crc)
                     for b in iter_batches(data)]
    assert [s[2:4] for s in spans] == [(0, 0), (10, 11), (20, 22), (30, 33)]


def test_batch_spans_report_a_bad_length_or_magic_with_file_and_position():
    one = build_batch([SimpleRecord(b"a", timestamp=1)])
    bad_magic = bytearray(one * 2)
    bad_magic[len(one) + 16] = 1
    with pytest.raises(CorruptRecordError, match="unsupported magic 1") as err:
        list(batch_spans(bad_magic, path="x.log", base_position=1000))
    assert (err.value.path, err.value.position) == ("x.log", 1000 + len(one))
    short = bytearray(one)
    short[8:12] = struct.pack(">i", 10)
    with pytest.raises(CorruptRecordError, match="batch length 10 is below the minimum"):
        list(batch_spans(short))


def test_record_count_mismatch_is_reported():
    data = bytearray(build_batch([SimpleRecord(b"a", timestamp=1), SimpleRecord(b"b", timestamp=2)]))
    struct.pack_into(">i", data, 57, 3)
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    with pytest.raises(CorruptRecordError, match="record count mismatch"):
        RecordBatch(bytes(data)).records()


header_strategy = st.builds(Header, st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20)))
record_strategy = st.builds(
    SimpleRecord,
    st.one_of(st.none(), st.binary(max_size=300)),
    st.one_of(st.none(), st.binary(max_size=50)),
    st.integers(0, 1 << 45),
    st.lists(header_strategy, max_size=4).map(tuple),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=30), st.sampled_from(CODECS), st.integers(0, 1 << 50))
def test_any_batch_round_trips(records, codec, base_offset):
    data = build_batch(records, base_offset=base_offset, compression=codec)
    batch = RecordBatch(data)
    batch.ensure_valid()
    records_equal(batch.records(), records, base_offset)
    assert BatchHeader.parse(data).pack() == data[:61]
