"""The bounded offset map and the key hash it is keyed by."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.log.cleaner.offset_map import BYTES_PER_ENTRY, OffsetMap
from broker_core.log.cleaner.records import hash_keys


def test_a_key_maps_to_the_last_offset_put_for_it():
    keys = [b"a", b"b", b"a", b"c", b"a", b"b"]
    h1, h2 = hash_keys(keys)
    m = OffsetMap(1 << 16)
    assert m.put_many(h1, h2, np.arange(6)) == 6
    assert m.size == 3
    assert m.get_many(*hash_keys([b"a", b"b", b"c", b"d"])).tolist() == [4, 5, 3, -1]
    assert m.put_many(*hash_keys([b"c"]), np.array([9])) == 1
    assert m.get_many(*hash_keys([b"c"])).tolist() == [9]


def test_the_map_holds_its_memory_divided_by_24_bytes_at_the_load_factor():
    m = OffsetMap(1000 * BYTES_PER_ENTRY, load_factor=0.9)
    assert m.slots == 997  # the largest prime at most 1000
    assert m.max_size == int(997 * 0.9)


def test_a_full_map_stops_at_the_record_kafka_stops_at():
    m = OffsetMap(11 * BYTES_PER_ENTRY, load_factor=0.5)  # 11 slots, full at 5 keys
    keys = [b"k1", b"k2", b"k1", b"k3", b"k4", b"k5", b"k2", b"k6", b"k7"]
    consumed = m.put_many(*hash_keys(keys), np.arange(len(keys)))
    # Before each put the map must hold fewer than 5 keys: the record after k5's is refused even
    # though its key (k2) is known, as Kafka checks the size before every put.
    assert consumed == 6
    assert m.size == 5
    assert m.get_many(*hash_keys([b"k1", b"k2", b"k5", b"k6"])).tolist() == [2, 1, 5, -1]
    assert m.put_many(*hash_keys([b"k1"]), np.array([20])) == 0


def test_clearing_forgets_every_key_and_the_latest_offset():
    m = OffsetMap(1 << 12)
    m.put_many(*hash_keys([b"x", b"y"]), np.array([1, 2]))
    m.update_latest_offset(7)
    m.clear()
    assert m.size == 0 and m.latest_offset == -1
    assert m.get_many(*hash_keys([b"x"])).tolist() == [-1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=300))
def test_the_map_agrees_with_a_dict_whatever_the_keys(keys):
    m = OffsetMap(4 * len(keys) * BYTES_PER_ENTRY + 100)
    assert m.put_many(*hash_keys(keys), np.arange(len(keys))) == len(keys)
    expected = {k: i for i, k in enumerate(keys)}
    assert m.get_many(*hash_keys(list(expected))).tolist() == list(expected.values())
    assert m.size == len(expected)


def test_key_hashes_are_deterministic_and_tell_close_keys_apart():
    keys = [b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"12345678", b"123456789", b"x" * 100, b"x" * 99 + b"y"]
    h1, h2 = hash_keys(keys)
    assert len(set(zip(h1.tolist(), h2.tolist()))) == len(keys)
    again = hash_keys(list(reversed(keys)))
    assert (again[0][::-1] == h1).all() and (again[1][::-1] == h2).all()
    # Fixed values: the Spark job's executors and the broker must agree, in any process, forever
    # (a cleaner-offset-checkpoint does not record which hash built the map, so it must never change).
    fixed = hash_keys([b"a", b"key-0000000001"])
    assert [hex(int(x)) for x in fixed[0]] == ["0x198f3b635583a64b", "0xc42b648273c94828"]
    assert [hex(int(x)) for x in fixed[1]] == ["0x6376afcca5a58cfc", "0x878def7a1e45009f"]


def test_a_million_keys_hash_without_collision():
    keys = [b"key-%010d" % i for i in range(1_000_000)]
    h1, h2 = hash_keys(keys)
    assert len(np.unique(h1)) == len(keys)
    assert len(np.unique(h2)) == len(keys)
