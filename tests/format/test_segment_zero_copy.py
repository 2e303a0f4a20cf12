"""Zero-copy reads of a segment: a ``FileSlice`` of the file, only for bytes whose CRCs this process checked."""

import os

import pytest

from format import file_slice
from format.crc_checked import CrcCheckedRanges
from format.errors import CorruptRecordError
from format.file_slice import FileSlice, FileSliceTruncatedError
from format.record import SimpleRecord
from format.record_batch import build_batch
from format.segment import ZERO_COPY_MIN_BYTES, LogSegment

BATCHES = 100
RECORDS = 10


def batch(base_offset):
    return build_batch([SimpleRecord(b"v" * 100, b"k%06d" % (base_offset + i), 1000 + i) for i in range(RECORDS)],
                       base_offset=base_offset)


def filled(tmp_path):
    segment = LogSegment.open(tmp_path, 0)
    for i in range(BATCHES):
        segment.append(batch(i * RECORDS))
    return segment


def zero_copy_read(segment, offset=0, max_size=1 << 20):
    return segment.read(offset, max_size, validate=True, zero_copy=True)


def copying_read(segment, offset=0, max_size=1 << 20):
    return segment.read(offset, max_size, validate=True)


def test_a_zero_copy_read_of_appended_batches_is_a_slice_with_the_bytes_a_copying_read_returns(tmp_path):
    segment = filled(tmp_path)
    info = zero_copy_read(segment, 95, 40_000)
    assert isinstance(info.records, FileSlice)
    try:
        expected = copying_read(segment, 95, 40_000)
        assert info.records.read() == bytes(expected.records)
        assert (info.position, len(info.records)) == (expected.position, len(expected.records))
        assert info.next_offset == 90 + len(info.records) // (segment.size // BATCHES) * RECORDS
    finally:
        info.records.close()


def test_a_segment_opened_from_disk_is_checked_on_its_first_zero_copy_read_and_sliced_after(tmp_path):
    filled(tmp_path).close()
    segment = LogSegment.open(tmp_path, 0)
    first = zero_copy_read(segment)
    assert not isinstance(first.records, FileSlice)  # read and checked: these very bytes are served
    again = zero_copy_read(segment)
    assert isinstance(again.records, FileSlice)
    try:
        assert again.records.read() == bytes(first.records)
    finally:
        again.records.close()


def test_a_corrupt_batch_of_a_segment_opened_from_disk_is_never_sent_from_the_file(tmp_path):
    segment = filled(tmp_path)
    size = segment.size // BATCHES
    segment.close()
    with open(os.path.join(tmp_path, "00000000000000000000.log"), "r+b") as f:
        f.seek(50 * size + 80)  # a record of the batch at offset 500
        byte = f.read(1)
        f.seek(50 * size + 80)
        f.write(bytes([byte[0] ^ 0x20]))
    segment = LogSegment.open(tmp_path, 0)
    for _ in range(2):
        served = zero_copy_read(segment)
        assert not isinstance(served.records, FileSlice)
        assert len(served.records) == 50 * size  # the batches before it
        with pytest.raises(CorruptRecordError, match=f"position {50 * size}"):
            zero_copy_read(segment, 500)
    assert segment.crc_checked.ranges == [(0, 50 * size)]


def test_truncation_forgets_the_checked_bytes_past_the_new_end(tmp_path):
    segment = filled(tmp_path)
    size = segment.size // BATCHES
    assert segment.crc_checked.ranges == [(0, BATCHES * size)]
    segment.truncate_to(600)
    assert segment.crc_checked.ranges == [(0, 60 * size)]
    segment.append(batch(600))  # what is appended was checked on its way in
    assert segment.crc_checked.ranges == [(0, 61 * size)]


def test_a_read_smaller_than_the_zero_copy_minimum_is_copied(tmp_path):
    segment = filled(tmp_path)
    info = zero_copy_read(segment, 0, ZERO_COPY_MIN_BYTES - 1)
    assert not isinstance(info.records, FileSlice) and len(info.records) > 0


def test_a_slice_is_sent_whole_after_its_segment_is_deleted_and_refuses_a_truncated_file(tmp_path):
    segment = filled(tmp_path)
    info = zero_copy_read(segment)
    expected = bytes(copying_read(segment).records)
    segment.delete()
    assert not os.path.exists(os.path.join(tmp_path, "00000000000000000000.log"))
    try:
        assert info.records.read() == expected  # an unlinked file stays readable through the slice's descriptor
    finally:
        info.records.close()
    assert info.records.closed
    info.records.close()  # a second close does nothing

    os.makedirs(tmp_path / "again")
    segment = filled(tmp_path / "again")
    info = zero_copy_read(segment)
    try:
        segment.truncate_to(500)
        with pytest.raises(FileSliceTruncatedError, match="position 0"):
            info.records.ensure_whole()
        with pytest.raises(FileSliceTruncatedError):
            info.records.read()
    finally:
        info.records.close()


def test_checked_ranges_merge_what_touches_and_cover_only_whole_spans():
    ranges = CrcCheckedRanges()
    ranges.add(100, 200)
    ranges.add(300, 400)
    assert not ranges.covers(150, 350)
    ranges.add(200, 300)  # touches both: one range
    assert ranges.ranges == [(100, 400)]
    assert ranges.covers(100, 400) and not ranges.covers(99, 150) and not ranges.covers(350, 401)
    ranges.add(500, 600)
    ranges.add(0, 50)
    assert ranges.ranges == [(0, 50), (100, 400), (500, 600)]
    ranges.truncate(350)
    assert ranges.ranges == [(0, 50), (100, 350)]
    ranges.truncate(100)
    assert ranges.ranges == [(0, 50)]


def test_reads_copy_while_open_slices_hold_their_share_of_the_descriptor_limit(tmp_path):
    segment = filled(tmp_path)
    taken = 0
    while file_slice.reserve():
        taken += 1
    try:
        info = zero_copy_read(segment)
        assert not isinstance(info.records, FileSlice) and len(info.records) == segment.size
    finally:
        for _ in range(taken):
            file_slice.give_back()
    info = zero_copy_read(segment)
    assert isinstance(info.records, FileSlice)
    info.records.close()
