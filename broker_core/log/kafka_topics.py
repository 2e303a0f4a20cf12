"""The topics of a log directory Apache Kafka wrote, which has no seglog topic store.

A KRaft broker keeps its topics in the cluster metadata log (``__cluster_metadata-0``),
not beside the partitions. What a reader of the directory needs is still there:
the partition directories give each topic's name and partitions, Kafka's
``partition.metadata`` its topic id, and the metadata log's records its
configuration overrides (``TopicRecord``, ``ConfigRecord``, ``RemoveTopicRecord``,
replayed from the latest snapshot, ``<end offset>-<epoch>.checkpoint``, on). The
metadata log itself is not a topic, and a directory Kafka marked for deletion
(``<topic>-<partition>.<id>-delete``) holds none.

Reading is best effort beyond the partition directories: a metadata log that
cannot be read costs the configuration overrides (logged), never the topics.
"""

from __future__ import annotations

import logging
from typing import Iterator

from fsspec.spec import AbstractFileSystem

from format import layout, log_dir
from format.file_records import FileRecords
from format.fs import join

from ..config import TOPIC_CONFIG_NAMES
from ..protocol.codec import decode
from ..protocol.errors import ProtocolError
from ..protocol.schema import F, Message, Versions
from ..protocol.types import read_uvarint, topic_id_text
from .topic_metadata import TopicMetadata

log = logging.getLogger(__name__)

CLUSTER_METADATA_TOPIC = layout.CLUSTER_METADATA_TOPIC_NAME
SNAPSHOT_SUFFIX = ".checkpoint"

# ConfigResource.Type.TOPIC in a ConfigRecord.
_TOPIC_RESOURCE = 2
# The frame of every metadata record value (MetadataRecordSerde): frame version, api key, version.
_FRAME_VERSION = 1

_FLEXIBLE = Versions.parse("0+")
TOPIC_RECORD = Message("TopicRecord", 2, Versions.parse("0"), _FLEXIBLE, (
    F("Name", "string", "0+"),
    F("TopicId", "uuid", "0+"),
))
CONFIG_RECORD = Message("ConfigRecord", 4, Versions.parse("0"), _FLEXIBLE, (
    F("ResourceType", "int8", "0+"),
    F("ResourceName", "string", "0+"),
    F("Name", "string", "0+"),
    F("Value", "string", "0+", nullable="0+", default=None),
))
REMOVE_TOPIC_RECORD = Message("RemoveTopicRecord", 9, Versions.parse("0"), _FLEXIBLE, (
    F("TopicId", "uuid", "0+"),
))
_RECORDS = {m.api_key: m for m in (TOPIC_RECORD, CONFIG_RECORD, REMOVE_TOPIC_RECORD)}

# Kafka's segment.bytes without its 1 MiB minimum (KIP-1030), which Kafka's own tests set.
_INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"


def decode_metadata_record(value: bytes) -> tuple[Message, dict] | None:
    """A metadata record value as (declaration, body); None for the record types topics do not need."""
    buf = memoryview(value)
    frame_version, pos = read_uvarint(buf, 0)
    if frame_version != _FRAME_VERSION:
        raise ValueError(f"metadata record frame version {frame_version} (expected {_FRAME_VERSION})")
    api_key, pos = read_uvarint(buf, pos)
    version, pos = read_uvarint(buf, pos)
    message = _RECORDS.get(api_key)
    if message is None:
        return None
    if version not in message.valid:
        raise ValueError(f"{message.name} version {version} is not supported (versions {message.valid} are)")
    body, _ = decode(message, version, buf, pos)
    return message, body


class TopicConfigs:
    """Replays metadata records into each live topic's configuration overrides, by name."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # topic id -> name
        self.configs: dict[str, dict[str, str]] = {}

    def replay(self, message: Message, body: dict) -> None:
        if message is TOPIC_RECORD:
            self.names[body["topic_id"]] = body["name"]
            self.configs.setdefault(body["name"], {})
        elif message is REMOVE_TOPIC_RECORD:
            name = self.names.pop(body["topic_id"], None)
            self.configs.pop(name, None)
        elif message is CONFIG_RECORD and body["resource_type"] == _TOPIC_RESOURCE:
            config = self.configs.setdefault(body["resource_name"], {})
            if body["value"] is None:
                config.pop(body["name"], None)
            else:
                config[body["name"]] = body["value"]


def _values(records: FileRecords, from_offset: int) -> Iterator[bytes]:
    for batch in records.batches(validate=True):
        if batch.header.is_control or batch.header.last_offset < from_offset:
            continue
        for record in batch.records():
            if record.offset >= from_offset and record.value is not None:
                yield record.value


def _metadata_files(fs: AbstractFileSystem, directory: str) -> list[tuple[str, int]]:
    """The latest snapshot (from offset 0) and the log segments from its end offset on: (path, from offset)."""
    snapshots = []
    for name, _ in log_dir.entries(fs, directory):
        if name.endswith(SNAPSHOT_SUFFIX):
            try:
                snapshots.append((int(name.split("-", 1)[0]), name))
            except ValueError:
                continue
    files: list[tuple[str, int]] = []
    snapshot_end = 0
    if snapshots:
        snapshot_end, name = max(snapshots)
        files.append((join(fs, directory, name), 0))
    files += [(join(fs, directory, s.file_name), snapshot_end) for s in log_dir.segments(fs, directory)]
    return files


def metadata_topic_configs(fs: AbstractFileSystem, root: str) -> dict[str, dict[str, str]]:
    """Each live topic's configuration overrides from the log dir's ``__cluster_metadata-0``
    (empty when it has none). Raises ValueError naming the file that cannot be read."""
    directory = join(fs, root, layout.partition_dir_name(layout.TopicPartition(CLUSTER_METADATA_TOPIC, 0)))
    replay = TopicConfigs()
    for path, from_offset in _metadata_files(fs, directory):
        records = FileRecords.open_fs(fs, path)
        try:
            for value in _values(records, from_offset):
                decoded = decode_metadata_record(value)
                if decoded is not None:
                    replay.replay(*decoded)
        except (ValueError, ProtocolError) as exc:
            raise ValueError(f"{path}: unreadable cluster metadata: {exc}") from exc
        finally:
            records.close()
    return replay.configs


def _known_overrides(topic: str, config: dict[str, str]) -> dict[str, str]:
    """The overrides seglog has: Kafka's others (tiered storage, replication throttles, …) are left
    out, with a warning; ``internal.segment.bytes`` stands for ``segment.bytes``, as in Kafka."""
    out = dict(config)
    if _INTERNAL_SEGMENT_BYTES in out:
        out["segment.bytes"] = out.pop(_INTERNAL_SEGMENT_BYTES)
    unknown = sorted(set(out) - TOPIC_CONFIG_NAMES)
    if unknown:
        log.warning("topic %r: leaving out Kafka configs seglog does not have: %s", topic, ", ".join(unknown))
    return {k: v for k, v in out.items() if k in TOPIC_CONFIG_NAMES}


def partition_topic_id(fs: AbstractFileSystem, partition_dir: str) -> str | None:
    """The topic id in Kafka's ``partition.metadata`` (``version: 0`` / ``topic_id: <id>``), if any."""
    try:
        text = fs.cat_file(join(fs, partition_dir, layout.PARTITION_METADATA_FILE)).decode("utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "topic_id" and value.strip():
            return value.strip()
    return None


def kafka_topics(fs: AbstractFileSystem, root: str) -> dict[str, TopicMetadata]:
    """The topics of a log dir without a topic store, from its partition directories (and, for
    their configuration overrides, its cluster metadata log)."""
    partitions: dict[str, list[int]] = {}
    for tp in log_dir.partitions(fs, root):
        if tp.topic != CLUSTER_METADATA_TOPIC:
            partitions.setdefault(tp.topic, []).append(tp.partition)
    if not partitions:
        return {}
    try:
        configs = metadata_topic_configs(fs, root)
    except (ValueError, OSError) as exc:
        log.warning("topics of %s without their configuration overrides: %s", root, exc)
        configs = {}
    out = {}
    for topic, found in sorted(partitions.items()):
        first_dir = join(fs, root, layout.partition_dir_name(layout.TopicPartition(topic, min(found))))
        topic_id = partition_topic_id(fs, first_dir) or topic_id_text(bytes(16))
        out[topic] = TopicMetadata(topic, topic_id, max(found) + 1,
                                    _known_overrides(topic, configs.get(topic, {})))
    return out

