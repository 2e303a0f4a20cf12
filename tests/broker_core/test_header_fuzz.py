"""Flip every byte of every batch header of a small segment — inside the CRC or outside it — and read
it through the broker, the Spark read path and ``seglog dump``: a record comes back at its true
offset, or the read reports corruption. Never a record at a wrong offset.

The segment is indexed at every batch (``index.interval.bytes`` 1), so every batch is pinned by the
offset index or by its neighbours: with a sparse index, a forward jump of the very last batch's
``baseOffset`` is the one change nothing on disk contradicts.
"""

import os
import re

from broker_core import Broker
from broker_core.errors import CorruptMessageError, OffsetOutOfRangeError
from format.dump import dump_file
from format.errors import CorruptRecordError
from format.fs import filesystem_for
from format.record_batch import RECORD_BATCH_OVERHEAD
from format.segment_reader import SegmentReader

from log_dir_kit import batch_positions, produce_numbered, records_at_true_offsets

BATCHES, PER_BATCH = 6, 3
TOTAL = BATCHES * PER_BATCH
_DUMPED = re.compile(r"\| offset: (\d+) .* payload: (\d+)")


def flips(value: int) -> list[int]:
    """A few values for one byte: the low bit, the high bit, all ones (or zero)."""
    return sorted({value ^ 0x01, value ^ 0x80, 0x00 if value == 0xFF else 0xFF})


def broker_reads_are_true(d) -> None:
    with Broker(d, read_only=True) as broker:
        end = broker.list_offsets("events", 0, "latest").offset
        assert end <= TOTAL
        for start in range(TOTAL):
            try:
                records = broker.fetch("events", 0, start).decoded(start)
            except (CorruptMessageError, OffsetOutOfRangeError):
                continue
            assert records_at_true_offsets(records), start


def spark_reads_are_true(fs, partition_dir) -> None:
    with SegmentReader(fs, partition_dir, 0) as reader:
        assert (reader.next_offset() or 0) <= TOTAL
        for start in range(0, TOTAL, 2):
            try:
                for batch in reader.iter_arrow("events", 0, start, TOTAL):
                    offsets = batch.column("offset").to_pylist()
                    values = [v.split(b".")[0] for v in batch.column("value").to_pylist()]
                    assert values == [b"%d" % o for o in offsets], start
            except CorruptRecordError:
                continue


def dump_is_true(path) -> None:
    result = dump_file(path, print_data=True)
    wrong = [m.groups() for m in map(_DUMPED.search, result.lines) if m and m.group(1) != m.group(2)]
    assert result.corrupt or not wrong, wrong


def test_no_header_byte_flip_makes_any_read_return_a_record_at_a_wrong_offset(tmp_path):
    d = str(tmp_path / "logs")
    with Broker(d, {"log.index.interval.bytes": "1"}, background=False) as broker:
        broker.create_topic("events", 1)
        produce_numbered(broker, "events", TOTAL, PER_BATCH)
    partition_dir = os.path.join(d, "events-0")
    path = os.path.join(partition_dir, "00000000000000000000.log")
    fs, root = filesystem_for(partition_dir)
    original = open(path, "rb").read()
    positions = [p + i for p, _, _ in batch_positions(path) for i in range(RECORD_BATCH_OVERHEAD)]
    assert len(positions) == BATCHES * RECORD_BATCH_OVERHEAD
    cases = 0
    with open(path, "r+b") as f:
        for position in positions:
            for value in flips(original[position]):
                f.seek(position)
                f.write(bytes([value]))
                f.flush()
                try:
                    broker_reads_are_true(d)
                    spark_reads_are_true(fs, root)
                    dump_is_true(path)
                except AssertionError as exc:
                    raise AssertionError(f"byte {position} set to 0x{value:02x}: {exc}") from None
                finally:
                    f.seek(position)
                    f.write(original[position:position + 1])
                    f.flush()
                cases += 1
    assert cases >= 3 * len(positions) - len(positions)
