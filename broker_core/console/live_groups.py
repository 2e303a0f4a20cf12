"""A live consumer group as the console shows it: the coordinator's members and assignments (memory),
its committed offsets (memory) and each partition's log end offset, in the ``GroupDescription`` that
``seglog groups describe`` prints — so the lag here is ``PartitionLag.lag``, the same figure."""

from __future__ import annotations

import logging
from typing import Callable

from format.layout import TopicPartition

from ..consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment
from ..coordinator.group import GroupCoordinator, OffsetFetchGroup, OffsetFetchRequest
from ..errors import NONE, GroupIdNotFoundError, error_for_code
from ..group_offsets import GroupDescription, GroupMember, PartitionLag
from ..protocol import ProtocolError

log = logging.getLogger(__name__)


def describe_live_group(coordinator: GroupCoordinator, log_end_offset: Callable[[TopicPartition], int | None],
                        group_id: str) -> GroupDescription:
    """The group as its coordinator holds it now; GroupIdNotFoundError when it has neither members
    nor offsets."""
    error, summary = coordinator.describe_group(group_id)
    if error != NONE:
        raise error_for_code(error)(f"consumer group {group_id!r} cannot be described now")
    (fetched,) = coordinator.fetch_offsets(OffsetFetchRequest(groups=(OffsetFetchGroup(group_id, None),)))
    committed = {tp: o for tp, o in fetched.offsets.items() if o is not None}
    if summary.state == "Dead" and not committed:
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    members = []
    for m in summary.members:
        assignment: tuple[TopicPartition, ...] = ()
        if summary.protocol_type == CONSUMER_PROTOCOL_TYPE and m.assignment:
            try:
                assignment = tuple(decode_assignment(m.assignment))
            except ProtocolError as exc:
                log.warning("group %r: member %s has an assignment that cannot be read: %s", group_id, m.member_id,
                            exc)
        members.append(GroupMember(m.member_id, m.client_id, m.client_host, m.group_instance_id, assignment))
    rows = tuple(PartitionLag(group_id, tp.topic, tp.partition,
                              None if tp not in committed else committed[tp].offset, log_end_offset(tp))
                 for tp in sorted(set(committed) | {tp for m in members for tp in m.assignment}))
    return GroupDescription(group_id, summary.state, summary.protocol_type, summary.protocol or None,
                            tuple(members), rows)
