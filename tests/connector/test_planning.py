from connector.planning import OffsetRange, rate_limit, split_ranges
from format.layout import TopicPartition

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def test_rate_limit_spreads_in_proportion_to_backlog():
    end = rate_limit({A: 0, B: 100, C: 5}, {A: 1000, B: 200, C: 5}, 110)
    assert end == {A: 100, B: 110, C: 5}


def test_rate_limit_rounds_small_shares_up_so_every_partition_moves():
    end = rate_limit({A: 0, B: 0}, {A: 10_000, B: 3}, 100)
    assert end[B] == 1 and end[A] == 99


def test_rate_limit_takes_everything_when_the_backlog_fits():
    assert rate_limit({A: 0, B: 0}, {A: 10, B: 20}, 100) == {A: 10, B: 20}


def test_max_records_per_partition_splits_each_range():
    out = split_ranges([OffsetRange("t", 0, 0, 1000)], min_partitions=None, max_records_per_partition=300)
    assert [(r.from_offset, r.until_offset) for r in out] == [(0, 250), (250, 500), (500, 750), (750, 1000)]


def test_min_partitions_splits_large_partitions_first():
    out = split_ranges([OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100)], min_partitions=5,
                       max_records_per_partition=None)
    per_partition = {}
    for r in out:
        per_partition.setdefault(r.partition, []).append(r)
    assert len(per_partition[0]) == 5 and len(per_partition[1]) == 1
    assert sum(r.size for r in out) == 1000


def test_split_points_snap_to_batch_boundaries():
    boundaries = list(range(0, 1000, 70))
    out = split_ranges([OffsetRange("t", 0, 0, 1000)], min_partitions=4, max_records_per_partition=None,
                       boundaries=lambda r: [b for b in boundaries if r.from_offset < b < r.until_offset])
    assert [r.from_offset for r in out][1:] == [280, 490, 770]
    assert out[-1].until_offset == 1000


def test_empty_ranges_become_no_tasks():
    assert split_ranges([OffsetRange("t", 0, 5, 5)], min_partitions=10, max_records_per_partition=1) == []


def test_latest_is_the_last_stable_offset_where_the_planner_asked_for_it():
    from connector.options import OffsetSpec
    from connector.planning import resolve
    from format.log_dir import PartitionInfo

    committed = {TopicPartition("t", 0): PartitionInfo("t", 0, "", (), 0, 40, last_stable_offset=25)}
    uncommitted = {TopicPartition("t", 0): PartitionInfo("t", 0, "", (), 0, 40)}
    for spec in (OffsetSpec("latest"), OffsetSpec("offsets", {"t": {0: -1}}),
                 OffsetSpec("timestamps", {"t": {0: -1}})):
        def plan(infos):
            return resolve(spec, infos, option="endingOffsets", is_start=False,
                           find_by_timestamp=lambda tp, ts: None)
        assert plan(committed) == {TopicPartition("t", 0): 25}
        assert plan(uncommitted) == {TopicPartition("t", 0): 40}


def test_ending_offsets_past_the_high_watermark_of_a_replicated_partition_end_there():
    from connector.planning import bound_to_readable
    from format.log_dir import PartitionInfo

    infos = {A: PartitionInfo("t", 0, "", (), 0, 40, high_watermark=30),  # replicated
             B: PartitionInfo("t", 1, "", (), 0, 40),  # a single broker's
             C: PartitionInfo("t", 2, "", (), 0, 40, last_stable_offset=20, high_watermark=30)}
    end = {A: 35, B: 45, C: 35}
    assert bound_to_readable({A: 0, B: 0, C: 0}, end, infos, read_committed=False) == {A: 30, B: 45, C: 20}
    assert bound_to_readable({A: 32, B: 0, C: 0}, end, infos, read_committed=False)[A] == 32  # never before the start
