"""Where the coordinator keeps groups and offsets: the records of ``__consumer_offsets``.

``GroupStore`` is what the coordinator needs from storage: append a group's
metadata, append committed offsets, append tombstones, and replay everything
at startup. Both implementations write Kafka's record layouts
(``broker_core.offsets_topic``) into the group's partition
(``partition_for_group``), so the bytes are the same whether they land in a
broker's log (``BrokerGroupStore``) or in memory (``InMemoryGroupStore``,
for tests and tools), and the replay rules are shared: the latest record of
a key wins and a null value (tombstone) deletes it.

Appends are synchronous: when a method returns, the records are in the log.
A failed append raises (a ``KafkaError`` from the log, or anything else);
the coordinator turns that into the error code Kafka answers with.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol

from format.layout import TopicPartition

from ..offsets_topic import (DEFAULT_OFFSETS_TOPIC_PARTITIONS, NO_LEADER_EPOCH, GroupMetadataKey, GroupMetadataValue,
                             OffsetCommitKey, OffsetCommitValue, decode_record, encode_group_metadata,
                             encode_offset_commit, partition_for_group)
from .offset_and_metadata import OffsetAndMetadata

__all__ = [
    "GroupStore",
    "LoadedGroups",
    "OffsetsTopicReplay",
    "InMemoryGroupStore",
    "offset_commit_record",
    "group_metadata_record",
]


@dataclass(frozen=True)
class LoadedGroups:
    """What replaying ``__consumer_offsets`` gives the coordinator at startup."""

    #: Each classic group's last stored generation (groups deleted by a tombstone are absent).
    groups: Mapping[str, GroupMetadataValue] = field(default_factory=dict)
    #: Each group's committed offsets (a group may have offsets and no metadata: it only stores offsets).
    offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)


class GroupStore(Protocol):
    """The coordinator's persistence: records of the group's ``__consumer_offsets`` partition."""

    @property
    def num_partitions(self) -> int:
        """``offsets.topic.num.partitions`` as the topic really has it (groups hash over it)."""
        ...

    def load(self) -> LoadedGroups:
        """Replay every partition: the groups and offsets that are live now."""
        ...

    def append_group_metadata(self, group_id: str, value: GroupMetadataValue) -> None:
        """Store a group's generation (after SyncGroup, or when it became Empty)."""
        ...

    def append_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Store committed offsets, all in one batch."""
        ...

    def append_tombstones(self, group_id: str, partitions: Iterable[TopicPartition], *, group: bool) -> None:
        """Delete offsets (and, with ``group``, the group's metadata, last), all in one batch."""
        ...


# --- records ---------------------------------------------------------------------------


def offset_commit_record(group_id: str, tp: TopicPartition,
                         offset: OffsetAndMetadata | None) -> tuple[bytes, bytes | None]:
    """Key and value of an offset commit in Kafka's layout; None makes the tombstone."""
    value = None if offset is None else OffsetCommitValue(
        offset.offset, NO_LEADER_EPOCH if offset.leader_epoch is None else offset.leader_epoch, offset.metadata,
        offset.commit_timestamp, offset.expire_timestamp)
    return encode_offset_commit(OffsetCommitKey(group_id, tp.topic, tp.partition), value)


def group_metadata_record(group_id: str, value: GroupMetadataValue | None) -> tuple[bytes, bytes | None]:
    """Key and value of a group's metadata in Kafka's layout; None makes the tombstone."""
    return encode_group_metadata(GroupMetadataKey(group_id), value)


class OffsetsTopicReplay:
    """Replays ``__consumer_offsets`` records in log order: the latest record of a key wins."""

    def __init__(self) -> None:
        self._groups: dict[str, GroupMetadataValue] = {}
        self._offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}

    def apply(self, key: bytes, value: bytes | None) -> None:
        """One record; raises ``UnknownRecordTypeError`` for record types of other coordinators."""
        decoded_key, decoded_value = decode_record(key, value)
        if isinstance(decoded_key, GroupMetadataKey):
            if decoded_value is None:
                self._groups.pop(decoded_key.group, None)
            else:
                assert isinstance(decoded_value, GroupMetadataValue)
                self._groups[decoded_key.group] = decoded_value
            return
        tp = TopicPartition(decoded_key.topic, decoded_key.partition)
        if decoded_value is None:
            offsets = self._offsets.get(decoded_key.group)
            if offsets is not None:
                offsets.pop(tp, None)
                if not offsets:
                    del self._offsets[decoded_key.group]
            return
        assert isinstance(decoded_value, OffsetCommitValue)
        self._offsets.setdefault(decoded_key.group, {})[tp] = OffsetAndMetadata(
            offset=decoded_value.offset, metadata=decoded_value.metadata,
            commit_timestamp=decoded_value.commit_timestamp,
            leader_epoch=None if decoded_value.leader_epoch == NO_LEADER_EPOCH else decoded_value.leader_epoch,
            expire_timestamp=decoded_value.expire_timestamp)

    def result(self) -> LoadedGroups:
        return LoadedGroups(dict(self._groups), {g: dict(o) for g, o in self._offsets.items()})


class GroupRecordWriter:
    """The GroupStore appends as ``__consumer_offsets`` records (Kafka's key and value layouts);
    a store supplies ``_append(group_id, records)``, which writes them to the group's partition."""

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        raise NotImplementedError

    def append_group_metadata(self, group_id: str, value: GroupMetadataValue) -> None:
        self._append(group_id, [group_metadata_record(group_id, value)])

    def append_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self._append(group_id, [offset_commit_record(group_id, tp, o) for tp, o in sorted(offsets.items())])

    def append_tombstones(self, group_id: str, partitions: Iterable[TopicPartition], *, group: bool) -> None:
        records = [offset_commit_record(group_id, tp, None) for tp in sorted(partitions)]
        if group:
            # Last, as Kafka writes it: a reader never sees offsets outlive their group.
            records.append(group_metadata_record(group_id, None))
        self._append(group_id, records)


# --- in memory -------------------------------------------------------------------------------


class InMemoryGroupStore(GroupRecordWriter):
    """A GroupStore holding each partition's records in a list: the offsets topic without files.

    ``fail_with``, when set, is raised by every append (a storage fault for tests).
    """

    def __init__(self, num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> None:
        if num_partitions < 1:
            raise ValueError(f"the offsets topic needs at least one partition, not {num_partitions}")
        self._num_partitions = num_partitions
        self._lock = threading.Lock()
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_with: BaseException | None = None

    @property
    def num_partitions(self) -> int:
        return self._num_partitions

    def load(self) -> LoadedGroups:
        replay = OffsetsTopicReplay()
        with self._lock:
            snapshot = {p: list(records) for p, records in self.partitions.items()}
        for partition in sorted(snapshot):
            for key, value in snapshot[partition]:
                replay.apply(key, value)
        return replay.result()

    def records(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """The records of the group's partition (every group hashing there), in append order."""
        with self._lock:
            return list(self.partitions.get(partition_for_group(group_id, self._num_partitions), []))

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        if not records:
            return
        partition = partition_for_group(group_id, self._num_partitions)
        with self._lock:
            self.partitions.setdefault(partition, []).extend(records)
