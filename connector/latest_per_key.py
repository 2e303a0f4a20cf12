"""An upsert batch reduced to one record per key: the one with the highest offset (a plain function on
Arrow tables, run by Spark on each key's share of a micro-batch).

A table fed in ``upsert`` mode holds the latest value of each key, as a compacted
topic does once cleaned; within one micro-batch the record with the highest
offset of a key wins (a tombstone among them: the key is deleted). Keys are
compared per topic, so a pattern of several topics keeps them apart.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

KEY_COLUMNS = ("topic", "key")
_ROW = "__row"


def latest_per_key(records: pa.Table) -> pa.Table:
    """The rows of ``records`` that have the highest ``offset`` of their (``topic``, ``key``), in their
    original order. Rows without a key are not reduced (they cannot be upserted; the caller sends
    them elsewhere) and are dropped here."""
    keyed = records.filter(pc.is_valid(records["key"]))
    if keyed.num_rows == 0:
        return keyed
    numbered = keyed.append_column(_ROW, pa.array(range(keyed.num_rows), pa.int64()))
    # The last row of each key in (offset ascending) order is its latest.
    ordered = numbered.sort_by([("offset", "ascending")])
    last = ordered.group_by(list(KEY_COLUMNS), use_threads=False).aggregate([(_ROW, "last")])
    rows = pc.sort_indices(last[f"{_ROW}_last"])
    return keyed.take(pc.take(last[f"{_ROW}_last"], rows))
