"""Consumer group offsets kept where Kafka keeps them: the compacted ``__consumer_offsets`` topic.

Writing goes through a Broker (the one owner of a log directory): a commit is
one batch of offset-commit records appended to the group's partition, a group
deletion one batch of tombstones. Reading never goes through the broker and
never locks: it replays the partition's segment files through fsspec, latest
record winning and tombstones deleting, so lag tools, the Spark connector and
the CLI see a running broker's commits from the files alone, on local disk or
in a bucket. The byte layout of the records is ``offsets_topic``'s.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from fsspec.spec import AbstractFileSystem

from format import layout
from format.control import ControlRecordType
from format.file_records import FileRecords
from format.fs import filesystem_for, join
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import RecordBatch, build_batch
from format.segment_reader import SegmentReader

from .errors import (GroupIdNotFoundError, InvalidRequestError, OffsetMetadataTooLargeError, OffsetOutOfRangeError,
                     TopicAlreadyExistsError)
from .offsets_topic import (DEFAULT_OFFSETS_TOPIC_PARTITIONS, NO_LEADER_EPOCH, GroupMetadataKey, GroupMetadataValue,
                            OffsetCommitKey, OffsetCommitValue, OffsetsTopicKey, UnknownRecordTypeError,
                            decode_group_metadata_value, decode_key, decode_offset_commit_value, encode_key,
                            encode_offset_commit, partition_for_group)
from .topic_store import STORE_FILE

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

__all__ = [
    "OFFSETS_TOPIC",
    "OFFSET_METADATA_MAX_BYTES",
    "CommittedOffset",
    "OffsetsTopicSnapshot",
    "PartitionLag",
    "GroupMember",
    "GroupDescription",
    "ensure_offsets_topic",
    "commit_offsets",
    "commit_offsets_to_log_dir",
    "reset_offsets",
    "delete_group",
    "committed_offsets",
    "read_offsets_topic",
    "read_committed_offsets",
    "list_groups",
    "describe_group",
    "describe_consumer_group",
]

OFFSETS_TOPIC = "__consumer_offsets"

#: Kafka's default ``offset.metadata.max.bytes``: the longest metadata string a commit may carry.
OFFSET_METADATA_MAX_BYTES = 4096

# A reader re-lists a partition this many times when segments vanish under it
# (retention, compaction swapping files) before giving up.
_MAX_RELISTS = 5


@dataclass(frozen=True)
class CommittedOffset:
    """A group's committed position in one partition (Kafka's OffsetAndMetadata)."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int | None = None


@dataclass(frozen=True)
class OffsetsTopicSnapshot:
    """What replaying ``__consumer_offsets`` gives: each group's offsets and the classic groups' metadata."""

    offsets: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    group_metadata: dict[str, GroupMetadataValue] = field(default_factory=dict)

    @property
    def groups(self) -> list[str]:
        """Every group that has committed offsets or live metadata, sorted."""
        return sorted(set(self.offsets) | set(self.group_metadata))

    def has_group(self, group_id: str) -> bool:
        return group_id in self.offsets or group_id in self.group_metadata


@dataclass(frozen=True)
class PartitionLag:
    """One row of ``kafka-consumer-groups.sh --describe``."""

    group: str
    topic: str
    partition: int
    current_offset: int | None  # None for a partition assigned to a member that has not committed yet
    log_end_offset: int | None  # None when no log directory holds the partition

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None or self.current_offset is None:
            return None
        return self.log_end_offset - self.current_offset


@dataclass(frozen=True)
class GroupMember:
    """A member of a consumer group and the partitions its generation assigned to it."""

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None = None
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    """``kafka-consumer-groups.sh --describe`` in one record: state, members and every partition's lag.

    ``partitions`` holds the partitions the group committed or that a member
    owns, by topic and partition.
    """

    group: str
    state: str
    protocol_type: str
    protocol: str | None
    members: tuple[GroupMember, ...]
    partitions: tuple[PartitionLag, ...]

    def owner(self, tp: TopicPartition) -> GroupMember | None:
        """The member whose assignment holds ``tp``, if any."""
        return next((m for m in self.members if tp in m.assignment), None)


# --- writing (through the broker that owns the log directory) ----------------------


def ensure_offsets_topic(broker: "Broker") -> int:
    """Create ``__consumer_offsets`` with Kafka's settings unless it exists; returns its partition count."""
    if broker.topics.get(OFFSETS_TOPIC) is None:
        config = broker.config
        try:
            broker.create_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": config.offsets_topic_segment_bytes,
                # Commits are stored as their writer compressed them, as Kafka does for this topic.
                "compression.type": "producer",
            })
        except TopicAlreadyExistsError:
            pass  # created by a concurrent commit
    # An existing topic keeps its partition count whatever the configuration
    # says now: moving groups to other partitions would lose their offsets.
    return broker.partitions_for(OFFSETS_TOPIC)


def _check_commit(group_id: str, offsets: Mapping[TopicPartition, int], metadata: str) -> None:
    if len(metadata) > OFFSET_METADATA_MAX_BYTES:
        raise OffsetMetadataTooLargeError(f"group {group_id!r}: offset metadata of {len(metadata)} characters is "
                                          f"longer than offset.metadata.max.bytes={OFFSET_METADATA_MAX_BYTES}")
    for tp, offset in offsets.items():
        if offset < 0:
            raise InvalidRequestError(f"group {group_id!r}: offset {offset} for {tp} is negative")


def _append(broker: "Broker", group_id: str, records: list[SimpleRecord], now: int) -> None:
    partitions = ensure_offsets_topic(broker)
    broker.produce_batches(OFFSETS_TOPIC, partition_for_group(group_id, partitions),
                           build_batch(records, default_timestamp=now))


def commit_offsets(broker: "Broker", group_id: str, offsets: Mapping[TopicPartition, int], metadata: str = "",
                   timestamp_ms: int | None = None) -> None:
    """Store ``offsets`` for ``group_id``: one batch of offset-commit records on the group's partition."""
    if not offsets:
        return
    _check_commit(group_id, offsets, metadata)
    now = broker.clock.milliseconds() if timestamp_ms is None else timestamp_ms
    records = []
    for tp in sorted(offsets):
        key, value = encode_offset_commit(OffsetCommitKey(group_id, tp.topic, tp.partition),
                                          OffsetCommitValue(offsets[tp], NO_LEADER_EPOCH, metadata, now))
        records.append(SimpleRecord(value, key, now))
    _append(broker, group_id, records, now)


def commit_offsets_to_log_dir(log_dir: str | Sequence[str], group_id: str, offsets: Mapping[TopicPartition, int],
                              metadata: str = "") -> None:
    """Commit with no running broker: opens the log directory (taking its lock), commits, closes.

    Raises LogDirInUseError when a running broker owns the directory.
    """
    from .broker import Broker

    with Broker(log_dir, background=False) as broker:
        commit_offsets(broker, group_id, offsets, metadata)


def reset_offsets(broker: "Broker", group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Move the group to ``offsets``, each of which must lie within its partition's log."""
    for tp, offset in sorted(offsets.items()):
        lg = broker.log_manager.log_or_raise(tp)
        if not lg.log_start_offset <= offset <= lg.log_end_offset:
            raise OffsetOutOfRangeError(f"group {group_id!r}: offset {offset} for {tp} is outside the log "
                                        f"[{lg.log_start_offset}, {lg.log_end_offset}]")
    commit_offsets(broker, group_id, offsets)


def delete_group(broker: "Broker", group_id: str) -> None:
    """Delete the group: a tombstone for each committed offset and one for its metadata.

    Raises GroupIdNotFoundError when the group has neither offsets nor metadata.
    """
    snapshot = _read_log_dirs(broker.log_manager.log_dirs, group_id)
    if not snapshot.has_group(group_id):
        raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
    now = broker.clock.milliseconds()
    records = [SimpleRecord(None, encode_offset_commit(OffsetCommitKey(group_id, tp.topic, tp.partition), None)[0],
                            now) for tp in sorted(snapshot.offsets.get(group_id, {}))]
    # The group's own tombstone goes last, as Kafka writes it once the offsets are gone.
    records.append(SimpleRecord(None, encode_key(GroupMetadataKey(group_id)), now))
    _append(broker, group_id, records, now)


def committed_offsets(broker: "Broker", group_id: str) -> dict[TopicPartition, CommittedOffset]:
    """The group's offsets, read from the files of the broker's own log directories."""
    return _read_log_dirs(broker.log_manager.log_dirs, group_id).offsets.get(group_id, {})


# --- reading (files only, no lock) ----------------------------------------------


@dataclass
class _Replay:
    """Replay state of one or more offsets partitions."""

    group_id: str | None
    # Each offset keeps the log offset of the record that set it: a transaction's
    # commits apply at its marker only over older records, as in Kafka's loader.
    offsets: dict[str, dict[TopicPartition, tuple[int, CommittedOffset]]] = field(default_factory=dict)
    group_metadata: dict[str, GroupMetadataValue] = field(default_factory=dict)
    pending: dict[int, list[tuple[int, OffsetsTopicKey, bytes | None]]] = field(default_factory=dict)

    def apply(self, log_offset: int, key: OffsetsTopicKey, value: bytes | None, transactional: bool) -> None:
        if isinstance(key, GroupMetadataKey):
            if value is None:
                self.group_metadata.pop(key.group, None)
            else:
                self.group_metadata[key.group] = decode_group_metadata_value(value)
            return
        tp = TopicPartition(key.topic, key.partition)
        current = self.offsets.get(key.group, {}).get(tp)
        if transactional and current is not None and current[0] > log_offset:
            return
        group = self.offsets.setdefault(key.group, {})
        if value is None:
            group.pop(tp, None)
        else:
            v = decode_offset_commit_value(value)
            group[tp] = (log_offset, CommittedOffset(v.offset, v.metadata, v.commit_timestamp,
                                                     None if v.leader_epoch == NO_LEADER_EPOCH else v.leader_epoch))
        if not group:
            del self.offsets[key.group]

    def batch(self, batch: RecordBatch, from_offset: int) -> None:
        header = batch.header
        if header.is_control:
            marker = batch.end_txn_marker()
            if marker is not None:
                pending = self.pending.pop(header.producer_id, [])
                if marker.control_type == ControlRecordType.COMMIT:
                    for log_offset, key, value in pending:
                        self.apply(log_offset, key, value, transactional=True)
            return
        for record in batch.records():
            if record.offset < from_offset or record.key is None:
                continue
            try:
                key = decode_key(record.key)
            except UnknownRecordTypeError:
                continue  # another coordinator record type (Kafka's new consumer groups, share groups)
            if self.group_id is not None and key.group != self.group_id:
                continue
            if header.is_transactional:
                # Offsets committed in a transaction count once its COMMIT marker is read.
                self.pending.setdefault(header.producer_id, []).append((record.offset, key, record.value))
            else:
                self.apply(record.offset, key, record.value, transactional=False)

    def snapshot(self) -> OffsetsTopicSnapshot:
        return OffsetsTopicSnapshot({g: {tp: c for tp, (_, c) in sorted(tps.items())}
                                     for g, tps in sorted(self.offsets.items())}, dict(self.group_metadata))


def _listing(fs: AbstractFileSystem, path: str) -> list[dict]:
    # Listings must be fresh: segments come and go while a broker runs.
    fs.invalidate_cache(path)
    try:
        return fs.ls(path, detail=True)
    except FileNotFoundError:
        return []


def _base_name(entry: dict) -> str:
    return entry["name"].rstrip("/").rsplit("/", 1)[-1]


def _partition_dirs(fs: AbstractFileSystem, root: str, topic: str) -> dict[int, str]:
    """The live partition directories of ``topic`` under ``root``, by partition."""
    out = {}
    for entry in _listing(fs, root):
        if entry.get("type") != "directory":
            continue
        try:
            tp = layout.parse_partition_dir(_base_name(entry))
        except ValueError:
            continue  # not a partition, or one being deleted or moved
        if tp.topic == topic:
            out[tp.partition] = join(fs, root, _base_name(entry))
    return out


def _segments(fs: AbstractFileSystem, directory: str, *, swapped: bool = False) -> list[tuple[int, int, str]]:
    """(base offset, size, file name) of the segments of a partition directory, in offset order.

    With ``swapped``, a cleaned ``.log.swap`` stands in for a ``.log`` that is
    missing: between renaming the old segments away and the swap file into
    place, the cleaned data exists under that name only.
    """
    found: dict[int, tuple[int, int, str]] = {}
    swap_suffix = layout.LOG_FILE_SUFFIX + layout.SWAP_FILE_SUFFIX
    for entry in _listing(fs, directory):
        name = _base_name(entry)
        if not (name.endswith(layout.LOG_FILE_SUFFIX) or (swapped and name.endswith(swap_suffix))):
            continue
        try:
            base_offset = layout.offset_from_file_name(name)
        except ValueError:
            continue
        if base_offset not in found or name.endswith(layout.LOG_FILE_SUFFIX):
            found[base_offset] = (base_offset, int(entry.get("size") or 0), name)
    return [found[b] for b in sorted(found)]


def _offsets_partition_count(fs: AbstractFileSystem, root: str, listed: Mapping[int, str]) -> int:
    """The offsets topic's partition count: from seglog's topic store, else from the directories found."""
    try:
        doc = json.loads(fs.cat_file(join(fs, root, STORE_FILE)))
        for topic in doc.get("topics", []):
            if topic.get("name") == OFFSETS_TOPIC:
                return int(topic["partitions"])
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s: unreadable topic metadata, counting partition directories instead: %s",
                    join(fs, root, STORE_FILE), exc)
    # A Kafka log directory has no topic store; on one broker it holds every partition.
    return max(listed) + 1 if listed else DEFAULT_OFFSETS_TOPIC_PARTITIONS


def _replay_partition(fs: AbstractFileSystem, directory: str, replay: _Replay) -> None:
    # Transactions are per partition: one still open at the end of another
    # partition must not be completed by a marker here.
    replay.pending = {}
    next_offset = 0
    for attempt in range(_MAX_RELISTS):
        segments = _segments(fs, directory, swapped=True)
        try:
            for i, (base_offset, size, name) in enumerate(segments):
                if i + 1 < len(segments) and segments[i + 1][0] <= next_offset:
                    continue  # read already
                records = FileRecords.open_fs(fs, join(fs, directory, name), size)
                try:
                    for batch in records.batches():
                        if batch.header.last_offset < next_offset:
                            continue
                        replay.batch(batch, next_offset)
                        next_offset = batch.header.next_offset
                finally:
                    records.close()
            return
        except FileNotFoundError:
            # Retention or compaction replaced a segment while we read: what is
            # read stays applied (compaction keeps offsets), the rest comes from
            # a fresh listing.
            if attempt + 1 == _MAX_RELISTS:
                raise


def _replay_root(fs: AbstractFileSystem, root: str, replay: _Replay) -> None:
    listed = _partition_dirs(fs, root, OFFSETS_TOPIC)
    if replay.group_id is not None:
        wanted = partition_for_group(replay.group_id, _offsets_partition_count(fs, root, listed))
        listed = {wanted: listed[wanted]} if wanted in listed else {}
    for partition in sorted(listed):
        _replay_partition(fs, listed[partition], replay)


def read_offsets_topic(fs: AbstractFileSystem | None, root: str, group_id: str | None = None,
                       storage_options: Mapping[str, object] | None = None) -> OffsetsTopicSnapshot:
    """Replay ``__consumer_offsets`` in the log directory ``root`` (only the group's partition when given).

    With ``fs`` None, ``root`` is a path or URL (``s3://...``) opened with ``storage_options``.
    """
    if fs is None:
        fs, root = filesystem_for(root, storage_options)
    replay = _Replay(group_id)
    _replay_root(fs, root, replay)
    return replay.snapshot()


def read_committed_offsets(fs: AbstractFileSystem | None, root: str, group_id: str | None = None,
                           storage_options: Mapping[str, object] | None = None
                           ) -> dict[str, dict[TopicPartition, CommittedOffset]]:
    """Every group's committed offsets in the log directory ``root`` (or only ``group_id``'s), from the files."""
    return read_offsets_topic(fs, root, group_id, storage_options).offsets


def _as_list(log_dirs: str | Iterable[str]) -> list[str]:
    return [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)


def _read_log_dirs(log_dirs: str | Iterable[str], group_id: str | None = None,
                   storage_options: Mapping[str, object] | None = None) -> OffsetsTopicSnapshot:
    # A broker spreads partitions over its log dirs; each lives in exactly one.
    replay = _Replay(group_id)
    for url in _as_list(log_dirs):
        fs, root = filesystem_for(url, storage_options)
        _replay_root(fs, root, replay)
    return replay.snapshot()


def list_groups(url: str | Sequence[str], storage_options: Mapping[str, object] | None = None) -> list[str]:
    """The groups with committed offsets or live metadata in a log directory (or several), sorted."""
    return _read_log_dirs(url, None, storage_options).groups


def _log_end_offset(fs: AbstractFileSystem, directory: str) -> int | None:
    """The offset after the last complete batch of a partition directory, or None when it has no segment."""
    for attempt in range(_MAX_RELISTS):
        segments = _segments(fs, directory)
        if not segments:
            return None
        base_offset, size, _ = segments[-1]
        try:
            with SegmentReader(fs, directory, base_offset, size) as reader:
                # The tail after the last index entry, checked as the broker and Spark check it.
                found = reader.next_offset()
                return base_offset if found is None else found
        except FileNotFoundError:
            if attempt + 1 == _MAX_RELISTS:
                raise
    return None


def describe_group(log_dirs: str | Sequence[str], group_id: str,
                   storage_options: Mapping[str, object] | None = None) -> list[PartitionLag]:
    """The group's committed offsets beside each partition's log end offset, by topic and partition.

    Raises GroupIdNotFoundError when the group has neither offsets nor metadata.
    """
    dirs = _as_list(log_dirs)
    snapshot = _read_log_dirs(dirs, group_id, storage_options)
    if not snapshot.has_group(group_id):
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    offsets = snapshot.offsets.get(group_id, {})
    roots = [filesystem_for(url, storage_options) for url in dirs]
    rows = []
    for tp, committed in sorted(offsets.items()):
        end = None
        for fs, root in roots:
            end = _log_end_offset(fs, join(fs, root, layout.partition_dir_name(tp)))
            if end is not None:
                break
        rows.append(PartitionLag(group_id, tp.topic, tp.partition, committed.offset, end))
    return rows


def group_members(group_id: str, value: GroupMetadataValue | None) -> tuple[GroupMember, ...]:
    """The members of a stored generation, with their assignments decoded for consumer groups."""
    from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment
    from .protocol import ProtocolError

    if value is None:
        return ()
    members = []
    for m in value.members:
        assignment: list[TopicPartition] = []
        if value.protocol_type == CONSUMER_PROTOCOL_TYPE:
            try:
                assignment = decode_assignment(m.assignment)
            except ProtocolError as exc:
                log.warning("group %r: member %s has an assignment that cannot be read: %s", group_id, m.member_id,
                            exc)
        members.append(GroupMember(m.member_id, m.client_id, m.client_host, m.group_instance_id, tuple(assignment)))
    return tuple(members)


def describe_consumer_group(log_dirs: str | Sequence[str], group_id: str,
                            storage_options: Mapping[str, object] | None = None) -> GroupDescription:
    """The group as its last stored generation left it (members, assignments) with offsets and lag.

    Read from the files: with no broker running (or beside one) this shows the
    generation last written to ``__consumer_offsets``. Raises
    GroupIdNotFoundError when the group has neither offsets nor metadata.
    """
    dirs = _as_list(log_dirs)
    snapshot = _read_log_dirs(dirs, group_id, storage_options)
    if not snapshot.has_group(group_id):
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    value = snapshot.group_metadata.get(group_id)
    members = group_members(group_id, value)
    offsets = snapshot.offsets.get(group_id, {})
    wanted = sorted(set(offsets) | {tp for m in members for tp in m.assignment})
    roots = [filesystem_for(url, storage_options) for url in dirs]
    rows = []
    for tp in wanted:
        end = None
        for fs, root in roots:
            end = _log_end_offset(fs, join(fs, root, layout.partition_dir_name(tp)))
            if end is not None:
                break
        committed = offsets.get(tp)
        rows.append(PartitionLag(group_id, tp.topic, tp.partition, None if committed is None else committed.offset,
                                 end))
    # A stored generation with members was Stable when written; one without is Empty.
    state = "Stable" if members else "Empty"
    return GroupDescription(group_id, state, value.protocol_type if value else "", value.protocol if value else None,
                            members, tuple(rows))
