"""A buffer's batches as columns (``format.batch_table``) and the record walk over them."""

import pytest

from format.arrow import decode_to_arrow
from format.batch_table import walk_batches
from format.errors import CorruptRecordError
from format.record import SimpleRecord
from format.record_batch import RECORDS_OFFSET, iter_batches, build_batch


def numbered_batches(count=100, per_batch=10, value=b"v" * 90):
    parts, positions, offset = [], [], 0
    for _ in range(count):
        positions.append(sum(len(p) for p in parts))
        parts.append(build_batch([SimpleRecord(value, b"k%d" % j, 1_700_000_000_000 + j) for j in range(per_batch)],
                                 base_offset=offset))
        offset += per_batch
    return bytearray(b"".join(parts)), positions


def test_the_columns_hold_each_batch_header_as_iter_batches_parses_it():
    data, positions = numbered_batches(count=5)
    table = walk_batches(bytes(data), base_position=1000)
    walked = list(iter_batches(bytes(data)))
    assert table.positions.tolist() == positions == [b.position for b in walked]
    assert table.file_positions.tolist() == [1000 + p for p in positions]
    assert table.base_offsets.tolist() == [b.header.base_offset for b in walked]
    assert table.last_offsets.tolist() == [b.header.last_offset for b in walked]
    assert table.headers["crc"].tolist() == [b.header.crc for b in walked]
    assert table.sizes.tolist() == [b.size_in_bytes for b in walked]


def test_a_walk_with_an_until_offset_ends_with_the_first_batch_at_or_past_it():
    data, _ = numbered_batches(count=10)
    assert walk_batches(bytes(data), until_offset=35).base_offsets.tolist() == [0, 10, 20, 30, 40]
    assert walk_batches(bytes(data), until_offset=40).base_offsets.tolist() == [0, 10, 20, 30, 40]


def test_a_torn_tail_ends_the_walk_and_a_bad_magic_raises_at_its_batch():
    data, positions = numbered_batches(count=10)
    assert len(walk_batches(bytes(data[:-3]))) == 9
    data[positions[6] + 16] = 1
    with pytest.raises(CorruptRecordError) as caught:
        walk_batches(bytes(data), path="x.log", base_position=500)
    assert caught.value.position == 500 + positions[6] and "unsupported magic 1" in str(caught.value)


def test_validation_names_the_first_batch_whose_crc_does_not_match():
    data, positions = numbered_batches()
    data[positions[40] + RECORDS_OFFSET + 3] ^= 0xFF
    data[positions[60] + RECORDS_OFFSET + 3] ^= 0xFF
    table = walk_batches(bytes(data), path="x.log")
    with pytest.raises(CorruptRecordError) as caught:
        table.ensure_valid()
    assert caught.value.position == positions[40] and "CRC mismatch" in str(caught.value)
    table[:40].ensure_valid()


@pytest.mark.parametrize("count", [3, 100])  # walked one by one, and side by side
def test_a_record_length_running_past_the_end_of_the_data_names_its_batch(count):
    data, positions = numbered_batches(count)
    data[positions[-1] + RECORDS_OFFSET:positions[-1] + RECORDS_OFFSET + 2] = b"\xfe\x7f"  # 8191 bytes
    with pytest.raises(CorruptRecordError) as caught:
        decode_to_arrow(bytes(data), topic="t", partition=0, validate=False, path="x.log")
    assert caught.value.position == positions[-1] and "record count mismatch" in str(caught.value)


def test_records_over_8_kib_in_the_side_by_side_walk_are_walked_by_their_longer_length_prefix():
    data, _ = numbered_batches(count=80, per_batch=3, value=b"w" * 20_000)
    table = decode_to_arrow(bytes(data), topic="t", partition=0)
    assert table.column("offset").to_pylist() == list(range(240))
    assert set(table.column("value").to_pylist()) == {b"w" * 20_000}
