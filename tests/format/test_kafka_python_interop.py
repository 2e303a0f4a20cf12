"""Cross-implementation checks against kafka-python's record module (``kafka.record``)."""

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from format.arrow import decode_to_arrow
from format.compression import CompressionType
from format.record import Header, SimpleRecord
from format.record_batch import RecordBatch, build_batch, iter_batches

CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
          CompressionType.ZSTD]


def sample_records(n=60):
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else (b"" if i % 11 == 0 else f"value-{i}-".encode() * (i % 13 + 1))
        headers = tuple(Header(f"h{j}", None if j == 1 else f"hv{i}.{j}".encode()) for j in range(i % 3))
        out.append(SimpleRecord(value, key, 1_700_000_000_000 + (i * 37) % 1000 - 500, headers))
    return out


def kafka_python_batch(records, codec, base_offset=0):
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=1 << 24)
    for i, r in enumerate(records):
        builder.append(i, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=[(h.key, h.value) for h in r.headers])
    data = bytearray(builder.build())
    # kafka-python writes the batch with base offset 0; a broker assigns the real one.
    data[0:8] = base_offset.to_bytes(8, "big")
    return bytes(data)


def kafka_python_records(data):
    records = MemoryRecords(data)
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]))
    return out


def ours(records, base_offset=0):
    return [(base_offset + i, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
            for i, r in enumerate(records)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_seglog_batches_decode_with_kafka_python(codec):
    records = sample_records()
    data = build_batch(records, base_offset=1000, compression=codec)
    assert kafka_python_records(data) == ours(records, 1000)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_kafka_python_batches_decode_with_seglog(codec):
    records = sample_records()
    data = kafka_python_batch(records, codec, base_offset=500)
    batch = RecordBatch(data)
    batch.ensure_valid()
    assert batch.header.compression_type == codec
    decoded = [(r.offset, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
               for r in batch.records()]
    assert decoded == ours(records, 500)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_kafka_python_batches_decode_to_arrow(codec):
    records = sample_records()
    data = b"".join(kafka_python_batch(records[i:i + 20], codec, base_offset=i) for i in range(0, 60, 20))
    table = decode_to_arrow(data, topic="t", partition=3, include_headers=True)
    rows = table.to_pylist()
    assert [r["offset"] for r in rows] == list(range(60))
    assert [r["key"] for r in rows] == [r.key for r in records]
    assert [r["value"] for r in rows] == [r.value for r in records]
    assert [int(r["timestamp"].timestamp() * 1000) for r in rows] == [r.timestamp for r in records]
    assert [[(h["key"], h["value"]) for h in (r["headers"] or [])] for r in rows] == \
           [[(h.key, h.value) for h in r.headers] for r in records]


def test_uncompressed_bytes_are_identical_to_kafka_python_apart_from_the_leader_epoch():
    records = sample_records(10)
    theirs = bytearray(kafka_python_batch(records, CompressionType.NONE))
    mine = bytearray(build_batch(records))
    # kafka-python leaves partitionLeaderEpoch at 0, the Java client at -1 (no epoch); it is outside the CRC.
    theirs[12:16] = mine[12:16]
    assert bytes(theirs) == bytes(mine)


def test_batch_iteration_agrees_with_kafka_python_on_positions():
    data = b"".join(build_batch(sample_records(5), base_offset=i * 5, compression=c)
                    for i, c in enumerate(CODECS))
    records = MemoryRecords(data)
    theirs = []
    while records.has_next():
        theirs.append(records.next_batch().base_offset)
    assert [b.header.base_offset for b in iter_batches(data)] == theirs == [0, 5, 10, 15, 20]
