"""Stage 1 of the distributed cleaner: damaged bytes stop it, naming where they are."""

from __future__ import annotations

import os

import pytest

from broker_core.clock import MockTime
from broker_core.log.cleaner.distributed.map_stage import map_tasks, run_map_task
from broker_core.log.cleaner.distributed.partition_plan import plan_compaction
from format import layout
from tests.broker_core.cleaner_kit import T0, fill


def test_a_corrupt_batch_stops_the_job_naming_its_file_and_position(tmp_path):
    from format.errors import CorruptRecordError

    d = str(tmp_path / "logs")
    fill(d, MockTime(current_time_ms=T0), {}, partitions=1, batches=20)
    plans = plan_compaction(d, ["table"], now_ms=T0 + 10**6)
    first = os.path.join(d, "table-0", layout.log_file_name(plans[0].segments[0].base_offset))
    size = os.path.getsize(first)
    with open(first, "r+b") as f:  # a byte of the last batch's records, which its CRC covers
        f.seek(size - 3)
        byte = f.read(1)
        f.seek(size - 3)
        f.write(bytes([byte[0] ^ 0xFF]))
    from format.file_records import FileRecords

    records = FileRecords.open(first, writable=False)
    last_batch = [position for position, _ in records.batch_headers()][-1]
    records.close()
    with pytest.raises(CorruptRecordError) as caught:
        run_map_task(map_tasks(plans)[0], d)
    assert caught.value.path == first and caught.value.position == last_batch and "CRC" in str(caught.value)
