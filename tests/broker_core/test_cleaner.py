"""Kafka's compaction guarantees, and the cleaner's choices, with the broker's cleaner on real files."""

import os
import random
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.log.cleaner.cleaner import SegmentSizes, Throttler, group_segments_by_size
from format import layout
from format.checkpoint import OffsetCheckpointFile
from format.layout import TopicPartition

from cleaner_kit import (T0, TP, Produced, all_batches, check_guarantees, cleaner_for, compact_config,
                         end_transaction, open_log, produce, read_from)


def keyed(n: int, keys: int, rng: random.Random, tombstones: float = 0.0, tag: str = "v"):
    return [(b"k%d" % rng.randrange(keys), None if rng.random() < tombstones else f"{tag}{rng.random()}".encode())
            for _ in range(n)]


def test_a_consumer_that_keeps_up_with_the_head_sees_every_record(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock)
    cleaner = cleaner_for(log, clock)
    rng = random.Random(7)
    produced = Produced()
    seen = []
    position = 0
    for round_ in range(12):
        for _ in range(rng.randrange(3, 9)):
            produce(log, produced, clock, keyed(5, 20, rng, tombstones=0.1))
            clock.sleep(100)
            if rng.random() < 0.3:
                log.roll()
        # The consumer catches up with the head before the cleaner runs ...
        got = read_from(log, position)
        seen.extend(got)
        position = log.log_end_offset
        cleaner.compact()
    seen.extend(read_from(log, position))
    # ... so it has seen every record, each once, in order, as written.
    assert [r.offset for r in seen] == sorted(produced.records)
    assert [(r.key, r.value) for r in seen] == [produced.records[o] for o in sorted(produced.records)]
    assert log.size < sum(b.size_in_bytes for b in all_batches(log)) + 1  # and compaction did remove data
    check_guarantees(produced, log)


def test_reading_from_offset_zero_gives_every_key_its_final_value_with_unchanged_offsets(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock)
    cleaner = cleaner_for(log, clock)
    rng = random.Random(11)
    produced = Produced()
    for _ in range(60):
        produce(log, produced, clock, keyed(8, 40, rng))
        clock.sleep(10)
    log.roll()
    before = log.size
    cleaner.compact()
    records = check_guarantees(produced, log)
    assert len(records) == len(produced.final_values())  # one record per key: fully compacted
    assert log.size < before / 5


def test_a_tombstone_stays_readable_for_delete_retention_ms_and_then_disappears(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(delete_retention_ms=60_000))
    cleaner = cleaner_for(log, clock)
    produced = Produced()
    produce(log, produced, clock, [(b"gone", b"v1"), (b"kept", b"v")])
    produce(log, produced, clock, [(b"gone", None)])
    log.roll()
    cleaned_at = clock.milliseconds()
    cleaner.compact()
    assert [(r.key, r.value) for r in read_from(log)] == [(b"kept", b"v"), (b"gone", None)]

    def clean_again():
        produce(log, produced, clock, [(b"other", b"x")])  # something dirty, so a clean runs
        log.roll()
        assert cleaner.compact()

    clock.set_time_ms(cleaned_at + 60_000 - 1)
    clean_again()
    assert (b"gone", None) in [(r.key, r.value) for r in read_from(log)]
    clock.set_time_ms(cleaned_at + 60_000)
    clean_again()
    assert b"gone" not in [r.key for r in read_from(log)]
    check_guarantees(produced, log)


def test_a_key_space_larger_than_the_dedupe_buffer_is_cleaned_over_several_rounds(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(segment_bytes=4000))
    # 200 bytes of dedupe buffer: 7 slots, 6 keys per round, for 60 keys.
    cleaner = cleaner_for(log, clock, **{"log.cleaner.dedupe.buffer.size": 200})
    rng = random.Random(3)
    produced = Produced()
    for _ in range(50):
        produce(log, produced, clock, keyed(6, 60, rng, tombstones=0.05))
    log.roll()
    checkpoint = OffsetCheckpointFile(os.path.join(str(tmp_path), layout.CLEANER_OFFSET_CHECKPOINT_FILE))
    rounds = 0
    while (result := cleaner.clean_filthiest_log(force=True)) is not None:
        rounds += 1
        # Each round cleans up to where its map filled, and records that as the first dirty offset.
        assert result.first_dirty_offset < result.end_offset < log.log_end_offset or rounds > 1
        assert checkpoint.read()[TP] == result.end_offset
        check_guarantees(produced, log)
    assert rounds > 5
    assert len(read_from(log)) == len(produced.final_values())


def test_the_active_segment_is_never_cleaned(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(segment_bytes=1 << 20))
    produced = Produced()
    for i in range(30):
        produce(log, produced, clock, [(b"same", b"%d" % i)])
    active = log.active_segment.log.path
    size = os.path.getsize(active)
    assert cleaner_for(log, clock).compact() == []
    assert os.path.getsize(active) == size and len(read_from(log)) == 30


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(min_compaction_lag_ms=10_000))
    cleaner = cleaner_for(log, clock)
    produced = Produced()
    for i in range(10):
        produce(log, produced, clock, [(b"k", b"old%d" % i)])
    log.roll()
    clock.sleep(5_000)
    assert cleaner.compact() == []  # every record is younger than the lag
    clock.sleep(5_001)
    assert cleaner.compact()
    assert [r.value for r in read_from(log)] == [b"old9"]


def test_max_compaction_lag_cleans_a_log_below_its_dirty_ratio(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000))
    cleaner = cleaner_for(log, clock)
    produced = Produced()
    for i in range(10):
        produce(log, produced, clock, [(b"k%d" % i, b"v")])
    log.roll()
    assert cleaner.compact()  # everything dirty, ratio 1
    produce(log, produced, clock, [(b"k0", b"w")])
    log.roll()
    assert cleaner.clean_filthiest_log() is None  # a little dirt, ratio below 0.99
    clock.sleep(60_001)
    assert cleaner.clean_filthiest_log() is not None  # overdue
    check_guarantees(produced, log)


def test_the_dirtiest_log_is_cleaned_first_and_logs_below_their_ratio_are_left(tmp_path):
    clock = MockTime(current_time_ms=T0)
    config = compact_config(min_cleanable_dirty_ratio=0.5)
    logs = {tp: open_log(tmp_path, clock, config, tp=tp) for tp in (TopicPartition("a", 0), TopicPartition("b", 0))}
    cleaner = cleaner_for(logs, clock)
    produced = {tp: Produced() for tp in logs}
    for tp, lg in logs.items():
        for i in range(20):
            produce(lg, produced[tp], clock, [(b"k%d" % (i % 5), b"v%d" % i)])
        lg.roll()
    first = cleaner.clean_filthiest_log()
    second = cleaner.clean_filthiest_log()
    assert {first.topic_partition, second.topic_partition} == set(logs)
    assert cleaner.clean_filthiest_log() is None  # both clean now
    # "a" gets a little dirty, "b" very dirty: "b" is the dirtiest, "a" stays below 0.5.
    produce(logs[TopicPartition("a", 0)], produced[TopicPartition("a", 0)], clock, [(b"k0", b"x")])
    for i in range(40):
        produce(logs[TopicPartition("b", 0)], produced[TopicPartition("b", 0)], clock, [(b"k1", b"y%d" % i)])
    for lg in logs.values():
        lg.roll()
    assert cleaner.clean_filthiest_log().topic_partition == TopicPartition("b", 0)
    assert cleaner.clean_filthiest_log() is None
    for tp, lg in logs.items():
        check_guarantees(produced[tp], lg)


def test_the_cleaner_checkpoint_holds_the_first_dirty_offset_across_restarts(tmp_path):
    clock = MockTime(current_time_ms=T0)
    d = str(tmp_path / "logs")
    with Broker(d, clock=clock, background=False) as broker:
        broker.create_topic("table", 1, {"cleanup.policy": "compact", "segment.bytes": 1000})
        for i in range(50):
            broker.produce("table", [(b"k%d" % (i % 7), b"v%d" % i)])
        broker.log_manager.get_log(TP).roll()
        result = broker.log_manager.cleaner.clean_filthiest_log()
        assert result.end_offset == 50
    assert OffsetCheckpointFile(os.path.join(d, layout.CLEANER_OFFSET_CHECKPOINT_FILE)).read() == {TP: 50}
    with Broker(d, clock=clock, background=False) as broker:
        manager = broker.log_manager.cleaner.manager
        assert manager.all_cleaner_checkpoints() == {TP: 50}
        assert broker.log_manager.cleaner.clean_filthiest_log() is None  # nothing dirty since
        broker.delete_topic("table")
    assert OffsetCheckpointFile(os.path.join(d, layout.CLEANER_OFFSET_CHECKPOINT_FILE)).read() == {}


def test_a_checkpoint_outside_the_log_restarts_cleaning_at_the_log_start(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock)
    cleaner = cleaner_for(log, clock)
    produced = Produced()
    for i in range(40):
        produce(log, produced, clock, [(b"k%d" % (i % 4), b"v%d" % i)])
    log.roll()
    cleaner.manager.update_checkpoints(str(tmp_path), (TP, 10_000))  # beyond the log end
    result = cleaner.clean_filthiest_log()
    assert result.first_dirty_offset == 0 and result.end_offset == 40
    check_guarantees(produced, log)


def test_aborted_transactions_go_and_their_markers_stay_until_their_data_is_gone(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(delete_retention_ms=1000))
    cleaner = cleaner_for(log, clock)
    produced = Produced()
    produce(log, produced, clock, [(b"a", b"1"), (b"b", b"1")])
    txn = dict(producer_id=5, producer_epoch=0, is_transactional=True)
    first = produce(log, produced, clock, [(b"a", b"aborted"), (b"c", b"aborted")], **txn)[0]
    abort = end_transaction(log, produced, clock, 5, commit=False, first_offset=first)
    first = produce(log, produced, clock, [(b"b", b"committed")], base_sequence=2, **txn)[0]
    commit = end_transaction(log, produced, clock, 5, commit=True, first_offset=first)
    produce(log, produced, clock, [(b"z", b"tail")])
    log.roll()
    cleaner.compact()
    check_guarantees(produced, log)
    offsets = {r.offset for r in read_from(log, with_control=True)}
    assert {2, 3}.isdisjoint(offsets)  # the aborted data went at once
    # Its marker stays this round (its data was still there) and is indexed again in the cleaned log.
    assert abort in offsets and commit in offsets
    assert [t.last_offset for s in log.segments for t in s.txn_index.all_aborted_txns()] == [abort]
    # Next round the abort marker has no data left: it is kept delete.retention.ms more, then goes.
    for wait in (0, 1000):
        clock.sleep(wait)
        produce(log, produced, clock, [(b"y", b"x%d" % wait)])
        log.roll()
        cleaner.compact()
        marker = [b.header for b in all_batches(log) if b.header.base_offset == abort]
        if wait == 0:
            assert marker[0].records_count == 1 and marker[0].delete_horizon_ms == clock.milliseconds() + 1000
    assert marker == [] or marker[0].records_count == 0
    offsets = {r.offset for r in read_from(log, with_control=True)}
    assert abort not in offsets and commit in offsets  # the commit marker's data (b) is still there
    check_guarantees(produced, log)


def test_a_commit_marker_whose_data_is_gone_waits_out_its_delete_horizon(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(delete_retention_ms=1000))
    cleaner = cleaner_for(log, clock)
    produced = Produced()
    txn = dict(producer_id=8, producer_epoch=0, is_transactional=True)
    first = produce(log, produced, clock, [(b"a", b"in-txn")], **txn)[0]
    commit = end_transaction(log, produced, clock, 8, commit=True, first_offset=first)
    produce(log, produced, clock, [(b"a", b"later")])
    second = produce(log, produced, clock, [(b"b", b"next-txn")], base_sequence=1, **txn)[0]
    end_transaction(log, produced, clock, 8, commit=True, first_offset=second)
    produce(log, produced, clock, [(b"pad", b"x")])
    log.roll()

    def marker():
        return next((b.header for b in all_batches(log) if b.header.base_offset == commit), None)

    def clean_round(wait: int) -> None:
        clock.sleep(wait)
        produce(log, produced, clock, [(b"pad", b"y%d" % clock.milliseconds())])
        log.roll()
        cleaner.compact()
        check_guarantees(produced, log)

    clean_round(0)  # a@0 superseded and dropped; the marker saw its data this round: kept as it is
    assert marker().records_count == 1 and marker().delete_horizon_ms is None
    clean_round(0)  # now its transaction is empty: a delete horizon
    assert marker().delete_horizon_ms == clock.milliseconds() + 1000
    clean_round(999)
    assert marker() is not None
    clean_round(1)  # past the horizon: gone
    assert marker() is None


def test_the_last_batch_of_an_idempotent_producer_is_kept_empty(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock)
    produced = Produced()
    produce(log, produced, clock, [(b"k", b"1"), (b"k", b"2")], producer_id=3, producer_epoch=1, base_sequence=0)
    produce(log, produced, clock, [(b"k", b"3")], producer_id=4, producer_epoch=0, base_sequence=0)
    produce(log, produced, clock, [(b"pad", b"x")])
    log.roll()
    cleaner_for(log, clock).compact()
    batches = {b.header.base_offset: b.header for b in all_batches(log)}
    assert batches[0].records_count == 0 and batches[0].last_offset == 1 and batches[0].base_sequence == 0
    assert batches[2].records_count == 1
    check_guarantees(produced, log)


def test_compact_delete_topics_get_retention_and_compaction(tmp_path):
    # Segments emptied by cleaning are aged by their files' modification time: use the real time.
    clock = MockTime(current_time_ms=int(time.time() * 1000))
    d = str(tmp_path / "logs")
    with Broker(d, {"log.retention.check.interval.ms": 1000, "log.segment.delete.delay.ms": 0}, clock=clock,
                background=False) as broker:
        broker.create_topic("table", 1, {"cleanup.policy": "compact,delete", "segment.bytes": 600,
                                         "retention.ms": 10_000, "file.delete.delay.ms": 0})
        for i in range(40):
            broker.produce("table", [(b"k%d" % (i % 3), b"value-%03d" % i)])
            clock.sleep(100)
        log = broker.log_manager.get_log(TP)
        log.roll()
        assert broker.log_manager.cleaner.clean_filthiest_log() is not None
        assert [r.value for r in read_from(log)] == [b"value-037", b"value-038", b"value-039"]
        clock.sleep(20_000)
        broker.tick()  # retention, with the cleaner idle
        assert log.log_start_offset == log.active_segment.base_offset
        assert read_from(log, log.log_start_offset) == []


def test_cleaner_threads_clean_in_the_background(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, {"log.cleaner.backoff.ms": 50, "log.cleaner.threads": 2}) as broker:
        broker.create_topic("table", 2, {"cleanup.policy": "compact", "segment.bytes": 500,
                                         "min.cleanable.dirty.ratio": 0.1, "file.delete.delay.ms": 0})
        for i in range(200):
            broker.produce("table", [(b"k%d" % (i % 4), b"v%d" % i)], partition=i % 2)
        deadline = time.monotonic() + 20
        logs = [broker.log_manager.get_log(TopicPartition("table", p)) for p in range(2)]
        while time.monotonic() < deadline:
            if all(len(read_from(lg)) <= 4 + len(read_from(lg, lg.active_segment.base_offset)) for lg in logs):
                break
            time.sleep(0.05)
        for lg in logs:
            head = read_from(lg, lg.active_segment.base_offset)
            assert len(read_from(lg)) <= 4 + len(head)
    assert not [n for _, _, names in os.walk(d) for n in names if n.endswith((".cleaned", ".swap"))]


def test_shutting_down_mid_clean_leaves_no_cleaned_files(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock)
    cleaner = cleaner_for(log, clock)
    produced = Produced()
    for i in range(100):
        produce(log, produced, clock, [(b"k%d" % (i % 9), b"v%d" % i)])
    log.roll()
    worker = cleaner.cleaner(0)
    stop_after = iter(range(3))
    worker.progress = lambda phase, n: next(stop_after, None) is None and cleaner._stop.set()
    result = cleaner.clean_filthiest_log(force=True)
    assert result.error is None and result.end_offset == 0  # aborted: the checkpoint stays at the start
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
    check_guarantees(produced, log)


def test_groups_stay_within_segment_bytes_and_int32_offsets():
    segments = [SegmentSizes(b, 400, 16, 24) for b in (0, 100, 200, 300, 400)]
    groups = group_segments_by_size(segments, 1000, 1 << 20, 500)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 100], [200, 300], [400]]
    far = [SegmentSizes(0, 10, 0, 0), SegmentSizes(2**31, 10, 0, 0), SegmentSizes(2**31 + 5, 10, 0, 0)]
    assert [[s.base_offset for s in g] for g in group_segments_by_size(far, 1000, 1000, 2**31 + 9)] == \
        [[0], [2**31, 2**31 + 5]]


def test_the_io_throttle_sleeps_off_a_rate_above_the_limit():
    clock = MockTime(current_time_ms=T0)
    throttler = Throttler(1_000_000, clock, check_interval_ms=100)
    clock.sleep(200)
    throttler.maybe_throttle(1_000_000)  # 1 MB in 0.2 s: 5x too fast, sleeps until 1 s has passed
    assert clock.milliseconds() == T0 + 1000
    clock.sleep(2000)
    throttler.maybe_throttle(1000)  # slow enough: no sleep
    assert clock.milliseconds() == T0 + 3000


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["produce", "roll", "clean", "wait"]), st.integers(0, 2**16)),
                min_size=1, max_size=40),
       st.integers(1, 12), st.sampled_from([200, 400, 1 << 20]))
def test_any_history_of_writes_and_cleans_keeps_the_guarantees(tmp_path_factory, steps, keys, dedupe):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path_factory.mktemp("prop"), clock, compact_config(segment_bytes=700,
                                                                          delete_retention_ms=500))
    cleaner = cleaner_for(log, clock, **{"log.cleaner.dedupe.buffer.size": dedupe})
    produced = Produced()
    for action, seed in steps:
        rng = random.Random(seed)
        if action == "produce":
            produce(log, produced, clock, keyed(rng.randrange(1, 6), keys, rng, tombstones=0.2))
        elif action == "roll":
            log.roll()
        elif action == "wait":
            clock.sleep(rng.randrange(1, 800))
        else:
            cleaner.clean_filthiest_log(force=True)
        check_guarantees(produced, log)
    log.roll()
    cleaner.compact()
    records = check_guarantees(produced, log)
    live = {k for k, (_, v) in produced.final_values().items() if v is not None}
    assert live <= {r.key for r in records}
    assert len(records) <= len(produced.final_values())


def four_dirty_segments(tmp_path):
    """A compacted log of four rolled segments of ten records over five keys, and its cleaner."""
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock, compact_config(segment_bytes=1 << 20))
    produced = Produced()
    for i in range(40):
        produce(log, produced, clock, [(b"k%d" % (i % 5), b"v%d" % i)])
        if i % 10 == 9:
            log.roll()
    return clock, log, produced, cleaner_for(log, clock)


def test_a_read_that_races_a_swap_reads_the_cleaned_segment(tmp_path, monkeypatch):
    from format.segment import LogSegment

    clock, log, produced, cleaner = four_dirty_segments(tmp_path)
    real = LogSegment.read
    raced = []

    def read(self, *args, **kwargs):
        if not raced:
            # The read has picked its segments; now the cleaner swaps them out and deletes them.
            raced.append(self)
            cleaner.compact()
            log.scheduler.run_all()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "read", read)
    first = log.read(0, 1 << 20).records
    assert raced and not os.path.exists(raced[0].log.path)  # the segment it started on is gone
    monkeypatch.undo()
    assert first == log.read(0, 1 << 20).records  # the cleaned data, not a later segment's
    check_guarantees(produced, log)


def test_a_read_the_cleaner_races_on_every_listing_answers_no_records_rather_than_skip_offsets(
        tmp_path, monkeypatch):
    from format.segment import LogSegment

    clock, log, produced, cleaner = four_dirty_segments(tmp_path)
    real = LogSegment.read
    raced = []

    def read(self, *args, **kwargs):
        if self is not log.active_segment:
            # Every listing the read makes is out of date before it reads: new data is cleaned
            # together with the segment the read picked, which is swapped out and deleted.
            raced.append(self.base_offset)
            produce(log, produced, clock, [(b"k0", b"again%d" % len(raced))])
            log.roll()
            cleaner.compact()
            log.scheduler.run_all()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "read", read)
    raced_read = log.read(0, 1 << 20)
    monkeypatch.undo()
    assert raced == [0, 0, 0, 0]  # listed four times, then it gives up
    assert (raced_read.fetch_offset, raced_read.records) == (0, b"")
    assert read_from(log, 0)[0].offset < 40  # the offsets are there for the next read
    check_guarantees(produced, log)


def test_an_idempotent_producers_last_batch_goes_once_the_producer_id_has_expired(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log = open_log(tmp_path, clock)
    produced = Produced()
    produce(log, produced, clock, [(b"k", b"1")], producer_id=3, producer_epoch=0, base_sequence=0)
    produce(log, produced, clock, [(b"k", b"2")])
    produce(log, produced, clock, [(b"pad", b"x")])
    log.roll()
    expiration = {"producer.id.expiration.ms": 60_000}
    cleaner_for(log, clock, **expiration).compact()
    assert [(h.base_offset, h.records_count) for h in (b.header for b in all_batches(log))][0] == (0, 0)
    # A minute after its last batch the producer has expired: nothing of it needs to be kept.
    clock.sleep(60_000)
    produce(log, produced, clock, [(b"pad", b"y")])
    log.roll()
    cleaner_for(log, clock, **expiration).compact()
    assert 0 not in {b.header.base_offset for b in all_batches(log)}
    check_guarantees(produced, log)


def test_a_producer_with_a_transaction_open_does_not_expire():
    from broker_core.log.cleaner.transactions import ProducerEvent, ProducerStateBuilder

    events = [ProducerEvent(4, 7, 0, False, True, T0), ProducerEvent(9, 8, 0, False, False, T0),
              ProducerEvent(12, 8, 0, True, False, T0 + 5)]
    producers = ProducerStateBuilder().add_all(events).last_records(T0 + 10_000, 1_000)
    assert list(producers) == [7]  # 8 ended with a marker and expired; 7 is still in its transaction
    assert ProducerStateBuilder().add_all(events).last_records(T0 + 10, 1_000).keys() == {7, 8}
