"""How the suite runs side by side in pytest-xdist's workers (``make test``: ``-n N --dist loadgroup
--no-loadscope-reorder``): which tests share a worker, the order they are handed out in, and the
tests that run with no other test beside them.

- Work units (``group_of``): the tests of one ``xdist_group``; the tests of a module that use a fixture
  of module (or class, package) scope, so that the fixture is built once, as in a run in one process;
  the ``serial`` tests. Every other test is a unit of its own, handed to whichever worker is free.
  The workers write the groups to a file the controller's scheduler reads (``--dist loadgroup`` here
  replaces xdist's own, which finds the groups in node ids).
- ``serial`` tests come first, then ``slow`` ones (servers, Spark, clients), then the quick ones,
  which fill the workers up at the end.
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
from typing import Iterator

import pytest

SERIAL = "serial"
SLOW = "slow"
_LOCK_DIR = "seglog_run_dir"
GROUPS_FILE = "xdist-groups.json"
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


def group_of(item: pytest.Item) -> str | None:
    """The work unit ``item`` shares with others: its ``xdist_group``, else its module if it uses a fixture
    that lives longer than a test but not the whole session; None when it can go anywhere."""
    marker = item.get_closest_marker("xdist_group")
    if marker is not None:
        return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))
    if item.get_closest_marker(SERIAL):
        return SERIAL
    fixtures = item._fixtureinfo.name2fixturedefs if hasattr(item, "_fixtureinfo") else {}
    for name in getattr(item, "fixturenames", ()):
        definitions = fixtures.get(name)
        if definitions and definitions[-1].scope in ("module", "class", "package"):
            return item.nodeid.split("::")[0]
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {item: group_of(item) for item in items}
    slow_groups = {group for item, group in groups.items() if group and item.get_closest_marker(SLOW)}

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker(SERIAL):
            return 0
        return 1 if item.get_closest_marker(SLOW) or groups[item] in slow_groups else 2

    items.sort(key=rank)  # stable: each rank keeps the collection's order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Worker side: tell the controller's scheduler the groups (every worker collects the same tests and
    writes the same file, before it reports its collection)."""
    directory = getattr(session.config, "workerinput", {}).get(_LOCK_DIR)
    if not directory:
        return
    groups = {item.nodeid: group for item in session.items if (group := group_of(item)) is not None}
    temporary = os.path.join(directory, f"groups.{os.getpid()}.json")
    with open(temporary, "w") as f:
        json.dump(groups, f)
    os.replace(temporary, os.path.join(directory, GROUPS_FILE))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup``: xdist's scheduling by work units, the units being ``group_of``'s groups (as
    the workers wrote them) and single tests."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    directory = str(config._tmp_path_factory.getbasetemp())

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] = {}

        def schedule(self) -> None:
            if self.collection is None:  # the first call: every worker has collected, and written the file
                with open(os.path.join(directory, GROUPS_FILE)) as f:
                    self.groups = json.load(f)
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """Controller side: the workers write the groups and lock the serial tests' files in the run's base
    temporary directory."""
    node.workerinput[_LOCK_DIR] = str(node.config._tmp_path_factory.getbasetemp())


def pytest_configure(config: pytest.Config) -> None:
    directory = getattr(config, "workerinput", {}).get(_LOCK_DIR)
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
