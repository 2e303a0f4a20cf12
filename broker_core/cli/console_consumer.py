"""``seglog consume``'s loop: Kafka's console consumer over the ``Broker`` interface.

The consumer fetches each partition from its position and hands the records
on; when no partition has anything new it sleeps a bounded while and polls
again, so it follows the log as producers append — through an embedded
broker, a remote one (``--bootstrap``) or any other object with ``fetch`` and
``list_offsets`` — until it is stopped, as ``kafka-console-consumer.sh`` does.
It ends by itself only when ``max_messages`` records were handed on or, with
``timeout_ms``, when no record came for that long (Kafka's ``--timeout-ms``).

``stop`` only sets a flag, so a signal handler may call it: the loop notices
within one poll.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

from format.record import Record
from format.record_batch import iter_batches

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import OffsetOutOfRangeError
from .progress import ProgressLine

IDLE_POLL_MS = 100  # the longest sleep between polls that found nothing


def _sleep_ms(ms: int) -> None:
    time.sleep(ms / 1000)


class ConsoleConsumer:
    """Reads ``topic`` from ``positions`` (partition -> next offset) until stopped or a limit is met,
    at ``isolation_level`` (Kafka's ``isolation.level``: read_committed stops at the last stable
    offset and leaves aborted transactions out).

    ``max_messages`` None (or negative, Kafka's -1) is no limit; ``timeout_ms``
    None waits for records forever.
    """

    def __init__(self, broker, topic: str, positions: dict[int, int], *, max_messages: int | None = None,
                 timeout_ms: int | None = None, isolation_level: str = "read_uncommitted",
                 warn: Callable[[str], None] = print,
                 progress: ProgressLine | None = None, clock: Clock = SYSTEM_CLOCK,
                 sleep_ms: Callable[[int], None] = _sleep_ms):
        if timeout_ms is not None and timeout_ms < 0:
            raise ValueError(f"--timeout-ms must be 0 or more, got {timeout_ms}")
        self.broker = broker
        self.topic = topic
        self.positions = dict(positions)
        self.max_messages = max_messages if max_messages is not None and max_messages >= 0 else None
        self.timeout_ms = timeout_ms
        self.isolation_level = isolation_level
        self.warn = warn
        self.progress = progress
        self.clock = clock
        self.sleep_ms = sleep_ms
        self.consumed = 0
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True

    def _room(self) -> int | None:
        return None if self.max_messages is None else self.max_messages - self.consumed

    def run(self, handle: Callable[[Sequence[Record]], None]) -> int:
        """Poll until stopped, ``max_messages`` or ``timeout_ms`` of silence; returns the records handled."""
        idle_since = self.clock.hi_res_clock_ms()
        while not self.stopped and self._room() != 0:
            if self.poll(handle):
                idle_since = self.clock.hi_res_clock_ms()
                continue
            idle_ms = self.clock.hi_res_clock_ms() - idle_since
            if self.timeout_ms is not None and idle_ms >= self.timeout_ms:
                break
            wait = IDLE_POLL_MS if self.timeout_ms is None else min(IDLE_POLL_MS, self.timeout_ms - idle_ms)
            self.sleep_ms(wait)
        return self.consumed

    def poll(self, handle: Callable[[Sequence[Record]], None]) -> bool:
        """One fetch per partition; True when some position moved."""
        moved = False
        for partition, position in self.positions.items():
            room = self._room()
            if room == 0 or self.stopped:
                break
            try:
                result = self.broker.fetch(self.topic, partition, position, isolation_level=self.isolation_level)
            except OffsetOutOfRangeError:
                moved |= self._reset(partition, position)
                continue
            records = result.decoded(position)
            if room is not None and len(records) > room:
                records = records[:room]
                next_position = records[-1].offset + 1
            else:
                # Past the last batch fetched, even if it held nothing to show (transaction markers).
                next_position = max([position] + [b.header.next_offset for b in iter_batches(result.records)])
            if records:
                handle(records)
                self.consumed += len(records)
                if self.progress is not None:
                    self.progress.update(self.consumed)
            if next_position != position:
                self.positions[partition] = next_position
                moved = True
        return moved

    def _reset(self, partition: int, position: int) -> bool:
        """A position the log no longer has (retention deleted it, or the log was truncated): go on
        from the log start or end, with a warning, as a consumer with ``auto.offset.reset`` does."""
        earliest = self.broker.list_offsets(self.topic, partition, "earliest").offset
        latest = self.broker.list_offsets(self.topic, partition, "latest", self.isolation_level).offset
        target = earliest if position < earliest else latest
        if target == position:
            return False
        self.warn(f"WARN: offset {position} of {self.topic}-{partition} is out of range [{earliest}, {latest}]; "
                  f"resuming at {target}")
        self.positions[partition] = target
        return True
