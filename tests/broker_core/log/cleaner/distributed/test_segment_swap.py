"""The distributed cleaner's swap, without Spark: the stages' plain functions, then a crash at each rename."""

from __future__ import annotations

import os

import pytest

from broker_core.clock import MockTime
from broker_core.log.cleaner.distributed import segment_swap
from broker_core.log.cleaner.distributed.clean_stage import clean_inputs, clean_tasks, run_clean_task
from broker_core.log.cleaner.distributed.map_stage import map_tasks, merge_pieces, run_map_task
from broker_core.log.cleaner.distributed.partition_plan import plan_compaction
from broker_core.log.cleaner.distributed.segment_swap import delete_files, swap_partition
from format import layout
from format.fs import filesystem_for
from tests.broker_core.cleaner_kit import T0, check_all, fill


def clean_without_spark(url: str, now_ms: int):
    """What the job's two stages produce, computed in this process."""
    plans = plan_compaction(url, ["table"], now_ms=now_ms)
    pieces = {}
    for task in map_tasks(plans, 1):
        key, piece = run_map_task(task, url)
        pieces[key] = merge_pieces(pieces[key], piece) if key in pieces else piece
    results = {}
    for plan in plans:
        tasks = clean_tasks(plan, False, 1)
        for task, given in zip(tasks, clean_inputs(pieces[plan.key], tasks, now_ms)):
            if given.whole_partition:
                task = clean_tasks(plan, True)[0]
            results.setdefault(plan.key, []).extend(run_clean_task(task, given, url, now_ms))
    return plans, results


class Crash(BaseException):
    pass


def crash_at_rename(monkeypatch, predicate, nth: int = 1):
    real = segment_swap._rename
    calls = []

    def rename(fs, source, target):
        if predicate(source, target):
            calls.append(source)
            if len(calls) == nth:
                raise Crash(f"crash renaming {source} -> {target}")
        return real(fs, source, target)

    monkeypatch.setattr(segment_swap, "_rename", rename)


JOB_CRASHES = {
    "after .cleaned is written": (None, "undone"),
    "mid rename to .swap": (lambda s, t: t.endswith(".swap"), "undone"),
    "after the .swap rename": (lambda s, t: t.endswith(".deleted"), "completed"),
    "mid-delete": ((lambda s, t: t.endswith(".deleted")), "completed", 3),
    "before the final rename": (lambda s, t: s.endswith(".swap"), "completed"),
}


@pytest.mark.parametrize("crash", list(JOB_CRASHES), ids=list(JOB_CRASHES))
def test_a_crash_during_the_jobs_swap_leaves_a_log_that_reopens_consistent(tmp_path, monkeypatch, crash):
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    d = str(tmp_path / "logs")
    fill(d, clock, produced, partitions=1, batches=40, transactions=True)
    before = check_all(d, produced, clock)[0]
    plans, results = clean_without_spark(d, clock.milliseconds())
    predicate, outcome, *nth = JOB_CRASHES[crash]
    if predicate is not None:
        crash_at_rename(monkeypatch, predicate, *nth)
        with pytest.raises(Crash):
            swap_partition(filesystem_for(d)[0], d, plans[0],
                           results[plans[0].key])
        monkeypatch.undo()
    partition_dir = os.path.join(d, "table-0")
    assert [n for n in os.listdir(partition_dir) if n.endswith(layout.TRANSIENT_FILE_SUFFIXES)]
    # A broker opening the log dir settles the swap ...
    after = check_all(d, produced, clock)[0]
    assert [n for n in os.listdir(partition_dir) if n.endswith(layout.TRANSIENT_FILE_SUFFIXES)] == []
    if outcome == "undone":
        assert after == before
    else:
        assert len(after) < len(before)
    # ... and the job runs again from there.
    plans, results = clean_without_spark(d, clock.milliseconds())
    fs = filesystem_for(d)[0]
    for plan in plans:
        delete_files(fs, swap_partition(fs, d, plan, results[plan.key]))
    records = check_all(d, produced, clock)[0]
    assert len({r.key for r in records}) == len(records)


def test_the_job_settles_an_interrupted_swap_before_planning(tmp_path, monkeypatch):
    clock = MockTime(current_time_ms=T0)
    produced: dict = {}
    d = str(tmp_path / "logs")
    fill(d, clock, produced, partitions=1, batches=30)
    plans, results = clean_without_spark(d, clock.milliseconds())
    crash_at_rename(monkeypatch, lambda s, t: t.endswith(".deleted"), 2)
    fs = filesystem_for(d)[0]
    with pytest.raises(Crash):
        swap_partition(fs, d, plans[0], results[plans[0].key])
    monkeypatch.undo()
    # The next run, not a broker, finds the half-done swap: planning completes it first.
    plans, results = clean_without_spark(d, clock.milliseconds())
    for plan in plans:
        delete_files(fs, swap_partition(fs, d, plan, results[plan.key]))
    records = check_all(d, produced, clock)[0]
    assert len({r.key for r in records}) == len(records)
