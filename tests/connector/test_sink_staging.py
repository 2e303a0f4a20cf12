"""The sink's staging files: a write removes those whose driver has ended and keeps those of writers that may
still run."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from connector.driver_process import DriverProcess
from connector.staging import STAGING_DIR, new_staging_dir, reclaim_staging, stage_batches, staging_owner
from tests.broker_core.wait_kit import wait_until
from tests.connector.conftest import produce_numbered
from tests.connector.driver_kit import ROWS, kill_driver_at, paused_driver
from tests.connector.test_sink import make_log_dir

ROW = pa.record_batch({"value": pa.array(["v"], pa.string())})


def staged_files(log_dir: str) -> dict[str, list[str]]:
    """The staging directories of ``log_dir`` and the files in each."""
    root = os.path.join(log_dir, STAGING_DIR)
    if not os.path.isdir(root):
        return {}
    return {name: sorted(os.listdir(os.path.join(root, name))) for name in sorted(os.listdir(root))}


def stage_for(log_dir: str, driver: DriverProcess) -> str:
    """One staged row in a new staging directory of ``driver``'s write; returns the directory's name."""
    directory = new_staging_dir(log_dir, driver)
    stage_batches([ROW], directory, ["value"])
    return os.path.basename(directory)


@pytest.fixture()
def ended_process():
    """A process of this host that ran and has ended (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process = DriverProcess.of_pid(child.pid)
    child.kill()
    child.wait(timeout=30)
    return process


# --- which staging directories a write removes, without Spark ----------------------------------------


def test_a_staging_dir_whose_driver_ended_is_removed_and_one_whose_driver_runs_is_kept(tmp_path, ended_process):
    log_dir = make_log_dir(tmp_path / "logs", t=1)
    dead = stage_for(log_dir, ended_process)
    live = stage_for(log_dir, DriverProcess.current())
    assert ended_process.has_ended() and not DriverProcess.current().has_ended()
    assert reclaim_staging(log_dir) == [os.path.join(log_dir, STAGING_DIR, dead)]
    assert list(staged_files(log_dir)) == [live]
    assert len(staged_files(log_dir)[live]) == 1


def test_a_driver_whose_pid_now_names_another_process_or_that_ran_before_a_reboot_has_ended(tmp_path):
    log_dir = make_log_dir(tmp_path / "logs", t=1)
    running = DriverProcess.current()
    pid_reused = dataclasses.replace(running, start_ticks=running.start_ticks - 1)
    before_reboot = dataclasses.replace(running, boot_id=format(int(running.boot_id, 16) ^ 1, "08x"))
    for driver in (pid_reused, before_reboot):
        stage_for(log_dir, driver)
    assert len(reclaim_staging(log_dir)) == 2
    assert not os.path.exists(os.path.join(log_dir, STAGING_DIR))  # nothing left: the root goes too


def test_staging_dirs_of_another_host_or_naming_no_driver_are_kept(tmp_path, ended_process):
    log_dir = make_log_dir(tmp_path / "logs", t=1)
    elsewhere = stage_for(log_dir, dataclasses.replace(ended_process, host="other-host"))
    stage_batches([ROW], os.path.join(log_dir, STAGING_DIR, "job"), ["value"])
    assert reclaim_staging(log_dir) == []
    assert sorted(staged_files(log_dir)) == sorted([elsewhere, "job"])


def test_a_staging_dir_name_gives_its_driver_back(tmp_path):
    driver = DriverProcess.current()
    directory = new_staging_dir(str(tmp_path), driver)
    assert os.path.dirname(directory) == os.path.join(str(tmp_path), STAGING_DIR)
    assert staging_owner(directory) == driver
    assert staging_owner(os.path.join(str(tmp_path), STAGING_DIR, "job")) is None


# --- a driver killed mid-write, through Spark ---------------------------------------------------------


@pytest.mark.slow
def test_a_driver_killed_mid_write_leaves_staging_files_that_the_next_write_removes_keeping_a_live_writes(
        spark, tmp_path):
    source, sink = str(tmp_path / "source"), str(tmp_path / "sink")
    produce_numbered(source, "src", 1, ROWS)
    make_log_dir(sink, dst=2, other=1)
    kill_driver_at("before-commit", source, sink, str(tmp_path / "killed"), str(tmp_path / "killed-paused"))
    left = staged_files(sink)
    assert len(left) == 1 and all(f.endswith(".arrow") for files in left.values() for f in files), left
    (killed_dir,) = left
    assert wait_until(staging_owner(killed_dir).has_ended, timeout_s=30)

    with paused_driver("before-write", source, sink, str(tmp_path / "live"), str(tmp_path / "live-paused"),
                       topic="other") as live:
        during = staged_files(sink)
        (live_dir,) = set(during) - {killed_dir}
        owner = staging_owner(live_dir).pid  # the live driver's JVM, which outlives the workers that stage
        assert os.getsid(owner) == live.pid and Path(f"/proc/{owner}/comm").read_text().strip() == "java"
        spark.createDataFrame([("next",)], "value string").write.format("seglog").option("path", sink) \
            .option("topic", "dst").mode("append").save()
        assert staged_files(sink) == {live_dir: during[live_dir]}  # the killed driver's went, the live one's stay

    assert wait_until(staging_owner(live_dir).has_ended, timeout_s=30)
    spark.createDataFrame([("after",)], "value string").write.format("seglog").option("path", sink) \
        .option("topic", "dst").mode("append").save()
    assert not os.path.exists(os.path.join(sink, STAGING_DIR))
