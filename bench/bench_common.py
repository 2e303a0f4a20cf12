"""What the benchmarks in this folder share: the environment header, timing, input records and reporting.

The benchmark scripts are run as ``python bench/<name>.py`` from the repository
root, so they find this module by putting their own folder first on
``sys.path`` before importing it. Nothing here is needed by Spark's Python
workers: the connector benchmark's data source must not refer to it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, TypeVar

from format.record import SimpleRecord

T = TypeVar("T")

VALUE_SIZE = 100
KEY_SIZE = 10
MB = 1e6
MIB = 1024 * 1024
GIB = 1024 ** 3

Environment = list[tuple[str, str]]


# --- environment ------------------------------------------------------------------


def log(message: str) -> None:
    """Progress, on stderr, so that stdout holds only the results."""
    print(message, file=sys.stderr, flush=True)


def pin_to_core(cpu: int) -> None:
    """Pin every thread of the process (numpy and pyarrow may have started some) to ``cpu``."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except ProcessLookupError:
            pass  # the thread ended meanwhile


def pinning(pin: bool, cpu: int) -> str:
    """Pin to ``cpu`` when ``pin`` is set; returns the header's description of the outcome."""
    if pin:
        pin_to_core(cpu)
        return f"core {cpu} (of {sorted(os.sched_getaffinity(0))} now allowed)"
    return f"no (allowed cores {sorted(os.sched_getaffinity(0))})"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_total() -> str:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 1024 ** 2:.0f} GiB"
    except OSError:
        pass
    return "unknown"


def file_system(path: str, with_options: bool = True) -> str:
    """The device, type (and mount options, if ``with_options``) of the mount holding ``path``."""
    best = ("", "unknown", "unknown", "")
    path = os.path.realpath(path)
    try:
        with open("/proc/mounts") as f:
            for line in f:
                device, mount, fstype, options = line.split()[:4]
                if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[0]):
                    best = (mount, device, fstype, options)
    except OSError:
        pass
    mount, device, fstype, options = best
    kind = f"{fstype}, {options}" if with_options else fstype
    return f"{path} on {device} ({kind}), {shutil.disk_usage(path).free / GIB:.0f} GiB free"


def git_revision() -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def interpreter() -> str:
    """The interpreter as typed: relative when it is under the working directory (the venv)."""
    relative = os.path.relpath(sys.executable)
    return os.path.basename(sys.executable) if relative.startswith("..") else relative


def environment(entries: Sequence[tuple[str, str]], with_memory: bool = True) -> Environment:
    """The header of a report: date, Python and CPU (with RAM if ``with_memory``), then
    ``entries``, then the git revision and the command line."""
    cpu = f"{cpu_model()} ({os.cpu_count()} cores)"
    if with_memory:
        cpu += f", {memory_total()} RAM"
    return [
        ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("cpu", cpu),
        *entries,
        ("revision", git_revision()),
        ("command", " ".join([interpreter()] + sys.argv)),
    ]


# --- files ------------------------------------------------------------------------


def short_of_disk(directory: str, needed_bytes: int) -> str | None:
    """None when ``directory`` has ``needed_bytes`` free, else how much it has ("1.2 GiB free in /tmp")."""
    free = shutil.disk_usage(directory).free
    return None if free >= needed_bytes else f"{free / GIB:.1f} GiB free in {directory}"


@contextlib.contextmanager
def scratch_directory(prefix: str, parent: str | None = None) -> Iterator[str]:
    """A new directory under ``parent`` (the system's temporary folder by default), removed on exit."""
    directory = tempfile.mkdtemp(prefix=prefix, dir=parent if parent is not None else tempfile.gettempdir())
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# --- input ------------------------------------------------------------------------


EVENTS = ("view", "click", "cart", "buy", "search", "login")
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def event_record(rng: random.Random, timestamp_ms: int, ts_field: bool = False) -> SimpleRecord:
    """A record as an application might produce: a small JSON event padded to ``VALUE_SIZE``
    bytes, keyed by user (``KEY_SIZE`` bytes), with CreateTime ``timestamp_ms`` (also in the
    value as ``"ts"`` if ``ts_field``).

    Compressible the way real events are (shared field names, varying values),
    unlike constant or random bytes.
    """
    user = rng.randrange(100_000)
    ts = f'"ts":{timestamp_ms},' if ts_field else ""
    head = f'{{"user":{user},"event":"{rng.choice(EVENTS)}",{ts}"page":"/p/{rng.randrange(10_000)}","s":"'
    value = (head + "".join(rng.choices(ALPHABET, k=VALUE_SIZE - len(head) - 2)) + '"}').encode()
    key = f"user-{user:05d}".encode()
    assert len(value) == VALUE_SIZE and len(key) == KEY_SIZE
    return SimpleRecord(value, key, timestamp_ms)


# --- measuring --------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessCpu:
    """One process as ``/proc/<pid>/stat`` shows it: its parent, command, and CPU seconds (user + system), its
    own and those of its children it has reaped."""

    ppid: int
    command: str
    own_s: float
    reaped_s: float


def process_table() -> dict[int, ProcessCpu]:
    """Every process on the machine, by pid (those that vanish while being read are left out)."""
    tick = os.sysconf("SC_CLK_TCK")
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command, which may hold spaces
        table[int(name)] = ProcessCpu(int(fields[1]), stat[stat.index("(") + 1:stat.rindex(")")],
                                      (int(fields[11]) + int(fields[12])) / tick,
                                      (int(fields[13]) + int(fields[14])) / tick)
    return table


def descendants(table: dict[int, ProcessCpu], root: int) -> list[int]:
    """The pids under ``root`` in ``table``, at any depth."""
    children: dict[int, list[int]] = {}
    for pid, process in table.items():
        children.setdefault(process.ppid, []).append(pid)
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds used so far by process ``root`` and every process under it (Spark's JVM, its Python daemon
    and workers), with what their finished children used."""
    table = process_table()
    return sum(table[pid].own_s + table[pid].reaped_s for pid in (root, *descendants(table, root))
               if pid in table)


def timed(action: Callable[[], T]) -> tuple[float, T]:
    """Wall-clock seconds ``action`` takes, after a garbage collection, and what it returns."""
    gc.collect()
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of each run over the same ``count`` items (records or rows) and ``bytes``."""

    count: int
    seconds: tuple[float, ...]
    bytes: int = 0

    @property
    def best_rate(self) -> float:
        """Items per second in the fastest run."""
        return self.count / min(self.seconds)

    @property
    def median_rate(self) -> float:
        return self.count / statistics.median(self.seconds)

    @property
    def best_mb_s(self) -> float:
        """10^6 bytes per second in the fastest run."""
        return self.bytes / min(self.seconds) / MB

    @property
    def median_mb_s(self) -> float:
        return self.bytes / statistics.median(self.seconds) / MB

    def run_ratio(self, other: Timing) -> float | None:
        """The median over the runs of this rate over ``other``'s in the same run: runs taken in turn ran under
        the same load, where the best runs of two need not (this machine's speed drifts by a factor of two from
        one minute to the next). None when the two have not run as many times."""
        if len(self.seconds) != len(other.seconds):
            return None
        return statistics.median((self.count / mine) / (other.count / theirs)
                                 for mine, theirs in zip(self.seconds, other.seconds))


# --- reporting --------------------------------------------------------------------


def rate(r: float) -> str:
    """A rate per second, short: ``1.23 M`` or ``456 k``."""
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.0f} k"


def ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def ratio_cell(best: float | None, paired: float | None) -> str:
    """A ratio of the best runs and the median of the runs' ratios (``Timing.run_ratio``), as one cell."""
    return ratio_text(best) if paired is None else f"{ratio_text(best)}; {ratio_text(paired)}"


def print_environment(env: Environment) -> None:
    print()
    for k, v in env:
        print(f"{k:>10}: {v}")


def print_header(header: str) -> None:
    """A text table's header line, underlined."""
    print(header)
    print("-" * len(header))


def date_and_command(env: Environment) -> tuple[str, str]:
    """The day and the command line of ``env``, as the markdown rows name them."""
    env_map = dict(env)
    return env_map["date"].split()[0], env_map["command"]


def print_markdown_header(cells: Sequence[str]) -> None:
    """A blank line, then a markdown table's header and separator rows."""
    print("\n| " + " | ".join(cells) + " |")
    print("|" + "---|" * len(cells))


def print_markdown_row(cells: Sequence[str]) -> None:
    print("| " + " | ".join(cells) + " |")


@dataclass(frozen=True)
class Target:
    """A goal a figure is held against."""

    description: str
    measured: str
    met: bool


def print_targets(found: Sequence[Target]) -> None:
    print("\ntargets")
    for t in found:
        print(f"  {t.description}: {t.measured} -> {'met' if t.met else 'NOT met'}")


def print_markdown_targets(found: Sequence[Target]) -> None:
    print_markdown_header(("target", "measured", "met"))
    for t in found:
        print_markdown_row((t.description, t.measured, "yes" if t.met else "no"))


# --- arguments --------------------------------------------------------------------


def argument_parser(doc: str, quick_help: str, pin: bool = True) -> argparse.ArgumentParser:
    """A parser described by the first paragraph of ``doc``, with ``--quick`` and ``--markdown``,
    and ``--no-pin`` and ``--cpu`` if ``pin``."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--markdown", action="store_true", help="also print rows ready for BENCHMARKS.md")
    if pin:
        p.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin the process to one core")
        p.add_argument("--cpu", type=int, default=0, help="the core to pin to (default 0)")
    return p
