"""Where the coordinator keeps groups and offsets: the records of ``__consumer_offsets``.

``GroupStore`` is what the coordinator needs from storage: append a group's
metadata, append committed offsets, append tombstones, and replay everything
at startup. Both implementations write Kafka's record layouts
(``broker_core.offsets_topic``) into the group's partition
(``partition_for_group``) through ``GroupRecordWriter``, so the bytes are the
same whether they land in a broker's log (``BrokerGroupStore``) or in memory
(``InMemoryGroupStore``, for tests and tools).

``OffsetsTopicReplay`` is the one reading of those records: the coordinator
loading at startup, the broker's own ``committed_offsets`` and the tools that
read a log directory's files (``group_offsets``) all feed it, so they agree.

Appends are synchronous: when a method returns, the records are in the log.
A failed append raises (a ``KafkaError`` from the log, or anything else);
the coordinator turns that into the error code Kafka answers with.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Protocol

from format.control import ControlRecordType
from format.layout import TopicPartition
from format.record_batch import RecordBatch

from ...offsets_topic import (DEFAULT_OFFSETS_TOPIC_PARTITIONS, NO_LEADER_EPOCH, OFFSETS_TOPIC, GroupMetadataKey,
                              GroupMetadataValue, InvalidOffsetsRecordError, OffsetCommitKey, OffsetCommitValue,
                              UnknownRecordTypeError, decode_group_metadata_value, decode_key,
                              decode_offset_commit_value, encode_group_metadata, encode_offset_commit,
                              partition_for_group)
from .offset_and_metadata import OffsetAndMetadata

__all__ = [
    "GroupStore",
    "LoadedGroups",
    "OffsetsTopicReplay",
    "GroupRecordWriter",
    "InMemoryGroupStore",
    "offset_commit_record",
    "group_metadata_record",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedGroups:
    """What replaying ``__consumer_offsets`` gives: the coordinator's start, the tools' answer."""

    #: Each classic group's last stored generation (groups deleted by a tombstone are absent).
    groups: Mapping[str, GroupMetadataValue] = field(default_factory=dict)
    #: Each group's committed offsets (a group may have offsets and no metadata: it only stores offsets).
    offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    #: The log offset of the record that set each committed offset (which of two commits is newer).
    offset_positions: Mapping[str, Mapping[TopicPartition, int]] = field(default_factory=dict)
    #: Offsets committed in transactions still open, by producer id, group and partition, with the log
    #: offset of their record: they count once the transaction's COMMIT marker lands.
    pending_transactional_offsets: Mapping[int, Mapping[str, Mapping[TopicPartition, tuple[int, OffsetAndMetadata]]]] \
        = field(default_factory=dict)

    @property
    def group_ids(self) -> list[str]:
        """Every group that has committed offsets or a stored generation, sorted."""
        return sorted(set(self.groups) | set(self.offsets))

    def has_group(self, group_id: str) -> bool:
        return group_id in self.groups or group_id in self.offsets


class GroupStore(Protocol):
    """The coordinator's persistence: records of the group's ``__consumer_offsets`` partition."""

    @property
    def num_partitions(self) -> int:
        """``offsets.topic.num.partitions`` as the topic really has it (groups hash over it)."""
        ...

    def load(self, partitions: Iterable[int] | None = None) -> LoadedGroups:
        """Replay ``partitions`` (every partition without them): the groups and offsets that are live now."""
        ...

    def append_group_metadata(self, group_id: str, value: GroupMetadataValue) -> None:
        """Store a group's generation (after SyncGroup, or when it became Empty)."""
        ...

    def append_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> int | None:
        """Store committed offsets, all in one batch; the log offset of its first record when known."""
        ...

    def append_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                     offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> int | None:
        """Store offsets committed in ``producer_id``'s open transaction: one transactional batch, which
        the transaction's marker commits or aborts; the log offset of its first record when known."""
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
    """Replays records of ``__consumer_offsets`` in log order, as Kafka's group metadata loader does.

    Per partition, the latest record of a key wins and a null value
    (tombstone) deletes it. Offsets committed inside a transaction wait for
    its marker: an ABORT drops them; a COMMIT applies each one unless its
    partition already holds a newer plain commit, newer by log offset
    (Kafka's ``CommitRecordMetadataAndOffset.olderThan``), so a plain commit
    written between a transaction's offset commit and its COMMIT marker
    stands. With ``group_id``, other groups' records are passed over.
    Records of other coordinators (Kafka's consumer and share groups) are
    skipped; one that cannot be decoded is skipped with a warning naming its
    partition and offset.
    """

    def __init__(self, group_id: str | None = None) -> None:
        self.group_id = group_id
        self._groups: dict[str, GroupMetadataValue] = {}
        # Each offset keeps the log offset of the record that set it.
        self._offsets: dict[str, dict[TopicPartition, tuple[int, OffsetAndMetadata]]] = {}
        # The offsets each open transaction commits (with their log offsets), by partition and producer id:
        # transactions are per partition.
        self._pending: dict[tuple[int, int], dict[tuple[str, TopicPartition], tuple[int, OffsetAndMetadata]]] = {}

    def replay_batch(self, partition: int, batch: RecordBatch, from_offset: int = 0) -> None:
        """One batch of the offsets topic's ``partition``; records below ``from_offset`` were replayed already."""
        header = batch.header
        if header.last_offset < from_offset:
            return
        if header.is_control:
            marker = batch.end_txn_marker()
            if marker is not None:
                done = self._pending.pop((partition, header.producer_id), {})
                if marker.control_type == ControlRecordType.COMMIT:
                    for (group_id, tp), (log_offset, offset) in done.items():
                        current = self._offsets.get(group_id, {}).get(tp)
                        if current is None or current[0] < log_offset:
                            self._put(group_id, tp, log_offset, offset)
            return
        producer_id = header.producer_id if header.is_transactional else None
        for record in batch.records():
            if record.offset >= from_offset and record.key is not None:
                self._replay(partition, record.offset, record.key, record.value, producer_id)

    def replay_record(self, partition: int, log_offset: int, key: bytes, value: bytes | None) -> None:
        """One record written outside any transaction, at ``log_offset`` of ``partition``."""
        self._replay(partition, log_offset, key, value, None)

    def _replay(self, partition: int, log_offset: int, key: bytes, value: bytes | None,
                producer_id: int | None) -> None:
        try:
            decoded = decode_key(key)
            if self.group_id is not None and decoded.group != self.group_id:
                return
            if isinstance(decoded, GroupMetadataKey):
                if value is None:
                    self._groups.pop(decoded.group, None)
                else:
                    self._groups[decoded.group] = decode_group_metadata_value(value)
                return
            offset = None if value is None else _offset_and_metadata(decode_offset_commit_value(value))
        except UnknownRecordTypeError:
            return
        except InvalidOffsetsRecordError as exc:
            log.warning("%s-%d offset %d: skipping a record that cannot be decoded: %s", OFFSETS_TOPIC, partition,
                        log_offset, exc)
            return
        tp = TopicPartition(decoded.topic, decoded.partition)
        if producer_id is None:
            self._put(decoded.group, tp, log_offset, offset)
            return
        pending = self._pending.setdefault((partition, producer_id), {})
        if offset is None:
            # As in Kafka's loader, a tombstone inside a transaction only takes back what the transaction pended.
            pending.pop((decoded.group, tp), None)
        else:
            pending[(decoded.group, tp)] = (log_offset, offset)

    def _put(self, group_id: str, tp: TopicPartition, log_offset: int, offset: OffsetAndMetadata | None) -> None:
        offsets = self._offsets.setdefault(group_id, {})
        if offset is None:
            offsets.pop(tp, None)
        else:
            offsets[tp] = (log_offset, offset)
        if not offsets:
            del self._offsets[group_id]

    def result(self) -> LoadedGroups:
        """The groups and offsets live after the records replayed so far (open transactions apart)."""
        offsets = {g: {tp: o for tp, (_, o) in sorted(tps.items())} for g, tps in sorted(self._offsets.items())}
        positions = {g: {tp: pos for tp, (pos, _) in tps.items()} for g, tps in self._offsets.items()}
        pending: dict[int, dict[str, dict[TopicPartition, tuple[int, OffsetAndMetadata]]]] = {}
        for (_, producer_id), entries in self._pending.items():
            for (group_id, tp), entry in entries.items():
                pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = entry
        return LoadedGroups(dict(sorted(self._groups.items())), offsets, positions, pending)


def _offset_and_metadata(value: OffsetCommitValue) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset=value.offset, metadata=value.metadata, commit_timestamp=value.commit_timestamp,
                             leader_epoch=None if value.leader_epoch == NO_LEADER_EPOCH else value.leader_epoch,
                             expire_timestamp=value.expire_timestamp)


class GroupRecordWriter:
    """The GroupStore appends as ``__consumer_offsets`` records (Kafka's key and value layouts);
    a store supplies ``_append(group_id, records, producer)``, which writes them to the group's partition
    (as one transactional batch of ``producer``, an id and epoch, when given) and returns the log offset
    of the first."""

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> int | None:
        raise NotImplementedError

    def append_group_metadata(self, group_id: str, value: GroupMetadataValue) -> None:
        self._append(group_id, [group_metadata_record(group_id, value)])

    def append_offsets(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> int | None:
        return self._append(group_id, [offset_commit_record(group_id, tp, o) for tp, o in sorted(offsets.items())])

    def append_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                     offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> int | None:
        return self._append(group_id, [offset_commit_record(group_id, tp, o) for tp, o in sorted(offsets.items())],
                            (producer_id, producer_epoch))

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

    def load(self, partitions: Iterable[int] | None = None) -> LoadedGroups:
        replay = OffsetsTopicReplay()
        wanted = None if partitions is None else set(partitions)
        with self._lock:
            snapshot = {p: list(records) for p, records in self.partitions.items() if wanted is None or p in wanted}
        for partition in sorted(snapshot):
            # A record's place in the list is its offset in the partition.
            for log_offset, (key, value) in enumerate(snapshot[partition]):
                replay.replay_record(partition, log_offset, key, value)
        return replay.result()

    def records(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """The records of the group's partition (every group hashing there), in append order."""
        with self._lock:
            return list(self.partitions.get(partition_for_group(group_id, self._num_partitions), []))

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> int | None:
        if self.fail_with is not None:
            raise self.fail_with
        if producer is not None:
            # Transactions end with markers in a log; a list of records has none.
            raise NotImplementedError("the in-memory offsets topic holds no transactions")
        if not records:
            return None
        partition = partition_for_group(group_id, self._num_partitions)
        with self._lock:
            records_of_partition = self.partitions.setdefault(partition, [])
            position = len(records_of_partition)
            records_of_partition.extend(records)
            return position
