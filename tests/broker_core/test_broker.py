import pytest

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.errors import (InvalidConfigurationError, InvalidPartitionsError, InvalidTopicError,
                                LogDirInUseError, OffsetOutOfRangeError, TopicAlreadyExistsError,
                                UnknownTopicOrPartitionError)
from broker_core.partitioner import partition_for_key
from format.record import Header, SimpleRecord

T0 = 1_800_000_000_000


@pytest.fixture()
def broker(tmp_path):
    with Broker(str(tmp_path / "logs"), clock=MockTime(current_time_ms=T0), background=False) as b:
        yield b


def test_create_describe_list_and_delete_topics(broker):
    created = broker.create_topic("orders", 3, {"retention.ms": 3_600_000})
    assert created.partition_count == 3 and created.config == {"retention.ms": "3600000"}
    assert len(created.topic_id) == 22
    broker.create_topic("payments")
    assert broker.list_topics() == ["orders", "payments"]
    assert broker.describe_topic("payments").partition_count == 1  # num.partitions
    broker.delete_topic("orders")
    assert broker.list_topics() == ["payments"]
    with pytest.raises(UnknownTopicOrPartitionError):
        broker.describe_topic("orders")


def test_topic_creation_errors_are_kafkas(broker):
    broker.create_topic("orders")
    with pytest.raises(TopicAlreadyExistsError):
        broker.create_topic("orders")
    with pytest.raises(InvalidTopicError):
        broker.create_topic("bad/name")
    broker.create_topic("my.topic")
    with pytest.raises(InvalidTopicError, match="collides"):
        broker.create_topic("my_topic")
    with pytest.raises(InvalidPartitionsError):
        broker.create_topic("none", 0)
    with pytest.raises(InvalidConfigurationError, match="segment.bytes"):
        broker.create_topic("tiny", 1, {"segment.bytes": "1"})
    assert "tiny" not in broker.list_topics()


def test_produce_partitions_keys_like_the_java_client(broker):
    broker.create_topic("orders", 6)
    keys = [b"customer-%d" % i for i in range(50)]
    metadata = broker.produce("orders", [(k, b"v") for k in keys])
    assert [m.partition for m in metadata] == [partition_for_key(k, 6) for k in keys]
    per_partition = {}
    for m in metadata:
        per_partition.setdefault(m.partition, []).append(m.offset)
    assert all(offsets == list(range(len(offsets))) for offsets in per_partition.values())


def test_null_keys_stick_to_one_partition_per_batch(broker):
    broker.create_topic("logs", 4)
    metadata = broker.produce("logs", [b"line %d" % i for i in range(20)])
    assert len({m.partition for m in metadata}) == 1


def test_fetch_returns_what_was_produced_field_by_field(broker):
    broker.create_topic("orders", 1)
    sent = [SimpleRecord(b"v1", b"k1", T0 - 5, (Header("trace", b"abc"),)), SimpleRecord(None, b"k2", T0 - 4),
            SimpleRecord(b"", None, None)]
    metadata = broker.produce("orders", sent, compression="zstd")
    assert [m.offset for m in metadata] == [0, 1, 2]
    assert metadata[2].timestamp == T0
    got = broker.fetch("orders", 0, 0).decoded()
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (0, b"k1", b"v1", (Header("trace", b"abc"),)), (1, b"k2", None, ()), (2, None, b"", ())]
    assert [r.timestamp for r in got] == [T0 - 5, T0 - 4, T0]
    with pytest.raises(OffsetOutOfRangeError):
        broker.fetch("orders", 0, 4)
    with pytest.raises(UnknownTopicOrPartitionError):
        broker.fetch("orders", 1, 0)


def test_list_offsets(broker):
    broker.create_topic("orders", 1)
    broker.produce("orders", [SimpleRecord(b"v%d" % i, None, T0 + i * 10) for i in range(10)], partition=0)
    assert broker.list_offsets("orders", 0, "earliest").offset == 0
    assert broker.list_offsets("orders", 0, "latest").offset == 10
    assert broker.list_offsets("orders", 0, T0 + 35).offset == 4
    assert broker.list_offsets("orders", 0, T0 + 1000) is None


def test_alter_topic_config_applies_to_the_logs(broker):
    broker.create_topic("orders", 2)
    assert broker.alter_topic_config("orders", {"segment.bytes": 1000, "retention.ms": 10}) == {
        "segment.bytes": "1000", "retention.ms": "10"}
    assert broker.alter_topic_config("orders", delete_configs=["retention.ms"]) == {"segment.bytes": "1000"}
    for _ in range(5):
        broker.produce("orders", [SimpleRecord(b"x" * 400)], partition=0)
    assert broker.describe_topic("orders").partitions[0].segments > 1


def test_topics_and_data_survive_a_restart(tmp_path):
    path = str(tmp_path / "logs")
    with Broker(path, background=False) as b:
        b.create_topic("orders", 2, {"cleanup.policy": "compact"})
        b.produce("orders", [b"a", b"b"], partition=1)
    with Broker(path, background=False) as b:
        d = b.describe_topic("orders")
        assert d.config == {"cleanup.policy": "compact"}
        assert [p.log_end_offset for p in d.partitions] == [0, 2]
        assert b.log_config("orders").compact


def test_a_second_broker_on_an_owned_log_dir_fails_clearly(tmp_path):
    path = str(tmp_path / "logs")
    with Broker(path, background=False):
        with pytest.raises(LogDirInUseError, match="in use by another broker"):
            Broker(path, background=False)
    with Broker(path, background=False):
        pass  # released on close


def test_create_partitions_adds_partitions(broker):
    broker.create_topic("orders", 2)
    assert broker.create_partitions("orders", 5).partition_count == 5
    with pytest.raises(InvalidPartitionsError):
        broker.create_partitions("orders", 3)


def test_retention_runs_from_the_background_tick(tmp_path):
    clock = MockTime(current_time_ms=T0)
    with Broker(str(tmp_path / "logs"), {"log.retention.check.interval.ms": 1000, "log.segment.delete.delay.ms": 0},
                clock=clock, background=False) as b:
        b.create_topic("events", 1, {"retention.ms": 60_000, "segment.bytes": 2000, "file.delete.delay.ms": 0})
        for i in range(20):
            b.produce("events", [SimpleRecord(b"x" * 200, None, T0 + i)], partition=0)
        before = b.describe_topic("events").partitions[0]
        clock.sleep(61_000)
        b.tick()
        after = b.describe_topic("events").partitions[0]
        assert after.log_start_offset == after.log_end_offset == 20
        assert after.segments == 1 and before.segments > 1
