"""What the job did, per partition: segments and bytes before and after, as a table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from format.layout import TopicPartition

from .clean_stage import GroupResult
from .partition_plan import PartitionPlan


@dataclass(frozen=True)
class PartitionReport:
    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int

    @property
    def reduction(self) -> float:
        return 1 - self.bytes_after / self.bytes_before if self.bytes_before else 0.0


def report_partition(plan: PartitionPlan, results: Sequence[GroupResult]) -> PartitionReport:
    """What the job did to one partition: its segments and bytes as planned, and once its cleaned
    groups (``results``) replace the segments they were cleaned from. The same figures as the
    stage-2 line's; what a broker appends meanwhile is not the job's doing."""
    mine = [r for r in results if r.key == plan.key]
    return PartitionReport(plan.topic_partition, plan.first_dirty_offset, plan.first_uncleanable_offset,
                           len(plan.segments), len(plan.segments) - sum(len(r.replaced) for r in mine) + len(mine),
                           plan.bytes_before,
                           plan.bytes_before - sum(r.bytes_before for r in mine) + sum(r.bytes_after for r in mine))


def format_report(reports: Sequence[PartitionReport]) -> list[str]:
    rows = [("PARTITION", "CLEANED-OFFSETS", "SEGMENTS", "BYTES-BEFORE", "BYTES-AFTER", "REDUCTION")]
    for r in reports:
        rows.append((str(r.topic_partition), f"{r.first_dirty_offset}..{r.end_offset}",
                     f"{r.segments_before} -> {r.segments_after}", f"{r.bytes_before:,}", f"{r.bytes_after:,}",
                     f"{100 * r.reduction:.1f}%"))
    before = sum(r.bytes_before for r in reports)
    after = sum(r.bytes_after for r in reports)
    rows.append(("total", "", "", f"{before:,}", f"{after:,}",
                 f"{100 * (1 - after / before):.1f}%" if before else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
