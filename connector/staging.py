"""The sink's staging files: where tasks leave their rows for the driver's commit, and who owns them.

Each task of a write stages the sink columns of its Arrow batches in an Arrow
IPC file under ``<log dir>/.seglog-staging/<writer id>/`` and sends the
file's name to the driver, whose commit appends the rows and deletes the
directory (``abort`` deletes it too). The writer id is a random id followed by
the tag of the driver process the write belongs to (``connector.driver_process``):
``<32 hex digits>-<pid>-<start ticks>-<boot id>-<host>``. A driver killed
mid-write leaves its directory behind; every new write first removes the
directories whose driver has ended (``reclaim_staging``), and never one whose
driver may still be running — one on this host that runs, one of another host,
or one whose name gives no driver.

``.seglog-staging`` never parses as a ``<topic>-<partition>`` directory, so
brokers and readers skip it; it is removed once empty.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from .driver_process import DriverProcess

log = logging.getLogger(__name__)

STAGING_DIR = ".seglog-staging"
_WRITER_ID = re.compile(r"^[0-9a-f]{32}-(.+)$")


@dataclass(frozen=True)
class StagedBatches(WriterCommitMessage):
    """What one task staged: the Arrow IPC file (None: the task had no rows) and its row count."""

    path: str | None
    rows: int


def new_staging_dir(log_dir: str, driver: DriverProcess | None = None) -> str:
    """A fresh staging directory of ``log_dir`` for a write of ``driver`` (default: this code's driver);
    created by the first task that stages rows."""
    owner = driver or DriverProcess.current()
    writer_id = uuid.uuid4().hex if owner is None else f"{uuid.uuid4().hex}-{owner.tag}"
    return os.path.join(log_dir, STAGING_DIR, writer_id)


def staging_owner(directory: str) -> DriverProcess | None:
    """The driver a staging directory belongs to, from its name; None: its name gives none."""
    match = _WRITER_ID.match(os.path.basename(os.path.normpath(directory)))
    return None if match is None else DriverProcess.from_tag(match.group(1))


def reclaim_staging(log_dir: str) -> list[str]:
    """Remove the staging directories of ``log_dir`` whose driver has ended; returns them."""
    root = os.path.join(log_dir, STAGING_DIR)
    try:
        names = sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed = []
    for name in names:
        owner = staging_owner(name)
        if owner is None or not owner.has_ended():
            continue
        path = os.path.join(root, name)
        log.warning("removing %s: staged by a write whose driver (pid %d on %s) ended before committing it",
                    path, owner.pid, owner.host)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        _remove_root_if_empty(log_dir)
    return removed


def stage_batches(batches: Iterable[pa.RecordBatch], directory: str, columns: Sequence[str]) -> StagedBatches:
    """Write the sink columns of ``batches`` into a new Arrow IPC file under ``directory``."""
    path = os.path.join(directory, f"{uuid.uuid4().hex}.arrow")
    writer = None
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            batch = batch.select(list(columns))
            if writer is None:
                _make_directory(directory)
                writer = pa.ipc.new_file(path, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
    except BaseException:
        if writer is not None:
            writer.close()
            _remove(path)
        raise
    if writer is None:
        return StagedBatches(None, 0)
    writer.close()
    return StagedBatches(path, rows)


def _make_directory(directory: str, attempts: int = 5) -> None:
    """Create ``directory`` and ``.seglog-staging`` above it, which another write that has just finished may remove
    between the two ``mkdir`` calls (it removes it only while it is empty): then create both again."""
    for attempt in range(attempts):
        try:
            os.makedirs(directory, exist_ok=True)
            return
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise


def staged_messages(messages: Sequence[WriterCommitMessage | None]) -> list[StagedBatches]:
    """The tasks' messages that name a staged file (a failed task sends None, an empty one no file)."""
    return [m for m in messages if isinstance(m, StagedBatches) and m.path is not None]


def read_staged(path: str) -> Iterator[pa.RecordBatch]:
    with pa.memory_map(path) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def remove_staging(directories: Iterable[str], log_dir: str) -> None:
    """Delete staging directories, then ``.seglog-staging`` once nothing else is staged there."""
    for d in set(directories):
        shutil.rmtree(d, ignore_errors=True)
    _remove_root_if_empty(log_dir)


def _remove_root_if_empty(log_dir: str) -> None:
    try:
        os.rmdir(os.path.join(log_dir, STAGING_DIR))
    except OSError:
        pass  # another write is staging, or it is gone already
