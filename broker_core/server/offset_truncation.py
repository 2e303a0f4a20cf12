"""Where a follower truncates its log before fetching from a new leader (KIP-101, KIP-279).

A follower's tail past what the leader has may hold records the leader never
had — written by an old leader in an epoch the new one does not know, or lost
from the new leader's disk in a crash. Truncating to the follower's high
watermark gets this wrong both ways: the HW it knows may lag the leader's (it
throws away records the ISR acknowledged, KIP-101's first case), or its log
past the HW may differ from the leader's (it keeps a diverged tail, the
second case). So the follower asks the leader, with OffsetsForLeaderEpoch,
where its own latest epoch ended in the leader's log, and truncates there;
when the leader answers with an older epoch the follower does not know
either, it truncates to the end of its own largest epoch below that one and
asks again (KIP-279), until both agree.

``offset_truncation_state`` is the decision (Kafka's
AbstractFetcherThread.getOffsetTruncationState), a pure function;
``truncate_by_leader_epoch`` is the follower's step: ask, truncate, repeat.
A follower fetching with its last fetched epoch (Fetch v12) learns the same
from the leader's ``DivergingEpoch`` instead and truncates with
``truncate_to_diverging_epoch`` before its next fetch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from ..log.leader_epoch_file_cache import UNDEFINED_EPOCH, EpochEndOffset
from ..log.log import Log

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetTruncationState:
    """Where to truncate, and whether that settles it or the leader must be asked again."""

    offset: int
    truncation_completed: bool


def offset_truncation_state(leader: EpochEndOffset, follower: EpochEndOffset | None, log_end_offset: int,
                            fetch_offset: int) -> OffsetTruncationState:
    """The truncation for the leader's answer ``leader`` to the follower's latest epoch.

    ``follower`` is the follower's own answer for ``leader.leader_epoch`` (its largest epoch at or below
    it and where that epoch ends in its log; None when it knows no epoch there), ``log_end_offset`` its
    log end and ``fetch_offset`` where it would fetch from otherwise (its high watermark).
    """
    if leader.undefined:
        # The leader knows no such epoch (no epochs at all): the high watermark is all there is.
        return OffsetTruncationState(min(fetch_offset, log_end_offset), True)
    if leader.leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader.end_offset, log_end_offset), True)
    if follower is None:
        # The follower kept no epochs that far back; the leader's end for an older epoch is safe.
        return OffsetTruncationState(min(leader.end_offset, log_end_offset), True)
    if follower.leader_epoch != leader.leader_epoch:
        # The leader answered with an epoch the follower does not have: cut back to the end of the
        # follower's largest epoch below it and ask again for that one.
        return OffsetTruncationState(min(follower.end_offset, log_end_offset), False)
    return OffsetTruncationState(min(leader.end_offset, follower.end_offset, log_end_offset), True)


def truncate_by_leader_epoch(follower_log: Log, ask_leader: Callable[[int], EpochEndOffset]) -> int:
    """Truncate ``follower_log`` where its history and the leader's part (Kafka's truncateToEpochEndOffsets),
    asking ``ask_leader(epoch)`` — the leader's OffsetsForLeaderEpoch answer — for its latest epoch
    until the answer settles it. A log with no epochs truncates to its high watermark. Returns the
    offset the follower fetches from next."""
    while True:
        epoch = follower_log.latest_epoch
        if epoch is None:
            target = follower_log.high_watermark
            if follower_log.truncate_to(target):
                log.info("%s: no leader epochs: truncated to the high watermark %d", follower_log, target)
            return follower_log.log_end_offset
        if truncate_to_diverging_epoch(follower_log, ask_leader(epoch)).truncation_completed:
            return follower_log.log_end_offset


def truncate_to_diverging_epoch(follower_log: Log, leader: EpochEndOffset) -> OffsetTruncationState:
    """Truncate ``follower_log`` for the leader's end offset of an epoch (an OffsetsForLeaderEpoch answer or
    a fetch's DivergingEpoch); not completed means the follower asks again for its new latest epoch."""
    mine = None if leader.undefined else follower_log.end_offset_for_epoch(leader.leader_epoch)
    state = offset_truncation_state(leader, mine, follower_log.log_end_offset, follower_log.high_watermark)
    if follower_log.truncate_to(state.offset):
        log.info("%s: truncated to offset %d: epoch %d ends at %d in the leader's log", follower_log, state.offset,
                 leader.leader_epoch, leader.end_offset)
    return state
