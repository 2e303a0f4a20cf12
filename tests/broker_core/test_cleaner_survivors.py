"""Records grouped by key hash, and the surviving offsets the Spark job filters by: the same
answers as the broker's offset map."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.log.cleaner.filter import FilterContext, MapLatest, filter_chunk
from broker_core.log.cleaner.key_runs import key_runs, latest_per_key
from broker_core.log.cleaner.offset_map import OffsetMap
from broker_core.log.cleaner.records import hash_keys
from broker_core.log.cleaner.survivors import BatchIndex, KeyMapBuilder, KeyOffsets, SurvivorOffsets, survivor_offsets
from broker_core.log.cleaner.transactions import CleanedTransactionMetadata
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

T0 = 1_767_225_600_000


def runs_as_sets(order: np.ndarray, starts: np.ndarray) -> list[list[int]]:
    ends = list(starts[1:]) + [len(order)]
    return [order[a:b].tolist() for a, b in zip(starts, ends)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=0, max_size=300), st.integers(0, 3))
def test_key_runs_put_each_keys_records_together_in_their_order(keys, prefix_bits):
    h1, h2 = hash_keys([b"k%d" % k for k in keys])
    if len(keys):
        # Keys sharing the top of h1 (what the packed sort orders by) must still be told apart, and so
        # must keys sharing all of h1.
        h1 = (h1 & np.uint64(0xFFFF)) | np.uint64(0xABCD << 48) if prefix_bits == 1 else h1
        h1 = np.where(np.array(keys) % 3 == 0, h1[0], h1) if prefix_bits == 2 else h1
    order, starts = key_runs(h1, h2)
    runs = runs_as_sets(order, starts)
    assert sorted(i for run in runs for i in run) == list(range(len(keys)))
    for run in runs:
        assert run == sorted(run)  # a key's records in their original order
        assert len({(int(h1[i]), int(h2[i])) for i in run}) == 1
    assert len(runs) == len({(int(a), int(b)) for a, b in zip(h1, h2)})


def test_latest_per_key_takes_the_largest_offset_of_each_key():
    h1, h2 = hash_keys([b"a", b"b", b"a", b"c", b"b", b"a"])
    offsets = np.array([5, 6, 9, 1, 2, 7], dtype=np.int64)
    k1, k2, latest = latest_per_key(h1, h2, offsets)
    a1, a2 = hash_keys([b"a", b"b", b"c"])
    found = {(int(x), int(y)): int(o) for x, y, o in zip(k1, k2, latest)}
    assert found == {(int(a1[0]), int(a2[0])): 9, (int(a1[1]), int(a2[1])): 6, (int(a1[2]), int(a2[2])): 1}


def test_the_builder_reduces_what_it_maps_as_it_goes_and_keeps_every_candidate():
    builder = KeyMapBuilder(reduce_every=4)
    for round_ in range(3):
        h1, h2 = hash_keys([b"a", b"b", b"c"])
        builder.add(KeyOffsets(h1, h2, np.arange(3, dtype=np.int64) + 10 * round_),
                    KeyOffsets(h1[:1], h2[:1], np.array([100 + round_], dtype=np.int64)))
    mapped, candidates = builder.result()
    assert sorted(mapped.offsets.tolist()) == [20, 21, 22]
    assert candidates.offsets.tolist() == [100, 101, 102]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.tuples(st.sampled_from([None, b"a", b"b", b"c", b"d", b"e"]), st.booleans(),
                                   st.booleans()), min_size=1, max_size=6), min_size=1, max_size=14),
       st.integers(0, 40), st.integers(0, 60))
def test_filtering_by_surviving_offsets_keeps_what_the_offset_map_keeps(batches, first_dirty, stop):
    # A log, the offset map the broker builds over [first_dirty, latest] (records flagged "unmapped"
    # stand for aborted data: never mapped), and the job's mapped records and candidates.
    data, offset = [], 0
    records = []
    for batch in batches:
        data.append(build_batch([SimpleRecord(None if tomb else b"v", key, T0) for key, tomb, _ in batch],
                                base_offset=offset))
        records.extend((offset + i, key, unmapped) for i, (key, _, unmapped) in enumerate(batch))
        offset += len(batch)
    whole = b"".join(data)
    latest_offset = min(max(first_dirty, stop), offset - 1)
    mapped: dict[bytes, int] = {}
    candidates = []
    for o, key, unmapped in records:
        if key is None:
            continue
        if first_dirty <= o <= latest_offset and not unmapped:
            mapped[key] = o
        else:
            candidates.append((o, key))

    def columns(pairs) -> KeyOffsets:
        h1, h2 = hash_keys([k for _, k in pairs])
        return KeyOffsets(h1, h2, np.array([o for o, _ in pairs], dtype=np.int64))

    h1, h2 = hash_keys(list(mapped))
    offset_map = OffsetMap.holding(h1, h2, np.array(list(mapped.values()), dtype=np.int64), latest_offset)
    # The map's rule record by record (its batch shortcut assumes aborted batches go whole).
    by_map = FilterContext(MapLatest(offset_map), T0 + 5, 1000, 10**9, {},
                           CleanedTransactionMetadata())
    survivors = survivor_offsets(columns([(o, k) for k, o in mapped.items()]), columns(candidates))
    by_offsets = FilterContext(SurvivorOffsets(survivors, latest_offset), T0 + 5, 1000, 10**9, {},
                               CleanedTransactionMetadata())
    assert filter_chunk(whole, 0, by_offsets).output == filter_chunk(whole, 0, by_map).output
    kept = [r.offset for b in iter_batches(filter_chunk(whole, 0, by_offsets).output) for r in b.records()]
    assert set(survivors.tolist()) <= set(range(offset))
    assert set(o for o in kept if o <= latest_offset) <= set(survivors.tolist())


def test_a_batch_index_reads_neighbouring_batches_together_within_a_chunk():
    index = BatchIndex.of([(0, 0, 100, 0, 9), (0, 100, 100, 10, 19), (0, 300, 50, 30, 31), (40, 0, 100, 40, 49),
                           (40, 100, 100, 50, 59)])
    assert index.read_ranges(10_000) == {0: [(0, 200), (300, 50)], 40: [(0, 200)]}
    assert index.read_ranges(150) == {0: [(0, 100), (100, 100), (300, 50)], 40: [(0, 100), (100, 100)]}
    assert index.holding(np.array([15, 45], dtype=np.int64)).tolist() == [False, True, False, True, False]
    assert index.holding(np.array([0, 31, 59], dtype=np.int64)).tolist() == [True, False, True, False, True]
    assert not index.holding(np.zeros(0, dtype=np.int64)).any()
