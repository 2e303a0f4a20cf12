"""Every single-byte flip in a stored batch is caught and located."""

import os

import pytest

from broker_core.cli import main as seglog
from format.arrow import decode_to_arrow
from format.errors import CorruptRecordError
from format.file_records import FileRecords
from format.record import Header, SimpleRecord
from format.record_batch import build_batch
from format.compression import CompressionType
from format.segment import LogSegment

MAX_BATCH = 1024 * 1024 + 12


def write_log(directory, codec=CompressionType.NONE):
    segment = LogSegment.open(directory, 0)
    offset = 0
    for i in range(3):
        records = [SimpleRecord(b"value-%d" % (offset + j), b"k%d" % j, 1000 + offset + j, (Header("h", b"x"),))
                   for j in range(4)]
        segment.append(build_batch(records, base_offset=offset, compression=codec))
        offset += 4
    segment.close()
    path = os.path.join(directory, "00000000000000000000.log")
    data = open(path, "rb").read()
    first = int.from_bytes(data[8:12], "big") + 12
    second = int.from_bytes(data[first + 8:first + 12], "big") + 12
    return path, data, first, second


def strict_walk(path):
    records = FileRecords.open(path, writable=False)
    try:
        for batch in records.batches(validate=True, stop_at_partial=False, max_batch_size=MAX_BATCH):
            batch.records()
    finally:
        records.close()


# Bytes 0-7 (baseOffset) and 12-15 (partitionLeaderEpoch) lie outside the CRC by
# Kafka's design, so the broker can assign them without re-checksumming; the
# offset-order test below covers baseOffset.
def covered(start, size):
    return [p for p in range(start, start + size) if not (start <= p < start + 8 or start + 12 <= p < start + 16)]


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4], ids=["none", "lz4"])
def test_every_covered_byte_flip_of_a_batch_is_detected_with_file_and_position(tmp_path, codec):
    path, data, first, second = write_log(tmp_path, codec)
    for pos in covered(first, second):
        corrupt = bytearray(data)
        corrupt[pos] ^= 0xFF
        with open(path, "wb") as f:
            f.write(corrupt)
        with pytest.raises(CorruptRecordError) as err:
            strict_walk(path)
        assert err.value.path == path, pos
        assert err.value.position == first, f"flip at {pos} reported at {err.value.position}"


def test_a_flipped_bit_is_reported_by_the_arrow_decoder_with_file_and_position(tmp_path):
    path, data, first, second = write_log(tmp_path)
    for pos in covered(first, second)[::7]:
        corrupt = bytearray(data)
        corrupt[pos] ^= 0x01
        with pytest.raises(CorruptRecordError) as err:
            decode_to_arrow(bytes(corrupt), topic="t", partition=0, path=path, stop_at_partial=False)
        assert err.value.path == path and err.value.position == first, pos


def test_recovery_stops_at_a_base_offset_out_of_order(tmp_path):
    path, data, first, second = write_log(tmp_path)
    for pos in range(first, first + 8):
        corrupt = bytearray(data)
        corrupt[pos] ^= 0x01 if pos == first + 7 else 0x80
        with open(path, "wb") as f:
            f.write(corrupt)
        segment = LogSegment.open(tmp_path, 0)
        truncated = segment.recover(MAX_BATCH)
        assert truncated > 0, pos
        assert segment.last_recovery_error is not None
        assert segment.last_recovery_error.path == path
        assert segment.last_recovery_error.position in (first, first + second)
        segment.close()


def test_recovery_truncates_at_the_corrupt_batch_and_keeps_what_precedes_it(tmp_path):
    path, data, first, second = write_log(tmp_path)
    corrupt = bytearray(data)
    corrupt[first + 40] ^= 0x10
    with open(path, "wb") as f:
        f.write(corrupt)
    segment = LogSegment.open(tmp_path, 0)
    assert segment.recover(MAX_BATCH) == len(data) - first
    assert "CRC mismatch" in str(segment.last_recovery_error)
    assert segment.size == first and segment.read_next_offset() == 4
    segment.close()


def test_dump_reports_a_crc_mismatch_and_exits_non_zero(tmp_path, capsys):
    path, data, first, second = write_log(tmp_path)
    corrupt = bytearray(data)
    corrupt[first + 30] ^= 0x04
    with open(path, "wb") as f:
        f.write(corrupt)
    assert seglog(["dump", path]) == 1
    out = capsys.readouterr().out
    assert "isvalid: false" in out and f"position {first}" in out
    assert out.count("isvalid: true") == 2


def test_recovery_moves_the_cut_bytes_aside_byte_for_byte_and_dump_reads_them(tmp_path, capsys):
    path, data, first, second = write_log(tmp_path)
    corrupt = bytearray(data)
    corrupt[first + second + 40] ^= 0x10  # the third batch
    with open(path, "wb") as f:
        f.write(corrupt)
    segment = LogSegment.open(tmp_path, 0)
    assert segment.recover(MAX_BATCH) == len(data) - first - second
    moved = segment.last_recovery_set_aside
    segment.close()
    assert moved.path == f"{path}.{first + second}.corrupt" and moved.records == 4
    assert open(path, "rb").read() + open(moved.path, "rb").read() == bytes(corrupt)
    assert seglog(["dump", moved.path]) == 1
    out = capsys.readouterr().out
    assert "baseOffset: 8 lastOffset: 11" in out and "isvalid: false" in out


def test_recovery_cuts_both_batches_whose_offsets_contradict_each_other(tmp_path):
    path, data, first, second = write_log(tmp_path)
    corrupt = bytearray(data)
    corrupt[first:first + 8] = (6).to_bytes(8, "big")  # the second batch claims 6..9: the third's 8..11 clash
    with open(path, "wb") as f:
        f.write(corrupt)
    segment = LogSegment.open(tmp_path, 0)
    segment.recover(MAX_BATCH)
    assert segment.size == first and segment.read_next_offset() == 4
    assert "do not follow offset 9" in str(segment.last_recovery_error)
    segment.close()
