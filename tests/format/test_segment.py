import os

import pytest

from format import layout
from format.compression import CompressionType
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches
from format.segment import LogSegment, RollParams


def batch(base_offset, n=10, ts=None, size=100, codec=CompressionType.NONE):
    ts = 1000 + base_offset if ts is None else ts
    return build_batch([SimpleRecord(b"v" * size, b"k%06d" % (base_offset + i), ts + i) for i in range(n)],
                       base_offset=base_offset, compression=codec)


def filled(tmp_path, batches=100, **kw):
    segment = LogSegment.open(tmp_path, 0, **kw)
    for i in range(batches):
        segment.append(batch(i * 10))
    return segment


def test_append_adds_an_index_entry_every_interval(tmp_path):
    segment = filled(tmp_path, index_interval_bytes=4096)
    size = len(batch(0))
    assert segment.size == 100 * size
    # An entry is added once more than 4096 bytes have gone by since the last one.
    per_entry = 4096 // size + 1
    assert segment.offset_index.entries == (100 - 1) // per_entry
    for n in range(segment.offset_index.entries):
        entry = segment.offset_index.entry(n)
        assert entry.position % size == 0
        assert entry.offset == (entry.position // size) * 10 + 9  # the batch's last offset


def test_translate_offset_finds_the_batch_holding_it(tmp_path):
    segment = filled(tmp_path)
    size = len(batch(0))
    for offset in (0, 9, 10, 555, 999):
        found = segment.translate_offset(offset)
        assert found.position == (offset // 10) * size
        assert found.offset == (offset // 10) * 10
    assert segment.translate_offset(1000) is None


def test_read_returns_complete_batches_within_max_size(tmp_path):
    segment = filled(tmp_path)
    size = len(batch(0))
    info = segment.read(555, 3 * size + 10)
    assert info.position == 55 * size and info.size == 3 * size
    assert [b.header.base_offset for b in iter_batches(info.records)] == [550, 560, 570]
    assert segment.read(555, 10).size == 0
    assert segment.read(555, 10, min_one_message=True).size == size
    assert segment.read(5000, 1000) is None


def test_a_read_serves_a_view_of_the_bytes_it_read_not_a_copy(tmp_path):
    segment = filled(tmp_path)
    size = len(batch(0))
    info = segment.read(555, 3 * size + 10)  # cut inside the fourth batch
    assert isinstance(info.records, memoryview) and info.records.readonly
    assert info.records.nbytes == 3 * size and len(info.records.obj) == 3 * size + 10
    with open(segment.log.path, "rb") as f:
        f.seek(55 * size)
        assert info.records == f.read(3 * size)


def test_find_offset_by_timestamp_returns_the_first_record_at_or_after(tmp_path):
    segment = filled(tmp_path)
    assert segment.find_offset_by_timestamp(1555).offset == 555
    assert segment.find_offset_by_timestamp(0).offset == 0
    assert segment.find_offset_by_timestamp(10_000) is None
    assert segment.max_timestamp_so_far == 1000 + 990 + 9


def test_reopen_after_close_restores_state(tmp_path):
    segment = filled(tmp_path)
    entries = segment.offset_index.entries
    segment.close()
    reopened = LogSegment.open(tmp_path, 0)
    assert reopened.offset_index.entries == entries
    assert reopened.read_next_offset() == 1000
    assert reopened.max_timestamp_so_far == 1999
    reopened.close()


def test_recover_cuts_a_torn_tail_and_rebuilds_indexes(tmp_path):
    segment = filled(tmp_path)
    full_entries = segment.offset_index.entries
    segment.close()
    log = os.path.join(tmp_path, layout.log_file_name(0))
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.truncate(size - 7)
    os.remove(os.path.join(tmp_path, layout.offset_index_file_name(0)))
    segment = LogSegment.open(tmp_path, 0)
    assert segment.recover() == len(batch(0)) - 7
    assert segment.read_next_offset() == 990
    assert segment.offset_index.entries in (full_entries, full_entries - 1)
    assert segment.translate_offset(555).offset == 550
    assert segment.last_recovery_error is None
    segment.close()


def test_truncate_to_removes_the_batch_holding_the_offset_and_after(tmp_path):
    segment = filled(tmp_path)
    size = len(batch(0))
    removed = segment.truncate_to(505)
    assert removed == 50 * size
    assert segment.read_next_offset() == 500
    assert segment.offset_index.last_offset < 500
    assert segment.time_index.last_entry.offset < 500
    assert segment.max_timestamp_so_far == 1000 + 490 + 9
    segment.append(batch(500))
    assert segment.read_next_offset() == 510


def test_appending_below_the_base_offset_or_past_int32_is_refused(tmp_path):
    segment = LogSegment.open(tmp_path, 100)
    with pytest.raises(Exception, match="below the segment's base offset"):
        segment.append(batch(50))
    with pytest.raises(Exception, match="int32"):
        segment.append(batch(100 + (1 << 31)))


def test_should_roll_on_size_time_and_offset_range(tmp_path):
    segment = filled(tmp_path, batches=3)

    def params(**kw):
        base = dict(max_segment_ms=10_000, max_segment_bytes=1 << 30, max_timestamp_in_messages=1000,
                    max_offset_in_messages=40, messages_size=100, now=1000)
        base.update(kw)
        return RollParams(**base)

    assert not segment.should_roll(params())
    assert segment.should_roll(params(max_segment_bytes=segment.size + 50))
    assert segment.should_roll(params(max_timestamp_in_messages=1009 + 10_001))
    assert segment.should_roll(params(max_offset_in_messages=1 << 31))


def test_change_file_suffixes_renames_every_file(tmp_path):
    segment = LogSegment.open(tmp_path, 0, file_suffix=layout.CLEANED_FILE_SUFFIX)
    segment.append(batch(0))
    segment.change_file_suffixes(layout.CLEANED_FILE_SUFFIX, layout.SWAP_FILE_SUFFIX)
    segment.change_file_suffixes(layout.SWAP_FILE_SUFFIX, "")
    segment.close()
    names = sorted(os.listdir(tmp_path))
    assert layout.log_file_name(0) in names
    assert not any(n.endswith((".cleaned", ".swap")) for n in names)


def test_a_read_that_stops_at_max_offset_serves_the_batches_below_it(tmp_path):
    # What a fetch sees while a later batch is appended past the high watermark it read.
    segment = filled(tmp_path, batches=3)
    size = len(batch(0))
    for start in (0, 10, 15):
        info = segment.read(start, 10 * size, max_offset=20, validate=True)
        assert [b.header.base_offset for b in iter_batches(info.records)] == [0, 10][start // 10:]
    assert segment.read(20, 10 * size, max_offset=30).size == size


@pytest.mark.parametrize("past_the_last", [0, 8, 30], ids=["ends-on-a-batch", "holds-the-next-base-offset",
                                                          "holds-more-of-the-next-batch"])
def test_a_read_cut_by_its_size_does_not_serve_a_batch_the_next_one_contradicts(tmp_path, past_the_last):
    segment = filled(tmp_path, batches=3)
    size = len(batch(0))
    segment.close()
    with open(tmp_path / layout.log_file_name(0), "r+b") as f:
        f.seek(2 * size)
        f.write((15).to_bytes(8, "big"))  # the third batch claims 15..24, outside its CRC
    segment = LogSegment.open(tmp_path, 0, writable=False)
    info = segment.read(0, 2 * size + past_the_last, validate=True)
    # Either of the second and third batches may be the damaged one: neither is served.
    assert [b.header.base_offset for b in iter_batches(info.records)] == [0]


def test_a_torn_last_batch_is_left_out_of_the_log_end_whatever_offsets_its_header_claims(tmp_path):
    segment = filled(tmp_path, batches=3)
    size = len(batch(0))
    segment.close()
    with open(tmp_path / layout.log_file_name(0), "r+b") as f:
        f.seek(2 * size)
        f.write((5).to_bytes(8, "big"))  # the torn third batch claims 5..14
        f.truncate(3 * size - 1)
    segment = LogSegment.open(tmp_path, 0, writable=False)
    assert segment.read_next_offset() == 20
    assert segment.translate_offset(25) is None
