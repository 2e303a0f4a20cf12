"""Text tables as Kafka's tools print them."""

from __future__ import annotations

from typing import Sequence


def aligned(rows: Sequence[Sequence[object]]) -> list[str]:
    """Columns padded to their widest cell, as kafka-consumer-groups.sh aligns them; None prints as "-"."""
    cells = [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return [" ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
