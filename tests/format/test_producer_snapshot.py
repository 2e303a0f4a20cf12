import struct

import crc32c
import pytest
from hypothesis import given, strategies as st

from format.producer_snapshot import (ENTRY_SIZE, CorruptSnapshotError, ProducerSnapshotEntry, decode_snapshot,
                                      encode_snapshot)

int16 = st.integers(-(1 << 15), (1 << 15) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)
entries = st.lists(st.builds(ProducerSnapshotEntry, int64, int16, int32, int64, int32, int64, int32, int64),
                   max_size=20)


def test_a_snapshot_is_laid_out_as_kafkas_producer_snapshot_version_1():
    entry = ProducerSnapshotEntry(producer_id=1000, epoch=3, last_sequence=41, last_offset=77, offset_delta=9,
                                  timestamp=1_700_000_000_123, coordinator_epoch=2, current_txn_first_offset=60)
    data = encode_snapshot([entry])
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 1000, 3, 41, 77, 9, 1_700_000_000_123, 2, 60)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert ENTRY_SIZE == 46


@given(entries)
def test_snapshots_read_back_what_was_written(written):
    assert decode_snapshot(encode_snapshot(written)) == written


@given(entries, st.data())
def test_any_flipped_byte_is_reported_as_a_corrupt_snapshot(written, data):
    raw = bytearray(encode_snapshot(written))
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] ^= 1 + data.draw(st.integers(0, 254))
    with pytest.raises(CorruptSnapshotError, match="00000000000000000042.snapshot"):
        decode_snapshot(bytes(raw), "00000000000000000042.snapshot")


def test_a_truncated_snapshot_names_its_file_and_length():
    raw = encode_snapshot([ProducerSnapshotEntry(1, 0, 0, 0, 0, 0, -1, -1)])
    with pytest.raises(CorruptSnapshotError, match=r"p\.snapshot: position 0: snapshot of 5 bytes is shorter"):
        decode_snapshot(raw[:5], "p.snapshot")
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        decode_snapshot(raw[:-1], "p.snapshot")


def test_an_unknown_version_is_refused():
    raw = bytearray(encode_snapshot([]))
    raw[1] = 2
    with pytest.raises(CorruptSnapshotError, match="unknown file version 2"):
        decode_snapshot(bytes(raw))
