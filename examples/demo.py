"""Write a small segment with seglog's format code, then dump it like Kafka's DumpLogSegments.

Run with ``make demo``. The files land in a fresh directory under ``demo-data/``
(or the directory given as the first argument) in Kafka's own layout.
"""

from __future__ import annotations

import os
import shutil
import sys

from broker_core.cli import main as seglog
from format import layout
from format.arrow import decode_to_arrow
from format.compression import CompressionType
from format.record import Header, SimpleRecord
from format.record_batch import build_batch
from format.segment import LogSegment


def write_segment(directory: str) -> LogSegment:
    segment = LogSegment.open(directory, 0, index_interval_bytes=256)
    offset = 0
    base_ts = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    for batch_no, codec in enumerate(CompressionType):
        records = [SimpleRecord(value=f"reading {offset + i}: {20 + (offset + i) % 7} C".encode(),
                                key=f"sensor-{(offset + i) % 3}".encode(), timestamp=base_ts + (offset + i) * 1000,
                                headers=(Header("unit", b"celsius"),))
                   for i in range(4)]
        records.append(SimpleRecord(value=None, key=b"sensor-retired", timestamp=base_ts + (offset + 4) * 1000))
        segment.append(build_batch(records, base_offset=offset, compression=codec))
        offset += len(records)
    segment.flush()
    return segment


def main() -> int:
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join("demo-data")
    directory = os.path.join(root, layout.partition_dir_name(layout.TopicPartition("sensors", 0)))
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    segment = write_segment(directory)
    log_path = segment.log.path
    print(f"wrote {segment.size} bytes in {log_path}; next offset {segment.read_next_offset()}")
    with open(log_path, "rb") as f:
        table = decode_to_arrow(f.read(), topic="sensors", partition=0, include_headers=True)
    print(f"decoded {table.num_rows} records into Arrow with schema:\n{table.schema}\n")
    segment.close()
    return seglog(["dump", "--print-data-log", log_path,
                   os.path.join(directory, layout.offset_index_file_name(0)),
                   os.path.join(directory, layout.time_index_file_name(0))])


if __name__ == "__main__":
    sys.exit(main())
