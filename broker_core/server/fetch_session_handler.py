"""The fetcher's side of a fetch session (Kafka's FetchSessionHandler): what to send to one leader.

The handler remembers the partitions the leader holds in the session and what was last asked of each. The
first request is full (epoch 0, every partition); once the leader answers with a session id, each request
names only the partitions added or whose request changed (fetch offset, log start offset, max bytes,
epochs) and forgets the ones no longer wanted, at the next epoch. An answer with a session error, a
failed connection or a leader that kept no session starts over with a full request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from format.layout import TopicPartition

from .fetch_session import (FETCH_SESSION_ID_NOT_FOUND, INITIAL_EPOCH, INVALID_SESSION_ID, FetchMetadata,
                            PartitionData, next_epoch)

__all__ = ["FetchRequestData", "FetchSessionHandler"]

NONE = 0
_INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)


@dataclass(frozen=True)
class FetchRequestData:
    """One fetch to send: the session id and epoch, the partitions to name and the ones to forget."""

    metadata: FetchMetadata
    to_send: tuple[tuple[TopicPartition, PartitionData], ...]
    to_forget: tuple[TopicPartition, ...]


class FetchSessionHandler:
    """The session with one leader, as its fetcher sees it. Not thread-safe: one fetcher thread owns it."""

    def __init__(self) -> None:
        self.next_metadata = _INITIAL
        self._session_partitions: dict[TopicPartition, PartitionData] = {}

    def build(self, wanted: Sequence[tuple[TopicPartition, PartitionData]]) -> FetchRequestData:
        """The request for the partitions ``wanted`` now, in that order."""
        previous, self._session_partitions = self._session_partitions, dict(wanted)
        if self.next_metadata.is_full:
            return FetchRequestData(self.next_metadata, tuple(wanted), ())
        to_send = tuple((tp, data) for tp, data in wanted if previous.get(tp) != data)
        to_forget = tuple(tp for tp in previous if tp not in self._session_partitions)
        return FetchRequestData(self.next_metadata, to_send, to_forget)

    def handle_response(self, error_code: int, session_id: int) -> bool:
        """Take in a response's session fields; False when it was a session error (nothing else in it)."""
        if error_code != NONE:
            # An unknown session starts afresh; any other error closes the session while opening a new one.
            self.next_metadata = _INITIAL if error_code == FETCH_SESSION_ID_NOT_FOUND else FetchMetadata(
                self.next_metadata.session_id, INITIAL_EPOCH)
            return False
        if session_id == INVALID_SESSION_ID:
            # The leader kept no session (no free slot, or it closed this one): the next request is full again.
            self.next_metadata = _INITIAL
        elif self.next_metadata.is_full:
            self.next_metadata = FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))
        else:
            self.next_metadata = FetchMetadata(session_id, next_epoch(self.next_metadata.epoch))
        return True

    def handle_error(self) -> None:
        """The request got no answer (a failed connection): the next one is full, closing this session."""
        self.next_metadata = FetchMetadata(self.next_metadata.session_id, INITIAL_EPOCH)
