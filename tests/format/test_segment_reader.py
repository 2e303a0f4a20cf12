"""Reading segments through fsspec: a local directory and an S3 bucket (SeaweedFS)."""

import os

import pytest

from format import layout
from format.fs import filesystem_for, storage_options_from
from format.record import SimpleRecord
from format.record_batch import build_batch
from format.segment import LogSegment
from format.segment_reader import SegmentReader


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
