"""Transaction index: Kafka's 34-byte entries, append rule, collect semantics, file life cycle."""

from __future__ import annotations

import os
import struct

import pytest

from format.errors import CorruptIndexError, InvalidOffsetError
from format.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
    collect_aborted_txns,
    parse_aborted_txns,
)


@pytest.fixture
def txn_path(tmp_path):
    return str(tmp_path / "00000000000000000000.txnindex")


@pytest.fixture
def open_index():
    """Opens transaction indexes and closes them after the test."""
    opened: list[TransactionIndex] = []

    def open_(path: str, start_offset: int = 0) -> TransactionIndex:
        opened.append(TransactionIndex(path, start_offset))
        return opened[-1]

    yield open_
    for index in opened:
        index.close()


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_entry_is_kafkas_34_byte_big_endian_layout():
    txn = AbortedTxn(producer_id=7, first_offset=10, last_offset=25, last_stable_offset=8)
    assert ENTRY_SIZE == 34
    assert txn.version == 0
    assert txn.to_bytes() == struct.pack(">hqqqq", 0, 7, 10, 25, 8)
    assert AbortedTxn.from_bytes(txn.to_bytes()) == txn


def test_file_is_created_on_first_append(txn_path):
    index = TransactionIndex(txn_path, 0)
    assert not os.path.exists(txn_path)
    assert index.all_aborted_txns() == []
    assert index.is_empty
    index.append(AbortedTxn(1, 0, 5, 0))
    assert os.path.exists(txn_path)
    index.close()


def test_appended_entries_are_written_in_order(txn_path, open_index):
    txns = [AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 3, 9, 3), AbortedTxn(1, 10, 12, 10)]
    with TransactionIndex(txn_path, 0) as index:
        for txn in txns:
            index.append(txn)
        index.flush()
        assert read_file(txn_path) == b"".join(struct.pack(">hqqqq", 0, *vars_of(t)) for t in txns)
    assert open_index(txn_path).all_aborted_txns() == txns


def vars_of(txn: AbortedTxn) -> tuple[int, int, int, int]:
    return (txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


@pytest.mark.parametrize("last_offset", [5, 4])
def test_append_needs_increasing_last_offset(txn_path, last_offset):
    index = TransactionIndex(txn_path, 0)
    index.append(AbortedTxn(1, 0, 5, 0))
    with pytest.raises(InvalidOffsetError, match=rf"{last_offset} is not greater than the current last offset 5"):
        index.append(AbortedTxn(2, 0, last_offset, 0))
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 0)]
    index.close()


def test_append_rule_holds_after_reopening(txn_path, open_index):
    with TransactionIndex(txn_path, 0) as index:
        index.append(AbortedTxn(1, 0, 5, 0))
    reopened = open_index(txn_path)
    assert reopened.last_offset == 5
    with pytest.raises(InvalidOffsetError):
        reopened.append(AbortedTxn(2, 0, 5, 0))
    reopened.append(AbortedTxn(2, 0, 6, 0))
    assert len(reopened.all_aborted_txns()) == 2
    reopened.close()


# --- collect --------------------------------------------------------------

TXNS = [
    AbortedTxn(producer_id=1, first_offset=0, last_offset=10, last_stable_offset=0),
    AbortedTxn(producer_id=2, first_offset=5, last_offset=20, last_stable_offset=11),
    AbortedTxn(producer_id=3, first_offset=25, last_offset=30, last_stable_offset=21),
    AbortedTxn(producer_id=4, first_offset=32, last_offset=40, last_stable_offset=35),
]


@pytest.fixture
def txn_index(txn_path):
    index = TransactionIndex(txn_path, 0)
    for txn in TXNS:
        index.append(txn)
    yield index
    index.close()


def test_collect_returns_transactions_overlapping_the_range(txn_index):
    result = txn_index.collect_aborted_txns(fetch_offset=11, upper_bound_offset=26)
    assert result.aborted_txns == (TXNS[1], TXNS[2])


def test_collect_excludes_transactions_ending_before_the_fetch(txn_index):
    result = txn_index.collect_aborted_txns(fetch_offset=21, upper_bound_offset=100)
    assert TXNS[0] not in result.aborted_txns
    assert TXNS[1] not in result.aborted_txns


def test_collect_excludes_transactions_starting_at_the_upper_bound(txn_index):
    result = txn_index.collect_aborted_txns(fetch_offset=0, upper_bound_offset=25)
    assert result.aborted_txns == (TXNS[0], TXNS[1])


def test_collect_is_complete_once_an_lso_reaches_the_upper_bound(txn_index):
    # TXNS[1].last_stable_offset == 11 >= 11: later entries cannot matter.
    assert txn_index.collect_aborted_txns(0, 11) == TxnIndexSearchResult((TXNS[0], TXNS[1]), True)


def test_collect_is_incomplete_when_no_lso_reaches_the_upper_bound(txn_index):
    result = txn_index.collect_aborted_txns(0, 36)
    assert result.aborted_txns == tuple(TXNS)
    assert result.is_complete is False


def test_collect_on_missing_file_is_empty_and_incomplete(txn_path, open_index):
    assert open_index(txn_path).collect_aborted_txns(0, 100) == TxnIndexSearchResult((), False)


def test_collect_over_bytes_matches_the_file(txn_index):
    txns = parse_aborted_txns(read_file(txn_index.path))
    assert txns == TXNS
    assert collect_aborted_txns(txns, 11, 26) == txn_index.collect_aborted_txns(11, 26)


# --- truncation and life cycle --------------------------------------------


@pytest.mark.parametrize(
    "offset, kept",
    [(20, 1), (21, 2), (0, 0), (10, 0), (41, 4)],
)
def test_truncate_to_removes_entries_with_last_offset_at_or_above(txn_index, offset, kept):
    txn_index.truncate_to(offset)
    assert txn_index.all_aborted_txns() == TXNS[:kept]
    assert os.path.getsize(txn_index.path) == kept * ENTRY_SIZE
    assert txn_index.last_offset == (TXNS[kept - 1].last_offset if kept else None)


def test_append_after_truncate_follows_the_kept_entries(txn_index):
    txn_index.truncate_to(21)
    txn_index.append(AbortedTxn(9, 21, 22, 21))
    assert txn_index.all_aborted_txns() == [TXNS[0], TXNS[1], AbortedTxn(9, 21, 22, 21)]


def test_reset_empties_the_file(txn_index):
    txn_index.reset()
    assert os.path.getsize(txn_index.path) == 0
    assert txn_index.last_offset is None
    txn_index.append(AbortedTxn(1, 0, 1, 0))
    assert txn_index.all_aborted_txns() == [AbortedTxn(1, 0, 1, 0)]


def test_reset_without_file_creates_none(txn_path):
    index = TransactionIndex(txn_path, 0)
    index.reset()
    assert not os.path.exists(txn_path)


def test_delete_and_rename(txn_index, tmp_path):
    new_path = str(tmp_path / "00000000000000000000.txnindex.deleted")
    txn_index.rename_to(new_path)
    assert txn_index.path == new_path
    assert txn_index.all_aborted_txns() == TXNS
    assert txn_index.delete() is True
    assert not os.path.exists(new_path)
    assert txn_index.delete() is False


def test_rename_of_a_never_written_index_just_follows_the_name(txn_path, tmp_path):
    index = TransactionIndex(txn_path, 0)
    new_path = str(tmp_path / "moved.txnindex")
    index.rename_to(new_path)
    assert index.path == new_path
    assert not os.path.exists(new_path)


# --- sanity check ---------------------------------------------------------


def write_entries(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def test_sanity_check_accepts_a_valid_index(txn_index):
    txn_index.sanity_check()


def test_sanity_check_rejects_last_offset_below_start_offset(txn_path, open_index):
    write_entries(txn_path, AbortedTxn(1, 0, 99, 0).to_bytes())
    with pytest.raises(CorruptIndexError, match="less than the start offset 100") as e:
        open_index(txn_path, 100).sanity_check()
    assert e.value.path == txn_path


def test_sanity_check_rejects_a_partial_entry(txn_path, open_index):
    write_entries(txn_path, AbortedTxn(1, 0, 5, 0).to_bytes() + b"\x00" * 10)
    index = open_index(txn_path)
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 0)]  # readers stop before it
    with pytest.raises(CorruptIndexError, match="44 bytes"):
        index.sanity_check()


def test_sanity_check_rejects_unordered_entries(txn_path, open_index):
    write_entries(txn_path, AbortedTxn(1, 0, 5, 0).to_bytes() + AbortedTxn(2, 0, 5, 0).to_bytes())
    with pytest.raises(CorruptIndexError, match="does not follow"):
        open_index(txn_path).sanity_check()


def test_sanity_check_rejects_first_offset_after_last_offset(txn_path, open_index):
    write_entries(txn_path, AbortedTxn(1, 9, 5, 0).to_bytes())
    with pytest.raises(CorruptIndexError, match="starts after its last offset"):
        open_index(txn_path).sanity_check()


def test_unknown_version_is_corrupt(txn_path, open_index):
    write_entries(txn_path, AbortedTxn(1, 0, 5, 0, version=1).to_bytes())
    with pytest.raises(CorruptIndexError, match="version 1"):
        open_index(txn_path).all_aborted_txns()
