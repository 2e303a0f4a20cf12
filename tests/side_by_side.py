"""How the suite runs side by side in pytest-xdist's workers (``make test``: ``-n N --dist loadgroup
--no-loadscope-reorder``): which tests share a worker, the order they are handed out in, and the
tests that run with no other test beside them.

- Work units (``work_units``): tests tied together run on one worker, one after the other. Ties: one
  ``xdist_group``; one module, for its tests that use a fixture of module (class, package) scope, so
  that the fixture is built once, as in a run in one process; a share of the tests of one
  ``JVM_FIXTURES`` session fixture (Spark on two workers, Apache Kafka on one); ``serial``. Every other test is a unit of its own, handed
  to whichever worker is free. The workers write the units to a file the controller's scheduler reads
  (``--dist loadgroup`` here replaces xdist's own, which looks for groups in node ids).
- ``serial`` tests come first, then ``long`` ones (many minutes each, alone on their worker while the
  others share the rest), then the ``JVM_FIXTURES`` units (the largest), then ``slow`` tests (servers,
  Spark, clients), then the quick ones, which fill the workers up at the end.
- A ``serial`` test (it measures time, or loads the machine) runs alone. Every other test runs holding
  a shared lock, a ``serial`` one holding it exclusively; a turnstile in front of the shared lock makes
  the others wait behind a ``serial`` test that asks for it rather than overtake it. The locks wrap the
  whole of a test (setup, call, teardown) and stay out of pytest-timeout's time.

In a run in one process (``-n 0``, ``-p no:xdist``) only the order applies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from typing import Iterator

import pytest

SERIAL = "serial"
LONG = "long"
SLOW = "slow"
# Session fixtures that start a JVM (Spark's driver, an Apache Kafka broker), and on how many workers at
# most: costly to start, and heavy beside each other on a small machine. The modules whose tests use one
# are dealt out to that many work units, in the order of their paths.
JVM_FIXTURES = {"spark": 2, "apache_kafka": 1}
_RUN_DIR = "seglog_run_dir"
UNITS_FILE = "xdist-units.json"
_LOCKS = pytest.StashKey["SerialLocks"]()


class SerialLocks:
    """The run's two lock files (``flock``), opened by one worker."""

    def __init__(self, directory: str) -> None:
        self.turnstile = open(os.path.join(directory, "serial-turnstile.lock"), "a")
        self.room = open(os.path.join(directory, "serial-room.lock"), "a")

    @contextlib.contextmanager
    def beside_others(self) -> Iterator[None]:
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.room, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(self.room, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.room, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self.room, fcntl.LOCK_UN)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)

    def close(self) -> None:
        self.turnstile.close()
        self.room.close()


def _ties(item: pytest.Item) -> list[str]:
    """What keeps ``item`` on the worker of other tests: its ``xdist_group``, ``serial``, its module if it
    uses a fixture of module (class, package) scope, and each ``JVM_FIXTURES`` fixture it uses."""
    ties = [f"group {mark.args[0] if mark.args else mark.kwargs.get('name', 'default')}"
            for mark in item.iter_markers("xdist_group")]
    if item.get_closest_marker(SERIAL):
        ties.append(SERIAL)
    fixtures = item._fixtureinfo.name2fixturedefs if hasattr(item, "_fixtureinfo") else {}
    for name in getattr(item, "fixturenames", ()):
        definitions = fixtures.get(name)
        if name in JVM_FIXTURES:
            ties.append(f"fixture {name}")
        elif definitions and definitions[-1].scope in ("module", "class", "package"):
            ties.append(f"module {item.nodeid.split('::')[0]}")
    return ties


def work_units(items: list[pytest.Item]) -> dict[str, str]:
    """Node id -> the name of its work unit, for the tests that share one; the others go anywhere. Ties
    join: a Spark test's module-scoped fixture takes its module's other tests into its Spark share."""
    parent: dict[str, str] = {}

    def root(tie: str) -> str:
        while parent.setdefault(tie, tie) != tie:
            tie = parent[tie]
        return tie

    ties = {item.nodeid: _ties(item) for item in items}
    for name, workers in JVM_FIXTURES.items():
        modules = sorted({nodeid.split("::")[0] for nodeid, item_ties in ties.items()
                          if f"fixture {name}" in item_ties})
        for nodeid, item_ties in ties.items():
            if f"fixture {name}" in item_ties:
                share = modules.index(nodeid.split("::")[0]) % workers
                item_ties[item_ties.index(f"fixture {name}")] = f"fixture {name} {share}"
    for item_ties in ties.values():
        for tie in item_ties[1:]:
            a, b = root(item_ties[0]), root(tie)
            if a != b:
                parent[max(a, b)] = min(a, b)  # the name of a unit does not depend on the order of its tests
    return {nodeid: root(item_ties[0]) for nodeid, item_ties in ties.items() if item_ties}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    units = work_units(items)
    serial_units = {units[item.nodeid] for item in items if item.get_closest_marker(SERIAL)}
    slow_units = {units[item.nodeid] for item in items if item.nodeid in units and item.get_closest_marker(SLOW)}

    def rank(item: pytest.Item) -> int:
        unit = units.get(item.nodeid)
        if unit in serial_units:
            return 0
        if item.get_closest_marker(LONG):
            return 1
        if unit is not None and unit.startswith("fixture "):
            return 2  # the largest units: they start first
        return 3 if item.get_closest_marker(SLOW) or unit in slow_units else 4

    items.sort(key=rank)  # stable: each rank keeps the collection's order


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Worker side: tell the controller's scheduler the work units (every worker collects the same tests
    and writes the same file, before it reports its collection: this hook runs before xdist's own)."""
    directory = getattr(session.config, "workerinput", {}).get(_RUN_DIR)
    if not directory:
        return
    temporary = os.path.join(directory, f"units.{os.getpid()}.json")
    with open(temporary, "w") as f:
        json.dump(work_units(session.items), f)
    os.replace(temporary, os.path.join(directory, UNITS_FILE))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup``: xdist's scheduling by work units, the units being ``work_units``' (as the
    workers wrote them) and single tests."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    directory = str(config._tmp_path_factory.getbasetemp())

    class GroupScheduling(LoadScopeScheduling):
        units: dict[str, str] = {}

        def schedule(self) -> None:
            if self.collection is None:  # the first call: every worker has collected, and written the file
                self.units = _read_units(os.path.join(directory, UNITS_FILE))
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self.units.get(nodeid, nodeid)

    return GroupScheduling(config, log)


def _read_units(path: str, timeout_s: float = 60) -> dict[str, str]:
    """The work units the workers wrote; waits a little should the file still be on its way."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(path) as f:
                return json.load(f)
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Controller side: the workers write the groups and lock the serial tests' files in the run's base
    temporary directory."""
    node.workerinput[_RUN_DIR] = str(node.config._tmp_path_factory.getbasetemp())


def pytest_configure(config: pytest.Config) -> None:
    directory = getattr(config, "workerinput", {}).get(_RUN_DIR)
    if directory:
        config.stash[_LOCKS] = SerialLocks(directory)


def pytest_unconfigure(config: pytest.Config) -> None:
    locks = config.stash.get(_LOCKS, None)
    if locks is not None:
        locks.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's wrapper: waiting is not the test's time
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    locks = item.config.stash.get(_LOCKS, None)
    if locks is None:
        return (yield)
    with locks.alone() if item.get_closest_marker(SERIAL) else locks.beside_others():
        return (yield)
