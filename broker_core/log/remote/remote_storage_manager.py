"""Kafka's ``RemoteStorageManager`` over fsspec: one remote segment's objects written, read by range and
deleted, and its metadata object put, under ``format.remote_tier``'s names. It decides nothing (the
``RemoteLogManager`` does); every call is one or a few object operations, so a failure between two calls is
a crash point the metadata states make recoverable."""

from __future__ import annotations

import os
from dataclasses import dataclass

from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem

from format import remote_tier
from format.checkpoint import fsync_dir
from format.remote_tier import METADATA_SUFFIX, SEGMENT_SUFFIXES, RemoteLogSegmentMetadata

__all__ = ["LogSegmentData", "RemoteStorageManager", "write_remote_tier_file"]

#: A metadata object being written on a local filesystem, before its rename.
STAGED_SUFFIX = METADATA_SUFFIX + ".tmp"


@dataclass(frozen=True)
class LogSegmentData:
    """The local files of one segment to copy (Kafka's ``LogSegmentData``); the leader-epoch checkpoint is
    the slice of the partition's epochs up to the segment's end, as checkpoint text."""

    log_segment: str
    offset_index: str
    time_index: str
    transaction_index: str | None
    producer_snapshot_index: str | None
    leader_epoch_index: bytes

    def objects(self) -> tuple[str, ...]:
        """The suffixes of the objects a copy of this data writes (no ``.txnindex`` or ``.snapshot`` without
        the file)."""
        return tuple(s for s in SEGMENT_SUFFIXES
                     if not (s == ".txnindex" and self.transaction_index is None)
                     and not (s == ".snapshot" and self.producer_snapshot_index is None))

    def _source(self, suffix: str) -> str:
        return {".log": self.log_segment, ".index": self.offset_index, ".timeindex": self.time_index,
                ".txnindex": self.transaction_index, ".snapshot": self.producer_snapshot_index}[suffix]


def write_remote_tier_file(log_dir: str, url: str) -> None:
    """Record in ``log_dir`` where its remote tier lives (the URL only), for readers given the log dir."""
    path = os.path.join(log_dir, remote_tier.REMOTE_TIER_FILE)
    # Java's Properties.load takes ':' and '=' after the first separator as they are: the URL goes unescaped,
    # so that the simplest key=value reader gets it whole too.
    text = f"remote.storage.url={url}\n"
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(log_dir)


class RemoteStorageManager:
    """The remote tier at ``url`` through ``fs`` (an fsspec filesystem; tests give one that fails on cue)."""

    def __init__(self, fs: AbstractFileSystem, url: str):
        self.fs = fs
        self.url = url.rstrip("/")

    def __repr__(self) -> str:
        return f"RemoteStorageManager({self.url})"

    def _path(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        return self.fs._strip_protocol(remote_tier.segment_object(self.url, metadata, suffix))

    def put_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """One PUT of the segment's metadata object: each state change is atomic. An object store's PUT
        is; on a local filesystem the object is written beside its name and renamed, so that a reader
        listing the partition meanwhile never sees it half-written."""
        path = self._path(metadata, METADATA_SUFFIX)
        data = remote_tier.encode_metadata(metadata)
        self.fs.makedirs(path.rpartition("/")[0], exist_ok=True)  # a local tier needs the directory; S3 not
        if not isinstance(self.fs, LocalFileSystem):
            self.fs.pipe_file(path, data)
            return
        staged = path + STAGED_SUFFIX  # not a metadata name: listings skip it, start-up removes it (remove_orphans)
        self.fs.pipe_file(staged, data)
        self.fs.mv(staged, path)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> None:
        """PUT the segment's data and index objects (those ``metadata.objects`` names)."""
        for suffix in metadata.objects:
            target = self._path(metadata, suffix)
            if suffix == ".leader_epoch_checkpoint":
                self.fs.pipe_file(target, data.leader_epoch_index)
            else:
                self.fs.put_file(data._source(suffix), target)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None, suffix: str = ".log") -> bytes:
        """Bytes ``start_position`` up to ``end_position`` (exclusive; None: the end) of one of the segment's
        objects, by a range read."""
        return self.fs.cat_file(self._path(metadata, suffix), start=start_position, end=end_position)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete the segment's data and index objects; those already gone are fine (a delete resumed)."""
        for suffix in SEGMENT_SUFFIXES:
            self._remove(self._path(metadata, suffix))

    def delete_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        self._remove(self._path(metadata, METADATA_SUFFIX))

    def _remove(self, path: str) -> None:
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def list_segments(self, topic: str, topic_id: str, partition: int) -> list[RemoteLogSegmentMetadata]:
        """The partition's remote segments as their metadata objects say, every state."""
        self.fs.invalidate_cache(self.fs._strip_protocol(remote_tier.partition_path(self.url, topic, topic_id,
                                                                                     partition)))
        return remote_tier.list_segments(self.fs, self.url, topic, topic_id, partition)

    def remove_orphans(self, topic: str, topic_id: str, partition: int) -> list[str]:
        """Delete the partition's objects that belong to no metadata object (a copy that crashed before its
        first PUT landed), and metadata staged but never renamed (a PUT that crashed on a local filesystem);
        returns their paths."""
        directory = self.fs._strip_protocol(remote_tier.partition_path(self.url, topic, topic_id, partition))
        self.fs.invalidate_cache(directory)
        try:
            listed = self.fs.ls(directory, detail=False)
        except FileNotFoundError:
            return []
        # Some stores (SeaweedFS) list the directory itself once it is empty.
        names = [n for n in listed if n.rstrip("/") != directory.rstrip("/")]
        described = {n[:-len(METADATA_SUFFIX)] for n in names if n.endswith(METADATA_SUFFIX)}
        orphans = [n for n in names if n.endswith(STAGED_SUFFIX)
                   or not n.endswith(METADATA_SUFFIX) and _stem(n) not in described]
        for name in orphans:
            self._remove(name)
        return orphans


def _stem(path: str) -> str:
    directory, _, name = path.rpartition("/")
    return f"{directory}/{name.split('.', 1)[0]}"
