"""A tiered log dir built by hand, as the remote log manager leaves it: the older closed segments of a
topic copied to a remote tier (``format.remote_tier``'s layout and metadata) and deleted locally, the log dir
naming its tier in ``remote-tier.properties`` and its log start offset still the earliest remote one."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from format import layout, remote_tier
from format.checkpoint import render_offset_checkpoint
from format.fs import filesystem_for
from format.log_dir import read_offset_checkpoint, read_topic_id, segments
from format.remote_tier import RemoteLogSegmentMetadata, RemoteLogSegmentState
from format.segment_reader import SegmentReader
from format.tiered_log import REMOTE_STORAGE_URL

EVENT_MS = 1_767_225_600_000


@dataclass
class TieredPartition:
    """What was tiered of one partition: the remote segments (finished), those also kept locally,
    and the copies left started."""

    finished: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    in_both_tiers: list[RemoteLogSegmentMetadata] = field(default_factory=list)
    started: list[RemoteLogSegmentMetadata] = field(default_factory=list)


def _metadata(fs, directory: str, tp: layout.TopicPartition, topic_id: str, base: int, size: int,
              state: RemoteLogSegmentState) -> RemoteLogSegmentMetadata:
    with SegmentReader(fs, directory, base, size) as reader:
        next_offset = reader.next_offset()
    return RemoteLogSegmentMetadata(tp.topic, topic_id, tp.partition, remote_tier.new_segment_id(), base,
                                    next_offset - 1, -1, size, state, 0, EVENT_MS)


def _put(remote_fs, url: str, m: RemoteLogSegmentMetadata, suffix: str, data: bytes) -> None:
    remote_fs.pipe_file(filesystem_for(remote_tier.segment_object(url, m, suffix))[1], data)


def tier_log_dir(log_dir: str, topic: str, url: str, storage_options: dict, *, keep_local: int = 1,
                 in_both_tiers: int = 1, started: bool = True) -> dict[int, TieredPartition]:
    """Move every closed segment of ``topic``'s partitions but the newest ``keep_local`` to the remote tier
    ``url``; the newest ``in_both_tiers`` of those moved stay on local disk too. With ``started``, the first
    remote segment also has a second copy whose state is COPY_SEGMENT_STARTED, holding bytes that are not
    a segment (a copy that crashed: readers must never use it)."""
    local_fs, root = filesystem_for(log_dir)
    remote_fs, _ = filesystem_for(url, storage_options)
    with open(os.path.join(log_dir, remote_tier.REMOTE_TIER_FILE), "w", encoding="utf-8") as f:
        f.write(f"{REMOTE_STORAGE_URL}={url}\n")
    out = {}
    for name in sorted(os.listdir(log_dir)):
        try:
            tp = layout.parse_partition_dir(name)
        except ValueError:
            continue
        if tp.topic != topic:
            continue
        directory = os.path.join(log_dir, name)
        topic_id = read_topic_id(local_fs, directory)
        assert topic_id is not None, f"{directory} has no partition.metadata"
        closed = segments(local_fs, directory)[:-1]
        moved = closed[:max(0, len(closed) - keep_local)]
        tiered = out[tp.partition] = TieredPartition()
        for i, segment in enumerate(moved):
            m = _metadata(local_fs, directory, tp, topic_id, segment.base_offset, segment.size,
                          RemoteLogSegmentState.COPY_SEGMENT_STARTED)
            _put(remote_fs, url, m, remote_tier.METADATA_SUFFIX, remote_tier.encode_metadata(m))
            stem = layout.filename_prefix_from_offset(segment.base_offset)
            suffixes = []
            for suffix in remote_tier.SEGMENT_SUFFIXES:
                path = os.path.join(directory, stem + suffix)
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        _put(remote_fs, url, m, suffix, f.read())
                    suffixes.append(suffix)
            m = m.with_state(RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 0, EVENT_MS + 1)
            m = RemoteLogSegmentMetadata(**{**m.__dict__, "objects": tuple(suffixes)})
            _put(remote_fs, url, m, remote_tier.METADATA_SUFFIX, remote_tier.encode_metadata(m))
            tiered.finished.append(m)
            if i >= len(moved) - in_both_tiers:
                tiered.in_both_tiers.append(m)
                continue
            for suffix in suffixes:
                os.remove(os.path.join(directory, stem + suffix))
        if started and moved:
            first = tiered.finished[0]
            crashed = RemoteLogSegmentMetadata(**{**first.__dict__, "segment_id": remote_tier.new_segment_id(),
                                                  "state": RemoteLogSegmentState.COPY_SEGMENT_STARTED,
                                                  "event_timestamp_ms": EVENT_MS - 1})
            _put(remote_fs, url, crashed, ".log", b"not a segment: the copy crashed here")
            _put(remote_fs, url, crashed, remote_tier.METADATA_SUFFIX, remote_tier.encode_metadata(crashed))
            tiered.started.append(crashed)
    # The log still starts at its earliest offset, now in the remote tier (Kafka's log start offset).
    path = os.path.join(log_dir, layout.LOG_START_OFFSET_CHECKPOINT_FILE)
    starts = read_offset_checkpoint(local_fs, path)
    for partition, tiered in out.items():
        if tiered.finished:
            starts[layout.TopicPartition(topic, partition)] = tiered.finished[0].base_offset
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_offset_checkpoint(starts, path))
    return out


def recopy_overlapping(url: str, storage_options: dict, before: RemoteLogSegmentMetadata,
                       after: RemoteLogSegmentMetadata) -> RemoteLogSegmentMetadata:
    """What a new leader whose segment boundaries differ from the old leader's leaves in the remote tier: the
    finished segment ``after`` (the one following ``before``) replaced by a copy that starts at the batch in the
    middle of ``before`` and holds ``after``'s offsets too, overlapping ``before`` (a ``.log`` object only,
    read from its start). The new segment's metadata."""
    from format.record_batch import iter_batches

    remote_fs, _ = filesystem_for(url, storage_options)

    def log_of(m: RemoteLogSegmentMetadata) -> bytes:
        return remote_fs.cat_file(filesystem_for(remote_tier.segment_object(url, m, ".log"))[1])

    head = list(iter_batches(log_of(before)))
    middle = head[len(head) // 2]
    data = log_of(before)[middle.position:] + log_of(after)
    batches = list(iter_batches(data))
    assert batches[-1].header.last_offset == after.end_offset
    m = RemoteLogSegmentMetadata(
        after.topic, after.topic_id, after.partition, remote_tier.new_segment_id(), middle.header.base_offset,
        after.end_offset, max(b.header.max_timestamp for b in batches), len(data),
        RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1, after.event_timestamp_ms + 1, objects=(".log",))
    _put(remote_fs, url, m, ".log", data)
    _put(remote_fs, url, m, remote_tier.METADATA_SUFFIX, remote_tier.encode_metadata(m))
    for suffix in (*after.objects, remote_tier.METADATA_SUFFIX):
        remote_fs.rm(filesystem_for(remote_tier.segment_object(url, after, suffix))[1])
    return m


#: Records per partition of ``tiered_orders``.
ORDERS_PER_PARTITION = 200


def tiered_orders(tmp_path, s3_bucket) -> tuple[str, str, dict, object]:
    """Topic ``orders`` (2 partitions of ``ORDERS_PER_PARTITION`` numbered records, 1000-byte segments) with all
    but its last two segments moved to ``s3://<bucket>/tier`` and one of those also kept local: (log dir,
    tier URL, storage options, what ``tier_log_dir`` answered)."""
    from tests.connector.conftest import produce_numbered

    bucket, creds = s3_bucket
    log_dir = str(tmp_path / "logs")
    produce_numbered(log_dir, "orders", 2, ORDERS_PER_PARTITION, config={"segment.bytes": "1000"})
    url = f"s3://{bucket}/tier"
    return log_dir, url, creds, tier_log_dir(log_dir, "orders", url, creds, keep_local=2, in_both_tiers=1)
