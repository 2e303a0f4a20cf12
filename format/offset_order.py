"""The offsets a walk over a segment's batches must find, checked batch by batch.

A batch's ``baseOffset`` lies outside its CRC (the broker assigns it), so a
flipped bit there passes every checksum. What gives it away is order: along a
segment, each batch starts above the previous batch's last offset; the first
batch starts at or above the segment's base offset (its file name); and an
offset index entry ``(offset O, position P)`` says that the batch at ``P`` ends
at ``O`` (Kafka writes the last offset of the batch that starts there; Kafka
2.x wrote the last offset of a multi-batch append, which a later batch of the
same append ends at — so a walk from ``P`` must end a batch at ``O`` before it
passes it). A forward jump of a segment's very last batch is the one change
nothing on disk contradicts.

``OffsetOrder`` is fed the batches of one walk in file order and raises
``OffsetOrderError`` (a ``CorruptRecordError``) naming the file and the batch position at the first
batch that breaks these rules. It is pure: the walks that use it read the bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import CorruptRecordError

if TYPE_CHECKING:
    import numpy as np


class OffsetOrderError(CorruptRecordError):
    """Batch offsets that contradict their neighbours or the offset index."""


class OffsetOrder:
    """The rules for the next batch of a walk over one segment file."""

    __slots__ = ("path", "floor", "anchor", "anchor_position", "last_offset")

    def __init__(self, path: str | None, floor: int, *, anchor: int | None = None,
                 anchor_position: int | None = None, last_offset: int | None = None):
        self.path = path
        self.floor = floor  # the segment's base offset: no batch starts below it
        self.anchor = anchor  # an offset index entry's offset, not yet reached
        self.anchor_position = anchor_position
        self.last_offset = last_offset  # the previous batch's last offset

    @classmethod
    def from_index_entry(cls, path: str | None, base_offset: int, entry_offset: int, entry_position: int
                         ) -> "OffsetOrder":
        """A walk that starts where the offset index points: (``base_offset``, 0) is no entry at all."""
        if entry_position == 0 and entry_offset == base_offset:
            return cls(path, base_offset)
        return cls(path, base_offset, anchor=entry_offset, anchor_position=entry_position)

    def check(self, position: int, base_offset: int, last_offset: int) -> None:
        """Accept the batch at ``position`` or raise naming it."""
        if last_offset < base_offset:
            self._fail(position, f"batch offsets {base_offset}..{last_offset} run backwards")
        if base_offset < self.floor:
            self._fail(position, f"batch base offset {base_offset} is below the segment's base offset {self.floor}")
        if self.last_offset is not None and base_offset <= self.last_offset:
            self._fail(position, f"batch offsets {base_offset}..{last_offset} do not follow offset "
                                 f"{self.last_offset} of the batch before")
        if self.anchor is not None:
            if last_offset > self.anchor:
                self._fail(position, f"batch offsets {base_offset}..{last_offset} pass offset {self.anchor}, "
                                     f"which the offset index puts in a batch ending at position "
                                     f"{self.anchor_position} or later")
            if last_offset == self.anchor:
                self.anchor = None
        self.last_offset = last_offset

    def accept_run(self, base_offsets: np.ndarray, last_offsets: np.ndarray) -> int:
        """How many batches from the first, in walk order, ``check`` accepts, all tested at once;
        the state moves past them. The caller checks the next one with ``check`` (it raises)."""
        n = len(base_offsets)
        if not n:
            return 0
        ok = (last_offsets >= base_offsets) & (base_offsets >= self.floor)
        ok[1:] &= base_offsets[1:] > last_offsets[:-1]
        if self.last_offset is not None:
            ok[0] &= base_offsets[0] > self.last_offset
        reach = None
        if self.anchor is not None:
            reaching = (last_offsets >= self.anchor).nonzero()[0]
            if reaching.size:
                reach = int(reaching[0])
                ok[reach] &= last_offsets[reach] == self.anchor
        accepted = int(ok.argmin()) if not ok.all() else n
        if accepted:
            self.last_offset = int(last_offsets[accepted - 1])
            if reach is not None and reach < accepted:
                self.anchor = None
        return accepted

    def check_next_base(self, position: int, base_offset: int) -> None:
        """The batch after the walk (only its first bytes read) must start above what the walk ended at."""
        if self.last_offset is not None and base_offset <= self.last_offset:
            self._fail(position, f"batch base offset {base_offset} does not follow offset {self.last_offset} "
                                 f"of the batch before")

    def check_bound(self, position: int, bound: int) -> None:
        """The walk's last batch must end below ``bound`` (the next segment's base offset)."""
        if self.last_offset is not None and self.last_offset >= bound:
            self._fail(position, f"batch ends at offset {self.last_offset}, at or past offset {bound} where the "
                                 f"next segment starts")

    def _fail(self, position: int, reason: str) -> None:
        raise OffsetOrderError(reason, path=self.path, position=position)
