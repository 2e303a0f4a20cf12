"""The remote tier's layout and metadata codec: object names, a round trip, listing a partition's
segments through an fsspec filesystem, and which segment serves each offset."""

from __future__ import annotations

import fsspec
import pytest

from format.errors import CorruptRecordError
from format.remote_tier import (METADATA_SUFFIX, RemoteLogSegmentMetadata, RemoteLogSegmentState, decode_metadata,
                                encode_metadata, list_segments, segment_object, serving_index, serving_segments)

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


def _segment(base: int, end: int, segment_id: str, state: S = S.COPY_SEGMENT_FINISHED, copied_ms: int = 0
             ) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata("orders", "TOPICID", 3, segment_id, base, end, -1, 4096, state, 2, copied_ms)


def _served(listed: list[RemoteLogSegmentMetadata]) -> list[tuple[str, int, int]]:
    return [(s.metadata.segment_id, s.start_offset, s.end_offset) for s in serving_segments(listed)]


def _offsets(listed: list[RemoteLogSegmentMetadata], until: int) -> dict[int, str | None]:
    """The segment id serving each offset below ``until`` (None: no segment)."""
    serving = serving_segments(listed)
    found = {o: serving_index(serving, o) for o in range(until)}
    return {o: None if i is None else serving[i].metadata.segment_id for o, i in found.items()}


def test_a_segment_overlapping_the_one_before_serves_from_past_its_end():
    listed = [_segment(80, 150, "b", copied_ms=2), _segment(0, 99, "a", copied_ms=1)]
    assert _served(listed) == [("a", 0, 99), ("b", 100, 150)]
    assert _offsets(listed, 152) == {**{o: "a" for o in range(100)}, **{o: "b" for o in range(100, 151)}, 151: None}


def test_a_segment_contained_in_another_serves_nothing():
    assert _served([_segment(0, 150, "a"), _segment(80, 120, "b")]) == [("a", 0, 150)]
    # The longer of two starting at the same offset serves, whichever was copied first.
    assert _served([_segment(0, 99, "a", copied_ms=1), _segment(0, 150, "b", copied_ms=2)]) == [("b", 0, 150)]


def test_of_identical_copies_the_first_copied_serves():
    listed = [_segment(0, 99, "later", copied_ms=2), _segment(0, 99, "first", copied_ms=1), _segment(100, 199, "c")]
    assert _served(listed) == [("first", 0, 99), ("c", 100, 199)]


def test_offsets_in_a_gap_stay_unserved_as_kafka_answers_them_out_of_range():
    listed = [_segment(0, 99, "a"), _segment(120, 199, "b"), _segment(110, 130, "c", copied_ms=1)]
    assert _served(listed) == [("a", 0, 99), ("c", 110, 130), ("b", 131, 199)]
    offsets = _offsets(listed, 201)
    assert [o for o, served in offsets.items() if served is None] == [*range(100, 110), 200]
    assert serving_index([], 0) is None


def test_only_finished_copies_serve():
    listed = [_segment(0, 99, "a"), _segment(80, 150, "started", S.COPY_SEGMENT_STARTED),
              _segment(90, 160, "deleting", S.DELETE_SEGMENT_STARTED)]
    assert _served(listed) == [("a", 0, 99)]
