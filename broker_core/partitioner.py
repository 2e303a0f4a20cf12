"""Choosing a partition for a record the way Kafka's Java producer does.

Records with a key go where the Java client sends them:
``to_positive(murmur2(key)) % num_partitions``, so a topic written through
seglog and one written by any Kafka client put the same key in the same
partition (and compacted topics keep one value per key).

Records without a key use ``StickyPartitioner``: the 3.x built-in partitioner's
idea, simplified for an embedded broker with no per-partition queues to weigh.
It keeps filling one partition until about ``batch_size`` bytes went there,
then moves to another, so batches stay large instead of one record per batch.

Everything here is pure: no clock, no I/O; randomness comes from an injected
``random.Random``.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

from .errors import UnknownTopicOrPartitionError

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "murmur2",
    "to_positive",
    "partition_for_key",
    "StickyPartitioner",
]

#: The producer's default ``batch.size``, which is also how much the built-in
#: partitioner sends to one partition before switching.
DEFAULT_BATCH_SIZE = 16384

_MASK32 = 0xFFFFFFFF
# Kafka's fixed seed and mixing constants; any other values would scatter keys
# differently from the Java client.
_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 of ``data`` as Kafka's ``Utils.murmur2`` computes it: a signed 32-bit int."""
    view = memoryview(data).cast("B")
    length = len(view)
    h = (_SEED ^ length) & _MASK32
    body = length & ~3
    for (k,) in struct.iter_unpack("<I", view[:body]):
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    # The tail bytes fold in from the highest one down, as in Java's
    # fall-through switch.
    if tail == 3:
        h ^= view[body + 2] << 16
    if tail >= 2:
        h ^= view[body + 1] << 8
    if tail >= 1:
        h ^= view[body]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, which overflows on INT_MIN)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for a serialized key."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be at least 1, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions


@dataclass
class _StickyPartition:
    """The partition null-key records of one topic currently go to, and how much went there."""

    partition: int
    produced_bytes: int = 0


class StickyPartitioner:
    """Picks partitions for records without a key, one topic at a time.

    ``partition(topic, num_partitions, record_size)`` is the one-call form:
    it answers the topic's sticky partition and counts the record against it.
    Callers that append first and count later use ``next_partition`` (peek)
    and ``on_append``. Either way the partitioner moves on once ``batch_size``
    bytes went to the sticky partition. ``on_new_batch`` moves on at once
    (the older KIP-480 hook, for callers that know when a batch closed).
    Keyed records do not come here: use ``partition_for_key``.

    A switch always lands on a different partition, chosen uniformly among
    the others: with no queue sizes to weigh, re-picking the same partition
    would only lengthen the run on it.
    """

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, *, rng: random.Random | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.batch_size = batch_size
        self._rng = rng if rng is not None else random.Random()
        self._sticky: dict[str, _StickyPartition] = {}

    def partition(self, topic: str, num_partitions: int, record_size: int = 0) -> int:
        """The partition for one null-key record of ``record_size`` bytes, counted against it.

        The record goes to the current sticky partition even when it is the
        one that fills it; the next record starts the new partition.
        """
        chosen = self.next_partition(topic, num_partitions)
        self.on_append(topic, chosen, record_size, num_partitions)
        return chosen

    def next_partition(self, topic: str, num_partitions: int) -> int:
        """The partition the topic's next null-key record goes to (chosen on first use)."""
        return self._current(topic, num_partitions).partition

    def on_append(self, topic: str, partition: int, appended_bytes: int, num_partitions: int) -> int:
        """Count bytes appended to ``partition``; switch once the sticky one got ``batch_size``.

        Appends to a partition other than the sticky one (keyed records, or a
        partition chosen by the caller) do not count. Returns the partition
        for the next null-key record.
        """
        if appended_bytes < 0:
            raise ValueError(f"appended_bytes must not be negative, got {appended_bytes}")
        sticky = self._current(topic, num_partitions)
        if partition == sticky.partition:
            sticky.produced_bytes += appended_bytes
            if sticky.produced_bytes >= self.batch_size:
                sticky = self._switch(topic, num_partitions, away_from=sticky.partition)
        return sticky.partition

    def on_new_batch(self, topic: str, num_partitions: int, previous_partition: int) -> int:
        """A batch for ``previous_partition`` closed: move on if it is still the sticky partition.

        Several callers may report the same closed batch; only the first one,
        which still sees ``previous_partition`` as sticky, causes a switch.
        """
        sticky = self._current(topic, num_partitions)
        if sticky.partition == previous_partition:
            sticky = self._switch(topic, num_partitions, away_from=previous_partition)
        return sticky.partition

    def _current(self, topic: str, num_partitions: int) -> _StickyPartition:
        if num_partitions < 1:
            raise ValueError(f"topic {topic}: num_partitions must be at least 1, got {num_partitions}")
        sticky = self._sticky.get(topic)
        # A partition number beyond the count means the topic was recreated
        # smaller; start over rather than send to a partition that is gone.
        if sticky is None or sticky.partition >= num_partitions:
            sticky = _StickyPartition(self._rng.randrange(num_partitions))
            self._sticky[topic] = sticky
        return sticky

    def _switch(self, topic: str, num_partitions: int, *, away_from: int) -> _StickyPartition:
        if num_partitions == 1:
            chosen = 0
        else:
            # Draw from the other num_partitions - 1 partitions and skip over
            # the current one, which keeps the choice uniform among them.
            chosen = self._rng.randrange(num_partitions - 1)
            if chosen >= away_from:
                chosen += 1
        sticky = _StickyPartition(chosen)
        self._sticky[topic] = sticky
        return sticky


def assign_partitions(topic: str, keys_and_sizes, num_partitions: int, partition: int | None,
                      sticky: "StickyPartitioner") -> dict[int, list[int]]:
    """Indexes of records per partition, as the Java producer spreads them.

    ``keys_and_sizes`` yields (key, value size) per record: an explicit
    ``partition`` wins (UnknownTopicOrPartitionError when the topic has no such
    partition), then murmur2 of the key, then the sticky partition for null keys.
    """
    if partition is not None and not 0 <= partition < num_partitions:
        raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {partition} (it has {num_partitions})")
    groups: dict[int, list[int]] = {}
    for i, (key, size) in enumerate(keys_and_sizes):
        if partition is not None:
            p = partition
        elif key is not None:
            p = partition_for_key(key, num_partitions)
        else:
            p = sticky.partition(topic, num_partitions, size)
        groups.setdefault(p, []).append(i)
    return groups

