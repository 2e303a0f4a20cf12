"""Which batches a read_committed reader leaves out: those of aborted transactions.

An aborted transaction of producer ``P`` covers ``P``'s transactional batches
from its ``first_offset`` to its ABORT marker (``last_offset``): a producer
has at most one transaction open at a time, so no other batch of ``P`` falls
in between. The ``.txnindex`` gives both ends; a Fetch response gives only the
first, and its end is then the first marker of ``P`` at or after it in the
fetched batches (Kafka's consumer finds it the same way), or past them all.

The test is vectorized: one ``searchsorted`` per aborted producer over every
batch of that producer, whatever the number of batches.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from .record_batch import RecordBatch
from .txn_index import AbortedTxn

# The end of a transaction whose ABORT marker lies past the batches at hand.
NO_MARKER_YET = np.iinfo(np.int64).max


def aborted_batch_mask(producer_ids: np.ndarray, base_offsets: np.ndarray, transactional: np.ndarray,
                       aborted: Sequence[AbortedTxn]) -> np.ndarray:
    """True for each batch (given by its producer id, base offset and transactional flag) that
    belongs to one of the ``aborted`` transactions."""
    out = np.zeros(len(base_offsets), dtype=bool)
    if not aborted or not len(base_offsets):
        return out
    table = np.array([(t.producer_id, t.first_offset, t.last_offset) for t in aborted], dtype=np.int64)
    table = table[np.lexsort((table[:, 1], table[:, 0]))]  # by producer, then first offset
    for producer_id in np.unique(table[:, 0]):
        rows = table[table[:, 0] == producer_id]
        candidates = np.flatnonzero(transactional & (producer_ids == producer_id))
        if not candidates.size:
            continue
        at = base_offsets[candidates]
        i = np.searchsorted(rows[:, 1], at, side="right") - 1  # the last transaction starting at or below
        inside = i >= 0
        inside[inside] &= at[inside] <= rows[i[inside], 2]
        out[candidates[inside]] = True
    return out


def with_marker_offsets(aborted: Iterable[tuple[int, int]], batches: Sequence[RecordBatch]) -> list[AbortedTxn]:
    """Aborted transactions known by (producer id, first offset), as a Fetch response lists them,
    ended at the first control batch of their producer at or after their first offset among
    ``batches`` (``NO_MARKER_YET`` when none is there)."""
    markers: dict[int, list[int]] = {}
    for batch in batches:
        h = batch.header
        if h.is_control and h.has_producer_id:
            markers.setdefault(h.producer_id, []).append(h.base_offset)
    out = []
    for producer_id, first_offset in aborted:
        ends = markers.get(producer_id, [])
        i = int(np.searchsorted(ends, first_offset, side="left"))
        last = ends[i] if i < len(ends) else NO_MARKER_YET
        out.append(AbortedTxn(producer_id, first_offset, last, -1))
    return out
