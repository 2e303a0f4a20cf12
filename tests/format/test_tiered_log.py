"""Reading a partition across both tiers: remote segments (SeaweedFS) below the local ones."""

import pytest

from format.layout import TopicPartition
from format.tiered_log import TieredLogDirectory
from tests.connector.conftest import produce_numbered
from tests.format.tiered_log_kit import recopy_overlapping, tier_log_dir

pytestmark = pytest.mark.slow


@pytest.fixture()
def tiered(tmp_path, s3_bucket):
    bucket, creds = s3_bucket
    log_dir = str(tmp_path / "logs")
    produce_numbered(log_dir, "orders", 2, 200, config={"segment.bytes": "1000"})
    tiers = tier_log_dir(log_dir, "orders", f"s3://{bucket}/tier", creds, keep_local=1, in_both_tiers=1)
    return log_dir, f"s3://{bucket}/tier", creds, tiers


def values(directory, tp, start, end):
    out = []
    for segment in directory.segments(tp):
        with directory.reader(tp, segment) as reader:
            for batch in reader.iter_arrow(tp.topic, tp.partition, max(start, segment.base_offset), end):
                out.extend(batch.column("offset").to_pylist())
    return out


def test_segments_list_the_finished_remote_segments_below_the_local_ones(tiered):
    log_dir, url, creds, tiers = tiered
    directory = TieredLogDirectory(log_dir, remote_storage_options=creds)
    tp = TopicPartition("orders", 0)
    listed = directory.segments(tp)
    remote = [s for s in listed if s.tier == "remote"]
    assert len(remote) >= 3
    finished = tiers[0].finished
    both = {m.base_offset for m in tiers[0].in_both_tiers}
    assert [s.remote for s in remote] == [m for m in finished if m.base_offset not in both]
    assert [s.base_offset for s in listed] == sorted({s.base_offset for s in listed})
    assert all(s.tier == "local" for s in listed if s.base_offset in both)
    assert directory.location(tp, remote[0]).startswith(f"{url}/orders-")
    info = directory.describe(tp)
    assert (info.log_start_offset, info.log_end_offset) == (0, 200)


def test_a_range_reads_every_offset_once_from_whichever_tier_holds_it(tiered):
    log_dir, url, creds, tiers = tiered
    directory = TieredLogDirectory(log_dir, remote_storage_options=creds)
    tp = TopicPartition("orders", 1)
    assert values(directory, tp, 0, 200) == list(range(200))
    assert values(directory, tp, 13, 147) == list(range(13, 147))


def test_a_log_dir_without_a_remote_tier_reads_as_before(tmp_path):
    log_dir = str(tmp_path / "logs")
    produce_numbered(log_dir, "orders", 1, 30, config={"segment.bytes": "1000"})
    directory = TieredLogDirectory(log_dir)
    tp = TopicPartition("orders", 0)
    assert all(s.tier == "local" for s in directory.segments(tp))
    assert values(directory, tp, 0, 30) == list(range(30))


def test_a_segment_whose_metadata_moves_to_delete_started_is_no_longer_listed(tiered):
    from format import remote_tier
    from format.fs import filesystem_for
    from format.remote_tier import RemoteLogSegmentState

    log_dir, url, creds, tiers = tiered
    directory = TieredLogDirectory(log_dir, remote_storage_options=creds)
    tp = TopicPartition("orders", 0)
    first = tiers[0].finished[0]
    assert directory.segments(tp)[0].remote == first
    deleting = first.with_state(RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 0, first.event_timestamp_ms + 1)
    obj = remote_tier.segment_object(url, deleting, remote_tier.METADATA_SUFFIX)
    fs, path = filesystem_for(obj, creds)
    fs.pipe_file(path, remote_tier.encode_metadata(deleting))
    assert directory.segments(tp)[0].base_offset > first.base_offset


def test_a_remote_segment_overlapping_the_one_before_is_read_from_past_its_end_so_every_offset_is_read_once(tiered):
    from connector.planning import OffsetRange
    from connector.reading import read_range

    log_dir, url, creds, tiers = tiered
    finished = tiers[1].finished
    assert len(finished) >= 5
    before = finished[1]
    overlapping = recopy_overlapping(url, creds, before, finished[2])
    assert overlapping.base_offset < before.end_offset < overlapping.end_offset
    directory = TieredLogDirectory(log_dir, remote_storage_options=creds)
    tp = TopicPartition("orders", 1)
    listed = directory.segments(tp)
    assert [(s.base_offset, s.remote.segment_id) for s in listed[1:3]] == [
        (before.base_offset, before.segment_id), (before.end_offset + 1, overlapping.segment_id)]
    info = directory.describe(tp)
    assert (info.log_start_offset, info.log_end_offset) == (0, 200)

    def offsets(ranges):
        return [o for r in ranges for b in read_range(directory, r, include_headers=False, fail_on_data_loss=True,
                                                      chunk_bytes=1 << 20) for o in b.column("offset").to_pylist()]

    whole = OffsetRange("orders", 1, info.log_start_offset, info.log_end_offset)
    assert offsets([whole]) == list(range(200))
    # Tasks starting inside the overlap, where the overlapping segment starts serving, and inside its part.
    cuts = [info.log_start_offset, overlapping.base_offset + 1, before.end_offset + 1, before.end_offset + 3,
            info.log_end_offset]
    assert offsets([OffsetRange("orders", 1, a, b) for a, b in zip(cuts, cuts[1:])]) == list(range(200))
