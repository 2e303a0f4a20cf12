"""Incremental fetch sessions (KIP-227) as a state machine: requests' session ids and epochs in, contexts and
response filtering out, on a simulated clock, without sockets."""

from __future__ import annotations

import random

import pytest

from broker_core.clock import MockTime
from broker_core.server.fetch_session import (FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR,
                                              INVALID_FETCH_SESSION_EPOCH, FetchManager, FetchMetadata,
                                              FetchSessionCache, FullFetchContext, IncrementalFetchContext,
                                              PartitionData, PartitionResponse, SessionErrorContext,
                                              SessionlessFetchContext, next_epoch)
from format.layout import TopicPartition

V12 = 12
V13 = 13
NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def ask(offset: int, max_bytes: int = 1024) -> PartitionData:
    return PartitionData(fetch_offset=offset, log_start_offset=-1, max_bytes=max_bytes)


def answer(high_watermark: int, *, records: bool = False, error: int = NONE, log_start: int = 0,
           lso: int | None = None) -> PartitionResponse:
    return PartitionResponse(error, high_watermark, high_watermark if lso is None else lso, log_start,
                             has_records=records)


def manager(slots: int = 1000, eviction_ms: int = 120_000, clock: MockTime | None = None) -> FetchManager:
    return FetchManager(FetchSessionCache(slots, eviction_ms, rng=random.Random(7)), clock or MockTime())


def open_session(fm: FetchManager, partitions: list[TopicPartition], *, follower: bool = False,
                 version: int = V12) -> int:
    """A full fetch of ``partitions`` (each at offset 0, high watermark 10); the session id answered."""
    context = fm.new_context(version, FetchMetadata(0, 0), [(tp, ask(0)) for tp in partitions], [], follower)
    assert isinstance(context, FullFetchContext)
    return context.update_and_generate_response([(tp, answer(10)) for tp in partitions]).session_id


def incremental(fm: FetchManager, session_id: int, epoch: int, changed=(), forgotten=(), version: int = V12):
    return fm.new_context(version, FetchMetadata(session_id, epoch), list(changed), list(forgotten), False)


def test_a_full_fetch_opens_a_session_with_every_partition_in_its_response():
    fm = manager()
    context = fm.new_context(V12, FetchMetadata(0, 0), [(A0, ask(0)), (A1, ask(5))], [], False)
    response = context.update_and_generate_response([(A0, answer(10)), (A1, answer(5))])
    assert response.error_code == NONE
    assert response.session_id > 0
    assert response.included == (True, True)
    session = fm.cache.get(response.session_id)
    assert session.epoch == 1
    assert [(tp, p.fetch_offset, p.high_watermark) for tp, p in session.partitions.items()] == [(A0, 0, 10),
                                                                                             (A1, 5, 5)]
    assert fm.cache.stats().num_incremental_fetch_partitions_cached == 2


def test_a_sessionless_fetch_answers_every_partition_with_session_id_zero_and_keeps_nothing():
    fm = manager()
    context = fm.new_context(V12, FetchMetadata(0, -1), [(A0, ask(0))], [], False)
    assert isinstance(context, SessionlessFetchContext)
    assert context.update_and_generate_response([(A0, answer(0))]).session_id == 0
    assert len(fm.cache) == 0


def test_an_incremental_fetch_reads_every_session_partition_with_the_cached_offsets_and_the_changed_ones():
    fm = manager()
    session_id = open_session(fm, [A0, A1])
    context = incremental(fm, session_id, 1, changed=[(A1, ask(7, 2048))])
    assert isinstance(context, IncrementalFetchContext)
    assert context.partitions() == [(A0, ask(0)), (A1, ask(7, 2048))]
    assert fm.cache.get(session_id).epoch == 2
    assert fm.cache.stats().incremental_fetches == 1


def test_an_incremental_fetch_adds_a_partition_it_names_that_the_session_lacked():
    fm = manager()
    session_id = open_session(fm, [A0])
    context = incremental(fm, session_id, 1, changed=[(B0, ask(3))])
    assert [tp for tp, _ in context.partitions()] == [A0, B0]


def test_an_incremental_response_carries_only_partitions_with_records_or_changed_state():
    fm = manager()
    session_id = open_session(fm, [A0, A1, B0])
    context = incremental(fm, session_id, 1)
    response = context.update_and_generate_response([
        (A0, answer(10)),                          # nothing new
        (A1, answer(12, records=True)),            # records
        (B0, answer(11)),                          # the high watermark moved
    ])
    assert response.included == (False, True, True)
    assert response.session_id == session_id


@pytest.mark.parametrize("change", ["log start offset", "last stable offset", "error", "preferred read replica",
                                    "diverging epoch"])
def test_an_incremental_response_carries_a_partition_whose_state_changed(change):
    fm = manager()
    session_id = open_session(fm, [A0])
    changed = {"log start offset": answer(10, log_start=4), "last stable offset": answer(10, lso=8),
               "error": answer(10, error=NOT_LEADER_OR_FOLLOWER),
               "preferred read replica": PartitionResponse(NONE, 10, 10, 0, preferred_read_replica=2),
               "diverging epoch": PartitionResponse(NONE, 10, 10, 0, diverging_epoch=True)}[change]
    assert incremental(fm, session_id, 1).update_and_generate_response([(A0, changed)]).included == (True,)


def test_a_partition_answered_with_an_error_is_sent_again_once_the_error_is_gone():
    fm = manager()
    session_id = open_session(fm, [A0])
    failed = incremental(fm, session_id, 1).update_and_generate_response(
        [(A0, PartitionResponse(NOT_LEADER_OR_FOLLOWER, -1, -1, -1))])
    assert failed.included == (True,)
    # The error's -1s are what the client last heard; the recovered partition differs from them.
    assert incremental(fm, session_id, 2).update_and_generate_response([(A0, answer(10))]).included == (True,)
    assert incremental(fm, session_id, 3).update_and_generate_response([(A0, answer(10))]).included == (False,)


def test_partitions_answered_move_to_the_back_of_the_session():
    fm = manager()
    session_id = open_session(fm, [A0, A1, B0])
    incremental(fm, session_id, 1).update_and_generate_response(
        [(A0, answer(11, records=True)), (A1, answer(10)), (B0, answer(10))])
    assert [tp for tp, _ in incremental(fm, session_id, 2).partitions()] == [A1, B0, A0]


def test_forgotten_partitions_leave_the_session():
    fm = manager()
    session_id = open_session(fm, [A0, A1, B0])
    context = incremental(fm, session_id, 1, forgotten=[A1, TopicPartition("never", 0)])
    assert [tp for tp, _ in context.partitions()] == [A0, B0]
    assert fm.cache.stats().num_incremental_fetch_partitions_cached == 2


def test_forgetting_every_partition_closes_the_session_and_answers_without_one():
    fm = manager()
    session_id = open_session(fm, [A0])
    context = incremental(fm, session_id, 1, forgotten=[A0])
    assert isinstance(context, SessionlessFetchContext)
    assert fm.cache.get(session_id) is None


def test_an_unknown_session_id_is_fetch_session_id_not_found():
    fm = manager()
    context = incremental(fm, 12345, 1)
    assert isinstance(context, SessionErrorContext)
    response = context.update_and_generate_response([])
    assert (response.error_code, response.session_id, response.included) == (FETCH_SESSION_ID_NOT_FOUND, 0, ())


def test_an_incremental_fetch_without_a_session_id_is_fetch_session_id_not_found():
    assert incremental(manager(), 0, 1).error_code == FETCH_SESSION_ID_NOT_FOUND


@pytest.mark.parametrize("epoch", [2, 7], ids=["ahead", "far ahead"])
def test_an_epoch_out_of_order_is_invalid_fetch_session_epoch_and_leaves_the_session_as_it_was(epoch):
    fm = manager()
    session_id = open_session(fm, [A0])
    assert incremental(fm, session_id, epoch, changed=[(B0, ask(0))]).error_code == INVALID_FETCH_SESSION_EPOCH
    session = fm.cache.get(session_id)
    assert session.epoch == 1
    assert list(session.partitions) == [A0]


def test_a_repeated_epoch_is_invalid_fetch_session_epoch():
    fm = manager()
    session_id = open_session(fm, [A0])
    assert isinstance(incremental(fm, session_id, 1), IncrementalFetchContext)
    assert incremental(fm, session_id, 1).error_code == INVALID_FETCH_SESSION_EPOCH
    assert isinstance(incremental(fm, session_id, 2), IncrementalFetchContext)


def test_a_response_prepared_after_another_request_of_its_session_came_in_is_invalid_fetch_session_epoch():
    fm = manager()
    session_id = open_session(fm, [A0])
    waiting = incremental(fm, session_id, 1)      # parked in the purgatory, say
    incremental(fm, session_id, 2)                # the client gave up on it and sent the next
    response = waiting.update_and_generate_response([(A0, answer(11, records=True))])
    assert (response.error_code, response.session_id, response.included) == (INVALID_FETCH_SESSION_EPOCH,
                                                                              session_id, (False,))


def test_a_full_fetch_naming_a_session_closes_it_and_opens_another():
    fm = manager()
    old = open_session(fm, [A0])
    context = fm.new_context(V12, FetchMetadata(old, 0), [(A0, ask(3))], [], False)
    new = context.update_and_generate_response([(A0, answer(10))]).session_id
    assert fm.cache.get(old) is None
    assert new not in (0, old)


def test_a_final_epoch_closes_the_session_and_answers_without_one():
    fm = manager()
    old = open_session(fm, [A0])
    context = fm.new_context(V12, FetchMetadata(old, -1), [(A0, ask(3))], [], False)
    assert isinstance(context, SessionlessFetchContext)
    assert fm.cache.get(old) is None
    assert len(fm.cache) == 0


def test_zero_slots_keep_no_session():
    fm = manager(slots=0)
    assert open_session(fm, [A0, A1]) == 0
    assert len(fm.cache) == 0


def test_a_full_cache_refuses_a_new_session_of_no_more_partitions_within_the_eviction_time():
    clock = MockTime()
    fm = manager(slots=1, clock=clock)
    first = open_session(fm, [A0, A1])
    clock.sleep(120_001)   # first is old now, but was used just now
    incremental(fm, first, 1)
    assert open_session(fm, [B0]) == 0
    assert fm.cache.get(first) is not None
    assert fm.cache.stats().incremental_fetch_session_evictions == 0


def test_a_session_unused_past_the_eviction_time_is_evicted_by_a_new_one():
    clock = MockTime()
    fm = manager(slots=1, clock=clock)
    first = open_session(fm, [A0, A1])
    clock.sleep(120_001)
    second = open_session(fm, [B0])
    assert second != 0
    assert fm.cache.get(first) is None
    assert incremental(fm, first, 1).error_code == FETCH_SESSION_ID_NOT_FOUND
    assert fm.cache.stats().incremental_fetch_session_evictions == 1


def test_the_least_recently_used_of_the_stale_sessions_is_evicted():
    clock = MockTime()
    fm = manager(slots=2, clock=clock)
    first = open_session(fm, [A0])
    clock.sleep(10)
    second = open_session(fm, [A1])
    clock.sleep(10)
    incremental(fm, first, 1)
    clock.sleep(120_001)
    open_session(fm, [B0])
    assert fm.cache.get(second) is None
    assert fm.cache.get(first) is not None


def test_a_larger_session_evicts_a_smaller_one_created_before_the_eviction_time():
    clock = MockTime()
    fm = manager(slots=1, clock=clock)
    small = open_session(fm, [A0])
    clock.sleep(120_001)
    incremental(fm, small, 1)              # recently used, but old
    large = open_session(fm, [A0, A1, B0])
    assert large != 0
    assert fm.cache.get(small) is None


def test_a_larger_session_does_not_evict_a_young_smaller_one():
    clock = MockTime()
    fm = manager(slots=1, clock=clock)
    small = open_session(fm, [A0])
    clock.sleep(1_000)
    incremental(fm, small, 1)
    assert open_session(fm, [A0, A1, B0]) == 0
    assert fm.cache.get(small) is not None


def test_a_follower_session_evicts_a_young_consumer_session():
    clock = MockTime()
    fm = manager(slots=1, clock=clock)
    consumer = open_session(fm, [A0, A1, B0])
    clock.sleep(1)
    follower = open_session(fm, [A0], follower=True)
    assert follower != 0
    assert fm.cache.get(consumer) is None
    assert fm.cache.get(follower).privileged


def test_a_consumer_session_never_evicts_a_young_follower_session():
    clock = MockTime()
    fm = manager(slots=1, clock=clock)
    follower = open_session(fm, [A0], follower=True)
    clock.sleep(1)
    assert open_session(fm, [A0, A1, B0]) == 0
    assert fm.cache.get(follower) is not None


def test_a_follower_session_does_not_evict_a_young_follower_session():
    clock = MockTime()
    fm = manager(slots=1, clock=clock)
    first = open_session(fm, [A0, A1], follower=True)
    clock.sleep(1)
    assert open_session(fm, [B0], follower=True) == 0
    assert fm.cache.get(first) is not None


def test_a_session_opened_with_topic_ids_refuses_an_incremental_fetch_by_topic_name():
    fm = manager()
    session_id = open_session(fm, [A0], version=V13)
    assert incremental(fm, session_id, 1, version=V12).error_code == FETCH_SESSION_TOPIC_ID_ERROR
    assert incremental(fm, session_id, 1, version=V13).error_code == NONE


def test_a_session_opened_by_topic_name_refuses_an_incremental_fetch_with_topic_ids():
    fm = manager()
    session_id = open_session(fm, [A0], version=V12)
    assert incremental(fm, session_id, 1, version=V13).error_code == FETCH_SESSION_TOPIC_ID_ERROR


def test_the_epoch_after_the_largest_int32_is_one_and_after_the_final_epoch_is_the_final_epoch():
    assert next_epoch(0) == 1
    assert next_epoch(0x7FFFFFFF) == 1
    assert next_epoch(-1) == -1


def test_a_cache_with_negative_slots_is_refused_with_the_setting_and_value():
    with pytest.raises(ValueError, match=r"max.incremental.fetch.session.cache.slots must be >= 0, got -1"):
        FetchSessionCache(-1, 0)
