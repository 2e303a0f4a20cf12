"""Which byte ranges of a segment file this process has seen pass their CRC check.

Why this is what lets a fetch send segment bytes it never reads (zero copy) while
keeping the rule that a corrupt batch is never served:

* A segment file's bytes at a given position change only through its owner:
  appends add bytes at the end, truncation (``truncate_to``, recovery cutting a
  damaged tail) removes them from the end. Nothing rewrites bytes in place: the
  cleaner writes new files and swaps them in, retention deletes whole files.
* So once the batches in ``[start, end)`` passed their CRC in this process, the
  same bytes lie there until a truncation cuts below ``end`` — which cuts the
  range here too (``truncate``). A range is recorded only from bytes whose CRCs
  were computed: a batch the log appended (every appended batch was validated
  before it was written, and the cleaner validates every batch it copies),
  recovery's full walk, or a read that checked each batch it served.
* A segment loaded from disk starts with nothing known: its first serve reads
  and checks the bytes (and sends those very bytes); later serves of the same
  range send from the file.

What this does not catch, and the copying read would: the bytes on disk changing
under the process by other means (another process writing the file, the disk
returning different bytes than were written). Kafka never checks CRCs on fetch at
all; seglog keeps the check at the boundary where it matters — bytes the process
did not produce or has not looked at.

The set is a sorted list of disjoint, non-adjacent ``[start, end)`` ranges; it
is touched from the appending thread and from fetch threads, under a lock.
"""

from __future__ import annotations

import bisect
import threading


class CrcCheckedRanges:
    """Disjoint ``[start, end)`` byte ranges of one file whose batches passed their CRC check."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CrcCheckedRanges({list(zip(self._starts, self._ends))})"

    @property
    def ranges(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(zip(self._starts, self._ends))

    def add(self, start: int, end: int) -> None:
        """Record ``[start, end)`` as checked, merging it with the ranges it touches."""
        if end <= start:
            return
        with self._lock:
            i = bisect.bisect_left(self._ends, start)  # the first range ending at or after start
            j = bisect.bisect_right(self._starts, end)  # past the last range starting at or before end
            if i < j:
                start = min(start, self._starts[i])
                end = max(end, self._ends[j - 1])
            self._starts[i:j] = [start]
            self._ends[i:j] = [end]

    def covers(self, start: int, end: int) -> bool:
        """Whether every byte of ``[start, end)`` is in one checked range."""
        with self._lock:
            i = bisect.bisect_right(self._starts, start) - 1
            return i >= 0 and self._ends[i] >= end

    def truncate(self, size: int) -> None:
        """The file was cut to ``size`` bytes: nothing at or past it is known any more."""
        with self._lock:
            i = bisect.bisect_left(self._starts, size)
            del self._starts[i:]
            del self._ends[i:]
            if self._ends and self._ends[-1] > size:
                self._ends[-1] = size
