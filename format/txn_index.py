"""Kafka's ``.txnindex``: the aborted transactions whose markers a segment holds.

This module owns the transaction index file and its 34-byte big-endian
entries, in Kafka's field order:

    int16 version (0) | int64 producer_id | int64 first_offset
    | int64 last_offset | int64 last_stable_offset

``last_offset`` is the offset of the abort marker, ``first_offset`` the
transaction's first record (possibly in an earlier segment), and
``last_stable_offset`` the partition's LSO when the abort was written. A
read_committed fetch collects the entries overlapping its range to drop the
aborted records; since a transaction may start before the segment, the search
goes on into later segments until an entry's LSO shows nothing older can
still be open.

The file is created on the first append, so most segments have none; a
missing file reads as empty. Entries are appended with one write each and
are not preallocated or checksummed; after an unclean shutdown the owner
rebuilds the index, as Kafka does. ``parse_aborted_txns`` and
``collect_aborted_txns`` serve readers holding the file's bytes (e.g. from
object storage) without a TransactionIndex.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

from format.errors import CorruptIndexError, InvalidOffsetError

CURRENT_VERSION = 0

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction. On disk ``version`` comes first; here it defaults last."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(self.version, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, position: int = 0) -> AbortedTxn:
        version, producer_id, first_offset, last_offset, last_stable_offset = _ENTRY.unpack_from(data, position)
        return cls(producer_id, first_offset, last_offset, last_stable_offset, version)


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """Aborted transactions overlapping a fetch range, and whether the search may stop here.

    ``is_complete`` is False when a transaction aborted in a later segment may
    still overlap the range, so the caller must search the next segment's index.
    """

    aborted_txns: tuple[AbortedTxn, ...]
    is_complete: bool


def _iter_entries(data: bytes, path: str | None) -> Iterator[tuple[int, AbortedTxn]]:
    # A partial entry at the end (a write cut short) is not an entry; Kafka's
    # reader stops before it too, and sanity_check reports it.
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        txn = AbortedTxn.from_bytes(data, position)
        if txn.version > CURRENT_VERSION:
            raise CorruptIndexError(
                f"unexpected aborted transaction version {txn.version} at position {position}, "
                f"current version is {CURRENT_VERSION}",
                path=path,
            )
        yield position, txn


def parse_aborted_txns(data: bytes, path: str | None = None) -> list[AbortedTxn]:
    """The entries of a transaction index held in memory; ``path`` names it in errors."""
    return [txn for _, txn in _iter_entries(data, path)]


def collect_aborted_txns(
    txns: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> TxnIndexSearchResult:
    """The transactions overlapping [fetch_offset, upper_bound_offset), in index order.

    The search is complete at the first entry whose last stable offset reaches
    the upper bound: every transaction overlapping the range was already
    decided (committed or aborted) by then, so no later entry can matter.
    """
    found: list[AbortedTxn] = []
    for txn in txns:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(tuple(found), True)
    return TxnIndexSearchResult(tuple(found), False)


class TransactionIndex:
    """The ``.txnindex`` file of the segment whose base offset is ``start_offset``."""

    def __init__(self, path: str | os.PathLike[str], start_offset: int) -> None:
        self._path = os.fspath(path)
        self.start_offset = start_offset
        self._file: BinaryIO | None = None
        self._last_offset: int | None = None
        self._appending = False
        if os.path.exists(self._path):
            data = self._read_all()
            # Carry the append rule across a reopen: the last whole entry is
            # where the next one must start above.
            whole = len(data) - len(data) % ENTRY_SIZE
            if whole:
                self._last_offset = AbortedTxn.from_bytes(data, whole - ENTRY_SIZE).last_offset

    @property
    def path(self) -> str:
        return self._path

    @property
    def last_offset(self) -> int | None:
        """The last offset of the last entry, or None when empty."""
        return self._last_offset

    def __repr__(self) -> str:
        return f"TransactionIndex({self._path}, start_offset={self.start_offset})"

    def _open(self, append: bool = False) -> BinaryIO:
        """The file, opened for reading only until the first append (a read-only segment, or one on
        a read-only filesystem, never asks for write access)."""
        if append and not self._appending and self._file is not None:
            self._file.close()
        if self._file is None or self._file.closed:
            # Unbuffered append: each entry reaches the file in one write.
            self._file = open(self._path, "a+b", buffering=0) if append else open(self._path, "rb", buffering=0)
            self._appending = append
        return self._file

    def _read_all(self) -> bytes:
        if self._file is None or self._file.closed:
            if not os.path.exists(self._path):
                return b""
            self._open(append=self._appending)
        fd = self._file.fileno()  # type: ignore[union-attr]
        return os.pread(fd, os.fstat(fd).st_size, 0)

    def _entries(self) -> Iterator[tuple[int, AbortedTxn]]:
        return _iter_entries(self._read_all(), self._path)

    def append(self, aborted_txn: AbortedTxn) -> None:
        """Add an entry; its last offset must be above the previous entry's."""
        if self._last_offset is not None and aborted_txn.last_offset <= self._last_offset:
            raise InvalidOffsetError(
                f"{self._path}: the last offset of appended transactions must increase, but "
                f"{aborted_txn.last_offset} is not greater than the current last offset {self._last_offset}"
            )
        self._open(append=True).write(aborted_txn.to_bytes())
        self._last_offset = aborted_txn.last_offset

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [txn for _, txn in self._entries()]

    @property
    def is_empty(self) -> bool:
        return next(self._entries(), None) is None

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries with last_offset >= fetch_offset and first_offset < upper_bound_offset.

        See ``collect_aborted_txns`` for when the result is complete.
        """
        return collect_aborted_txns((txn for _, txn in self._entries()), fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose last offset is >= ``offset``."""
        previous: int | None = None
        for position, txn in self._entries():
            if txn.last_offset >= offset:
                self._open(append=True).truncate(position)
                self._last_offset = previous
                return
            previous = txn.last_offset

    def reset(self) -> None:
        """Remove every entry (the file stays, empty, if it existed)."""
        if os.path.exists(self._path):
            self._open(append=True).truncate(0)
        self._last_offset = None

    def flush(self) -> None:
        if self._file is not None and not self._file.closed:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None

    def __enter__(self) -> TransactionIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def delete(self) -> bool:
        """Close and delete the file; False if it did not exist."""
        self.close()
        try:
            os.remove(self._path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        """Rename the file if it exists; the index follows the new name either way."""
        new_path = os.fspath(new_path)
        try:
            if os.path.exists(self._path):
                os.replace(self._path, new_path)
        finally:
            self._path = new_path

    def sanity_check(self) -> None:
        """Raise CorruptIndexError on a partial entry, an unknown version or bad offsets.

        Kafka checks only that no last offset is below the start offset; the
        length and the ordering that ``append`` enforces are checked as well.
        """
        data = self._read_all()
        if len(data) % ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"found {len(data)} bytes, which is not a multiple of the entry size {ENTRY_SIZE}", path=self._path
            )
        previous: AbortedTxn | None = None
        for position, txn in _iter_entries(data, self._path):
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"last offset of aborted transaction {txn} at position {position} "
                    f"is less than the start offset {self.start_offset}",
                    path=self._path,
                )
            if txn.first_offset > txn.last_offset:
                raise CorruptIndexError(
                    f"aborted transaction {txn} at position {position} starts after its last offset", path=self._path
                )
            if previous is not None and txn.last_offset <= previous.last_offset:
                raise CorruptIndexError(
                    f"last offset {txn.last_offset} at position {position} does not follow "
                    f"the previous last offset {previous.last_offset}",
                    path=self._path,
                )
            previous = txn
