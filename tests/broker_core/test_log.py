import os

import pytest

from broker_core.clock import MockTime
from broker_core.config import LogConfig
from broker_core.errors import (CorruptMessageError, InvalidRecordError, MessageTooLargeError,
                                OffsetOutOfRangeError)
from broker_core.log.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log
from format import layout
from format.compression import CompressionType
from format.control import ControlRecordType, EndTransactionMarker
from format.record import SimpleRecord
from format.layout import TopicPartition
from format.record_batch import build_batch, build_end_txn_marker_batch, iter_batches

from cleaner_kit import open_log as open_partition_log

T0 = 1_800_000_000_000


def records(n, ts=T0, size=100, tag=b""):
    return [SimpleRecord(tag + b"v" * size, b"key-%05d" % i, ts + i) for i in range(n)]


def open_log(tmp_path, clock=None, **overrides):
    """topic-0 under ``tmp_path`` with Kafka's defaults but ``overrides``; the log and its clock."""
    config = LogConfig.from_props({k.replace("_", "."): v for k, v in overrides.items()})
    clock = clock or MockTime(current_time_ms=T0)
    return open_partition_log(tmp_path, clock, config, TopicPartition("topic", 0)), clock


def read_all(log, start=None):
    offset = log.log_start_offset if start is None else start
    out = []
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        batches = list(iter_batches(info.records))
        assert batches, f"no progress at {offset}"
        for b in batches:
            b.ensure_valid()
            out.extend(r for r in b.records() if r.offset >= offset)
        offset = batches[-1].header.next_offset
    return out


def test_append_assigns_consecutive_offsets_by_rewriting_base_offsets(tmp_path):
    log, _ = open_log(tmp_path)
    first = log.append(build_batch(records(5)))
    second = log.append(build_batch(records(3)) + build_batch(records(2)))
    assert (first.first_offset, first.last_offset) == (0, 4)
    assert (second.first_offset, second.last_offset, second.num_batches) == (5, 9, 2)
    assert log.log_end_offset == log.high_watermark == 10
    assert [r.offset for r in read_all(log)] == list(range(10))
    stored = list(iter_batches(log.read(5, 1 << 20).records))
    assert [b.header.base_offset for b in stored] == [5, 8]
    assert all(b.header.partition_leader_epoch == 0 for b in stored)


def test_reading_outside_the_log_is_offset_out_of_range_naming_the_offsets(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(build_batch(records(5)))
    assert log.read(5, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError, match=r"Log\(topic-0\): offset 6 is beyond the log end offset 5"):
        log.read(6, 1000)
    log.truncate_fully_and_start_at(100)
    with pytest.raises(OffsetOutOfRangeError, match="offset 3 is below the log start offset 100"):
        log.read(3, 1000)


def test_a_batch_over_max_message_bytes_is_refused_and_nothing_is_written(tmp_path):
    log, _ = open_log(tmp_path, max_message_bytes=2000)
    with pytest.raises(MessageTooLargeError, match="max.message.bytes 2000"):
        log.append(build_batch(records(1)) + build_batch(records(30)))
    assert log.log_end_offset == 0 and log.size == 0


def test_a_corrupt_batch_is_refused(tmp_path):
    log, _ = open_log(tmp_path)
    data = bytearray(build_batch(records(3)))
    data[70] ^= 1
    with pytest.raises(CorruptMessageError, match="CRC mismatch"):
        log.append(bytes(data))
    with pytest.raises(CorruptMessageError, match="truncated"):
        log.append(build_batch(records(3))[:-4])
    assert log.log_end_offset == 0


def test_clients_cannot_write_control_batches(tmp_path):
    log, _ = open_log(tmp_path)
    marker = build_end_txn_marker_batch(EndTransactionMarker(ControlRecordType.COMMIT, 0), producer_id=1,
                                        producer_epoch=0, timestamp=T0)
    with pytest.raises(InvalidRecordError, match="control"):
        log.append(marker)
    log.append(marker, from_client=False)
    assert log.log_end_offset == 1


def test_log_append_time_topics_stamp_the_broker_time(tmp_path):
    log, clock = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    clock.sleep(5000)
    info = log.append(build_batch(records(3, ts=1)))
    assert info.log_append_time == T0 + 5000
    assert [r.timestamp for r in read_all(log)] == [T0 + 5000] * 3


def test_a_topic_compression_type_recompresses(tmp_path):
    log, _ = open_log(tmp_path, compression_type="lz4")
    log.append(build_batch(records(10)))
    batch = next(iter_batches(log.read(0, 1 << 20).records))
    assert batch.header.compression_type == CompressionType.LZ4
    assert [r.value for r in batch.records()] == [r.value for r in records(10)]


def test_rolls_on_segment_bytes(tmp_path):
    log, _ = open_log(tmp_path, segment_bytes=5000)
    for _ in range(10):
        log.append(build_batch(records(10)))  # about 1.3 KB each
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3 and bases == sorted(bases)
    assert all(s.size <= 5000 for s in log.segments)
    assert [r.offset for r in read_all(log)] == list(range(100))


def test_rolls_on_segment_ms(tmp_path):
    log, clock = open_log(tmp_path, segment_ms=60_000)
    log.append(build_batch(records(1, ts=T0)))
    clock.sleep(59_000)
    log.append(build_batch(records(1, ts=T0 + 59_000)))
    assert len(log.segments) == 1
    clock.sleep(2_000)
    log.append(build_batch(records(1, ts=T0 + 61_000)))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_rolls_when_the_index_is_full(tmp_path):
    log, _ = open_log(tmp_path, segment_index_bytes=8 * 3, index_interval_bytes=1)
    for _ in range(12):
        log.append(build_batch(records(1)))
    assert len(log.segments) >= 3
    assert all(s.offset_index.entries <= 3 for s in log.segments)
    assert [r.offset for r in read_all(log)] == list(range(12))


def test_rolls_when_offsets_would_overflow_a_relative_int32(tmp_path):
    log, _ = open_log(tmp_path)
    log.append(build_batch(records(1)))
    far = 1 << 31
    log.append(build_batch(records(1), base_offset=far), assign_offsets=False, from_client=False)
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 1


def test_offset_for_timestamp(tmp_path):
    log, _ = open_log(tmp_path, segment_bytes=3000)
    for i in range(10):
        log.append(build_batch(records(5, ts=T0 + i * 100)))
    assert log.offset_for_timestamp(T0 + 302).offset == 17
    assert log.offset_for_timestamp(T0 + 305).offset == 20
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 50
    assert log.offset_for_timestamp(MAX_TIMESTAMP).timestamp == T0 + 904
    assert log.offset_for_timestamp(T0 + 10_000) is None


def test_truncate_to_drops_later_segments_and_records(tmp_path):
    log, _ = open_log(tmp_path, segment_bytes=3000)
    for _ in range(10):
        log.append(build_batch(records(5)))
    assert log.truncate_to(23)
    assert log.log_end_offset == 20  # the batch holding 23 starts at 20
    assert [r.offset for r in read_all(log)] == list(range(20))
    assert all(s.base_offset <= 20 for s in log.segments)
    assert log.append(build_batch(records(2))).first_offset == 20
    assert not log.truncate_to(100)


def test_time_retention_deletes_old_segments_after_the_delete_delay(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=3000, retention_ms=60_000, file_delete_delay_ms=1000)
    for i in range(6):
        log.append(build_batch(records(5, ts=T0 + i * 10_000)))
    old_segments = len(log.segments)
    clock.sleep(95_000)  # the first segment (batches up to T0 + 30 s) is now over a minute old
    deleted = log.delete_old_segments_by_retention()
    assert deleted >= 1
    assert len(log.segments) == old_segments - deleted
    assert log.log_start_offset == log.segments[0].base_offset
    names = os.listdir(log.dir)
    assert any(n.endswith(".log.deleted") for n in names)
    log.scheduler.run_due()
    assert any(n.endswith(".log.deleted") for n in os.listdir(log.dir))
    clock.sleep(1000)
    log.scheduler.run_due()
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    assert read_all(log)[0].offset == log.log_start_offset


def test_size_retention_keeps_the_log_under_retention_bytes(tmp_path):
    log, _ = open_log(tmp_path, segment_bytes=3000, retention_bytes=7000)
    for _ in range(20):
        log.append(build_batch(records(5)))
    log.delete_old_segments_by_retention()
    assert log.size <= 7000 + 3000
    assert log.size > 7000 - 3000
    assert log.log_start_offset > 0


def test_compacted_topics_are_not_subject_to_time_retention(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=3000, retention_ms=1000, cleanup_policy="compact")
    for _ in range(6):
        log.append(build_batch(records(5)))
    clock.sleep(1_000_000)
    assert log.delete_old_segments_by_retention() == 0


def test_the_active_segment_is_rolled_before_it_is_deleted(tmp_path):
    log, clock = open_log(tmp_path, retention_ms=1000)
    log.append(build_batch(records(5)))
    clock.sleep(5000)
    assert log.delete_old_segments_by_retention() == 1
    assert [s.base_offset for s in log.segments] == [5]
    assert log.log_start_offset == log.log_end_offset == 5


def test_reopen_after_a_clean_close_keeps_everything(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=3000)
    for _ in range(10):
        log.append(build_batch(records(5)))
    log.flush()
    log.close()
    reopened = Log.open(log.dir, log.config, had_clean_shutdown=True, clock=clock)
    assert reopened.log_end_offset == 50
    assert [r.offset for r in read_all(reopened)] == list(range(50))
    assert reopened.append(build_batch(records(1))).first_offset == 50


def test_recovery_truncates_a_torn_tail_and_rebuilds_indexes(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=3000)
    for _ in range(10):
        log.append(build_batch(records(5)))
    last = log.active_segment.log.path
    log.close()
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 10)
    reopened = Log.open(log.dir, log.config, recovery_point=0, clock=clock)
    assert reopened.log_end_offset == 45
    assert [r.offset for r in read_all(reopened)] == list(range(45))


def test_recovery_removes_leftover_cleaned_and_deleted_files_and_completes_a_swap(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=3000)
    for _ in range(10):
        log.append(build_batch(records(5)))
    bases = [s.base_offset for s in log.segments]
    log.close()
    d = log.dir
    open(os.path.join(d, "00000000000000000099.log.cleaned"), "wb").close()
    open(os.path.join(d, "00000000000000000098.log.deleted"), "wb").close()
    # A cleaned replacement of the first two segments, already renamed to .swap.
    kept = [SimpleRecord(b"survivor", b"k", T0)]
    swap = build_batch(kept, base_offset=bases[0], offsets=[bases[1] - 1], last_offset_delta=bases[2] - 1 - bases[0])
    with open(os.path.join(d, layout.log_file_name(bases[0]) + ".swap"), "wb") as f:
        f.write(swap)
    reopened = Log.open(d, log.config, recovery_point=0, clock=clock)
    names = os.listdir(d)
    assert not any(n.endswith((".cleaned", ".deleted", ".swap")) for n in names)
    assert [s.base_offset for s in reopened.segments][0] == bases[0]
    assert bases[1] not in [s.base_offset for s in reopened.segments]
    got = read_all(reopened)
    assert got[0].value == b"survivor" and got[0].offset == bases[1] - 1
    assert got[1].offset == bases[2]
    assert reopened.log_end_offset == 50


def test_reads_never_serve_a_corrupt_batch(tmp_path):
    log, clock = open_log(tmp_path, segment_bytes=3000)
    for _ in range(10):
        log.append(build_batch(records(5)))
    log.flush()
    first = log.segments[0]
    second_batch = next(b for b in iter_batches(log.read(0, 1 << 20).records) if b.header.base_offset == 5)
    with open(first.log.path, "r+b") as f:
        f.seek(second_batch.position + 80)
        byte = f.read(1)
        f.seek(second_batch.position + 80)
        f.write(bytes([byte[0] ^ 0x20]))
    served = list(iter_batches(log.read(0, 1 << 20).records))
    assert [b.header.base_offset for b in served] == [0]
    with pytest.raises(CorruptMessageError) as err:
        log.read(5, 1 << 20)
    assert first.log.path in str(err.value) and f"position {second_batch.position}" in str(err.value)
