"""The fetcher's side of a fetch session, against the leader's ``FetchManager``: requests built by the handler
are answered by the manager's contexts, without sockets."""

from __future__ import annotations

import random

from broker_core.clock import MockTime
from broker_core.server.fetch_session import (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
                                              FetchManager, FetchMetadata, FetchSessionCache, PartitionData,
                                              PartitionResponse)
from broker_core.server.fetch_session_handler import FetchSessionHandler
from format.layout import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
V12 = 12


def at(offset: int) -> PartitionData:
    return PartitionData(offset, 0, 1 << 20, 3, 2)


def exchange(handler: FetchSessionHandler, leader: FetchManager, wanted, high_watermark: int = 10):
    """One fetch from a follower: the request the handler builds, what the leader reads, what it answers."""
    request = handler.build(wanted)
    context = leader.new_context(V12, request.metadata, list(request.to_send), list(request.to_forget), True)
    read = context.partitions()
    response = context.update_and_generate_response(
        [(tp, PartitionResponse(0, high_watermark, high_watermark, 0)) for tp, _ in read])
    handler.handle_response(response.error_code, response.session_id)
    return request, read, response


def leader(slots: int = 1000) -> FetchManager:
    return FetchManager(FetchSessionCache(slots, 120_000, rng=random.Random(3)), MockTime())


def test_the_first_fetch_is_full_and_the_next_names_only_partitions_whose_offset_moved():
    handler, manager = FetchSessionHandler(), leader()
    first, _, answered = exchange(handler, manager, [(A0, at(0)), (A1, at(0)), (B0, at(0))])
    assert (first.metadata, len(first.to_send)) == (FetchMetadata(0, 0), 3)
    second, read, _ = exchange(handler, manager, [(A0, at(4)), (A1, at(0)), (B0, at(0))])
    assert second.metadata == FetchMetadata(answered.session_id, 1)
    assert [tp for tp, _ in second.to_send] == [A0]
    # The leader still reads every partition of the session, at the offsets the follower last named.
    assert dict(read) == {A0: at(4), A1: at(0), B0: at(0)}


def test_a_partition_no_longer_wanted_is_forgotten_and_one_added_is_sent():
    handler, manager = FetchSessionHandler(), leader()
    exchange(handler, manager, [(A0, at(0)), (A1, at(0))])
    request, read, _ = exchange(handler, manager, [(A0, at(0)), (B0, at(7))])
    assert request.to_forget == (A1,)
    assert request.to_send == ((B0, at(7)),)
    assert [tp for tp, _ in read] == [A0, B0]


def test_an_evicted_session_is_followed_by_a_full_fetch_that_opens_another():
    handler, manager = FetchSessionHandler(), leader()
    _, _, answered = exchange(handler, manager, [(A0, at(0))])
    manager.cache.remove(answered.session_id)
    _, _, refused = exchange(handler, manager, [(A0, at(1))])
    assert refused.error_code == FETCH_SESSION_ID_NOT_FOUND
    request, _, reopened = exchange(handler, manager, [(A0, at(1))])
    assert request.metadata == FetchMetadata(0, 0) and request.to_send == ((A0, at(1)),)
    assert reopened.session_id not in (0, answered.session_id)


def test_an_epoch_error_closes_the_session_with_the_next_full_fetch():
    handler, manager = FetchSessionHandler(), leader()
    _, _, answered = exchange(handler, manager, [(A0, at(0))])
    assert handler.handle_response(INVALID_FETCH_SESSION_EPOCH, 0) is False
    request, _, reopened = exchange(handler, manager, [(A0, at(0))])
    assert request.metadata == FetchMetadata(answered.session_id, 0)
    assert manager.cache.get(answered.session_id) is None
    assert reopened.session_id != 0


def test_a_leader_without_slots_is_fetched_from_in_full_every_time():
    handler, manager = FetchSessionHandler(), leader(slots=0)
    for offset in range(3):
        request, _, answered = exchange(handler, manager, [(A0, at(offset)), (A1, at(0))])
        assert request.metadata == FetchMetadata(0, 0) and len(request.to_send) == 2
        assert answered.session_id == 0


def test_a_failed_connection_makes_the_next_fetch_full():
    handler, manager = FetchSessionHandler(), leader()
    _, _, answered = exchange(handler, manager, [(A0, at(0))])
    handler.handle_error()
    request, _, _ = exchange(handler, manager, [(A0, at(0))])
    assert request.metadata == FetchMetadata(answered.session_id, 0) and request.to_send == ((A0, at(0)),)
