"""Consumer group offsets kept where Kafka keeps them: the compacted ``__consumer_offsets`` topic.

Writing goes through a Broker (the one owner of a log directory) and its
``BrokerGroupStore``, the group coordinator's own writer: a commit is one batch
of offset-commit records appended to the group's partition, a group deletion
one batch of tombstones. Reading never goes through a broker and never locks:
it feeds the partition's segment files, through fsspec, to the coordinator's
``OffsetsTopicReplay``, so lag tools, the Spark connector and the CLI see
what a running broker's coordinator sees, from the files alone, on local disk
or in a bucket.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from fsspec.spec import AbstractFileSystem

from format import layout, log_dir
from format.file_records import FileRecords
from format.fs import filesystem_for, join
from format.layout import TopicPartition

from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment
from .coordinator.group.broker_store import BrokerGroupStore
from .coordinator.group.config import GroupCoordinatorConfig
from .coordinator.group.offset_and_metadata import OffsetAndMetadata
from .coordinator.group.store import LoadedGroups, OffsetsTopicReplay
from .errors import GroupIdNotFoundError, InvalidRequestError, OffsetMetadataTooLargeError, OffsetOutOfRangeError
from .log.topic_store import read_topics
from .offsets_topic import DEFAULT_OFFSETS_TOPIC_PARTITIONS, OFFSETS_TOPIC, GroupMetadataValue, partition_for_group
from .protocol import ProtocolError

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

__all__ = [
    "PartitionLag",
    "GroupMember",
    "GroupDescription",
    "commit_offsets",
    "reset_offsets",
    "delete_group",
    "committed_offsets",
    "read_offsets_topic",
    "read_committed_offsets",
    "list_groups",
    "describe_consumer_group",
]

# A reader re-lists a partition this many times when segments vanish under it
# (retention, compaction swapping files) before giving up.
_MAX_RELISTS = 5


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


def _check_commit(broker: Broker, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str) -> None:
    metadata_max = GroupCoordinatorConfig.from_broker_config(broker.config).offset_metadata_max_bytes
    if len(metadata) > metadata_max:
        raise OffsetMetadataTooLargeError(f"group {group_id!r}: offset metadata of {len(metadata)} characters is "
                                          f"longer than offset.metadata.max.bytes={metadata_max}")
    for tp, offset in offsets.items():
        if offset < 0:
            raise InvalidRequestError(f"group {group_id!r}: offset {offset} for {tp} is negative")


def commit_offsets(broker: Broker, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str = "",
                   timestamp_ms: int | None = None) -> None:
    """Store ``offsets`` for ``group_id``: one batch of offset-commit records on the group's partition."""
    if not offsets:
        return
    _check_commit(broker, group_id, offsets, metadata)
    now = broker.clock.milliseconds() if timestamp_ms is None else timestamp_ms
    BrokerGroupStore(broker).append_offsets(group_id, {tp: OffsetAndMetadata(offset, metadata, now)
                                                       for tp, offset in offsets.items()})


def reset_offsets(broker: Broker, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Move the group to ``offsets``, each of which must lie within its partition's log."""
    for tp, offset in sorted(offsets.items()):
        lg = broker.log_manager.log_or_raise(tp)
        if not lg.log_start_offset <= offset <= lg.log_end_offset:
            raise OffsetOutOfRangeError(f"group {group_id!r}: offset {offset} for {tp} is outside the log "
                                        f"[{lg.log_start_offset}, {lg.log_end_offset}]")
    commit_offsets(broker, group_id, offsets)


def delete_group(broker: Broker, group_id: str) -> None:
    """Delete the group: a tombstone for each committed offset and, last, one for its metadata.

    Raises GroupIdNotFoundError when the group has neither offsets nor metadata.
    """
    loaded = _read_log_dirs(broker.log_manager.log_dirs, group_id)
    if not loaded.has_group(group_id):
        raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
    BrokerGroupStore(broker).append_tombstones(group_id, loaded.offsets.get(group_id, {}), group=True)


def committed_offsets(broker: Broker, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
    """The group's offsets, read from the files of the broker's own log directories."""
    return dict(_read_log_dirs(broker.log_manager.log_dirs, group_id).offsets.get(group_id, {}))


# --- reading (files only, no lock) ----------------------------------------------


def _offsets_partition_count(fs: AbstractFileSystem, root: str, listed: Mapping[int, str]) -> int:
    """The offsets topic's partition count: from seglog's topic store, else from the directories found."""
    try:
        topic = read_topics(fs, root).get(OFFSETS_TOPIC)
    except ValueError as exc:
        log.warning("counting partition directories instead: %s", exc)
        topic = None
    if topic is not None:
        return topic.partitions
    # A Kafka log directory has no topic store; on one broker it holds every partition.
    return max(listed) + 1 if listed else DEFAULT_OFFSETS_TOPIC_PARTITIONS


def _replay_partition(fs: AbstractFileSystem, directory: str, partition: int, replay: OffsetsTopicReplay) -> None:
    next_offset = 0
    for attempt in range(_MAX_RELISTS):
        segments = log_dir.segments(fs, directory, swapped=True)
        try:
            for i, segment in enumerate(segments):
                if i + 1 < len(segments) and segments[i + 1].base_offset <= next_offset:
                    continue  # read already
                records = FileRecords.open_fs(fs, join(fs, directory, segment.file_name), segment.size)
                try:
                    for batch in records.batches():
                        if batch.header.last_offset < next_offset:
                            continue
                        replay.replay_batch(partition, batch, next_offset)
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


def _replay_root(fs: AbstractFileSystem, root: str, replay: OffsetsTopicReplay) -> None:
    listed = {tp.partition: join(fs, root, layout.partition_dir_name(tp))
              for tp in log_dir.partitions(fs, root) if tp.topic == OFFSETS_TOPIC}
    if replay.group_id is not None:
        wanted = partition_for_group(replay.group_id, _offsets_partition_count(fs, root, listed))
        listed = {wanted: listed[wanted]} if wanted in listed else {}
    for partition in sorted(listed):
        _replay_partition(fs, listed[partition], partition, replay)


def read_offsets_topic(fs: AbstractFileSystem | None, root: str, group_id: str | None = None,
                       storage_options: Mapping[str, object] | None = None) -> LoadedGroups:
    """Replay ``__consumer_offsets`` in the log directory ``root`` (only the group's partition when given).

    With ``fs`` None, ``root`` is a path or URL (``s3://...``) opened with ``storage_options``.
    """
    if fs is None:
        fs, root = filesystem_for(root, storage_options)
    replay = OffsetsTopicReplay(group_id)
    _replay_root(fs, root, replay)
    return replay.result()


def read_committed_offsets(fs: AbstractFileSystem | None, root: str, group_id: str | None = None,
                           storage_options: Mapping[str, object] | None = None
                           ) -> Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]]:
    """Every group's committed offsets in the log directory ``root`` (or only ``group_id``'s), from the files."""
    return read_offsets_topic(fs, root, group_id, storage_options).offsets


def _as_list(log_dirs: str | Iterable[str]) -> list[str]:
    return [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)


def _read_log_dirs(log_dirs: str | Iterable[str], group_id: str | None = None,
                   storage_options: Mapping[str, object] | None = None) -> LoadedGroups:
    # A broker spreads partitions over its log dirs; each lives in exactly one.
    replay = OffsetsTopicReplay(group_id)
    for url in _as_list(log_dirs):
        fs, root = filesystem_for(url, storage_options)
        _replay_root(fs, root, replay)
    return replay.result()


def list_groups(url: str | Sequence[str], storage_options: Mapping[str, object] | None = None) -> list[str]:
    """The groups with committed offsets or live metadata in a log directory (or several), sorted."""
    return _read_log_dirs(url, None, storage_options).group_ids


def _log_end_offset(roots: Sequence[tuple[AbstractFileSystem, str]], tp: TopicPartition) -> int | None:
    """The partition's log end offset from whichever log directory holds it; None when none does."""
    for fs, root in roots:
        directory = join(fs, root, layout.partition_dir_name(tp))
        for attempt in range(_MAX_RELISTS):
            segments = log_dir.segments(fs, directory)
            if not segments:
                break
            try:
                return log_dir.log_end_offset(fs, directory, segments)
            except FileNotFoundError:
                if attempt + 1 == _MAX_RELISTS:
                    raise
    return None


def member_assignment(group_id: str, member_id: str, protocol_type: str,
                      assignment: bytes | None) -> tuple[TopicPartition, ...]:
    """A member's assigned partitions: decoded for a consumer group, none for another protocol, for a member
    not assigned yet, or (with a warning) for an assignment that cannot be read."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not assignment:
        return ()
    try:
        return tuple(decode_assignment(assignment))
    except ProtocolError as exc:
        log.warning("group %r: member %s has an assignment that cannot be read: %s", group_id, member_id, exc)
        return ()


def lag_rows(group_id: str, committed: Mapping[TopicPartition, int], members: Sequence[GroupMember],
             end_offset: Callable[[TopicPartition], int | None]) -> tuple[PartitionLag, ...]:
    """A row per partition the group committed or a member owns, by topic and partition, its end offset
    from ``end_offset`` (None where unknown)."""
    return tuple(PartitionLag(group_id, tp.topic, tp.partition, committed.get(tp), end_offset(tp))
                 for tp in sorted(set(committed) | {tp for m in members for tp in m.assignment}))


def group_members(group_id: str, value: GroupMetadataValue | None) -> tuple[GroupMember, ...]:
    """The members of a stored generation, with their assignments decoded for consumer groups."""
    if value is None:
        return ()
    return tuple(GroupMember(m.member_id, m.client_id, m.client_host, m.group_instance_id,
                             member_assignment(group_id, m.member_id, value.protocol_type, m.assignment))
                 for m in value.members)


def describe_consumer_group(log_dirs: str | Sequence[str], group_id: str,
                            storage_options: Mapping[str, object] | None = None) -> GroupDescription:
    """The group as its last stored generation left it (members, assignments) with offsets and lag.

    Read from the files: with no broker running (or beside one) this shows the
    generation last written to ``__consumer_offsets``. Raises
    GroupIdNotFoundError when the group has neither offsets nor metadata.
    """
    dirs = _as_list(log_dirs)
    loaded = _read_log_dirs(dirs, group_id, storage_options)
    if not loaded.has_group(group_id):
        raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
    value = loaded.groups.get(group_id)
    members = group_members(group_id, value)
    committed = {tp: o.offset for tp, o in loaded.offsets.get(group_id, {}).items()}
    roots = [filesystem_for(url, storage_options) for url in dirs]
    rows = lag_rows(group_id, committed, members, lambda tp: _log_end_offset(roots, tp))
    # A stored generation with members was Stable when written; one without is Empty.
    state = "Stable" if members else "Empty"
    return GroupDescription(group_id, state, value.protocol_type if value else "", value.protocol if value else None,
                            members, rows)
