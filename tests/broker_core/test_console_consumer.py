"""``seglog consume``'s loop on an embedded broker, with simulated time: it follows appends made
while it waits, and ends only at ``max_messages``, after ``timeout_ms`` of silence or when stopped."""

from __future__ import annotations

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.cli.console_consumer import IDLE_POLL_MS, ConsoleConsumer
from format.layout import TopicPartition


def values(batches: list) -> list[bytes]:
    return [r.value for records in batches for r in records]


def test_the_consumer_follows_records_appended_while_it_waits(tmp_path):
    clock = MockTime()
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("events", 2)
        broker.produce("events", [b"a", b"b"], partition=0)
        consumer = None
        slept = []

        def sleep(ms: int) -> None:  # a producer appends while the consumer waits, then a user stops it
            slept.append(ms)
            clock.sleep(ms)
            if len(slept) == 1:
                broker.produce("events", [b"c"], partition=1)
                broker.produce("events", [b"d"], partition=0)
            elif len(slept) == 3:
                consumer.stop()

        consumer = ConsoleConsumer(broker, "events", {0: 0, 1: 0}, clock=clock, sleep_ms=sleep)
        shown: list = []
        assert consumer.run(shown.append) == 4
    assert values(shown) == [b"a", b"b", b"d", b"c"]
    assert slept == [IDLE_POLL_MS] * 3


def test_the_consumer_ends_after_timeout_ms_without_a_message(tmp_path):
    clock = MockTime()
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("events", 1)
        broker.produce("events", [b"a"], partition=0)
        consumer = ConsoleConsumer(broker, "events", {0: 0}, timeout_ms=250, clock=clock, sleep_ms=clock.sleep)
        shown: list = []
        assert consumer.run(shown.append) == 1
    assert values(shown) == [b"a"] and clock.hi_res_clock_ms() == 250


def test_the_consumer_stops_at_max_messages_and_minus_one_is_no_limit(tmp_path):
    clock = MockTime()
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("events", 1)
        broker.produce("events", [b"m%d" % i for i in range(10)], partition=0)
        shown: list = []
        assert ConsoleConsumer(broker, "events", {0: 2}, max_messages=3, clock=clock,
                               sleep_ms=clock.sleep).run(shown.append) == 3
        assert values(shown) == [b"m2", b"m3", b"m4"]
        shown = []
        assert ConsoleConsumer(broker, "events", {0: 0}, max_messages=-1, timeout_ms=0, clock=clock,
                               sleep_ms=clock.sleep).run(shown.append) == 10


def test_a_position_below_the_log_start_resumes_at_the_log_start_with_a_warning(tmp_path):
    clock = MockTime()
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("events", 1)
        log = broker.log_manager.get_log(TopicPartition("events", 0))
        for first in (0, 6):  # two segments: offsets 0-5, then 6-9
            broker.produce("events", [b"m%d" % i for i in range(first, first + (6 if first == 0 else 4))],
                           partition=0)
            log.roll()
        # Retention deletes the first segment.
        assert log.delete_old_segments(lambda segment, _: segment.base_offset == 0, "retention") == 1
        warnings: list[str] = []
        shown: list = []
        consumer = ConsoleConsumer(broker, "events", {0: 2}, timeout_ms=0, clock=clock, sleep_ms=clock.sleep,
                                   warn=warnings.append)
        assert consumer.run(shown.append) == 4
    assert values(shown) == [b"m6", b"m7", b"m8", b"m9"]
    assert warnings == ["WARN: offset 2 of events-0 is out of range [6, 10]; resuming at 6"]
