"""The topics of a log dir Kafka wrote: partition directories give names, ids and partition counts;
KRaft's metadata log, from its latest snapshot on, gives configuration overrides."""

from __future__ import annotations

import os

from broker_core import Broker
from broker_core.log.kafka_topics import CONFIG_RECORD, REMOVE_TOPIC_RECORD, TOPIC_RECORD, kafka_topics
from broker_core.protocol.codec import encode
from broker_core.protocol.schema import Message
from broker_core.protocol.types import topic_id_text, uvarint
from format.fs import filesystem_for
from format.record import SimpleRecord
from format.record_batch import build_batch

IDS = {name: bytes([i + 1]) * 16 for i, name in enumerate(["orders", "gone", "table"])}


def metadata_value(message: Message, body: dict) -> bytes:
    """A metadata record value as Kafka frames it: frame version 1, api key, version 0, the message."""
    out: list = [uvarint(1), uvarint(message.api_key), uvarint(0)]
    encode(message, 0, body, out)
    return b"".join(bytes(part) for part in out)


def topic(name: str) -> bytes:
    return metadata_value(TOPIC_RECORD, {"name": name, "topic_id": IDS[name]})


def config(name: str, key: str, value: str | None) -> bytes:
    return metadata_value(CONFIG_RECORD, {"resource_type": 2, "resource_name": name, "name": key, "value": value})


def write_batch(path: str, base_offset: int, values: list[bytes]) -> None:
    with open(path, "wb") as f:
        f.write(build_batch([SimpleRecord(v) for v in values], base_offset=base_offset))


def kafka_like_dir(root: str) -> str:
    """Partition directories with ``partition.metadata``, and a metadata log whose snapshot holds
    the first records and whose segment the later ones."""
    for name, partitions in (("orders", 3), ("table", 1), ("__consumer_offsets", 1)):
        for p in range(partitions):
            d = os.path.join(root, f"{name}-{p}")
            os.makedirs(d)
            open(os.path.join(d, "00000000000000000000.log"), "wb").close()
            if name in IDS:
                with open(os.path.join(d, "partition.metadata"), "w") as f:
                    f.write(f"version: 0\ntopic_id: {topic_id_text(IDS[name])}\n")
    os.makedirs(os.path.join(root, "orders-0.0123456789abcdef0123456789abcdef-delete"))
    metadata = os.path.join(root, "__cluster_metadata-0")
    os.makedirs(metadata)
    snapshot = [topic("orders"), topic("gone"), topic("table"), config("orders", "retention.ms", "1000"),
                config("gone", "cleanup.policy", "compact"), config("table", "segment.ms", "5")]
    write_batch(os.path.join(metadata, "00000000000000000006-0000000001.checkpoint"), 0, snapshot)
    # The log starts where the snapshot ends: what it covers was deleted with the old segments.
    write_batch(os.path.join(metadata, "00000000000000000006.log"), 6, [
        config("table", "cleanup.policy", "compact"), config("table", "segment.ms", None),
        metadata_value(REMOVE_TOPIC_RECORD, {"topic_id": IDS["gone"]}),
        config("orders", "message.downconversion.enable", "false")])
    with open(os.path.join(metadata, "quorum-state"), "w") as f:
        f.write('{"leaderId":1,"leaderEpoch":1,"votedId":-1,"data_version":1}')
    return root


def test_topics_of_a_kafka_log_dir_come_from_its_partition_directories_and_metadata_log(tmp_path):
    root = kafka_like_dir(str(tmp_path / "logs"))
    topics = kafka_topics(*filesystem_for(root))
    assert sorted(topics) == ["__consumer_offsets", "orders", "table"]
    assert topics["orders"].partitions == 3 and topics["table"].partitions == 1
    assert topics["orders"].config == {"retention.ms": "1000"}  # message.downconversion.enable is not seglog's
    assert topics["table"].config == {"cleanup.policy": "compact"}  # segment.ms was deleted after the snapshot
    assert topics["orders"].topic_id == topic_id_text(IDS["orders"])


def test_the_broker_opens_a_kafka_log_dir_with_its_topics_and_takes_them_into_its_store(tmp_path):
    root = kafka_like_dir(str(tmp_path / "logs"))
    with Broker(root, read_only=True) as broker:
        assert broker.list_topics() == ["__consumer_offsets", "orders", "table"]
        assert broker.log_config("table").compact
    with Broker(root) as broker:
        broker.create_topic("added", 1)
    assert os.path.exists(os.path.join(root, "seglog-topics.json"))
    with Broker(root, read_only=True) as broker:
        assert broker.list_topics() == ["__consumer_offsets", "added", "orders", "table"]
        assert broker.describe_topic("orders").partition_count == 3
