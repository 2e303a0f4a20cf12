"""A follower as its partition's leader sees it (Kafka's ``kafka.cluster.Replica``).

The leader learns a follower's log end offset from the offset it fetches at,
and when the follower was last caught up: a fetch at or past the leader's log
end makes it caught up now; a fetch at or past what the leader's log end was
at the follower's previous fetch makes it caught up as of that previous fetch.
A follower not caught up for ``replica.lag.time.max.ms`` is out of sync.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(frozen=True)
class ReplicaState:
    """What the leader knows of one follower (Kafka's ReplicaState)."""

    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    # The leader's log end offset when the follower last fetched.
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def is_caught_up(self, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        """Whether the follower is in sync: it holds the leader's whole log, or it did within the lag time."""
        return (leader_end_offset == self.log_end_offset
                or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms)


class Replica:
    """One follower of a partition this broker leads."""

    def __init__(self, broker_id: int, owner: str):
        self.broker_id = broker_id
        self._owner = owner
        self.state = ReplicaState()

    def __repr__(self) -> str:
        return f"Replica(broker {self.broker_id} of {self._owner}: {self.state})"

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int) -> None:
        """Take in a fetch from offset ``fetch_offset`` (the follower's log end) at ``fetch_time_ms``,
        when the leader's log ended at ``leader_end_offset`` (Kafka's updateFetchStateOrThrow)."""
        old = self.state
        if fetch_offset >= leader_end_offset:
            caught_up = max(old.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= old.last_fetch_leader_log_end_offset:
            caught_up = max(old.last_caught_up_time_ms, old.last_fetch_time_ms)
        else:
            caught_up = old.last_caught_up_time_ms
        self.state = ReplicaState(log_start_offset, fetch_offset, leader_end_offset, fetch_time_ms, caught_up)

    def reset_replica_state(self, now_ms: int, leader_end_offset: int, is_new_leader: bool,
                            is_follower_in_sync: bool) -> None:
        """Start over when this broker is elected or re-elected leader (Kafka's resetReplicaState): a
        follower in the ISR counts as caught up now, one outside it as never (so it holds back neither
        the high watermark nor, before it fetches, comes back into the ISR); a new leader forgets
        what the follower held."""
        caught_up = now_ms if is_follower_in_sync else 0
        if is_new_leader:
            self.state = ReplicaState(last_caught_up_time_ms=caught_up)
        else:
            self.state = dataclasses.replace(self.state, last_fetch_leader_log_end_offset=leader_end_offset,
                                             last_fetch_time_ms=caught_up, last_caught_up_time_ms=caught_up)
