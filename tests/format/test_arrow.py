import random

import pytest
from hypothesis import given, settings, strategies as st

from format.arrow import decode_to_arrow, kafka_schema
from format.compression import CompressionType
from format.control import ControlRecordType, EndTransactionMarker
from format.record import Header, SimpleRecord
from format.errors import CorruptRecordError
from format.record_batch import (RECORDS_OFFSET, build_batch, build_end_txn_marker_batch,
                                 set_log_append_time)


def expected_rows(data, topic="t", partition=0, lo=None, hi=None):
    rows = []
    from format.record_batch import iter_batches
    for b in iter_batches(data):
        if b.header.is_control:
            continue
        for r in b.records():
            if (lo is None or r.offset >= lo) and (hi is None or r.offset < hi):
                rows.append((r.key, r.value, topic, partition, r.offset, r.timestamp,
                             int(b.header.timestamp_type), [(h.key, h.value) for h in r.headers] or None))
    return rows


def actual_rows(table):
    out = []
    for r in table.to_pylist():
        ts = r["timestamp"]
        millis = round(ts.timestamp() * 1000)
        out.append((r["key"], r["value"], r["topic"], r["partition"], r["offset"], millis, r["timestampType"],
                    None if r.get("headers") is None else [(h["key"], h["value"]) for h in r["headers"]]))
    return out


def test_schema_matches_sparks_kafka_source():
    schema = kafka_schema(include_headers=True)
    assert [(f.name, str(f.type)) for f in schema] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int32"),
        ("offset", "int64"), ("timestamp", "timestamp[us, tz=UTC]"), ("timestampType", "int32"),
        ("headers", "list<item: struct<key: string, value: binary>>"),
    ]
    assert "headers" not in kafka_schema(False).names


def test_decodes_every_field_and_keeps_nulls():
    records = [SimpleRecord(b"v1", b"k1", 1000, (Header("a", b"1"), Header("b", None))),
               SimpleRecord(None, None, 999),
               SimpleRecord(b"", b"", 1001)]
    data = build_batch(records, base_offset=7)
    table = decode_to_arrow(data, topic="orders", partition=2, include_headers=True)
    assert table.schema == kafka_schema(True)
    table.validate(full=True)
    assert actual_rows(table) == [
        (b"k1", b"v1", "orders", 2, 7, 1000, 0, [("a", b"1"), ("b", None)]),
        (None, None, "orders", 2, 8, 999, 0, None),
        (b"", b"", "orders", 2, 9, 1001, 0, None),
    ]


def test_keeps_only_offsets_in_the_requested_range():
    data = b"".join(build_batch([SimpleRecord(b"v%d" % (i * 10 + j), None, j) for j in range(10)],
                                base_offset=i * 10) for i in range(10))
    table = decode_to_arrow(data, topic="t", partition=0, from_offset=15, until_offset=42)
    assert table.column("offset").to_pylist() == list(range(15, 42))
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(15, 42)]


def test_skips_control_batches_and_reads_across_offset_gaps():
    data = (build_batch([SimpleRecord(b"a", None, 1)], base_offset=0, producer_id=5, is_transactional=True)
            + build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 0), producer_id=5,
                                         producer_epoch=0, base_offset=1, timestamp=2)
            + build_batch([SimpleRecord(b"b", None, 3), SimpleRecord(b"c", None, 4)], base_offset=10,
                          offsets=[12, 15]))
    table = decode_to_arrow(data, topic="t", partition=0)
    assert table.column("offset").to_pylist() == [0, 12, 15]
    assert table.column("value").to_pylist() == [b"a", b"b", b"c"]


def test_log_append_time_batches_report_type_one_and_the_batch_time():
    data = bytearray(build_batch([SimpleRecord(b"a", None, 1), SimpleRecord(b"b", None, 2)]))
    set_log_append_time(data, 0, 1_700_000_000_123)
    table = decode_to_arrow(bytes(data), topic="t", partition=0)
    assert table.column("timestampType").to_pylist() == [1, 1]
    assert [round(t.timestamp() * 1000) for t in table.column("timestamp").to_pylist()] == [1_700_000_000_123] * 2


def test_mixed_codecs_in_one_buffer():
    parts = [build_batch([SimpleRecord(b"%s-%d" % (c.name.encode(), j), b"k", 5) for j in range(3)],
                         base_offset=i * 3, compression=c) for i, c in enumerate(CompressionType)]
    data = b"".join(parts)
    table = decode_to_arrow(data, topic="t", partition=0, include_headers=True)
    assert actual_rows(table) == expected_rows(data)


def test_a_torn_tail_is_where_decoding_stops():
    data = build_batch([SimpleRecord(b"a", None, 1)]) + build_batch([SimpleRecord(b"b", None, 1)], base_offset=1)
    table = decode_to_arrow(data[:-5], topic="t", partition=0)
    assert table.column("offset").to_pylist() == [0]


def test_an_empty_buffer_gives_an_empty_batch_with_the_schema():
    table = decode_to_arrow(b"", topic="t", partition=0, include_headers=True)
    assert table.num_rows == 0 and table.schema == kafka_schema(True)


def test_many_batches_take_the_side_by_side_path_and_agree_with_the_record_decoder():
    rng = random.Random(7)
    parts = []
    offset = 0
    for i in range(150):
        n = rng.randint(1, 40)
        records = [SimpleRecord(None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 5, 90, 300, 20000])),
                                None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20)),
                                1_700_000_000_000 + rng.randint(-5000, 5000),
                                tuple(Header(f"h{k}", rng.choice([None, b"x" * k])) for k in range(rng.randint(0, 3))))
                   for _ in range(n)]
        parts.append(build_batch(records, base_offset=offset,
                                 compression=CompressionType.LZ4 if i % 10 == 0 else CompressionType.NONE))
        offset += n
    data = b"".join(parts)
    table = decode_to_arrow(data, topic="t", partition=1, include_headers=True, from_offset=17,
                            until_offset=offset - 3)
    table.validate(full=True)
    assert actual_rows(table) == expected_rows(data, partition=1, lo=17, hi=offset - 3)


record_strategy = st.builds(
    SimpleRecord, st.one_of(st.none(), st.binary(max_size=200)), st.one_of(st.none(), st.binary(max_size=30)),
    st.integers(0, 1 << 42), st.lists(st.builds(Header, st.text(max_size=5),
                                                st.one_of(st.none(), st.binary(max_size=10))), max_size=3).map(tuple))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(record_strategy, min_size=1, max_size=8), min_size=1, max_size=80),
       st.sampled_from([CompressionType.NONE, CompressionType.ZSTD]), st.booleans())
def test_arrow_decoding_agrees_with_record_decoding(batches, codec, headers):
    parts, offset = [], 0
    for records in batches:
        parts.append(build_batch(records, base_offset=offset, compression=codec))
        offset += len(records)
    data = b"".join(parts)
    table = decode_to_arrow(data, topic="t", partition=0, include_headers=headers)
    want = expected_rows(data)
    if not headers:
        want = [row[:7] + (None,) for row in want]
    assert actual_rows(table) == want


@pytest.mark.parametrize("record", [0, 3, 8, 9])  # checked at its step, between checks, the last
@pytest.mark.parametrize("length_byte", [0x7E, 0xFF])
def test_a_bad_record_length_in_the_side_by_side_walk_names_its_batch(length_byte, record):
    parts, positions, offset = [], [], 0
    for i in range(100):
        positions.append(sum(len(p) for p in parts))
        parts.append(build_batch([SimpleRecord(b"v" * 90, b"k%d" % j, 1_700_000_000_000) for j in range(10)],
                                 base_offset=offset))
        offset += 10
    record_size = (len(parts[0]) - RECORDS_OFFSET) // 10  # every record of these batches is as long
    data = bytearray(b"".join(parts))
    data[positions[70] + RECORDS_OFFSET + record * record_size] = length_byte  # its length prefix, in batch 70
    with pytest.raises(CorruptRecordError) as caught:
        decode_to_arrow(bytes(data), topic="t", partition=0, validate=False, path="x.log")
    assert caught.value.position == positions[70] and caught.value.path == "x.log"
