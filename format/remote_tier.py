"""The remote tier's layout: where a partition's tiered segments live in object storage, and the metadata
that says which of them are complete (KIP-405's remote log segments, on any fsspec filesystem).

A remote tier is a URL (``remote.storage.url``, e.g. ``s3://bucket/prefix``). Each partition of a topic has a
directory named for the topic, its topic id and the partition (``orders-<topic id>/3``, as Kafka's
``LocalTieredStorage`` names it), and each copied segment a set of objects named for its base offset and its
segment id (a random UUID, so a copy started again after a crash never overwrites an earlier one)::

    <url>/<topic>-<topic id>/<partition>/<base offset, 20 digits>-<segment id>.log
                                                                         .index
                                                                         .timeindex
                                                                         .txnindex          (when any)
                                                                         .snapshot          (producer state)
                                                                         .leader_epoch_checkpoint
                                                                         .metadata.json

The ``.metadata.json`` object is the segment's remote log metadata (Kafka's ``RemoteLogSegmentMetadata``):
offsets, sizes, leader epochs and its **state**, one of Kafka's ``COPY_SEGMENT_STARTED``,
``COPY_SEGMENT_FINISHED``, ``DELETE_SEGMENT_STARTED``, ``DELETE_SEGMENT_FINISHED``. Kafka keeps these records
in its ``__remote_log_metadata`` topic; seglog keeps each segment's latest record next to its data, so that
the tier describes itself: a reader with only the URL (Spark's tasks, ``seglog dump``) lists the partition's
metadata objects and knows every complete segment without a broker. An object store writes one object
atomically, so each state change is one PUT of the metadata object:

- copying: metadata ``COPY_SEGMENT_STARTED`` first, then the data and index objects, then the metadata again
  as ``COPY_SEGMENT_FINISHED`` — only then does the segment exist for readers and may its local copy go;
- deleting: metadata ``DELETE_SEGMENT_STARTED`` first (readers stop using it), then the data and index
  objects, then the metadata object itself (``DELETE_SEGMENT_FINISHED`` leaves nothing behind).

A crash between the steps leaves a segment in a ``..._STARTED`` state, which the next owner finds and finishes:
a copy started is removed (its objects deleted, the segment copied again under a new segment id), a delete
started is completed. Objects with no metadata at all are orphans of a copy that crashed before its first
PUT landed, and are removed too.

Segments may overlap: after a leader change the new leader's segment boundaries can differ from the old
leader's (truncation on divergence, ``segment.jitter.ms``), so its first copied segment can start below the
end of the last one copied (remote ``[0, 99]``, then ``[80, 150]``). ``serving_segments`` says which segment
serves each offset, for every reader (the broker's ``RemoteLogReader``, ``tiered_log``): the earliest holding
it, each segment from past the end of the one before.

Pure: names, the metadata codec, the serving segments, and ``list_segments`` reading the metadata objects
through an fsspec filesystem.
"""

from __future__ import annotations

import bisect
import enum
import json
import uuid
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

from fsspec import AbstractFileSystem

from .errors import CorruptRecordError

__all__ = [
    "RemoteLogSegmentState", "RemoteLogSegmentMetadata", "SEGMENT_SUFFIXES", "METADATA_SUFFIX",
    "partition_path", "segment_object", "new_segment_id", "encode_metadata", "decode_metadata", "read_metadata",
    "list_segments", "ServingSegment", "serving_segments", "serving_index",
    "REMOTE_TIER_FILE",
]

#: The file in a broker's log dir naming its remote tier (the URL only: credentials never go to disk), so that a
#: reader given the log dir alone finds the tier.
REMOTE_TIER_FILE = "remote-tier.properties"

#: The suffixes of a remote segment's data and index objects.
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader_epoch_checkpoint")
METADATA_SUFFIX = ".metadata.json"


class RemoteLogSegmentState(enum.Enum):
    """Kafka's ``RemoteLogSegmentState``, with its ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


@dataclass(frozen=True)
class RemoteLogSegmentMetadata:
    """One remote segment (Kafka's ``RemoteLogSegmentMetadata``): offsets ``base_offset..end_offset``
    (inclusive), the largest timestamp, the bytes of its ``.log``, the leader epochs that start in it
    (epoch -> start offset), the broker that wrote the state, and when."""

    topic: str
    topic_id: str
    partition: int
    segment_id: str
    base_offset: int
    end_offset: int
    max_timestamp_ms: int
    size_in_bytes: int
    state: RemoteLogSegmentState
    broker_id: int
    event_timestamp_ms: int
    segment_leader_epochs: Mapping[int, int] = field(default_factory=dict)
    #: The suffixes of the objects the copy wrote (a segment with no transactions has no ``.txnindex``).
    objects: tuple[str, ...] = SEGMENT_SUFFIXES

    def with_state(self, state: RemoteLogSegmentState, broker_id: int, event_timestamp_ms: int
                   ) -> RemoteLogSegmentMetadata:
        return replace(self, state=state, broker_id=broker_id, event_timestamp_ms=event_timestamp_ms)

    @property
    def name(self) -> str:
        """The stem of its objects: ``<base offset, 20 digits>-<segment id>``."""
        return f"{self.base_offset:020d}-{self.segment_id}"


def new_segment_id() -> str:
    return str(uuid.uuid4())


def partition_path(url: str, topic: str, topic_id: str, partition: int) -> str:
    """The directory of ``topic``-``partition`` under the remote tier ``url``."""
    return f"{url.rstrip('/')}/{topic}-{topic_id}/{partition}"


def segment_object(url: str, metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
    """The path of one of a remote segment's objects (``suffix`` one of ``SEGMENT_SUFFIXES`` or
    ``METADATA_SUFFIX``)."""
    return (f"{partition_path(url, metadata.topic, metadata.topic_id, metadata.partition)}/"
            f"{metadata.name}{suffix}")


def encode_metadata(metadata: RemoteLogSegmentMetadata) -> bytes:
    return json.dumps({
        "version": 1, "topic": metadata.topic, "topic_id": metadata.topic_id, "partition": metadata.partition,
        "segment_id": metadata.segment_id, "base_offset": metadata.base_offset, "end_offset": metadata.end_offset,
        "max_timestamp_ms": metadata.max_timestamp_ms, "size_in_bytes": metadata.size_in_bytes,
        "state": metadata.state.name, "broker_id": metadata.broker_id,
        "event_timestamp_ms": metadata.event_timestamp_ms,
        "segment_leader_epochs": {str(e): o for e, o in sorted(metadata.segment_leader_epochs.items())},
        "objects": list(metadata.objects),
    }, sort_keys=True).encode()


def decode_metadata(data: bytes, where: str) -> RemoteLogSegmentMetadata:
    """The metadata in ``data``; CorruptRecordError naming ``where`` if it is not one."""
    try:
        d = json.loads(data)
        return RemoteLogSegmentMetadata(
            d["topic"], d["topic_id"], int(d["partition"]), d["segment_id"], int(d["base_offset"]),
            int(d["end_offset"]), int(d["max_timestamp_ms"]), int(d["size_in_bytes"]),
            RemoteLogSegmentState[d["state"]], int(d["broker_id"]), int(d["event_timestamp_ms"]),
            {int(e): int(o) for e, o in d.get("segment_leader_epochs", {}).items()},
            tuple(d.get("objects", SEGMENT_SUFFIXES)))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptRecordError(f"{where}: not remote log segment metadata: {exc}") from None


def read_metadata(fs: AbstractFileSystem, name: str) -> RemoteLogSegmentMetadata | None:
    """The metadata object ``name`` as it is now; None when it is gone (a delete finished since it was listed).
    Read whole rather than opened: an object opened from a listing is held to the listed version, and a state
    change (a new PUT) since then would fail the read."""
    try:
        return decode_metadata(fs.cat_file(name), name)
    except FileNotFoundError:
        return None


def list_segments(fs: AbstractFileSystem, url: str, topic: str, topic_id: str, partition: int
                  ) -> list[RemoteLogSegmentMetadata]:
    """Every remote segment of the partition with its latest metadata, in base offset order (all states:
    readers keep ``COPY_SEGMENT_FINISHED`` ones)."""
    directory = partition_path(url, topic, topic_id, partition)
    try:
        names = fs.ls(directory, detail=False)
    except FileNotFoundError:
        return []
    found = [m for m in (read_metadata(fs, n) for n in sorted(names) if n.endswith(METADATA_SUFFIX)) if m is not None]
    return sorted(found, key=lambda m: (m.base_offset, m.event_timestamp_ms))


@dataclass(frozen=True)
class ServingSegment:
    """A complete remote segment as readers serve it: the offsets of ``metadata`` from ``start_offset`` (its
    base offset, or the offset past the end of the segment before, which it overlaps) to its end offset."""

    metadata: RemoteLogSegmentMetadata
    start_offset: int

    @property
    def end_offset(self) -> int:
        return self.metadata.end_offset


def serving_segments(listed: Iterable[RemoteLogSegmentMetadata]) -> list[ServingSegment]:
    """The ``COPY_SEGMENT_FINISHED`` segments of ``listed`` that serve reads, in offset order, so that every
    offset a complete segment holds is served by exactly one: the earliest segment holding it (the longest of
    those starting at the same offset, then the first copied). A segment overlapping the one before serves from
    past that one's end; one holding nothing past it (contained in it, a duplicate) serves nothing and is left
    out. Offsets no segment holds stay a gap: the next segment serves from its own base offset."""
    finished = sorted((m for m in listed if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED),
                      key=lambda m: (m.base_offset, -m.end_offset, m.event_timestamp_ms, m.segment_id))
    out: list[ServingSegment] = []
    for m in finished:
        served_until = out[-1].end_offset if out else -1
        if m.end_offset > served_until:
            out.append(ServingSegment(m, max(m.base_offset, served_until + 1)))
    return out


def serving_index(serving: Sequence[ServingSegment], offset: int) -> int | None:
    """The position in ``serving`` (``serving_segments``) of the segment that serves ``offset`` (the next one
    serves from where a read of it must stop); None when no complete segment holds it (below the first, past
    the last, or in a gap between two), where Kafka answers OFFSET_OUT_OF_RANGE."""
    i = bisect.bisect_left(serving, offset, key=_end_offset)
    return i if i < len(serving) and serving[i].start_offset <= offset else None


def _end_offset(segment: ServingSegment) -> int:
    return segment.metadata.end_offset
