"""The fetch path without a network: request limits, and the DelayedFetch driven by a simulated clock."""

from __future__ import annotations

import pytest

from broker_core.broker import Broker
from broker_core.clock import MockTime
from broker_core.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from broker_core.purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from broker_core.server.delayed_fetch import (DelayedFetch, FetchParams, FetchPartition, FetchPartitionStatus,
                                              read_from_local_log)
from broker_core.timer import InlineExecutor, SystemTimer
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

NOW = 1_700_000_000_000


@pytest.fixture()
def clock():
    return MockTime(current_time_ms=NOW)


@pytest.fixture()
def broker(tmp_path, clock):
    with Broker(str(tmp_path), {"log.segment.bytes": 1_000_000}, clock=clock, background=False) as b:
        b.create_topic("t", 2)
        yield b


@pytest.fixture()
def purgatory(clock):
    timer = SystemTimer("fetch", clock=clock, executor=InlineExecutor())
    with DelayedOperationPurgatory("Fetch", timer, clock=clock, reaper_enabled=False) as p:
        yield p


def append(broker: Broker, partition: int, size: int) -> None:
    broker.produce_batches("t", partition, build_batch([SimpleRecord(b"x" * size)], default_timestamp=NOW))


def offsets(records: bytes) -> list[int]:
    return [b.header.base_offset for b in iter_batches(records)]


def test_read_from_local_log_reports_errors_per_partition(broker):
    append(broker, 0, 10)
    params = FetchParams(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20)
    ok, beyond, missing = read_from_local_log(broker.log_manager, params, [
        FetchPartition("t", 0, 0, 1 << 20), FetchPartition("t", 0, 9, 1 << 20), FetchPartition("u", 0, 0, 1 << 20)])
    assert (offsets(ok.records), ok.high_watermark, ok.error) == ([0], 1, None)
    assert isinstance(beyond.error, OffsetOutOfRangeError) and beyond.high_watermark == -1
    assert isinstance(missing.error, UnknownTopicOrPartitionError)


def test_only_the_first_partition_with_data_may_exceed_the_limits(broker):
    for partition in (0, 1):
        append(broker, partition, 500)
        append(broker, partition, 500)
    params = FetchParams(max_wait_ms=0, min_bytes=0, max_bytes=100)
    empty_first = FetchPartition("t", 0, 2, 100)  # at the log end: nothing to return
    first, second, third = read_from_local_log(broker.log_manager, params, [
        empty_first, FetchPartition("t", 1, 0, 100), FetchPartition("t", 0, 0, 100)])
    assert first.records == b""
    assert offsets(second.records) == [0]  # one whole batch, over both limits
    assert third.records == b""


def parked(broker, purgatory, min_bytes: int, max_wait_ms: int = 500) -> tuple[DelayedFetch, list]:
    results: list = []
    params = FetchParams(max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20)
    partition = FetchPartition("t", 0, broker.list_offsets("t", 0, "latest").offset, 1 << 20)
    (first,) = read_from_local_log(broker.log_manager, params, [partition])
    operation = DelayedFetch(broker.log_manager, params, [FetchPartitionStatus(partition, first.fetch_offset_metadata)],
                             results.append)
    assert not purgatory.try_complete_else_watch(operation, [TopicPartitionOperationKey("t", 0)])
    return operation, results


def test_a_delayed_fetch_completes_once_min_bytes_have_arrived(broker, purgatory):
    operation, results = parked(broker, purgatory, min_bytes=300)
    append(broker, 0, 100)
    assert purgatory.check_and_complete(TopicPartitionOperationKey("t", 0)) == 0
    append(broker, 0, 200)
    assert purgatory.check_and_complete(TopicPartitionOperationKey("t", 0)) == 1
    ((result,),) = results
    assert offsets(result.records) == [0, 1] and not operation.expired


def test_a_delayed_fetch_expires_after_max_wait_with_what_is_there(broker, purgatory, clock):
    operation, results = parked(broker, purgatory, min_bytes=10_000, max_wait_ms=500)
    append(broker, 0, 10)
    purgatory.check_and_complete(TopicPartitionOperationKey("t", 0))
    clock.sleep(499)
    purgatory.advance_clock(0)
    assert results == []
    clock.sleep(1)
    purgatory.advance_clock(0)
    ((result,),) = results
    assert operation.expired and offsets(result.records) == [0]


def test_a_delayed_fetch_on_a_deleted_topic_completes_with_the_error(broker, purgatory):
    _, results = parked(broker, purgatory, min_bytes=1)
    broker.delete_topic("t")
    purgatory.check_and_complete(TopicPartitionOperationKey("t", 0))
    ((result,),) = results
    assert isinstance(result.error, UnknownTopicOrPartitionError)


def test_a_delayed_fetch_completes_when_a_new_segment_rolls(broker, purgatory):
    append(broker, 0, 10)
    _, results = parked(broker, purgatory, min_bytes=10_000_000)  # waits at offset 1, in segment 0
    broker.log_manager.get_log(TopicPartition("t", 0)).roll()
    append(broker, 0, 10)
    purgatory.check_and_complete(TopicPartitionOperationKey("t", 0))
    ((result,),) = results
    assert offsets(result.records) == [1]
