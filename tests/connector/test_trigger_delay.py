"""minOffsetsPerTrigger and maxTriggerDelay: when a streaming micro-batch may start, on a simulated clock."""

from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

from broker_core.clock import MockTime
from connector.options import parse_options
from connector.planning import TriggerPacer
from connector.source import SeglogStreamReader
from format.layout import TopicPartition
from tests.connector.conftest import produce_numbered

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
DELAY_MS = 60_000


def test_a_trigger_waits_until_min_offsets_per_trigger_are_there():
    pacer = TriggerPacer(DELAY_MS, MockTime())
    assert pacer.end_offsets({A: 0, B: 10}, {A: 4, B: 15}, min_offsets=10) == {A: 0, B: 10}
    assert pacer.end_offsets({A: 0, B: 10}, {A: 5, B: 15}, min_offsets=10) == {A: 5, B: 15}


def test_a_trigger_below_min_offsets_goes_once_max_trigger_delay_has_passed():
    clock = MockTime()
    pacer = TriggerPacer(DELAY_MS, clock)
    clock.sleep(DELAY_MS - 1)
    assert pacer.end_offsets({A: 0}, {A: 3}, min_offsets=10) == {A: 0}
    clock.sleep(1)
    assert pacer.end_offsets({A: 0}, {A: 3}, min_offsets=10) == {A: 3}


def test_max_trigger_delay_counts_from_the_last_micro_batch_that_read_something():
    clock = MockTime()
    pacer = TriggerPacer(DELAY_MS, clock)
    clock.sleep(DELAY_MS)
    assert pacer.end_offsets({A: 0}, {A: 3}, min_offsets=10) == {A: 3}
    clock.sleep(DELAY_MS // 2)
    assert pacer.end_offsets({A: 3}, {A: 3}, min_offsets=10) == {A: 3}  # nothing new: no batch, no restart
    clock.sleep(DELAY_MS // 2 - 1)
    assert pacer.end_offsets({A: 3}, {A: 5}, min_offsets=10) == {A: 3}
    clock.sleep(1)
    assert pacer.end_offsets({A: 3}, {A: 5}, min_offsets=10) == {A: 5}


def test_max_offsets_per_trigger_caps_a_trigger_that_min_offsets_let_through():
    pacer = TriggerPacer(DELAY_MS, MockTime())
    assert pacer.end_offsets({A: 0, B: 0}, {A: 100, B: 100}, min_offsets=10, max_offsets=50) == {A: 25, B: 25}


def test_the_stream_reader_holds_back_a_small_backlog_for_max_trigger_delay(tmp_path):
    d = str(tmp_path / "logs")
    produce_numbered(d, "events", 2, 3)
    clock = MockTime()
    options = parse_options({"path": d, "subscribe": "events", "minOffsetsPerTrigger": "10",
                             "maxTriggerDelay": "1m"}, streaming=True)
    reader = SeglogStreamReader(options, clock=clock)
    start = {"events": {"0": 0, "1": 0}}
    assert reader.getDefaultReadLimit().min_rows == 10
    assert reader.latestOffset(start, ReadMinRows(10)) == start
    clock.sleep(59_999)
    assert reader.latestOffset(start, ReadMinRows(10)) == start
    clock.sleep(1)
    assert reader.latestOffset(start, ReadMinRows(10)) == {"events": {"0": 3, "1": 3}}
    produce_numbered(d, "events", 2, 4, start=3)
    # 8 offsets wait, fewer than 10, and the last batch was just now; with maxOffsetsPerTrigger as
    # the limit, minOffsetsPerTrigger still comes from the options.
    after = {"events": {"0": 3, "1": 3}}
    assert reader.latestOffset(after, ReadMaxRows(100)) == after
    produce_numbered(d, "events", 2, 1, start=7)
    assert reader.latestOffset(after, ReadMaxRows(6)) == {"events": {"0": 6, "1": 6}}
