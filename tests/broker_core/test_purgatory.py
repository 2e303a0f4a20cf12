"""DelayedOperation and DelayedOperationPurgatory, with DelayedWaitForBytes as the operation."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import pytest

from broker_core.clock import SYSTEM_CLOCK, MockTime
from broker_core.purgatory import DelayedOperation, DelayedOperationPurgatory, TopicPartitionOperationKey
from broker_core.timer import InlineExecutor, SystemTimer
from purgatory_kit import ByteCounters, DelayedWaitForBytes, LoopCompletion, WaitForBytesResult, wait_for_bytes
from wait_kit import wait_until

pytestmark = pytest.mark.timeout(30)


@dataclass(frozen=True)
class PartitionKey:
    topic: str
    partition: int


class CountingOperation(DelayedOperation):
    """Completes when ``ready()`` says so; counts every callback."""

    def __init__(self, delay_ms: int, ready: Callable[[], bool] = lambda: False, lock=None) -> None:
        super().__init__(delay_ms, lock)
        self.ready = ready
        self.completions = 0
        self.expirations = 0
        self.events: list[str] = []

    def try_complete(self) -> bool:
        return self.force_complete() if self.ready() else False

    def on_complete(self) -> None:
        self.completions += 1
        self.events.append("complete")

    def on_expiration(self) -> None:
        self.expirations += 1
        self.events.append("expire")


@pytest.fixture
def clock() -> MockTime:
    return MockTime()


@pytest.fixture
def purgatory(clock: MockTime):
    """A deterministic purgatory: mock clock, inline executor, no reaper thread."""
    timer = SystemTimer("fetch", clock=clock, executor=InlineExecutor())
    purgatory: DelayedOperationPurgatory = DelayedOperationPurgatory(
        "fetch", timer, clock, purge_interval=1000, reaper_enabled=False
    )
    yield purgatory
    purgatory.shutdown()


# -- DelayedOperation ------------------------------------------------------------


def test_force_complete_runs_on_complete_exactly_once():
    operation = CountingOperation(1000)
    assert operation.is_completed() is False
    assert operation.force_complete() is True
    assert operation.force_complete() is False
    assert operation.is_completed() is True
    assert operation.completions == 1


def test_run_on_expiration_completes_then_reports_expiration():
    operation = CountingOperation(1000)
    operation.run()
    operation.run()
    assert operation.events == ["complete", "expire"]


def test_run_after_completion_does_not_report_expiration():
    operation = CountingOperation(1000)
    operation.force_complete()
    operation.run()
    assert operation.events == ["complete"]


def test_force_complete_from_many_threads_completes_once():
    operation = CountingOperation(1000)
    barrier = threading.Barrier(8)
    winners: list[bool] = []

    def race() -> None:
        barrier.wait()
        winners.append(operation.force_complete())

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert sorted(winners) == [False] * 7 + [True]
    assert operation.completions == 1


class RecordingLock:
    """A lock that records whether it was held when asked."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.depth = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        acquired = self._lock.acquire(blocking, timeout)
        if acquired:
            self.depth += 1
        return acquired

    def release(self) -> None:
        self.depth -= 1
        self._lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc_info):
        self.release()


def test_safe_try_complete_runs_try_complete_under_the_supplied_lock():
    lock = RecordingLock()
    held_during_check: list[int] = []
    operation = CountingOperation(1000, ready=lambda: held_during_check.append(lock.depth) or True, lock=lock)
    assert operation.lock is lock
    assert operation.safe_try_complete() is True
    assert held_during_check == [1]
    assert lock.depth == 0


def test_safe_try_complete_waits_for_a_lock_held_elsewhere():
    shared = threading.Lock()
    operation = CountingOperation(1000, ready=lambda: True, lock=shared)
    shared.acquire()
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(operation.safe_try_complete()))
    worker.start()
    worker.join(0.05)
    assert result == [] and operation.completions == 0
    shared.release()
    worker.join(5)
    assert result == [True] and operation.completions == 1


# -- purgatory: watch, complete, expire -------------------------------------------


def test_completable_operation_completes_without_being_watched(purgatory):
    counters = ByteCounters()
    counters.add(("t", 0), 100)
    operation = DelayedWaitForBytes(500, ("t", 0), 10, counters)
    assert purgatory.try_complete_else_watch(operation, [("t", 0)]) is True
    assert operation.result == WaitForBytesResult(("t", 0), 10, 100)
    assert (purgatory.watched(("t", 0)), purgatory.num_delayed(), purgatory.watched_keys()) == (0, 0, [])


def test_waiting_operation_is_watched_and_delayed(purgatory):
    key = PartitionKey("orders", 3)
    operation = DelayedWaitForBytes(500, key, 10, ByteCounters())
    assert purgatory.try_complete_else_watch(operation, [key]) is False
    assert (purgatory.watched(key), purgatory.watched_count(), purgatory.num_delayed()) == (1, 1, 1)
    assert purgatory.watched_keys() == [key]


def test_check_and_complete_completes_when_enough_bytes_arrive(purgatory, clock):
    key = ("orders", 3)
    counters = ByteCounters()
    results: list[WaitForBytesResult] = []
    operation = DelayedWaitForBytes(500, key, 10, counters, on_result=results.append)
    purgatory.try_complete_else_watch(operation, [key])

    counters.add(key, 6)
    assert purgatory.check_and_complete(key) == 0
    assert operation.is_completed() is False
    counters.add(key, 6)
    assert purgatory.check_and_complete(key) == 1
    assert purgatory.check_and_complete(key) == 0

    assert results == [WaitForBytesResult(key, 10, 12)]
    assert results[0].satisfied and not operation.expired
    assert (purgatory.watched(key), purgatory.num_delayed(), purgatory.watched_keys()) == (0, 0, [])
    # Its timeout was cancelled: nothing happens when it passes.
    clock.sleep(1000)
    purgatory.advance_clock(0)
    assert results == [WaitForBytesResult(key, 10, 12)]


def test_operation_expires_after_its_delay(purgatory, clock):
    key = TopicPartitionOperationKey("orders", 0)
    counters = ByteCounters()
    counters.add(key, 3)
    operation = DelayedWaitForBytes(500, key, 10, counters)
    purgatory.try_complete_else_watch(operation, [key])

    clock.sleep(499)
    purgatory.advance_clock(0)
    assert not operation.is_completed()
    clock.sleep(1)
    purgatory.advance_clock(0)
    assert operation.is_completed() and operation.expired
    assert operation.result == WaitForBytesResult(key, 10, 3)
    assert not operation.result.satisfied
    assert purgatory.num_delayed() == 0
    # Expired, it still sits in the watch list until the key is checked.
    assert purgatory.watched(key) == 1
    assert purgatory.check_and_complete(key) == 0
    assert (purgatory.watched(key), purgatory.watched_keys()) == (0, [])


def test_operation_watched_on_several_keys_stays_in_the_others_until_purged(purgatory):
    counters = ByteCounters()
    keys = [("t", 0), ("t", 1), ("t", 2)]
    operation = DelayedWaitForBytes(500, keys[0], 1, counters)
    purgatory.try_complete_else_watch(operation, keys)
    assert [purgatory.watched(key) for key in keys] == [1, 1, 1]

    counters.add(keys[0], 1)
    assert purgatory.check_and_complete(keys[0]) == 1
    assert [purgatory.watched(key) for key in keys] == [0, 1, 1]
    assert purgatory.purge_completed() == 2
    assert (purgatory.watched_count(), purgatory.watched_keys()) == (0, [])


def test_reaper_round_purges_once_completed_operations_exceed_purge_interval(clock):
    timer = SystemTimer("fetch", clock=clock, executor=InlineExecutor())
    purgatory = DelayedOperationPurgatory("fetch", timer, clock, purge_interval=3, reaper_enabled=False)
    counters = ByteCounters()
    keys = [("t", 0), ("t", 1)]
    operations = [DelayedWaitForBytes(10_000, keys[0], 1, counters) for _ in range(5)]
    for operation in operations[:4]:
        purgatory.try_complete_else_watch(operation, keys)
    # Completed by force (say the client went away): still watched under both keys.
    for operation in operations[:3]:
        operation.force_complete()
    purgatory.advance_clock(0)
    assert purgatory.watched_count() == 8, "3 completed is not more than purge_interval=3"

    operations[3].force_complete()
    purgatory.advance_clock(0)
    assert (purgatory.watched_count(), purgatory.watched_keys()) == (0, [])

    purgatory.try_complete_else_watch(operations[4], keys)
    assert purgatory.watched_count() == 2
    purgatory.shutdown()


def test_cancel_for_key_stops_watching_without_completing(purgatory, clock):
    key = ("t", 0)
    operations = [CountingOperation(100) for _ in range(3)]
    for operation in operations:
        purgatory.try_complete_else_watch(operation, [key])
    cancelled = purgatory.cancel_for_key(key)
    assert cancelled == operations
    assert (purgatory.watched_keys(), purgatory.num_delayed()) == ([], 0)
    clock.sleep(200)
    purgatory.advance_clock(0)
    assert [op.events for op in operations] == [[], [], []]


def test_watch_keys_must_not_be_empty(purgatory):
    operation = CountingOperation(100)
    with pytest.raises(ValueError, match=r"DelayedOperationPurgatory\(fetch\): no watch keys for CountingOperation"):
        purgatory.try_complete_else_watch(operation, [])


def test_event_between_the_two_checks_is_not_missed(purgatory):
    # The condition turns true while the operation is being registered (after
    # the first check); the second check under the lock must catch it.
    state = {"calls": 0}

    def ready() -> bool:
        state["calls"] += 1
        return state["calls"] >= 2

    operation = CountingOperation(100, ready=ready)
    assert purgatory.try_complete_else_watch(operation, [("t", 0)]) is True
    assert operation.completions == 1
    assert purgatory.num_delayed() == 0


def test_unknown_key_completes_nothing(purgatory):
    assert purgatory.check_and_complete(("nobody", 9)) == 0
    assert purgatory.watched(("nobody", 9)) == 0


# -- the reaper thread --------------------------------------------------------------


def test_reaper_expires_operations_with_a_mock_clock():
    clock = MockTime()
    with DelayedOperationPurgatory("fetch", clock=clock, purge_interval=1000) as purgatory:
        operation = CountingOperation(300)
        purgatory.try_complete_else_watch(operation, [("t", 0)])
        time.sleep(0.02)
        assert operation.events == []
        clock.sleep(300)
        assert wait_until(lambda: operation.events == ["complete", "expire"])


def test_reaper_expires_operations_with_the_real_clock():
    with DelayedOperationPurgatory("fetch", clock=SYSTEM_CLOCK) as purgatory:
        started = time.monotonic()
        operation = CountingOperation(40)
        purgatory.try_complete_else_watch(operation, [("t", 0)])
        assert wait_until(lambda: operation.expirations == 1)
        assert time.monotonic() - started >= 0.039
        assert purgatory.num_delayed() == 0


def test_shutdown_is_prompt_with_an_idle_reaper():
    purgatory = DelayedOperationPurgatory("fetch", clock=SYSTEM_CLOCK)
    time.sleep(0.01)
    started = time.monotonic()
    purgatory.shutdown()
    assert time.monotonic() - started < 1.0


# -- asyncio -----------------------------------------------------------------------


def test_loop_completion_takes_the_first_result_from_another_thread():
    async def main() -> int:
        completion: LoopCompletion[int] = LoopCompletion()
        threading.Thread(target=lambda: (completion.set_result(1), completion.set_result(2))).start()
        return await asyncio.wait_for(completion, 5)

    assert asyncio.run(main()) == 1


def test_async_wait_for_bytes_is_completed_by_a_producer_thread():
    counters = ByteCounters()
    key = PartitionKey("clicks", 1)

    async def main(purgatory) -> WaitForBytesResult:
        waiter = asyncio.ensure_future(wait_for_bytes(purgatory, counters, key, min_bytes=64, delay_ms=10_000))
        await asyncio.sleep(0.01)
        assert not waiter.done()

        def produce() -> None:
            for _ in range(4):
                counters.add(key, 16)
                purgatory.check_and_complete(key)

        await asyncio.get_running_loop().run_in_executor(None, produce)
        return await asyncio.wait_for(waiter, 5)

    with DelayedOperationPurgatory("fetch", clock=SYSTEM_CLOCK) as purgatory:
        result = asyncio.run(main(purgatory))
        assert result == WaitForBytesResult(key, 64, 64)
        assert (purgatory.watched_keys(), purgatory.num_delayed()) == ([], 0)


def test_async_wait_for_bytes_expires_through_the_reaper():
    counters = ByteCounters()
    key = PartitionKey("clicks", 2)
    counters.add(key, 5)

    async def main(purgatory) -> WaitForBytesResult:
        return await asyncio.wait_for(wait_for_bytes(purgatory, counters, key, min_bytes=64, delay_ms=30), 5)

    with DelayedOperationPurgatory("fetch", clock=SYSTEM_CLOCK) as purgatory:
        result = asyncio.run(main(purgatory))
        assert result == WaitForBytesResult(key, 64, 5)
        assert not result.satisfied


def test_cancelled_async_waiter_leaves_nothing_delayed():
    counters = ByteCounters()
    key = PartitionKey("clicks", 3)

    async def main(purgatory) -> None:
        waiter = asyncio.ensure_future(wait_for_bytes(purgatory, counters, key, min_bytes=64, delay_ms=60_000))
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    with DelayedOperationPurgatory("fetch", clock=SYSTEM_CLOCK) as purgatory:
        asyncio.run(main(purgatory))
        assert purgatory.num_delayed() == 0
        assert purgatory.purge_completed() == 1
        assert purgatory.watched_keys() == []


# -- concurrency -------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_many_threads_watch_complete_and_cancel_each_operation_exactly_once():
    keys = [PartitionKey("topic", p) for p in range(16)]
    counters = ByteCounters()
    completions: Counter[int] = Counter()
    completions_lock = threading.Lock()
    all_operations: list[DelayedWaitForBytes] = []
    all_lock = threading.Lock()
    completed_by = Counter()  # who completed: caller, check, force, expiry
    cancelled_keys_ops: set[int] = set()

    class Tracked(DelayedWaitForBytes):
        def on_complete(self) -> None:
            super().on_complete()
            with completions_lock:
                completions[id(self)] += 1

        def on_expiration(self) -> None:
            super().on_expiration()
            with completions_lock:
                completed_by["expiry"] += 1

    def count(source: str, n: int = 1) -> None:
        with completions_lock:
            completed_by[source] += n

    with DelayedOperationPurgatory("fetch", clock=SYSTEM_CLOCK, purge_interval=10) as purgatory:
        barrier = threading.Barrier(8)

        def worker(seed: int) -> None:
            rng = random.Random(seed)
            mine: list[DelayedWaitForBytes] = []
            barrier.wait()
            for _ in range(400):
                roll = rng.random()
                if roll < 0.45:
                    watch = rng.sample(keys, rng.randint(1, 3))
                    # Like a fetch: wait for more bytes than the partition has now.
                    wanted = counters.get(watch[0]) + rng.randint(1, 120)
                    operation = Tracked(rng.randint(1, 150), watch[0], wanted, counters)
                    with all_lock:
                        all_operations.append(operation)
                    mine.append(operation)
                    if purgatory.try_complete_else_watch(operation, watch):
                        count("caller")
                elif roll < 0.85:
                    key = rng.choice(keys)
                    counters.add(key, rng.randint(1, 40))
                    count("check", purgatory.check_and_complete(key))
                elif roll < 0.98 and mine:
                    # The client went away: complete it from outside.
                    if rng.choice(mine).force_complete():
                        count("force")
                else:
                    for operation in purgatory.cancel_for_key(rng.choice(keys)):
                        with all_lock:
                            cancelled_keys_ops.add(id(operation))

        threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not any(thread.is_alive() for thread in threads)

        # Whatever is still on the timer expires within its (<= 150 ms) delay;
        # only operations whose timeout was cancelled with their key can be left.
        # (The timer's size drops when a bucket is flushed, before the executor
        # has run the expired operations, so wait for the completions too.)
        def settled() -> bool:
            return purgatory.num_delayed() == 0 and all(
                op.is_completed() or id(op) in cancelled_keys_ops for op in all_operations
            )

        assert wait_until(settled, timeout_s=10)
        pending = [op for op in all_operations if not op.is_completed()]
        for operation in pending:
            assert operation.force_complete()
            count("force")

        assert len(all_operations) > 1000
        assert all(completions[id(op)] == 1 for op in all_operations)
        assert sum(completed_by.values()) == len(all_operations)
        assert completed_by["check"] > 0 and completed_by["expiry"] > 0 and completed_by["force"] > 0

        for key in keys:
            purgatory.check_and_complete(key)
        assert purgatory.watched_count() == 0
        assert purgatory.watched_keys() == []
        assert purgatory.num_delayed() == 0
