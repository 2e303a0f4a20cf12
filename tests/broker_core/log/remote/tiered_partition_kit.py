"""A tiered partition built by hand, as the remote log manager leaves one: a topic written with the embedded
``Broker`` in small segments, its older closed segments copied to a remote tier in ``format.remote_tier``'s
layout (their files, then a ``COPY_SEGMENT_FINISHED`` metadata object) and deleted from local disk."""

from __future__ import annotations

import os

import s3fs

from broker_core.broker import Broker
from format import layout, remote_tier
from format.record import SimpleRecord
from format.remote_tier import RemoteLogSegmentMetadata, RemoteLogSegmentState

EVENT_MS = 1_767_225_600_000
RECORDS = 400
PER_BATCH = 4
# About eight batches a segment: ~25 segments for RECORDS.
SEGMENT_BYTES = 1_400
# An offset index entry about every batch, so that reads start from the index.
INDEX_INTERVAL_BYTES = 200


#: The topic's remote storage: its older segments are in the remote tier, kept there for good.
TIERED = {"remote.storage.enable": "true", "retention.ms": "-1"}


def remote_config(bucket: str, options: dict) -> dict[str, str]:
    """The settings of a broker with tiered storage in ``s3://<bucket>/tier`` with the s3fs ``options``."""
    return {"remote.log.storage.system.enable": "true", "remote.storage.url": f"s3://{bucket}/tier",
            **{f"remote.storage.options.{k}": str(v) for k, v in options.items()}}


def value(i: int) -> bytes:
    return b"record-%05d" % i + b"." * 60


def write_topic(log_dir: str, topic: str, broker_config: dict[str, str], partitions: int = 1,
                records: int = RECORDS, topic_config: dict[str, str] = TIERED) -> None:
    """``records`` numbered records in batches of ``PER_BATCH`` into each partition, in small segments, by a
    broker with ``broker_config``; the topic has ``topic_config`` (remote storage by default)."""
    with Broker(log_dir, broker_config, background=False) as broker:
        broker.create_topic(topic, partitions, {"segment.bytes": SEGMENT_BYTES,
                                                "index.interval.bytes": INDEX_INTERVAL_BYTES, **topic_config})
        for p in range(partitions):
            for first in range(0, records, PER_BATCH):
                broker.produce(topic, [SimpleRecord(value(i), b"k%d" % i, timestamp=EVENT_MS + i)
                                       for i in range(first, min(first + PER_BATCH, records))], partition=p)


def tier(log_dir: str, topic: str, partition: int, bucket: str, options: dict, keep_local: int = 3
         ) -> list[RemoteLogSegmentMetadata]:
    """Copy every segment of the partition but the newest ``keep_local`` to the remote tier and delete them
    locally; the remote segments' metadata, in offset order."""
    fs = s3fs.S3FileSystem(**options)
    root = f"{bucket}/tier"
    copied: list[RemoteLogSegmentMetadata] = []
    with Broker(log_dir, remote_config(bucket, options), background=False) as broker:
        topic_id = broker.describe_topic(topic).topic_id
        lg = broker.log_manager.get_log(layout.TopicPartition(topic, partition))
        segments = lg.segments[:-keep_local]
        for i, segment in enumerate(segments):
            following = lg.segments[i + 1].base_offset
            m = RemoteLogSegmentMetadata(
                topic, topic_id, partition, remote_tier.new_segment_id(), segment.base_offset, following - 1,
                segment.max_timestamp_so_far, segment.size, RemoteLogSegmentState.COPY_SEGMENT_STARTED, 0, EVENT_MS)
            fs.pipe_file(remote_tier.segment_object(root, m, remote_tier.METADATA_SUFFIX),
                         remote_tier.encode_metadata(m))
            stem = layout.filename_prefix_from_offset(segment.base_offset)
            suffixes = []
            for suffix in remote_tier.SEGMENT_SUFFIXES:
                path = os.path.join(lg.dir, stem + suffix)
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        data = f.read()
                    fs.pipe_file(remote_tier.segment_object(root, m, suffix), data)
                    suffixes.append(suffix)
            m = RemoteLogSegmentMetadata(**{**m.__dict__, "objects": tuple(suffixes)}).with_state(
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 0, EVENT_MS + 1)
            fs.pipe_file(remote_tier.segment_object(root, m, remote_tier.METADATA_SUFFIX),
                         remote_tier.encode_metadata(m))
            copied.append(m)
        last = copied[-1].end_offset if copied else -1
        lg.delete_old_segments(lambda s, _: s.base_offset <= last, "copied to the remote tier")
    return copied
