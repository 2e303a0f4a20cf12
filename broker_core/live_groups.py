"""A live consumer group as its coordinator holds it: members and assignments, committed offsets (from
memory), each partition's end offset, in the ``GroupDescription`` that ``seglog groups describe`` prints —
so the lag the console and the metrics show is ``PartitionLag.lag``, the same figure."""

from __future__ import annotations

from typing import Callable

from format.layout import TopicPartition

from .coordinator.group import GroupCoordinator, OffsetFetchGroup, OffsetFetchRequest
from .errors import NONE, GroupIdNotFoundError, error_for_code
from .group_offsets import GroupDescription, GroupMember, lag_rows, member_assignment


def describe_live_group(coordinator: GroupCoordinator, end_offset: Callable[[TopicPartition], int | None],
                        group_id: str) -> GroupDescription:
    """The group as its coordinator holds it now, each partition's end offset from ``end_offset`` (the high
    watermark a consumer's ListOffsets ``latest`` answers); GroupIdNotFoundError when it has neither members
    nor offsets."""
    error, summary = coordinator.describe_group(group_id)
    if error != NONE:
        raise error_for_code(error)(f"consumer group {group_id!r} cannot be described now")
    (fetched,) = coordinator.fetch_offsets(OffsetFetchRequest(groups=(OffsetFetchGroup(group_id, None),)))
    committed = {tp: o.offset for tp, o in fetched.offsets.items() if o is not None}
    if summary.state == "Dead" and not committed:
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    members = tuple(GroupMember(m.member_id, m.client_id, m.client_host, m.group_instance_id,
                                member_assignment(group_id, m.member_id, summary.protocol_type, m.assignment))
                    for m in summary.members)
    return GroupDescription(group_id, summary.state, summary.protocol_type, summary.protocol or None, members,
                            lag_rows(group_id, committed, members, end_offset))
