"""A log directory read across both tiers: the partition's complete remote segments (``remote_tier``) below
its local ones, so that an offset range is read from whichever tier holds it, with no broker.

The log dir names its remote tier in ``remote-tier.properties`` (``remote.storage.url``, never credentials);
the reader brings the storage options (endpoint, keys) itself, or names the tier directly when the log dir
does not (``remote_storage_url``). A partition's remote directory is named by its topic id, read from the
partition's ``partition.metadata`` as Kafka's text form (``Uuid.toString``: URL-safe base64, no padding).

Only ``COPY_SEGMENT_FINISHED`` segments are read, each offset from the one segment that serves it
(``remote_tier.serving_segments``: remote segments may overlap after a leader change). A segment copied but
not yet deleted locally is in both tiers: the local copy is read, so the remote segments kept are those
starting below the first local one. Each segment of ``segments`` is read from its ``base_offset`` up to the
next one's: for a remote segment, the first offset it serves, which is past its own base offset when it
overlaps the segment before (its metadata, ``SegmentInfo.remote``, keeps the base offset of its objects).
Remote segments are read as local ones are (``SegmentReader``), by range reads through fsspec, starting from
their offset index.
"""

from __future__ import annotations

from typing import Mapping

from . import remote_tier
from .fs import filesystem_for, join
from .layout import TopicPartition
from .log_dir import LogDirectory, SegmentInfo, read_topic_id
from .properties import parse_properties
from .remote_tier import REMOTE_TIER_FILE, RemoteLogSegmentMetadata, ServingSegment, serving_segments
from .segment_reader import SegmentReader

__all__ = ["TieredLogDirectory", "REMOTE_STORAGE_URL", "read_remote_storage_url"]

#: The key of ``remote-tier.properties`` naming the tier (the broker config of the same name).
REMOTE_STORAGE_URL = "remote.storage.url"


def read_remote_storage_url(fs, root: str) -> str | None:
    """The remote tier the log dir ``root`` names in ``remote-tier.properties``; None when it has none."""
    path = join(fs, root, REMOTE_TIER_FILE)
    try:
        text = fs.cat_file(path).decode("utf-8")
    except FileNotFoundError:
        return None
    return parse_properties(text).get(REMOTE_STORAGE_URL) or None


class TieredLogDirectory(LogDirectory):
    """A log directory whose partitions' segments include those of its remote tier.

    ``remote_storage_options`` are the fsspec options of the remote tier (endpoint, keys);
    ``remote_storage_url`` names the tier when the log dir does not."""

    def __init__(self, url: str, storage_options: Mapping | None = None, *,
                 remote_storage_url: str | None = None, remote_storage_options: Mapping | None = None):
        super().__init__(url, storage_options)
        self.remote_storage_options = dict(remote_storage_options or {})
        self._remote_storage_url = remote_storage_url
        self._tier_looked_up = False
        self._remote_fs = None
        # Decoded metadata objects by (name, version, size): an object rewritten (a new state) is read again.
        self._metadata: dict[tuple, RemoteLogSegmentMetadata] = {}

    @property
    def remote_storage_url(self) -> str | None:
        if not self._tier_looked_up:  # once per reader: a tier named later is found by the next one
            if self._remote_storage_url is None:
                self._remote_storage_url = read_remote_storage_url(self.fs, self.root)
            self._tier_looked_up = True
        return self._remote_storage_url

    @property
    def remote_fs(self):
        if self._remote_fs is None:
            self._remote_fs, _ = filesystem_for(self.remote_storage_url, self.remote_storage_options)
        return self._remote_fs

    def remote_segments(self, tp: TopicPartition) -> list[ServingSegment]:
        """The partition's complete remote segments serving reads, in offset order (``serving_segments``;
        none without a tier or a topic id)."""
        url = self.remote_storage_url
        if url is None:
            return []
        topic_id = read_topic_id(self.fs, self.partition_dir(tp))
        if topic_id is None:
            return []
        return serving_segments(self._list_metadata(remote_tier.partition_path(url, tp.topic, topic_id,
                                                                               tp.partition)))

    def _list_metadata(self, directory: str) -> list[RemoteLogSegmentMetadata]:
        """``remote_tier.list_segments`` of one partition directory, reading again only the metadata objects
        that changed since the last listing (a task walks a partition segment by segment, listing each time)."""
        fs = self.remote_fs
        fs.invalidate_cache(directory)
        try:
            entries = fs.ls(directory, detail=True)
        except FileNotFoundError:
            return []
        found = []
        for entry in entries:
            name = entry["name"]
            if not name.endswith(remote_tier.METADATA_SUFFIX):
                continue
            stamp = entry.get("ETag") or entry.get("LastModified") or entry.get("mtime")
            version = (name, stamp, entry.get("size"))
            metadata = self._metadata.get(version) if stamp is not None else None
            if metadata is None:
                metadata = remote_tier.read_metadata(fs, name)
                if metadata is None:
                    continue  # deleted since the listing
                self._metadata[version] = metadata
            found.append(metadata)
        return sorted(found, key=lambda m: (m.base_offset, m.event_timestamp_ms))

    def segments(self, tp: TopicPartition) -> list[SegmentInfo]:
        local = super().segments(tp)
        first_local = local[0].base_offset if local else None
        remote = [SegmentInfo(s.start_offset, s.metadata.size_in_bytes, remote=s.metadata)
                  for s in self.remote_segments(tp) if first_local is None or s.start_offset < first_local]
        return remote + local

    def location(self, tp: TopicPartition, segment: SegmentInfo) -> str:
        """Where the segment's ``.log`` is: an object of the remote tier, or a file of the log dir."""
        if segment.remote is None:
            return super().location(tp, segment)
        return remote_tier.segment_object(self.remote_storage_url, segment.remote, ".log")

    def reader(self, tp: TopicPartition, segment: SegmentInfo) -> SegmentReader:
        if segment.remote is None:
            return super().reader(tp, segment)
        m = segment.remote
        url = self.remote_storage_url
        _, directory = filesystem_for(remote_tier.partition_path(url, m.topic, m.topic_id, m.partition),
                                      self.remote_storage_options)
        return SegmentReader(self.remote_fs, directory, m.base_offset, m.size_in_bytes, stem=m.name)
