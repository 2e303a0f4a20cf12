"""The remote tier's layout and metadata codec: object names, a round trip, and listing a partition's
segments through an fsspec filesystem."""

from __future__ import annotations

import fsspec
import pytest

from format.errors import CorruptRecordError
from format.remote_tier import (METADATA_SUFFIX, RemoteLogSegmentMetadata, RemoteLogSegmentState, decode_metadata,
                                encode_metadata, list_segments, segment_object)

S = RemoteLogSegmentState


def _metadata(base: int, state: S = S.COPY_SEGMENT_FINISHED, segment_id: str = "0f1e") -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata("orders", "TOPICID", 3, segment_id, base, base + 9, 1_700_000_000_000, 4096,
                                    state, 2, 1_700_000_000_500, {4: base})


def test_a_segments_objects_are_named_for_topic_topic_id_partition_base_offset_and_segment_id():
    assert segment_object("s3://bucket/tier/", _metadata(120), ".log") == \
        "s3://bucket/tier/orders-TOPICID/3/00000000000000000120-0f1e.log"


def test_metadata_survives_a_round_trip_and_garbage_is_named_as_such():
    metadata = _metadata(0, S.DELETE_SEGMENT_STARTED)
    assert decode_metadata(encode_metadata(metadata), "m") == metadata
    with pytest.raises(CorruptRecordError, match="bucket/x.metadata.json: not remote log segment metadata"):
        decode_metadata(b"{}", "bucket/x.metadata.json")


def test_list_segments_gives_each_segments_latest_metadata_in_offset_order():
    fs = fsspec.filesystem("memory")
    for metadata in (_metadata(10, segment_id="b"), _metadata(0, S.COPY_SEGMENT_STARTED, segment_id="a")):
        fs.pipe(segment_object("memory://tier", metadata, METADATA_SUFFIX), encode_metadata(metadata))
        fs.pipe(segment_object("memory://tier", metadata, ".log"), b"data")
    listed = list_segments(fs, "memory://tier", "orders", "TOPICID", 3)
    assert [(m.base_offset, m.state) for m in listed] == [(0, S.COPY_SEGMENT_STARTED), (10, S.COPY_SEGMENT_FINISHED)]
    assert list_segments(fs, "memory://tier", "orders", "TOPICID", 4) == []
