"""Reading segments through fsspec: a local directory and an S3 bucket (SeaweedFS)."""

import os
import random

import pytest
from test_arrow import actual_rows, expected_rows

from format import layout
from format.compression import CompressionType
from format.control import ControlRecordType, EndTransactionMarker
from format.errors import CorruptRecordError
from format.fs import filesystem_for, storage_options_from
from format.record import Header, SimpleRecord
from format.record_batch import build_batch, build_end_txn_marker_batch, iter_batches
from format.segment import LogSegment
from format.segment_reader import SegmentReader
from format.txn_index import AbortedTxn


def write_partition(directory, batches=300, per_batch=20, value_size=200):
    os.makedirs(directory, exist_ok=True)
    segment = LogSegment.open(directory, 0)
    for i in range(batches):
        base = i * per_batch
        segment.append(build_batch([SimpleRecord(b"%08d" % (base + j) + b"x" * value_size, b"k%d" % j,
                                                 10_000 + base + j) for j in range(per_batch)],
                                   base_offset=base))
    segment.close()
    return batches * per_batch


def check_reader(reader, total):
    assert reader.translate_offset(1234).offset == 1220
    tables = list(reader.iter_arrow("t", 0, 1234, 4321, chunk_bytes=64 * 1024))
    assert len(tables) > 1  # really read in chunks
    offsets = [o for t in tables for o in t.column("offset").to_pylist()]
    assert offsets == list(range(1234, 4321))
    values = [v[:8] for t in tables for v in t.column("value").to_pylist()]
    assert values == [b"%08d" % o for o in range(1234, 4321)]
    assert reader.find_offset_by_timestamp(10_000 + 777).offset == 777
    everything = sum(t.num_rows for t in reader.iter_arrow("t", 0, 0))
    assert everything == total


def test_reads_a_local_partition_through_fsspec(tmp_path):
    directory = tmp_path / "t-0"
    total = write_partition(directory)
    fs, path = filesystem_for(f"file://{directory}")
    with SegmentReader(fs, path, 0) as reader:
        check_reader(reader, total)


def test_batches_larger_than_a_chunk_are_read_whole(tmp_path):
    directory = tmp_path / "t-0"
    total = write_partition(directory, batches=5, per_batch=50, value_size=4000)
    fs, path = filesystem_for(str(directory))
    with SegmentReader(fs, path, 0) as reader:
        tables = list(reader.iter_arrow("t", 0, 60, 180, chunk_bytes=1024))
        assert [o for t in tables for o in t.column("offset").to_pylist()] == list(range(60, 180))
        assert sum(t.num_rows for t in reader.iter_arrow("t", 0, 0, chunk_bytes=1024)) == total


def test_a_segment_without_an_index_is_scanned(tmp_path):
    directory = tmp_path / "t-0"
    write_partition(directory, batches=50)
    os.remove(directory / layout.offset_index_file_name(0))
    fs, path = filesystem_for(str(directory))
    with SegmentReader(fs, path, 0) as reader:
        assert reader.translate_offset(555).offset == 540


@pytest.mark.slow
def test_reads_a_partition_in_an_s3_bucket(tmp_path, s3_bucket):
    bucket, options = s3_bucket
    directory = tmp_path / "t-0"
    total = write_partition(directory)
    opts = storage_options_from({f"storage.{k}": v for k, v in options.items()})
    fs, root = filesystem_for(f"s3://{bucket}/logs", opts)
    for name in os.listdir(directory):
        fs.put_file(str(directory / name), f"{root}/t-0/{name}")
    with SegmentReader(fs, f"{root}/t-0", 0) as reader:
        assert reader.size == os.path.getsize(directory / layout.log_file_name(0))
        check_reader(reader, total)


def write_mixed_partition(directory, batches=120):
    """A segment of ``batches`` data batches (enough to be walked side by side) of every kind a
    reader meets: headers, null keys and values, each codec, transactions committed and aborted with
    their control batches. Returns the segment's bytes and the aborted transactions."""
    rng = random.Random(19)
    os.makedirs(directory, exist_ok=True)
    segment = LogSegment.open(directory, 0)
    offset, aborted = 0, []
    codecs = list(CompressionType)
    for i in range(batches):
        records = [SimpleRecord(None if rng.random() < 0.1 else rng.randbytes(9000 if rng.random() < 0.02 else rng.choice([0, 7, 120])),
                                None if rng.random() < 0.2 else b"k%d" % rng.randint(0, 99),
                                1_700_000_000_000 + rng.randint(-20_000, 20_000),
                                tuple(Header(f"h{k}", rng.choice([None, b"", b"x" * k])) for k in range(i % 3)))
                   for _ in range(rng.randint(1, 30))]
        producer_id = 7 + i % 2
        transactional = i % 5 == 0
        segment.append(build_batch(records, base_offset=offset, compression=codecs[i % 7 % len(codecs)],
                                   producer_id=producer_id if transactional else -1,
                                   producer_epoch=0 if transactional else -1, is_transactional=transactional))
        first, offset = offset, offset + len(records)
        if transactional:
            kind = ControlRecordType.ABORT if i % 10 == 0 else ControlRecordType.COMMIT
            segment.append(build_end_txn_marker_batch(EndTransactionMarker(kind, 0), producer_id=producer_id,
                                                      producer_epoch=0, base_offset=offset, timestamp=1))
            if kind == ControlRecordType.ABORT:
                aborted.append(AbortedTxn(producer_id, first, offset, 0))
            offset += 1
    segment.close()
    with open(directory / layout.log_file_name(0), "rb") as f:
        return f.read(), aborted


@pytest.mark.parametrize("headers", [True, False])
def test_a_segment_of_every_kind_of_batch_reads_in_chunks_as_the_record_decoder_reads_it(tmp_path, headers):
    directory = tmp_path / "t-0"
    data, aborted = write_mixed_partition(directory)
    fs, path = filesystem_for(str(directory))
    with SegmentReader(fs, path, 0) as reader:
        for chunk_bytes in (64 * 1024, 1024 * 1024):
            tables = list(reader.iter_arrow("t", 3, 25, None, include_headers=headers, chunk_bytes=chunk_bytes))
            rows = [row for table in tables for row in actual_rows(table)]
            want = expected_rows(data, partition=3, lo=25)
            assert rows == (want if headers else [row[:7] + (None,) for row in want])
        committed = [row for table in reader.iter_arrow("t", 3, 0, None, include_headers=headers,
                                                        aborted_transactions=aborted)
                     for row in actual_rows(table)]
    gone = {o for txn in aborted for o in range(txn.first_offset, txn.last_offset)}
    assert gone and [row[4] for row in committed] == [row[4] for row in expected_rows(data) if row[4] not in gone]


def test_a_base_offset_out_of_order_mid_chunk_ends_the_read_before_the_pair_naming_file_and_position(tmp_path):
    directory = tmp_path / "t-0"
    write_partition(directory, batches=300, per_batch=20, value_size=50)
    log_path = directory / layout.log_file_name(0)
    data = bytearray(log_path.read_bytes())
    positions = [batch.position for batch in iter_batches(bytes(data))]
    victim = positions[150]  # offsets 3000..3019, relabelled 2990..3009
    data[victim:victim + 8] = (2990).to_bytes(8, "big")
    log_path.write_bytes(bytes(data))
    fs, path = filesystem_for(str(directory))
    with SegmentReader(fs, path, 0) as reader:
        read = []
        with pytest.raises(CorruptRecordError) as caught:
            for table in reader.iter_arrow("t", 0, 0, None, chunk_bytes=1024 * 1024):
                read.extend(table.column("offset").to_pylist())
    assert caught.value.path == reader.log_path and caught.value.position == victim
    assert "batch offsets 2990..3009 do not follow offset 2999" in str(caught.value)
    assert read == list(range(2980))  # nor the batch before it: either of the two may be the damaged one
