"""The consumer's embedded protocol, read the way consumers write it (kafka-python's encoder as the reference)."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from broker_core.consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from broker_core.protocol import ProtocolError
from format.layout import TopicPartition as TP


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_an_assignment_of_every_version_decodes_to_its_partitions_sorted(version):
    data = ConsumerProtocolAssignment(version=version, assigned_partitions=[("orders", [3, 0]), ("audit", [1])],
                                      user_data=b"sticky").encode()
    assert decode_assignment(data) == [TP("audit", 1), TP("orders", 0), TP("orders", 3)]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_subscription_of_every_version_decodes_to_its_topics(version):
    data = ConsumerProtocolSubscription(version=version, topics=["orders", "audit"], user_data=None,
                                        owned_partitions=[("orders", [1])], generation_id=7, rack_id="r1").encode()
    assert decode_subscription(data) == ["orders", "audit"]


def test_a_newer_version_is_read_as_the_newest_known_one():
    data = ConsumerProtocolAssignment(version=3, assigned_partitions=[("orders", [2])], user_data=None).encode()
    assert decode_assignment(b"\x00\x07" + data[2:]) == [TP("orders", 2)]


def test_empty_bytes_are_no_assignment_and_garbage_is_an_error():
    assert decode_assignment(b"") == [] and decode_subscription(b"") == []
    with pytest.raises(ProtocolError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x05")


def test_encoding_round_trips_through_kafka_python():
    data = encode_assignment([TP("orders", 1), TP("orders", 0), TP("audit", 4)])
    decoded = ConsumerProtocolAssignment.decode(data)
    assert sorted((tp.topic, tp.partition) for tp in decoded.partitions()) == [("audit", 4), ("orders", 0),
                                                                                ("orders", 1)]
