"""Commands as a user runs them at a shell: the environment with or without the virtualenv
active, and a command run to its end within a deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

VENV_BIN = os.path.dirname(sys.executable)


def user_environment(*, venv_active: bool) -> dict[str, str]:
    """A user's shell: no SPARK_HOME or PYSPARK_* settings, and the virtualenv's bin/ on PATH only
    when it is active. Spark binds loopback only, as every test here."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_HOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != VENV_BIN]
    if venv_active:  # what `. .venv/bin/activate` does
        path.insert(0, VENV_BIN)
        env["VIRTUAL_ENV"] = os.path.dirname(VENV_BIN)
    env["PATH"] = os.pathsep.join(path)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def run_to_end(command: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    """``command`` to its end; past ``timeout_s`` its whole process group (a JVM and its Python
    workers) is killed and the test fails with the end of its standard error."""
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(command[:2])} did not finish in {timeout_s} s; stderr ends:\n{err[-3000:]}")
    return subprocess.CompletedProcess(command, proc.returncode, out, err)
