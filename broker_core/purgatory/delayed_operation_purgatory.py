"""``DelayedOperationPurgatory``: delayed operations watched by key and timed out by a timer.

A request that cannot be answered yet (a fetch below ``fetch.min.bytes``)
enters the purgatory with ``try_complete_else_watch``: it is watched under its
keys (e.g. its partitions) and scheduled on the timer. Whoever changes the
state behind a key (an append to the partition) calls ``check_and_complete``
to complete the operations waiting on it; the timer completes the rest when
their delay passes.

Watch lists are sharded by key hash, each shard with its own lock, so
unrelated keys do not contend; a key's list is dropped once it is empty. A
reaper thread advances the timer and, once more than ``purge_interval``
completed operations may still sit in watch lists (completed through another
key or by the timer), sweeps them out.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Generic, Hashable, Iterable, TypeVar

from ..clock import SYSTEM_CLOCK, Clock
from ..timer.atomic import AtomicInteger
from ..timer.system_timer import SystemTimer
from ..timer.timer import Timer
from .delayed_operation import DelayedOperation
from .watchers import Watchers

__all__ = ["DelayedOperationPurgatory", "DEFAULT_PURGE_INTERVAL", "REAPER_WORK_TIMEOUT_MS"]

_log = logging.getLogger(__name__)

T = TypeVar("T", bound=DelayedOperation)

DEFAULT_PURGE_INTERVAL = 1000
DEFAULT_SHARDS = 512
# How long one reaper round waits for a bucket to expire (Kafka's value).
REAPER_WORK_TIMEOUT_MS = 200
# A simulated clock cannot be waited on, so a reaper round on one returns at
# once; this real pause keeps such a reaper from spinning a core.
_REAPER_IDLE_PAUSE_S = 0.001


class _WatcherList(Generic[T]):
    """One shard: the watch lists of the keys hashing to it."""

    __slots__ = ("lock", "watchers_by_key")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watchers_by_key: dict[Hashable, Watchers[T]] = {}


class DelayedOperationPurgatory(Generic[T]):
    """Bookkeeping for delayed operations: watch by key, complete on events, expire on time."""

    def __init__(
        self,
        name: str,
        timer: Timer | None = None,
        clock: Clock = SYSTEM_CLOCK,
        purge_interval: int = DEFAULT_PURGE_INTERVAL,
        reaper_enabled: bool = True,
        *,
        timer_enabled: bool = True,
        broker_id: int = 0,
        shards: int = DEFAULT_SHARDS,
    ) -> None:
        if shards < 1:
            raise ValueError(f"DelayedOperationPurgatory({name}): shards must be >= 1, got {shards}")
        self.name = name
        self.purge_interval = purge_interval
        self._timer: Timer = timer if timer is not None else SystemTimer(name, clock=clock)
        self._timer_enabled = timer_enabled
        self._watcher_lists: tuple[_WatcherList[T], ...] = tuple(_WatcherList() for _ in range(shards))
        # Operations ever watched minus those known to be gone; the excess over
        # num_delayed() estimates completed operations left in watch lists.
        self._estimated_total_operations = AtomicInteger(0)
        self._reaper_enabled = reaper_enabled
        self._stop_reaper = threading.Event()
        self._reaper = threading.Thread(
            target=self._reap,
            name=f"ExpirationReaper-{broker_id}-{name}",
            daemon=True,
        )
        if reaper_enabled:
            self._reaper.start()

    @property
    def timer(self) -> Timer:
        return self._timer

    # -- watching and completing -----------------------------------------

    def try_complete_else_watch(self, operation: T, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can be; otherwise watch it under every key and time it.

        Returns True iff the operation was completed by this call. If it
        completes after being watched under some keys, it stays in those
        watch lists until they are checked or purged.
        """
        keys = list(watch_keys)
        if not keys:
            raise ValueError(f"DelayedOperationPurgatory({self.name}): no watch keys for {operation!r}")

        def watch_all() -> None:
            for key in keys:
                self._watch_for_operation(key, operation)
            self._estimated_total_operations.increment_and_get()

        # Watching under the operation's lock, between two completion checks,
        # means an event on a key either is seen by the second check or finds
        # the operation already in that key's watch list.
        if operation.safe_try_complete_or_else(watch_all):
            return True

        if not operation.is_completed():
            if self._timer_enabled:
                self._timer.add(operation)
            # Completed between the check and the add: take it off the timer.
            if operation.is_completed():
                operation.cancel()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the operations watching ``key``; returns how many completed."""
        shard = self._watcher_list(key)
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
        if watchers is None:
            return 0
        completed = watchers.try_complete_watched()
        self._remove_key_if_empty(key, watchers)
        if completed:
            _log.debug("%s: key %r unblocked %d operations", self.name, key, completed)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key``: its operations lose their timeout but are not completed."""
        shard = self._watcher_list(key)
        with shard.lock:
            watchers = shard.watchers_by_key.pop(key, None)
        return watchers.cancel() if watchers is not None else []

    # -- counts ------------------------------------------------------------

    def watched(self, key: Hashable) -> int:
        """Entries in ``key``'s watch list (completed ones included until purged)."""
        shard = self._watcher_list(key)
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
        return watchers.count_watched() if watchers is not None else 0

    def watched_count(self) -> int:
        """Entries in all watch lists; an operation counts once per key (Kafka's PurgatorySize)."""
        return sum(watchers.count_watched() for watchers in self._all_watchers())

    def watched_keys(self) -> list[Hashable]:
        """The keys that currently have a watch list."""
        keys: list[Hashable] = []
        for shard in self._watcher_lists:
            with shard.lock:
                keys.extend(shard.watchers_by_key)
        return keys

    def num_delayed(self) -> int:
        """Operations waiting on the timer (Kafka's NumDelayedOperations)."""
        return self._timer.size()

    # -- expiration and purging --------------------------------------------

    def advance_clock(self, timeout_ms: int) -> bool:
        """One reaper round: expire due operations, then purge if enough completed ones piled up."""
        advanced = self._timer.advance_clock(timeout_ms)
        delayed = self.num_delayed()
        if self._estimated_total_operations.get() - delayed > self.purge_interval:
            # Reset first: operations completing during the sweep leave the
            # estimate a little high, which only brings the next purge forward.
            self._estimated_total_operations.set(delayed)
            purged = self.purge_completed()
            _log.debug("%s: purged %d completed operations from watch lists", self.name, purged)
        return advanced

    def purge_completed(self) -> int:
        """Drop completed operations from every watch list and empty lists from the shards."""
        purged = 0
        for watchers in self._all_watchers():
            purged += watchers.purge_completed()
            self._remove_key_if_empty(watchers.key, watchers)
        return purged

    # -- lifecycle ---------------------------------------------------------

    def shutdown(self) -> None:
        """Stop the reaper and shut the timer down; waiting operations are left as they are."""
        if self._reaper_enabled and self._reaper.is_alive():
            self._stop_reaper.set()
            # Repeat the wake-up: one sent just before the reaper starts its
            # next poll would be missed and cost a whole round.
            while self._reaper.is_alive():
                self._timer.wakeup()
                self._reaper.join(0.01)
        self._timer.shutdown()

    close = shutdown

    def __enter__(self) -> DelayedOperationPurgatory[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    # -- internals ---------------------------------------------------------

    def _watcher_list(self, key: Hashable) -> _WatcherList[T]:
        return self._watcher_lists[hash(key) % len(self._watcher_lists)]

    def _all_watchers(self) -> list[Watchers[T]]:
        # A snapshot: lists may be dropped by other threads while we use it.
        found: list[Watchers[T]] = []
        for shard in self._watcher_lists:
            with shard.lock:
                found.extend(shard.watchers_by_key.values())
        return found

    def _watch_for_operation(self, key: Hashable, operation: T) -> None:
        shard = self._watcher_list(key)
        # Adding under the shard lock keeps the list from being dropped as
        # empty between looking it up and adding to it.
        with shard.lock:
            watchers = shard.watchers_by_key.get(key)
            if watchers is None:
                watchers = shard.watchers_by_key[key] = Watchers(key)
            watchers.watch(operation)

    def _remove_key_if_empty(self, key: Hashable, watchers: Watchers[T]) -> None:
        shard = self._watcher_list(key)
        with shard.lock:
            # The key may already map to a newer list; only drop this one.
            if shard.watchers_by_key.get(key) is watchers and watchers.is_empty():
                del shard.watchers_by_key[key]

    def _reap(self) -> None:
        while not self._stop_reaper.is_set():
            try:
                advanced = self.advance_clock(REAPER_WORK_TIMEOUT_MS)
            except Exception:
                _log.exception("%s: expiration reaper round failed", self.name)
                advanced = False
            if not advanced:
                self._stop_reaper.wait(_REAPER_IDLE_PAUSE_S)

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory(name={self.name!r}, watched={self.watched_count()}, "
            f"delayed={self.num_delayed()})"
        )
