"""The Spark driver process a sink write belongs to, and whether it is still running.

A write's staging files are the driver's until it commits or aborts them; when
the driver dies first (SIGKILL, OOM, a lost machine) nothing else ever will.
Spark runs a Python data source's driver side in short-lived Python workers
(one plans the write, another commits it), so no Python process lives as long
as the write: the process that does is the driver's JVM, which those workers
descend from (and which exits when a Python driver program dies, its gateway
watching stdin). A ``DriverProcess`` names that JVM — or the calling process
outside Spark — by host, boot, pid and the kernel's start time of the process,
so a pid reused after the driver died is not mistaken for it.

Liveness comes from ``/proc`` (Linux). Where ``/proc`` is missing there is no
``DriverProcess``, and nothing named by one is ever judged ended.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

_PROC = "/proc"
_BOOT_ID = "/proc/sys/kernel/random/boot_id"
_JVM_COMMANDS = ("java",)
# <pid>-<start ticks>-<first 8 hex digits of the boot id>-<host>
_TAG = re.compile(r"^(\d+)-(\d+)-([0-9a-f]{8})-([A-Za-z0-9._-]+)$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "localhost"


def _boot_id() -> str | None:
    try:
        with open(_BOOT_ID) as f:
            return f.read().strip().replace("-", "")[:8].lower()
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, str, int, int] | None:
    """(command, state, parent pid, start ticks) of ``pid`` from ``/proc/<pid>/stat``; None: no such process."""
    try:
        with open(os.path.join(_PROC, str(pid), "stat")) as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command sits in parentheses and may itself hold spaces and parentheses.
    command = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return command, fields[0], int(fields[1]), int(fields[19])


def _driver_pid() -> int:
    """The nearest JVM among this process's ancestors (the Spark driver that runs this worker), else this process."""
    pid = os.getppid()
    while pid > 1:
        stat = _stat(pid)
        if stat is None:
            break
        if stat[0] in _JVM_COMMANDS:
            return pid
        pid = stat[2]
    return os.getpid()


@dataclass(frozen=True)
class DriverProcess:
    """One process of one boot of one host."""

    pid: int
    start_ticks: int
    boot_id: str
    host: str

    @classmethod
    def of_pid(cls, pid: int) -> DriverProcess | None:
        """The running process ``pid`` on this host; None when it is not running or there is no ``/proc``."""
        stat, boot_id = _stat(pid), _boot_id()
        if stat is None or boot_id is None:
            return None
        return cls(pid, stat[3], boot_id, _host())

    @classmethod
    def current(cls) -> DriverProcess | None:
        """The driver that runs this code: the JVM this Spark worker descends from, or this process outside
        Spark; None where processes cannot be told apart (no ``/proc``)."""
        if not os.path.isdir(_PROC):
            return None
        return cls.of_pid(_driver_pid())

    @property
    def tag(self) -> str:
        """The process as a file-name part; ``from_tag`` reads it back."""
        return f"{self.pid}-{self.start_ticks}-{self.boot_id}-{self.host}"

    @classmethod
    def from_tag(cls, tag: str) -> DriverProcess | None:
        match = _TAG.match(tag)
        if match is None:
            return None
        pid, start, boot_id, host = match.groups()
        return cls(int(pid), int(start), boot_id, host)

    def has_ended(self) -> bool:
        """Whether this process is certainly gone: it ran on this host, and the host rebooted since or no
        running process has its pid and start time. A process of another host is never judged ended."""
        if self.host != _host():
            return False
        boot_id = _boot_id()
        if boot_id is None:
            return False
        if boot_id != self.boot_id:
            return True
        stat = _stat(self.pid)
        # A zombie (Z) or dead (X) process has exited; only its parent has not reaped it yet.
        return stat is None or stat[3] != self.start_ticks or stat[1] in ("Z", "X")
