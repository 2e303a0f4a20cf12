"""The cleaner's offset map: key hash -> latest offset, in a fixed amount of memory
(Kafka's SkimpyOffsetMap).

Each slot holds a 16-byte key hash and an 8-byte offset, as Kafka's MD5-keyed
map does, so ``log.cleaner.dedupe.buffer.size`` buys the same number of
slots here as there. The table is open addressing with double hashing over
a prime number of slots, held in three numpy arrays, and every operation
takes a whole column of keys: a round of probing moves every key still
looking one step along its own probe sequence.

The map is "full" at ``load_factor`` of its slots
(``log.cleaner.io.buffer.load.factor``); ``put`` then stops, and the cleaner
cleans up to where the map got and continues in its next round.
"""

from __future__ import annotations

import numpy as np

from .key_runs import key_runs

BYTES_PER_ENTRY = 24  # a 16-byte hash and an 8-byte offset, Kafka's MD5 entry size
DEFAULT_LOAD_FACTOR = 0.9


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def largest_prime_at_most(n: int) -> int:
    while n > 2 and not _is_prime(n):
        n -= 1
    return max(n, 2)


_H1, _H2, _OFFSET1 = 0, 1, 2  # the columns of a slot (a row of three uint64: one cache line)


class OffsetMap:
    """A bounded map from 128-bit key hashes to offsets.

    ``memory`` bytes give ``memory // 24`` slots (rounded down to a prime);
    at most ``max_size = slots * load_factor`` keys are stored. A slot's hash
    halves and offset sit side by side, so a probe touches one cache line;
    offsets are stored plus one so that a zeroed slot is free, which lets a
    fresh map be allocated lazily by the operating system.
    """

    def __init__(self, memory: int, load_factor: float = DEFAULT_LOAD_FACTOR):
        slots = largest_prime_at_most(max(2, int(memory) // BYTES_PER_ENTRY))
        if int(slots * load_factor) < 1:
            raise ValueError(f"offset map of {memory} bytes is too small to hold a single key; raise "
                             f"log.cleaner.dedupe.buffer.size or lower log.cleaner.threads")
        self.memory = int(memory)
        self.load_factor = load_factor
        self.slots = slots
        self.max_size = int(slots * load_factor)
        self._table = np.zeros((slots, 3), dtype=np.uint64)
        self._used: list[np.ndarray] = []  # the slots filled since the last clear
        self.size = 0
        self.latest_offset = -1
        self._slots_u = np.uint64(slots)
        self._step_mod = np.uint64(slots - 1)

    @classmethod
    def holding(cls, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray, latest_offset: int) -> "OffsetMap":
        """A map sized for (and filled with) the given distinct keys, at most half full."""
        m = cls(max(2 * len(h1) + 3, 3) * BYTES_PER_ENTRY, load_factor=1.0)
        consumed = m.put_many(h1, h2, offsets)
        assert consumed == len(h1)
        m.latest_offset = latest_offset
        return m

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self.slots}, size={self.size}, latest_offset={self.latest_offset})"

    @property
    def utilization(self) -> float:
        return self.size / self.slots

    def clear(self) -> None:
        for used in self._used:
            self._table[used, _OFFSET1] = 0
        self._used = []
        self.size = 0
        self.latest_offset = -1

    def sorted_offsets(self) -> np.ndarray:
        """Every offset in the map, ascending."""
        if not self._used:
            return np.zeros(0, dtype=np.int64)
        used = np.concatenate(self._used)
        return np.sort(self._table[used, _OFFSET1].astype(np.int64) - 1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    # --- probing -----------------------------------------------------------

    def _start(self, h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        slot = (h1 % self._slots_u).astype(np.int64)
        step = (h2 % self._step_mod).astype(np.int64) + 1
        return slot, step

    def _find(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """The slot holding each key, or the free slot its probe sequence ends at (as -(slot + 1))."""
        n = len(h1)
        out = np.empty(n, dtype=np.int64)
        slot, step = self._start(h1, h2)
        pending = np.arange(n)
        slots = self.slots
        while pending.size:
            s = slot[pending]
            rows = np.take(self._table, s, axis=0)
            occupied = rows[:, _OFFSET1] != 0
            same = occupied & (rows[:, _H1] == h1[pending]) & (rows[:, _H2] == h2[pending])
            out[pending[same]] = s[same]
            free = ~occupied
            out[pending[free]] = -(s[free] + 1)
            moving = occupied & ~same
            pending = pending[moving]
            slot[pending] = (s[moving] + step[pending]) % slots
        return out

    def get_many(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """The offset stored for each key, or -1 where the key is absent."""
        if not len(h1):
            return np.zeros(0, dtype=np.int64)
        where = self._find(h1, h2)
        out = np.full(len(h1), -1, dtype=np.int64)
        found = where >= 0
        out[found] = self._table[where[found], _OFFSET1].astype(np.int64) - 1
        return out

    def put_many(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray) -> int:
        """Map each key to its offset, in order (offsets ascending, so the last one of a key wins),
        as Kafka's cleaner does record by record: before each put the map must hold fewer than
        ``max_size`` keys, else it is full and the put, and every later one, is not made.

        Returns how many of the records were put (all of them unless the map filled).
        """
        n = len(h1)
        if not n:
            return 0
        order, starts = key_runs(h1, h2)
        firsts = order[starts]  # each distinct key's first record
        where = self._find(h1[firsts], h2[firsts])
        new_firsts = np.sort(firsts[where < 0])
        room = self.max_size - self.size
        if room <= 0:
            return 0
        # Once ``room`` new keys are in, the map is full: the record after the one adding the last
        # of them is refused, whatever its key.
        consumed = n if len(new_firsts) < room else min(n, int(new_firsts[room - 1]) + 1)
        if consumed < n:
            # Only the records before ``consumed`` are put: regroup what is left of each key.
            group = np.cumsum(np.isin(np.arange(n), starts)) - 1  # each position's key group
            keep = order < consumed
            order, group = order[keep], group[keep]
            starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
            where = where[group[starts]]
        lasts = order[np.append(starts[1:], len(order)) - 1]  # each key's last record put
        self._insert(h1[lasts], h2[lasts], offsets[lasts], where)
        return consumed

    def _insert(self, h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray, where: np.ndarray) -> None:
        """Store distinct keys; ``where`` is what ``_find`` said for each."""
        present = where >= 0
        self._table[where[present], _OFFSET1] = (offsets[present] + 1).astype(np.uint64)
        pending = np.flatnonzero(~present)
        if not pending.size:
            return
        slot = -(where[pending] + 1)
        _, step = self._start(h1[pending], h2[pending])
        slots = self.slots
        while pending.size:
            free = self._table[slot, _OFFSET1] == 0
            # Keys racing for the same free slot: the first one takes it, the others probe on.
            candidates = np.flatnonzero(free)
            _, first = np.unique(slot[candidates], return_index=True)
            winners = candidates[first]
            won = np.zeros(len(pending), dtype=bool)
            won[winners] = True
            s = slot[won]
            k = pending[won]
            self._table[s] = np.stack([h1[k], h2[k], (offsets[k] + 1).astype(np.uint64)], axis=1)
            self._used.append(s)
            self.size += len(k)
            lost = ~won
            slot = (slot[lost] + step[lost]) % slots
            step = step[lost]
            pending = pending[lost]
