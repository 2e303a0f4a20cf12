"""Records grouped by key: the sort both cleaners build their latest-offset-per-key on.

Keys are 128-bit hashes held as two uint64 columns (``h1``, ``h2``). A
stable sort on them (``np.argsort(kind="stable")`` or ``np.lexsort``) costs
about a fifth of a microsecond a record; numpy's plain ``np.sort`` of one
uint64 column is several times faster. So each record's position is packed
into the low bits of its ``h1`` and that one column is sorted: records of one
key end up next to each other, in their original order. Two distinct keys
whose ``h1`` agree above the packed bits would interleave; such runs (rare:
about one in ``2**(64 - bits) / keys**2``) are found and sorted again on the
full hashes.
"""

from __future__ import annotations

import numpy as np

# Positions up to 2**MAX_PACKED_BITS are packed; larger inputs fall back to a lexicographic sort.
MAX_PACKED_BITS = 32


def _boundaries(s1: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """Where each run of one key starts in hash columns sorted by key."""
    changed = (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])
    return np.flatnonzero(np.concatenate(([True], changed)))


def key_runs(h1: np.ndarray, h2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An order putting the records of each key next to each other (in their original order
    within a key), and where each key's run starts in it."""
    n = len(h1)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    bits = max(1, (n - 1).bit_length())
    if bits > MAX_PACKED_BITS:
        order = np.lexsort((np.arange(n), h2, h1))
        return order, _boundaries(h1[order], h2[order])
    low = np.uint64((1 << bits) - 1)
    packed = (h1 & ~low) | np.arange(n, dtype=np.uint64)
    packed.sort()
    order = (packed & low).astype(np.int64)
    s1, s2 = h1[order], h2[order]
    prefix = packed >> np.uint64(bits)
    same_prefix = prefix[1:] == prefix[:-1]
    other_key = same_prefix & ((s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1]))
    if other_key.any():
        # Keys sharing a prefix: re-sort the records of those prefixes on the full hashes. Each such
        # prefix occupies a contiguous stretch, and sorting on (h1, h2) keeps it there.
        run_of = np.cumsum(np.concatenate(([0], ~same_prefix)))
        mixed = np.unique(run_of[1:][other_key])
        positions = np.flatnonzero(np.isin(run_of, mixed))
        sub = order[positions]
        order[positions] = sub[np.lexsort((sub, h2[sub], h1[sub]))]
        s1, s2 = h1[order], h2[order]
    return order, _boundaries(s1, s2)


def latest_per_key(h1: np.ndarray, h2: np.ndarray, offsets: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct key once with its largest offset (in no particular order of keys)."""
    if not len(h1):
        return h1, h2, offsets
    order, starts = key_runs(h1, h2)
    firsts = order[starts]
    return h1[firsts], h2[firsts], np.maximum.reduceat(offsets[order], starts)
