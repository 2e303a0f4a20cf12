"""Crashes at every step of a clean's swap; reopening the log completes or undoes the swap."""

import os
import random

import pytest

from broker_core.log.log import Log
from broker_core.log.log_loader import plan_swap_recovery
from format import layout
from format.index import OffsetIndex
from format.segment import LogSegment

from broker_core.clock import MockTime
from cleaner_kit import (T0, Produced, check_guarantees, cleaner_for, compact_config, open_log, produce,
                         read_from)


class Crash(BaseException):
    """The process dies here: nothing after it runs, no cleanup handler catches it."""


def build(tmp_path, clock):
    """A log of small segments (so a cleaning group holds several), keys overwritten many times."""
    log = open_log(tmp_path, clock, compact_config(segment_bytes=1 << 20))
    produced = Produced()
    rng = random.Random(5)
    for i in range(60):
        produce(log, produced, clock, [(b"k%d" % rng.randrange(12), b"v%d-%d" % (i, j)) for j in range(3)])
        if i % 6 == 5:
            log.roll()
    log.roll()
    return log, produced


def crash_on_rename(monkeypatch, old: str, new: str, nth: int = 1):
    """Crash at the ``nth`` rename of a segment from suffix ``old`` to ``new``."""
    real = LogSegment.change_file_suffixes
    calls = []

    def change(self, old_suffix, new_suffix):
        if (old_suffix, new_suffix) == (old, new):
            calls.append(self.base_offset)
            if len(calls) == nth:
                raise Crash(f"crash renaming {self} {old!r} -> {new!r}")
        return real(self, old_suffix, new_suffix)

    monkeypatch.setattr(LogSegment, "change_file_suffixes", change)


def crash_after_cleaned_written(monkeypatch):
    def replace(self, new, old):
        raise Crash("crash with the .cleaned segment written, before the swap")

    monkeypatch.setattr(Log, "replace_segments", replace)


def crash_mid_segment_rename_to_swap(monkeypatch):
    real = OffsetIndex.rename_to

    def rename(self, new_path):
        if str(new_path).endswith(layout.SWAP_FILE_SUFFIX):
            raise Crash("crash after the .log became .swap, before its index did")
        return real(self, new_path)

    monkeypatch.setattr(OffsetIndex, "rename_to", rename)


# Where the process dies, and whether loading must undo the first group's swap or complete it.
CRASHES = {
    "after .cleaned is written": (crash_after_cleaned_written, "undone"),
    "between the .log and .index renames to .swap": (crash_mid_segment_rename_to_swap, "undone"),
    "after the .swap rename": (lambda mp: crash_on_rename(mp, "", layout.DELETED_FILE_SUFFIX, 1), "completed"),
    "mid-delete (one old segment renamed .deleted)":
        (lambda mp: crash_on_rename(mp, "", layout.DELETED_FILE_SUFFIX, 2), "completed"),
    "after every old segment is .deleted": (lambda mp: crash_on_rename(mp, layout.SWAP_FILE_SUFFIX, ""), "completed"),
}


def reopen(log: Log, clock) -> Log:
    # No close: the crashed process wrote nothing more. Recovery runs as after a kill.
    return Log.open(log.dir, log.config, recovery_point=0, had_clean_shutdown=False, clock=clock)


def transient_files(directory: str) -> list[str]:
    return [n for n in os.listdir(directory) if n.endswith(layout.TRANSIENT_FILE_SUFFIXES)]


@pytest.mark.parametrize("crash", list(CRASHES), ids=list(CRASHES))
def test_a_crash_during_a_clean_leaves_a_log_that_reopens_consistent(tmp_path, monkeypatch, crash):
    clock = MockTime(current_time_ms=T0)
    log, produced = build(tmp_path, clock)
    original = read_from(log)
    inject, outcome = CRASHES[crash]
    inject(monkeypatch)
    with pytest.raises(Crash):
        cleaner_for(log, clock).compact()
    assert transient_files(log.dir), "the crash should have left the swap half done"
    monkeypatch.undo()

    recovered = reopen(log, clock)
    assert transient_files(recovered.dir) == []
    records = check_guarantees(produced, recovered)
    if outcome == "undone":
        assert records == original
    else:
        assert len(records) < len(original)
    assert recovered.log_end_offset == log.log_end_offset
    # And the log cleans again to completion.
    cleaner_for(recovered, clock).compact()
    assert len(check_guarantees(produced, recovered)) == len(produced.final_values())


def test_a_crash_while_deleting_replaced_segments_leaves_only_garbage(tmp_path):
    clock = MockTime(current_time_ms=T0)
    log, produced = build(tmp_path, clock)
    config = compact_config(segment_bytes=1 << 20, file_delete_delay_ms=60_000)
    log.update_config(config)
    cleaner_for(log, clock).compact()
    deleted = sorted(n for n in os.listdir(log.dir) if n.endswith(layout.DELETED_FILE_SUFFIX))
    assert deleted
    for name in deleted[: len(deleted) // 2]:  # the delayed deletion got halfway
        os.remove(os.path.join(log.dir, name))
    recovered = reopen(log, clock)
    assert transient_files(recovered.dir) == []
    assert len(check_guarantees(produced, recovered)) == len(produced.final_values())


def test_swap_recovery_follows_kafkas_rules():
    names = ["00000000000000000000.log", "00000000000000000000.index", "00000000000000000010.log",
             "00000000000000000010.log.deleted", "00000000000000000000.log.swap",
             "00000000000000000020.log", "00000000000000000030.log.cleaned", "00000000000000000040.log.swap",
             "leader-epoch-checkpoint"]
    plan = plan_swap_recovery(names, lambda name: {"00000000000000000000.log.swap": 20}.get(name, 45))
    # The swap at 40 lies above an unfinished clean (the .cleaned at 30): it goes with it. The swap
    # at 0 is complete: it replaces every segment file in [0, 20).
    assert sorted(plan.delete) == sorted(["00000000000000000010.log.deleted", "00000000000000000030.log.cleaned",
                                          "00000000000000000040.log.swap", "00000000000000000000.log",
                                          "00000000000000000000.index", "00000000000000000010.log"])
    assert plan.rename == (("00000000000000000000.log.swap", "00000000000000000000.log"),)


def test_an_empty_swap_still_replaces_the_segment_of_its_base_offset():
    names = ["00000000000000000005.log", "00000000000000000005.index", "00000000000000000005.log.swap"]
    plan = plan_swap_recovery(names, lambda name: 5)
    assert sorted(plan.delete) == ["00000000000000000005.index", "00000000000000000005.log"]
