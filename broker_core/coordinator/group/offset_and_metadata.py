"""``OffsetAndMetadata``: one committed offset as the coordinator holds it (Kafka's class of that name)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OffsetAndMetadata"]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A group's position in one partition.

    ``expire_timestamp`` is set only by OffsetCommit v2-v4 requests that carry
    a retention time; such an offset expires at that time whatever the group
    does, as in Kafka. ``leader_epoch`` is None when the client sent none.
    """

    offset: int
    metadata: str = ""
    commit_timestamp: int = 0
    leader_epoch: int | None = None
    expire_timestamp: int | None = None
