"""Names on disk: topics, partition directories, segment files and checkpoints.

This module owns every rule about what a log directory looks like, so that a
directory written by Kafka reads here and the other way round:

* topic names follow Kafka's rules (``[a-zA-Z0-9._-]``, at most 249 chars,
  neither ``.`` nor ``..``); ``__consumer_offsets`` and ``__transaction_state``
  are Kafka's internal topics;
* a partition lives in ``<topic>-<partition>``; a partition being deleted is
  renamed to ``<topic>-<partition>.<uuidhex>-delete``, one being moved to
  another log dir is built in ``...-future``, one found orphaned is
  ``...-stray``;
* segment files are named by their base offset, zero-padded to 20 digits,
  with a suffix per file kind and an optional transient suffix
  (``.deleted``, ``.cleaned``, ``.swap``) while a file is on its way in or out;
  bytes recovery had to cut are moved into ``<file>.<position>.corrupt``, which
  no loader or reader takes for a segment;
* the broker-wide and per-partition checkpoint files have fixed names.

Paths are joined with ``posixpath`` so the same helpers serve local
directories and fsspec URLs such as ``s3://bucket/log/topic-0``.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

from format.errors import InvalidTopicError

# --- topics ---------------------------------------------------------------

# 249 rather than 255: the partition directory name appends "-<partition>"
# and, while a replica moves between log dirs, a ".<uuid>-future" suffix,
# and the whole name must fit a 255-byte file name.
MAX_TOPIC_NAME_LENGTH = 249

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicError unless ``name`` is a legal Kafka topic name."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"Topic name {name!r} is illegal, it cannot be '.' or '..'")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, "
            f"it has {len(name)}: {name!r}"
        )
    if _LEGAL_TOPIC.fullmatch(name) is None:
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


# Kafka's internal topics: the group coordinator's and the transaction coordinator's state.
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
# Kafka's KRaft metadata log (one partition) in a log dir Apache Kafka wrote: no topic of the cluster's.
CLUSTER_METADATA_TOPIC_NAME = "__cluster_metadata"


def is_valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidTopicError:
        return False
    return True


def has_collision_chars(name: str) -> bool:
    """True if the name holds '.' or '_', which collide in metric names."""
    return "." in name or "_" in name


def unify_collision_chars(name: str) -> str:
    """The form two colliding topic names share ('.' replaced by '_')."""
    return name.replace(".", "_")


def has_collision(name_a: str, name_b: str) -> bool:
    """True if two topic names would collide in metric names (e.g. 'a.b' and 'a_b')."""
    return unify_collision_chars(name_a) == unify_collision_chars(name_b)


@dataclass(frozen=True, order=True)
class TopicPartition:
    """One partition of one topic; ``str()`` gives Kafka's ``topic-partition``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


# --- partition directories ------------------------------------------------

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

# "<topic>-<partition>.<unique id><suffix>"; the unique id is a UUID without
# dashes. Kafka accepts any non-blank id here, and so do we.
_DELETE_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(DELETE_DIR_SUFFIX) + "$")
_FUTURE_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(FUTURE_DIR_SUFFIX) + "$")
_STRAY_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)" + re.escape(STRAY_DIR_SUFFIX) + "$")

# Longest file name most filesystems accept; suffixed dir names are capped to it.
_MAX_FILE_NAME_LENGTH = 255


def partition_dir_name(tp: TopicPartition) -> str:
    """The directory holding one partition's segments: ``<topic>-<partition>``."""
    return str(tp)


def is_deleted_dir(name: str) -> bool:
    """A partition directory renamed for asynchronous deletion."""
    return _DELETE_DIR.match(name) is not None


def is_future_dir(name: str) -> bool:
    """A partition directory being built by a move between log dirs."""
    return _FUTURE_DIR.match(name) is not None


def is_stray_dir(name: str) -> bool:
    """A partition directory the broker no longer hosts, set aside for deletion."""
    return _STRAY_DIR.match(name) is not None


def _suffixed_dir_name(tp: TopicPartition, unique_id: str, suffix: str) -> str:
    # The topic is cut so the whole name stays a legal file name; the result is
    # only ever recognised by its suffix, never parsed back into a topic.
    tail = f"-{tp.partition}.{unique_id}{suffix}"
    return tp.topic[: _MAX_FILE_NAME_LENGTH - len(tail)] + tail


def deleted_dir_name(tp: TopicPartition, unique_id: str) -> str:
    """``<topic>-<partition>.<unique_id>-delete``; ``unique_id`` is a dashless UUID hex."""
    return _suffixed_dir_name(tp, unique_id, DELETE_DIR_SUFFIX)


def future_dir_name(tp: TopicPartition, unique_id: str) -> str:
    """``<topic>-<partition>.<unique_id>-future``."""
    return _suffixed_dir_name(tp, unique_id, FUTURE_DIR_SUFFIX)


def parse_partition_dir(name: str) -> TopicPartition:
    """The partition a live partition directory holds, e.g. "my-topic-12".

    The topic may itself contain '-', so the name splits on the last one.
    Deleted, future and stray directories are refused (use ``is_deleted_dir``
    and friends to recognise them): their topic may have been shortened.
    """
    name = os.path.basename(os.fspath(name).rstrip("/"))
    if is_deleted_dir(name) or is_future_dir(name) or is_stray_dir(name):
        raise ValueError(f"{name!r} is a deleted, future or stray partition directory, not a live partition")
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition:
        raise ValueError(f"{name!r} is not a partition directory of the form <topic>-<partition>")
    if not (partition.isascii() and partition.isdigit()):
        raise ValueError(f"{name!r} is not a partition directory: partition {partition!r} is not a number")
    try:
        validate_topic_name(topic)
    except InvalidTopicError as e:
        raise ValueError(f"{name!r} is not a partition directory: {e}") from None
    return TopicPartition(topic, int(partition))


# --- segment files --------------------------------------------------------

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"

# A file scheduled for deletion, the output of the cleaner, and a cleaned file
# waiting to be swapped in; recovery acts on each differently.
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"
TRANSIENT_FILE_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)

# Bytes recovery could not use: moved out of a segment, never deleted, and
# ignored by every loader and reader (see ``set_aside_file_name``).
SET_ASIDE_FILE_SUFFIX = ".corrupt"

_OFFSET_DIGITS = 20


def filename_prefix_from_offset(offset: int) -> str:
    """The base offset, zero-padded to 20 digits so names sort as offsets do."""
    if offset < 0:
        raise ValueError(f"offset {offset} is negative; segment files are named by non-negative offsets")
    return f"{offset:0{_OFFSET_DIGITS}d}"


def log_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + LOG_FILE_SUFFIX


def offset_index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + INDEX_FILE_SUFFIX


def time_index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + TIME_INDEX_FILE_SUFFIX


def txn_index_file_name(base_offset: int) -> str:
    return filename_prefix_from_offset(base_offset) + TXN_INDEX_FILE_SUFFIX


def producer_snapshot_file_name(offset: int) -> str:
    return filename_prefix_from_offset(offset) + PRODUCER_SNAPSHOT_FILE_SUFFIX


def offset_from_file_name(name: str) -> int:
    """The offset a segment file is named by, whatever its suffixes.

    "00000000000000000123.log.deleted" gives 123. A directory part is ignored.
    """
    base = posixpath.basename(os.fspath(name))
    prefix, _, _ = base.partition(".")
    if not (prefix.isascii() and prefix.isdigit()):
        raise ValueError(f"{name!r} is not named by an offset")
    return int(prefix)


def strip_transient_suffix(name: str) -> str:
    """``name`` without a trailing ``.deleted``, ``.cleaned`` or ``.swap``."""
    for suffix in TRANSIENT_FILE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def set_aside_file_name(name: str, position: int, attempt: int = 0) -> str:
    """Where recovery moves the bytes of segment file ``name`` from ``position`` on:
    ``<name>.<position>.corrupt`` (``00000000000000001200.log.4840.corrupt``), with
    ``-<attempt>`` after the position when an earlier recovery took that name."""
    tag = f"{position}" if attempt == 0 else f"{position}-{attempt}"
    return f"{name}.{tag}{SET_ASIDE_FILE_SUFFIX}"


def is_set_aside_file_name(name: str) -> bool:
    return name.endswith(SET_ASIDE_FILE_SUFFIX)


def set_aside_source_name(name: str) -> str:
    """The segment file a set-aside file came from: ``X.log.4840.corrupt`` gives ``X.log``."""
    if not is_set_aside_file_name(name):
        return name
    return name[: -len(SET_ASIDE_FILE_SUFFIX)].rsplit(".", 1)[0]


def is_log_file_name(name: str) -> bool:
    return name.endswith(LOG_FILE_SUFFIX)


def is_index_file_name(name: str) -> bool:
    """An offset, time or transaction index (with no transient suffix)."""
    return name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))


@dataclass(frozen=True)
class SegmentFiles:
    """The four files of the segment starting at ``base_offset`` in ``dir``.

    ``dir`` may be a local path or an fsspec URL; the paths are strings.
    """

    dir: str
    base_offset: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "dir", os.fspath(self.dir))
        filename_prefix_from_offset(self.base_offset)  # rejects a negative offset early

    def _path(self, name: str) -> str:
        return posixpath.join(self.dir, name)

    @property
    def log(self) -> str:
        return self._path(log_file_name(self.base_offset))

    @property
    def offset_index(self) -> str:
        return self._path(offset_index_file_name(self.base_offset))

    @property
    def time_index(self) -> str:
        return self._path(time_index_file_name(self.base_offset))

    @property
    def txn_index(self) -> str:
        return self._path(txn_index_file_name(self.base_offset))

    def all(self) -> tuple[str, str, str, str]:
        """log, offset index, time index, transaction index, in that order."""
        return (self.log, self.offset_index, self.time_index, self.txn_index)


# --- checkpoints and markers ----------------------------------------------

# In each log dir, for all its partitions:
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
META_PROPERTIES_FILE = "meta.properties"
# Written by a broker whose logs are replicas of replicated partitions (cluster mode), removed by a single
# broker: readers of the files stop at the high watermarks of ``replication-offset-checkpoint`` while it is
# there, and at the log end (every record a single broker holds is committed) while it is not.
REPLICATED_MARKER_FILE = ".seglog_replicated"
LOCK_FILE = ".lock"
# Written on clean shutdown; without it the next start rebuilds the indexes of
# the segments after the recovery point, since they may be torn.
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

# In each partition dir:
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
