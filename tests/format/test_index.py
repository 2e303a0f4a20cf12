"""Offset and time indexes: Kafka's byte layout, lookups, append rules, file life cycle."""

from __future__ import annotations

import io
import math
import os
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from format.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from format.index import (
    DEFAULT_MAX_INDEX_SIZE,
    NO_TIMESTAMP,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

BASE = 1000


@pytest.fixture
def index_path(tmp_path):
    return str(tmp_path / "00000000000000001000.index")


@pytest.fixture
def time_index_path(tmp_path):
    return str(tmp_path / "00000000000000001000.timeindex")


def offset_index_bytes(pairs: list[tuple[int, int]], base: int = BASE) -> bytes:
    return b"".join(struct.pack(">ii", offset - base, position) for offset, position in pairs)


def time_index_bytes(pairs: list[tuple[int, int]], base: int = BASE) -> bytes:
    return b"".join(struct.pack(">qi", timestamp, offset - base) for timestamp, offset in pairs)


def write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# --- offset index: layout and file life cycle -----------------------------


def test_new_offset_index_is_preallocated_to_whole_entries(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=85)
    assert os.path.getsize(index_path) == 80
    assert index.max_entries == 10
    assert index.entries == 0
    assert not index.is_full
    index.close()


def test_default_max_index_size_is_kafkas_ten_mebibytes(index_path):
    index = OffsetIndex(index_path, BASE)
    assert DEFAULT_MAX_INDEX_SIZE == 10 * 1024 * 1024
    assert os.path.getsize(index_path) == DEFAULT_MAX_INDEX_SIZE
    index.close()
    assert os.path.getsize(index_path) == 0


def test_max_index_size_below_one_entry_is_refused(index_path):
    with pytest.raises(ValueError, match="max index size"):
        OffsetIndex(index_path, BASE, max_index_size=7)


def test_offset_index_entries_are_kafkas_relative_offset_and_position(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=800)
    index.append(1000, 0)
    index.append(1005, 4096)
    index.append(1000 + 2**31 - 1, 2**31 - 1)
    index.flush()
    expected = struct.pack(">ii", 0, 0) + struct.pack(">ii", 5, 4096) + struct.pack(">ii", 2**31 - 1, 2**31 - 1)
    assert read_file(index_path)[:24] == expected
    index.close()
    assert read_file(index_path) == expected


def test_close_trims_file_and_reopen_restores_entries(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=800)
    for i in range(5):
        index.append(BASE + 10 * i, 100 * i)
    index.close()
    assert os.path.getsize(index_path) == 5 * 8

    reopened = OffsetIndex(index_path, BASE, max_index_size=800)
    assert reopened.entries == 5
    assert reopened.last_offset == BASE + 40
    assert reopened.lookup(BASE + 25) == OffsetPosition(BASE + 20, 200)
    reopened.close()


def test_reopened_index_is_full_until_resized_as_in_kafka(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=800)
    index.append(BASE + 1, 10)
    index.close()

    reopened = OffsetIndex(index_path, BASE, max_index_size=800)
    assert reopened.is_full
    with pytest.raises(IndexFullError):
        reopened.append(BASE + 2, 20)
    assert reopened.resize(800) is True
    assert reopened.resize(800) is False
    reopened.append(BASE + 2, 20)
    assert reopened.entries == 2
    reopened.close()
    assert read_file(index_path) == offset_index_bytes([(BASE + 1, 10), (BASE + 2, 20)])


def test_resize_below_the_valid_entries_is_refused(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    index.append(BASE, 0)
    index.append(BASE + 1, 10)
    with pytest.raises(ValueError, match="below the 2 valid entries"):
        index.resize(8)
    index.close()


def test_empty_existing_file_opens_with_no_entries(index_path):
    write_file(index_path, b"")
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    assert index.entries == 0
    assert index.is_full
    assert index.lookup(BASE + 5) == OffsetPosition(BASE, 0)
    index.sanity_check()
    index.reset()
    assert index.max_entries == 10
    index.append(BASE + 5, 0)
    index.close()
    assert read_file(index_path) == offset_index_bytes([(BASE + 5, 0)])


def test_delete_removes_the_file_once(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    assert index.delete() is True
    assert not os.path.exists(index_path)
    assert index.delete() is False


def test_rename_keeps_the_mapping_and_trims_under_the_new_name(index_path, tmp_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    index.append(BASE + 1, 0)
    new_path = str(tmp_path / "00000000000000001000.index.deleted")
    index.rename_to(new_path)
    assert index.path == new_path
    assert not os.path.exists(index_path)
    index.append(BASE + 2, 50)
    index.close()
    assert read_file(new_path) == offset_index_bytes([(BASE + 1, 0), (BASE + 2, 50)])


def test_closed_index_refuses_lookups(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    index.close()
    index.close()  # closing twice is harmless
    with pytest.raises(ValueError, match="closed"):
        index.lookup(BASE)


def test_context_manager_closes_and_trims(index_path):
    with OffsetIndex(index_path, BASE, max_index_size=80) as index:
        index.append(BASE, 0)
    assert os.path.getsize(index_path) == 8


# --- offset index: append rules -------------------------------------------


def test_first_append_may_use_any_offset_from_the_base(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    index.append(BASE + 7, 0)
    assert index.last_offset == BASE + 7
    index.close()


def test_empty_index_reports_base_offset_as_last_offset(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    assert index.last_offset == BASE
    index.close()


@pytest.mark.parametrize("offset", [BASE + 5, BASE + 4])
def test_append_not_above_last_offset_is_invalid(index_path, offset):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    index.append(BASE + 5, 0)
    with pytest.raises(InvalidOffsetError, match=rf"offset {offset}.*\(1005\)"):
        index.append(offset, 100)
    assert index.entries == 1
    index.close()


def test_append_below_base_offset_is_invalid(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    with pytest.raises(InvalidOffsetError, match="999"):
        index.append(BASE - 1, 0)
    index.close()


def test_append_beyond_32_bit_relative_offset_is_invalid(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    assert index.can_append_offset(BASE + 2**31 - 1)
    assert not index.can_append_offset(BASE + 2**31)
    with pytest.raises(InvalidOffsetError, match="32-bit"):
        index.append(BASE + 2**31, 0)
    index.close()


def test_position_must_fit_int32(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    with pytest.raises(ValueError, match="position"):
        index.append(BASE, 2**31)
    index.close()


def test_append_to_full_index_raises(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=24)
    for i in range(3):
        index.append(BASE + i, i * 10)
    assert index.is_full
    with pytest.raises(IndexFullError, match="full"):
        index.append(BASE + 3, 30)
    index.close()


# --- offset index: lookups ------------------------------------------------


@pytest.fixture
def filled_index(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=800)
    for offset, position in [(1000, 0), (1010, 500), (1020, 1000), (1030, 1500)]:
        index.append(offset, position)
    yield index
    index.close()


@pytest.mark.parametrize(
    "target, expected",
    [
        (999, OffsetPosition(1000, 0)),  # before the first entry: (base, 0)
        (1000, OffsetPosition(1000, 0)),
        (1010, OffsetPosition(1010, 500)),  # exact
        (1015, OffsetPosition(1010, 500)),  # between
        (1029, OffsetPosition(1020, 1000)),
        (1030, OffsetPosition(1030, 1500)),
        (5000, OffsetPosition(1030, 1500)),  # after the last
    ],
)
def test_lookup_finds_largest_offset_not_above_target(filled_index, target, expected):
    assert filled_index.lookup(target) == expected


def test_lookup_below_first_entry_returns_base_and_zero(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    index.append(BASE + 10, 300)
    assert index.lookup(BASE + 3) == OffsetPosition(BASE, 0)
    index.close()


def test_lookup_on_empty_index_returns_base_and_zero(index_path):
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    assert index.lookup(BASE + 100) == OffsetPosition(BASE, 0)
    index.close()


def test_entry_returns_nth_entry_and_rejects_out_of_range(filled_index):
    assert filled_index.entry(2) == OffsetPosition(1020, 1000)
    with pytest.raises(IndexError, match="no entry 4"):
        filled_index.entry(4)


@pytest.mark.parametrize(
    "start, size, expected",
    [
        (OffsetPosition(1000, 0), 200, OffsetPosition(1010, 500)),
        (OffsetPosition(1000, 0), 500, OffsetPosition(1010, 500)),
        (OffsetPosition(1010, 500), 501, OffsetPosition(1030, 1500)),
        (OffsetPosition(1020, 1000), 600, None),
    ],
)
def test_fetch_upper_bound_offset_finds_first_entry_past_the_fetch(filled_index, start, size, expected):
    assert filled_index.fetch_upper_bound_offset(start, size) == expected


# --- offset index: truncation ---------------------------------------------


@pytest.mark.parametrize(
    "offset, entries, last_offset",
    [
        (1020, 2, 1010),  # an exact entry goes too
        (1025, 3, 1020),  # between entries
        (1000, 0, 1000),  # below everything
        (999, 0, 1000),
        (9999, 4, 1030),  # above everything changes nothing
    ],
)
def test_truncate_to_removes_entries_at_or_above_offset(filled_index, offset, entries, last_offset):
    filled_index.truncate_to(offset)
    assert filled_index.entries == entries
    assert filled_index.last_offset == last_offset


def test_append_after_truncate_continues_from_kept_entries(filled_index):
    filled_index.truncate_to(1020)
    filled_index.append(1011, 700)
    assert filled_index.lookup(1015) == OffsetPosition(1011, 700)
    filled_index.close()
    assert read_file(filled_index.path) == offset_index_bytes([(1000, 0), (1010, 500), (1011, 700)])


def test_truncate_zeroes_removed_entries(filled_index):
    filled_index.truncate_to(1010)
    filled_index.flush()
    assert read_file(filled_index.path)[8:32] == bytes(24)


def test_truncate_and_reset_remove_everything(filled_index):
    filled_index.truncate()
    assert filled_index.entries == 0
    assert filled_index.lookup(1030) == OffsetPosition(1000, 0)
    filled_index.trim_to_valid_size()
    assert filled_index.length == 0
    filled_index.reset()
    assert filled_index.length == 800
    assert filled_index.entries == 0


# --- offset index: sanity check -------------------------------------------


def test_sanity_check_accepts_a_valid_index(filled_index):
    filled_index.sanity_check()


def test_sanity_check_rejects_length_not_multiple_of_entry_size(index_path):
    write_file(index_path, offset_index_bytes([(BASE, 0)]) + b"\x00")
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    with pytest.raises(CorruptIndexError, match="9 bytes") as e:
        index.sanity_check()
    assert e.value.path == index_path
    index.close()


def test_sanity_check_rejects_offsets_not_increasing(index_path):
    write_file(index_path, offset_index_bytes([(BASE, 0), (BASE + 5, 10), (BASE + 5, 20)]))
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    with pytest.raises(CorruptIndexError, match="offsets not strictly increasing at entry 2"):
        index.sanity_check()
    index.close()


def test_sanity_check_rejects_offsets_below_base(index_path):
    write_file(index_path, struct.pack(">ii", -3, 0))
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        index.sanity_check()
    index.close()


def test_sanity_check_rejects_positions_not_increasing(index_path):
    write_file(index_path, offset_index_bytes([(BASE, 100), (BASE + 5, 50)]))
    index = OffsetIndex(index_path, BASE, max_index_size=80)
    with pytest.raises(CorruptIndexError, match="positions not strictly increasing"):
        index.sanity_check()
    index.close()


def test_sanity_check_catches_zero_padding_left_by_a_crash(index_path):
    writer = OffsetIndex(index_path, BASE, max_index_size=80)
    writer.append(BASE + 1, 0)
    writer.append(BASE + 2, 100)
    writer.flush()
    # The process dies here: the file keeps its preallocated length.
    after_crash = OffsetIndex(index_path, BASE, max_index_size=80)
    assert after_crash.entries == 10
    with pytest.raises(CorruptIndexError, match="entry 2"):
        after_crash.sanity_check()
    after_crash.close()
    writer.close()


# --- read-only indexes ----------------------------------------------------


def test_read_only_open_neither_preallocates_nor_trims(filled_index):
    filled_index.close()
    reader = OffsetIndex(filled_index.path, BASE, writable=False)
    assert reader.entries == 4
    assert reader.lookup(1025) == OffsetPosition(1020, 1000)
    reader.close()
    assert os.path.getsize(filled_index.path) == 32
    reader = OffsetIndex(filled_index.path, BASE, max_index_size=800, writable=False)
    reader.close()
    assert os.path.getsize(filled_index.path) == 32


def test_read_only_open_of_missing_file_raises(index_path):
    with pytest.raises(FileNotFoundError):
        OffsetIndex(index_path, BASE, writable=False)
    assert not os.path.exists(index_path)


def test_read_only_reader_of_a_live_index_trusts_only_finished_entries(filled_index):
    reader = OffsetIndex(filled_index.path, BASE, writable=False)
    # Stops at the preallocated zeros and leaves out the entry the writer
    # may still be writing.
    assert reader.entries == 3
    assert reader.lookup(10**6) == OffsetPosition(1020, 1000)
    reader.close()
    assert os.path.getsize(filled_index.path) == 800


def test_read_only_index_refuses_changes(filled_index):
    reader = OffsetIndex(filled_index.path, BASE, writable=False)
    with pytest.raises(io.UnsupportedOperation):
        reader.append(2000, 5000)
    with pytest.raises(io.UnsupportedOperation):
        reader.truncate_to(1000)
    with pytest.raises(io.UnsupportedOperation):
        reader.resize(80)
    reader.close()


def test_from_bytes_looks_up_like_the_file(filled_index):
    filled_index.close()
    view = OffsetIndex.from_bytes(BASE, read_file(filled_index.path), path="s3://bucket/t-0/x.index")
    assert view.path == "s3://bucket/t-0/x.index"
    assert view.entries == 4
    reopened = OffsetIndex(filled_index.path, BASE, writable=False)
    for target in range(990, 1040):
        assert view.lookup(target) == reopened.lookup(target)
    reopened.close()


def test_from_bytes_of_a_padded_file_keeps_finished_entries():
    data = offset_index_bytes([(BASE, 0), (BASE + 3, 40), (BASE + 7, 90)]) + bytes(80)
    view = OffsetIndex.from_bytes(BASE, data)
    assert view.entries == 2
    assert view.lookup(BASE + 100) == OffsetPosition(BASE + 3, 40)


def test_from_bytes_of_a_torn_last_entry_never_uses_it():
    # The writer has put down the position but not yet the offset.
    data = offset_index_bytes([(BASE, 0), (BASE + 3, 40)]) + struct.pack(">ii", 0, 90) + bytes(16)
    view = OffsetIndex.from_bytes(BASE, data)
    assert view.entries == 2
    assert view.lookup(BASE + 100) == OffsetPosition(BASE + 3, 40)


def test_from_bytes_keeps_a_single_zero_entry():
    view = OffsetIndex.from_bytes(BASE, offset_index_bytes([(BASE, 0)]))
    assert view.entries == 1
    view.sanity_check()


def test_from_bytes_reports_corruption_without_a_file():
    view = OffsetIndex.from_bytes(BASE, b"\x00" * 12)
    with pytest.raises(CorruptIndexError, match="12 bytes"):
        view.sanity_check()


# --- lookups against a brute-force reference ------------------------------


def brute_force_lookup(pairs: list[tuple[int, int]], target: int) -> OffsetPosition:
    below = [(offset, position) for offset, position in pairs if offset <= target]
    return OffsetPosition(*below[-1]) if below else OffsetPosition(BASE, 0)


@st.composite
def offset_pairs(draw) -> list[tuple[int, int]]:
    # Up to ~3000 entries, enough to cross Kafka's 1024-entry warm section.
    count = draw(st.integers(0, 3000))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    offsets = BASE + np.cumsum(rng.integers(1, 50, size=count)) - 1
    positions = np.cumsum(rng.integers(1, 5000, size=count)) - 1
    return list(zip(offsets.tolist(), positions.tolist()))


@settings(max_examples=60, deadline=None)
@given(pairs=offset_pairs(), data=st.data())
def test_lookup_matches_brute_force(pairs, data):
    top = pairs[-1][0] + 10 if pairs else BASE + 10
    targets = data.draw(st.lists(st.integers(BASE - 5, top), min_size=1, max_size=20))
    targets += [pair[0] for pair in pairs[:: max(1, len(pairs) // 7)]]
    with tempfile.TemporaryDirectory() as d:
        index = OffsetIndex(os.path.join(d, "x.index"), BASE, max_index_size=(len(pairs) + 5) * 8)
        for offset, position in pairs:
            index.append(offset, position)
        view = OffsetIndex.from_bytes(BASE, offset_index_bytes(pairs))
        for target in targets:
            expected = brute_force_lookup(pairs, target)
            assert index.lookup(target) == expected
            assert view.lookup(target) == expected
        index.close()


@st.composite
def time_pairs(draw) -> list[tuple[int, int]]:
    count = draw(st.integers(0, 2000))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    timestamps = 1_700_000_000_000 + np.cumsum(rng.integers(1, 1000, size=count))
    offsets = BASE + np.cumsum(rng.integers(0, 3, size=count))  # offsets may repeat
    return list(zip(timestamps.tolist(), offsets.tolist()))


@settings(max_examples=60, deadline=None)
@given(pairs=time_pairs(), data=st.data())
def test_time_lookup_matches_brute_force(pairs, data):
    low = pairs[0][0] - 5 if pairs else 0
    high = pairs[-1][0] + 5 if pairs else 10
    targets = data.draw(st.lists(st.integers(low, high), min_size=1, max_size=20))
    view = TimeIndex.from_bytes(BASE, time_index_bytes(pairs))
    for target in targets:
        below = [pair for pair in pairs if pair[0] <= target]
        expected = TimestampOffset(*below[-1]) if below else TimestampOffset(NO_TIMESTAMP, BASE)
        assert view.lookup(target) == expected


# --- a full 10 MiB index is searched, not scanned -------------------------


def count_probes(index, monkeypatch) -> list[int]:
    probes: list[int] = []
    read = index._key_at

    def counting(n: int) -> int:
        probes.append(n)
        return read(n)

    monkeypatch.setattr(index, "_key_at", counting)
    return probes


def test_lookup_in_a_full_ten_mebibyte_offset_index_reads_log_n_entries(index_path, monkeypatch):
    count = DEFAULT_MAX_INDEX_SIZE // 8
    entries = np.zeros(count, dtype=[("relative_offset", ">i4"), ("position", ">i4")])
    entries["relative_offset"] = np.arange(count) * 3
    entries["position"] = np.arange(count) * 100
    write_file(index_path, entries.tobytes())
    del entries

    index = OffsetIndex(index_path, BASE)
    assert index.entries == count
    probes = count_probes(index, monkeypatch)
    bound = 2 * math.ceil(math.log2(count)) + 2
    for target in (BASE - 1, BASE, BASE + 3 * 1000 + 1, BASE + 3 * (count // 2), BASE + 3 * (count - 1), BASE + 10**9):
        probes.clear()
        result = index.lookup(target)
        assert len(probes) <= bound, (target, len(probes))
        slot = min(max((target - BASE) // 3, 0), count - 1)
        expected = OffsetPosition(BASE + 3 * slot, 100 * slot) if target >= BASE else OffsetPosition(BASE, 0)
        assert result == expected
    monkeypatch.undo()
    index.close()


def test_lookup_near_the_end_stays_in_the_warm_section(index_path, monkeypatch):
    count = DEFAULT_MAX_INDEX_SIZE // 8
    entries = np.zeros(count, dtype=[("relative_offset", ">i4"), ("position", ">i4")])
    entries["relative_offset"] = np.arange(count)
    entries["position"] = np.arange(count)
    write_file(index_path, entries.tobytes())
    del entries

    index = OffsetIndex(index_path, BASE, writable=False)
    probes = count_probes(index, monkeypatch)
    index.lookup(BASE + count - 10)
    warm_start = count - 1 - 8192 // 8
    assert min(probes) >= warm_start
    monkeypatch.undo()
    index.close()


def test_lookup_in_a_ten_mebibyte_time_index_reads_log_n_entries(time_index_path, monkeypatch):
    count = DEFAULT_MAX_INDEX_SIZE // 12
    entries = np.zeros(count, dtype=[("timestamp", ">i8"), ("relative_offset", ">i4")])
    entries["timestamp"] = 1_000_000 + np.arange(count) * 7
    entries["relative_offset"] = np.arange(count)
    write_file(time_index_path, entries.tobytes())
    del entries

    index = TimeIndex(time_index_path, BASE, writable=False)
    assert index.entries == count
    probes = count_probes(index, monkeypatch)
    bound = 2 * math.ceil(math.log2(count)) + 2
    for target in (0, 1_000_000 + 7 * 12345 + 3, 1_000_000 + 7 * (count - 1), 10**12):
        probes.clear()
        index.lookup(target)
        assert len(probes) <= bound
    assert index.lookup(1_000_000 + 7 * 12345 + 3) == TimestampOffset(1_000_000 + 7 * 12345, BASE + 12345)
    monkeypatch.undo()
    index.close()


# --- time index -----------------------------------------------------------


def test_new_time_index_is_preallocated_to_whole_entries(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=130)
    assert os.path.getsize(time_index_path) == 120
    assert index.max_entries == 10
    index.close()
    assert os.path.getsize(time_index_path) == 0


def test_time_index_entries_are_kafkas_timestamp_and_relative_offset(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    index.maybe_append(1_700_000_000_000, BASE + 3)
    index.maybe_append(1_700_000_000_500, BASE + 9)
    index.close()
    assert read_file(time_index_path) == struct.pack(">qi", 1_700_000_000_000, 3) + struct.pack(
        ">qi", 1_700_000_000_500, 9
    )


def test_empty_time_index_has_no_timestamp_last_entry(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    assert index.last_entry == TimestampOffset(NO_TIMESTAMP, BASE)
    assert index.lookup(10**15) == TimestampOffset(NO_TIMESTAMP, BASE)
    index.close()


def test_maybe_append_only_records_a_larger_timestamp(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    index.maybe_append(NO_TIMESTAMP, BASE)  # v0-style "no timestamp" is never indexed
    assert index.entries == 0
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 1)  # the roll/close repeat of the last entry
    index.maybe_append(100, BASE + 4)
    assert index.entries == 1
    index.maybe_append(150, BASE + 4)  # same offset, larger timestamp
    assert index.entries == 2
    assert index.last_entry == TimestampOffset(150, BASE + 4)
    index.close()


def test_maybe_append_with_smaller_offset_is_invalid(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    index.maybe_append(100, BASE + 5)
    with pytest.raises(InvalidOffsetError, match=r"offset 1004.*\(1005\)"):
        index.maybe_append(200, BASE + 4)
    index.close()


def test_maybe_append_with_smaller_timestamp_is_refused(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    index.maybe_append(100, BASE + 5)
    with pytest.raises(ValueError, match="timestamp 99"):
        index.maybe_append(99, BASE + 6)
    index.close()


def test_time_index_keeps_its_last_slot_for_the_roll(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=36)
    index.maybe_append(10, BASE)
    assert not index.is_full
    index.maybe_append(20, BASE + 1)
    assert index.is_full  # 2 of 3 slots used
    with pytest.raises(IndexFullError):
        index.maybe_append(30, BASE + 2)
    index.maybe_append(30, BASE + 2, skip_full_check=True)
    assert index.entries == 3
    with pytest.raises(IndexFullError):
        index.maybe_append(40, BASE + 3, skip_full_check=True)
    index.close()


@pytest.fixture
def filled_time_index(time_index_path):
    index = TimeIndex(time_index_path, BASE, max_index_size=240)
    for timestamp, offset in [(100, 1000), (200, 1005), (300, 1005), (400, 1010)]:
        index.maybe_append(timestamp, offset)
    yield index
    index.close()


@pytest.mark.parametrize(
    "target, expected",
    [
        (99, TimestampOffset(NO_TIMESTAMP, 1000)),  # before the first
        (100, TimestampOffset(100, 1000)),  # exact
        (250, TimestampOffset(200, 1005)),  # between
        (400, TimestampOffset(400, 1010)),
        (10**12, TimestampOffset(400, 1010)),  # after the last
    ],
)
def test_time_lookup_finds_largest_timestamp_not_above_target(filled_time_index, target, expected):
    assert filled_time_index.lookup(target) == expected


@pytest.mark.parametrize(
    "offset, entries, last_entry",
    [
        (1005, 1, TimestampOffset(100, 1000)),  # both entries at 1005 go
        (1006, 3, TimestampOffset(300, 1005)),
        (1000, 0, TimestampOffset(NO_TIMESTAMP, 1000)),
        (2000, 4, TimestampOffset(400, 1010)),
    ],
)
def test_time_truncate_to_removes_entries_at_or_above_offset(filled_time_index, offset, entries, last_entry):
    filled_time_index.truncate_to(offset)
    assert filled_time_index.entries == entries
    assert filled_time_index.last_entry == last_entry


def test_time_index_reopens_with_its_last_entry(filled_time_index):
    filled_time_index.close()
    reopened = TimeIndex(filled_time_index.path, BASE, max_index_size=240)
    assert reopened.entries == 4
    assert reopened.last_entry == TimestampOffset(400, 1010)
    reopened.sanity_check()
    reopened.close()


def test_time_sanity_check_rejects_timestamps_not_increasing(time_index_path):
    write_file(time_index_path, time_index_bytes([(100, BASE), (100, BASE + 1)]))
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    with pytest.raises(CorruptIndexError, match="timestamps not strictly increasing at entry 1"):
        index.sanity_check()
    index.close()


def test_time_sanity_check_rejects_offsets_going_back(time_index_path):
    write_file(time_index_path, time_index_bytes([(100, BASE + 5), (200, BASE + 4)]))
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    with pytest.raises(CorruptIndexError, match="offsets decreasing"):
        index.sanity_check()
    index.close()


def test_time_sanity_check_rejects_offsets_below_base(time_index_path):
    write_file(time_index_path, struct.pack(">qi", 100, -1))
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    with pytest.raises(CorruptIndexError, match="below the base offset"):
        index.sanity_check()
    index.close()


def test_time_sanity_check_rejects_bad_length(time_index_path):
    write_file(time_index_path, bytes(13))
    index = TimeIndex(time_index_path, BASE, max_index_size=120)
    with pytest.raises(CorruptIndexError, match="13 bytes"):
        index.sanity_check()
    index.close()


def test_time_sanity_check_catches_zero_padding_left_by_a_crash(filled_time_index):
    filled_time_index.flush()
    after_crash = TimeIndex(filled_time_index.path, BASE, max_index_size=240)
    assert after_crash.entries == 20
    with pytest.raises(CorruptIndexError, match="entry 4"):
        after_crash.sanity_check()
    after_crash.close()


def test_time_index_from_bytes_of_a_padded_file_keeps_finished_entries():
    view = TimeIndex.from_bytes(BASE, time_index_bytes([(0, BASE), (5, BASE + 2), (9, BASE + 4)]) + bytes(36))
    assert view.entries == 2
    assert view.last_entry == TimestampOffset(5, BASE + 2)
    assert view.lookup(4) == TimestampOffset(0, BASE)
    assert view.lookup(100) == TimestampOffset(5, BASE + 2)


# --- the in-memory copy of a writable index's entries -----------------------------


def _lookups(index: OffsetIndex, offsets: list[int]) -> list[OffsetPosition]:
    return [index.lookup(offset) for offset in offsets]


def test_lookups_read_the_entries_copy_kept_up_to_date_by_appends_and_truncation(index_path):
    with OffsetIndex(index_path, BASE, max_index_size=8 * 64) as index:
        for i in range(10):
            index.append(BASE + 10 * i, 100 * i)
        assert index.lookup(BASE + 55) == OffsetPosition(BASE + 50, 500)
        assert index._entry_copy is not None and len(index._entry_copy) == 80
        index.append(BASE + 100, 1000)  # after the copy was made
        assert index.lookup(BASE + 105) == OffsetPosition(BASE + 100, 1000)
        index.truncate_to(BASE + 40)
        assert len(index._entry_copy) == 32
        assert index.lookup(BASE + 99) == OffsetPosition(BASE + 30, 300)
        index.append(BASE + 41, 777)  # where a truncated entry was
        assert index.lookup(BASE + 45) == OffsetPosition(BASE + 41, 777)
        # The copy says what the file says.
        assert bytes(index._entry_copy) == read_file(index_path)[:len(index._entry_copy)]
    with OffsetIndex(index_path, BASE) as reopened:
        assert reopened.lookup(BASE + 45) == OffsetPosition(BASE + 41, 777)


def test_time_index_lookups_read_its_entries_copy(time_index_path):
    with TimeIndex(time_index_path, BASE, max_index_size=12 * 64) as index:
        for i in range(5):
            index.maybe_append(10_000 + i, BASE + i)
        assert index.lookup(10_003) == TimestampOffset(10_003, BASE + 3)
        index.maybe_append(20_000, BASE + 9)
        assert index.lookup(20_000) == TimestampOffset(20_000, BASE + 9)
        assert len(index._entry_copy) == 6 * 12


def test_copies_past_the_budget_drop_the_oldest_and_lookups_read_the_file(tmp_path, monkeypatch):
    import format.index as index_module

    copies = index_module._EntryCopies(budget=2 * 88)  # two copies of ten or eleven entries
    monkeypatch.setattr(index_module, "_ENTRY_COPIES", copies)
    indexes = [OffsetIndex(str(tmp_path / f"{n:020d}.index"), BASE, max_index_size=8 * 64) for n in range(3)]
    try:
        for n, index in enumerate(indexes):
            for i in range(10):
                index.append(BASE + i, 10 * i + n)
        assert indexes[2].lookup(BASE + 3) == OffsetPosition(BASE + 3, 32)
        assert indexes[0].lookup(BASE + 3) == OffsetPosition(BASE + 3, 30)
        assert indexes[1].lookup(BASE + 3) == OffsetPosition(BASE + 3, 31)  # drops the copy of the oldest
        assert [i._entry_copy is not None for i in indexes] == [True, True, False]
        assert indexes[2].lookup(BASE + 7) == OffsetPosition(BASE + 7, 72)  # read again, drops the next oldest
        assert [i._entry_copy is not None for i in indexes] == [False, True, True]
        indexes[0].append(BASE + 20, 999)  # without a copy: the file only
        assert indexes[0].lookup(BASE + 25) == OffsetPosition(BASE + 20, 999)
        assert [i._entry_copy is not None for i in indexes] == [True, False, True]
    finally:
        for index in indexes:
            index.close()
    assert copies._total == 0


def test_read_only_indexes_make_no_copy(index_path):
    write_file(index_path, offset_index_bytes([(BASE, 0), (BASE + 5, 50)]))
    with OffsetIndex(index_path, BASE, writable=False) as index:
        assert index.lookup(BASE + 6) == OffsetPosition(BASE + 5, 50)
        assert index._entry_copy is None
    in_memory = OffsetIndex.from_bytes(BASE, offset_index_bytes([(BASE, 0), (BASE + 5, 50)]))
    assert in_memory.lookup(BASE + 6) == OffsetPosition(BASE + 5, 50)
    assert in_memory._entry_copy is None
