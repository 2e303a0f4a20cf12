"""Stage 2 of the distributed cleaner: what a task is given to read, and what it writes."""

from __future__ import annotations

from broker_core.clock import MockTime
from broker_core.log.cleaner.distributed.clean_stage import clean_inputs, clean_tasks, run_clean_task
from broker_core.log.cleaner.distributed.map_stage import map_tasks, run_map_task
from broker_core.log.cleaner.distributed.partition_plan import plan_compaction
from tests.broker_core.cleaner_kit import T0, fill


def test_stage_two_reads_only_the_batches_that_keep_something(tmp_path):
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    d = str(tmp_path / "logs")
    fill(d, clock, produced, partitions=1, batches=60, keys=8)
    plans = plan_compaction(d, ["table"], now_ms=clock.milliseconds())
    _, piece = run_map_task(map_tasks(plans)[0], d)
    tasks = clean_tasks(plans[0], False)
    (given,) = clean_inputs(piece, tasks, clock.milliseconds())
    read = sum(length for runs in given.reads.values() for _, length in runs)
    # Eight keys over sixty batches: a few batches hold the survivors, the rest are not even read ...
    assert 0 < read < plans[0].bytes_before / 3
    # ... and what is read holds every survivor, in the cleaned segments.
    results = run_clean_task(tasks[0], given, d, clock.milliseconds())
    assert sum(r.messages_written for r in results) == len(given.survivors)
    assert sum(r.messages_read for r in results) < len(produced[0].records) / 3
