"""murmur2 and key partitioning against Kafka's vectors and kafka-python; sticky partitioning for null keys."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from broker_core.partitioner import (
    DEFAULT_BATCH_SIZE,
    StickyPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Kafka's UtilsTest.testMurmur2 vectors.
KAFKA_MURMUR2_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def as_signed32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


# --- murmur2 and keyed partitioning -------------------------------------------------


@pytest.mark.parametrize("data, expected", KAFKA_MURMUR2_VECTORS)
def test_murmur2_matches_kafkas_utils_test_vectors(data, expected):
    assert murmur2(data) == expected


@given(st.binary(max_size=300))
def test_murmur2_agrees_with_kafka_python(data):
    assert murmur2(data) == as_signed32(kafka_python_murmur2(data))


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(data):
    assert -(1 << 31) <= murmur2(data) < (1 << 31)


def test_murmur2_takes_any_bytes_like():
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"xfoobar")[1:]) == -790332482


@pytest.mark.parametrize("data", [b"", b"a", b"ab", b"abc", b"abcd", b"abcde"])
def test_murmur2_covers_every_tail_length(data):
    assert murmur2(data) == as_signed32(kafka_python_murmur2(data))


def test_to_positive_clears_the_sign_bit_rather_than_negating():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(5) == 5


def test_partition_for_key_is_positive_murmur2_mod_partitions():
    # "foobar" hashes to -790332482; with the sign bit cleared that is 1357151166.
    assert partition_for_key(b"foobar", 10) == 1357151166 % 10 == 6
    assert partition_for_key(b"21", 7) == to_positive(-973932308) % 7


@given(st.binary(max_size=40), st.integers(min_value=1, max_value=1000))
def test_partition_for_key_agrees_with_kafka_pythons_default_partitioner(key, num_partitions):
    expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % num_partitions
    assert partition_for_key(key, num_partitions) == expected


def test_partition_for_key_refuses_a_topic_without_partitions():
    with pytest.raises(ValueError, match="num_partitions must be at least 1, got 0"):
        partition_for_key(b"k", 0)


# --- sticky partitioning for null keys ----------------------------------------------------


def test_sticky_partitioner_stays_on_one_partition_until_batch_size_bytes_went_there():
    p = StickyPartitioner(batch_size=1000, rng=random.Random(1))
    chosen = [p.partition("t", 8, 100) for _ in range(10)]
    assert len(set(chosen)) == 1
    following = p.partition("t", 8, 100)
    assert following != chosen[0]


def test_the_record_that_fills_the_batch_still_goes_to_the_old_partition():
    p = StickyPartitioner(batch_size=250, rng=random.Random(2))
    first = p.partition("t", 4, 100)
    assert p.partition("t", 4, 100) == first
    assert p.partition("t", 4, 100) == first  # 300 >= 250: this one fills it
    assert p.next_partition("t", 4) != first


def test_a_switch_never_lands_on_the_same_partition():
    p = StickyPartitioner(batch_size=1, rng=random.Random(3))
    chosen = [p.partition("t", 2, 1) for _ in range(50)]
    assert all(a != b for a, b in zip(chosen, chosen[1:]))
    assert set(chosen) == {0, 1}


def test_switches_are_spread_uniformly_over_the_other_partitions():
    p = StickyPartitioner(batch_size=1, rng=random.Random(4))
    counts = Counter()
    previous = p.next_partition("t", 5)
    for _ in range(5000):
        current = p.partition("t", 5, 1)
        assert current == previous
        previous = p.next_partition("t", 5)
        counts[(current, previous)] += 1
    # Each of the 4 destinations from each source is about equally likely.
    for source in range(5):
        row = [counts[(source, dest)] for dest in range(5) if dest != source]
        assert counts[(source, source)] == 0
        assert min(row) > 0.6 * max(row)


def test_one_partition_topics_always_get_partition_zero():
    p = StickyPartitioner(batch_size=10, rng=random.Random(5))
    assert [p.partition("t", 1, 7) for _ in range(10)] == [0] * 10


def test_each_topic_has_its_own_sticky_partition_and_byte_count():
    p = StickyPartitioner(batch_size=100, rng=random.Random(6))
    a = p.partition("a", 16, 60)
    b = p.partition("b", 16, 60)
    assert p.next_partition("a", 16) == a and p.next_partition("b", 16) == b
    p.partition("a", 16, 60)  # only "a" reaches 100 bytes
    assert p.next_partition("a", 16) != a
    assert p.next_partition("b", 16) == b


def test_the_same_seed_gives_the_same_choices():
    def run(seed: int) -> list[int]:
        p = StickyPartitioner(batch_size=100, rng=random.Random(seed))
        return [p.partition("t", 12, 30) for _ in range(200)]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_on_append_counts_only_bytes_sent_to_the_sticky_partition():
    p = StickyPartitioner(batch_size=100, rng=random.Random(9))
    sticky = p.next_partition("t", 4)
    other = (sticky + 1) % 4
    assert p.on_append("t", other, 1000, 4) == sticky
    assert p.on_append("t", sticky, 99, 4) == sticky
    assert p.on_append("t", sticky, 1, 4) != sticky


def test_on_new_batch_switches_once_for_the_batch_that_closed():
    p = StickyPartitioner(rng=random.Random(10))
    first = p.next_partition("t", 6)
    second = p.on_new_batch("t", 6, first)
    assert second != first
    # A late report about the same closed batch must not move us again.
    assert p.on_new_batch("t", 6, first) == second


def test_a_topic_that_shrank_gets_a_new_sticky_partition_in_range():
    p = StickyPartitioner(rng=random.Random(11))
    for _ in range(20):
        if p.next_partition("t", 10) >= 3:
            break
        p.on_new_batch("t", 10, p.next_partition("t", 10))
    assert p.next_partition("t", 10) >= 3
    assert 0 <= p.next_partition("t", 3) < 3


def test_default_batch_size_is_the_producers_batch_size():
    assert DEFAULT_BATCH_SIZE == 16384
    assert StickyPartitioner().batch_size == 16384


@pytest.mark.parametrize("call", [
    lambda: StickyPartitioner(batch_size=0),
    lambda: StickyPartitioner().partition("t", 0, 1),
    lambda: StickyPartitioner().on_append("t", 0, -1, 3),
])
def test_nonsense_arguments_are_refused(call):
    with pytest.raises(ValueError):
        call()


def test_an_explicit_partition_the_topic_lacks_is_refused_for_every_producer(tmp_path):
    from broker_core import Broker
    from broker_core.errors import UnknownTopicOrPartitionError
    from broker_core.partitioner import StickyPartitioner, assign_partitions

    assert assign_partitions("t", [(b"k", 1), (None, 1)], 3, 2, StickyPartitioner()) == {2: [0, 1]}
    with pytest.raises(UnknownTopicOrPartitionError, match="no partition 3"):
        assign_partitions("t", [(b"k", 1)], 3, 3, StickyPartitioner())
    with Broker(str(tmp_path / "logs"), background=False) as broker:
        broker.create_topic("t", 2)
        with pytest.raises(UnknownTopicOrPartitionError, match="has no partition 5 \\(it has 2\\)"):
            broker.produce("t", [(b"k", b"v")], partition=5)
