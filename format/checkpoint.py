"""Kafka's checkpoint files: small text files rewritten whole and atomically.

This module owns the checkpoint text format and its atomic replacement. A
checkpoint file is UTF-8 text, each line ending in ``\\n``:

    <version>
    <number of entries>
    <entry>            (one per line, fields separated by a space)

``render_checkpoint`` and ``parse_checkpoint`` turn entries into that text and
back without touching a file (``render_offset_checkpoint`` and
``parse_offset_checkpoint`` for offsets), for writers that go through fsspec.
``CheckpointFile[T]`` handles a local file for any entry type given a
formatter; ``OffsetCheckpointFile`` ("topic partition offset", used by
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` and ``cleaner-offset-checkpoint``) and
``LeaderEpochCheckpointFile`` ("epoch start_offset", used by
``leader-epoch-checkpoint``) are built on it.

A write goes to ``<path>.tmp``, is fsynced, replaces ``<path>`` with
``os.replace`` and then fsyncs the directory, so after a crash the file holds
either the old or the new content, never a mix. A missing file reads as
empty (the first start of a log dir); anything malformed raises
CheckpointError naming the file and the line.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Generic, Iterable, Mapping, Protocol, TypeVar

from format.errors import CheckpointError
from format.layout import TopicPartition

T = TypeVar("T")

TMP_SUFFIX = ".tmp"

_INT = re.compile(r"-?[0-9]+")


def _parse_int(text: str) -> int:
    # Strict: int() would also take " 7", "+7" and "0_7", which no Kafka
    # writer produces.
    if _INT.fullmatch(text) is None:
        raise ValueError(f"{text!r} is not an integer")
    return int(text)


class EntryFormatter(Protocol[T]):
    """Turns one entry into one line and back; ``from_line`` raises ValueError on a bad line."""

    def to_line(self, entry: T) -> str: ...

    def from_line(self, line: str) -> T: ...


def fsync_dir(path: str) -> None:
    """Make a rename or a new file in directory ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def render_checkpoint(version: int, formatter: EntryFormatter[T], entries: Iterable[T], source: str) -> str:
    """The checkpoint text for ``entries``; ``source`` (the file's path or URL) names it in errors."""
    lines = []
    for entry in entries:
        try:
            line = formatter.to_line(entry)
        except ValueError as e:
            raise CheckpointError(f"{source}: cannot write entry {entry!r}: {e}") from None
        if "\n" in line or "\r" in line:
            raise CheckpointError(f"{source}: entry {entry!r} would span lines: {line!r}")
        lines.append(line)
    return "".join(f"{line}\n" for line in [str(version), str(len(lines)), *lines])


def parse_checkpoint(text: str, version: int, formatter: EntryFormatter[T], source: str) -> list[T]:
    """The entries of a checkpoint's text; ``source`` (the file's path or URL) names it in errors."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    # Kafka tolerates an empty file and a file holding only the version.
    if not lines:
        return []
    found = _header(lines[0], 1, "version", source)
    if found != version:
        raise CheckpointError(f"{source}: line 1: unrecognized checkpoint version {found}, expected {version}")
    if len(lines) == 1:
        return []
    expected = _header(lines[1], 2, "entry count", source)
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        try:
            entries.append(formatter.from_line(line.removesuffix("\r")))
        except ValueError as e:
            raise CheckpointError(f"{source}: line {number}: malformed entry {line!r}: {e}") from None
    if len(entries) != expected:
        raise CheckpointError(f"{source}: line 2: count says {expected} entries but the file holds {len(entries)}")
    return entries


def _header(line: str, number: int, what: str, source: str) -> int:
    try:
        return _parse_int(line.removesuffix("\r"))
    except ValueError:
        raise CheckpointError(f"{source}: line {number}: malformed {what} {line!r}") from None


class CheckpointFile(Generic[T]):
    """A versioned list of entries in Kafka's checkpoint text format."""

    def __init__(self, path: str | os.PathLike[str], version: int, formatter: EntryFormatter[T]) -> None:
        self._path = os.fspath(path)
        self.version = version
        self.formatter = formatter

    @property
    def path(self) -> str:
        return self._path

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._path})"

    def render(self, entries: Iterable[T]) -> str:
        """The file content for ``entries``."""
        return render_checkpoint(self.version, self.formatter, entries, self._path)

    def parse(self, text: str) -> list[T]:
        """The entries in a checkpoint's content (as read from this file)."""
        return parse_checkpoint(text, self.version, self.formatter, self._path)

    def read(self) -> list[T]:
        """The entries, or [] if the file does not exist."""
        try:
            with open(self._path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(f"{self._path}: not UTF-8 text at byte {e.start}") from None
        return self.parse(text)

    def write(self, entries: Iterable[T], sync: bool = True) -> None:
        """Replace the file's content atomically; ``sync`` makes it durable before returning."""
        content = self.render(entries).encode("utf-8")
        tmp = self._path + TMP_SUFFIX
        try:
            with open(tmp, "wb") as f:
                f.write(content)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
            os.replace(tmp, self._path)
        except BaseException:
            # Leave no half-written temporary beside the checkpoint.
            try:
                os.remove(tmp)
            except FileNotFoundError:
                pass
            raise
        if sync:
            fsync_dir(os.path.dirname(os.path.abspath(self._path)))


def _split(line: str, fields: int) -> list[str]:
    # Kafka writes one space and reads any run of whitespace.
    parts = line.split()
    if len(parts) != fields:
        raise ValueError(f"expected {fields} fields, found {len(parts)}")
    return parts


class _OffsetFormatter:
    def to_line(self, entry: tuple[TopicPartition, int]) -> str:
        tp, offset = entry
        if not tp.topic or any(c.isspace() for c in tp.topic):
            raise ValueError(f"topic {tp.topic!r} is empty or contains whitespace")
        return f"{tp.topic} {int(tp.partition)} {int(offset)}"

    def from_line(self, line: str) -> tuple[TopicPartition, int]:
        topic, partition, offset = _split(line, 3)
        return TopicPartition(topic, _parse_int(partition)), _parse_int(offset)


OFFSET_CHECKPOINT_VERSION = 0


def render_offset_checkpoint(offsets: Mapping[TopicPartition, int], source: str) -> str:
    """The text of an offset checkpoint ("topic partition offset" lines), to write anywhere
    (a local file through ``OffsetCheckpointFile``, an object store through fsspec)."""
    return render_checkpoint(OFFSET_CHECKPOINT_VERSION, _OffsetFormatter(), offsets.items(), source)


def parse_offset_checkpoint(text: str, source: str) -> dict[TopicPartition, int]:
    """Offsets by partition from an offset checkpoint's text, however it was read; a repeated
    partition keeps its last line."""
    return dict(parse_checkpoint(text, OFFSET_CHECKPOINT_VERSION, _OffsetFormatter(), source))


class OffsetCheckpointFile:
    """An offset per partition: "topic partition offset" lines, version 0."""

    CURRENT_VERSION = OFFSET_CHECKPOINT_VERSION

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._checkpoint: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, self.CURRENT_VERSION, _OffsetFormatter()
        )

    @property
    def path(self) -> str:
        return self._checkpoint.path

    def __repr__(self) -> str:
        return f"OffsetCheckpointFile({self.path})"

    def write(self, offsets: Mapping[TopicPartition, int], sync: bool = True) -> None:
        self._checkpoint.write(offsets.items(), sync)

    def read(self) -> dict[TopicPartition, int]:
        """Offsets by partition; {} if the file does not exist. A repeated partition keeps its last line."""
        return dict(self._checkpoint.read())

    def parse(self, text: str) -> dict[TopicPartition, int]:
        """Offsets by partition from this file's text read elsewhere (e.g. through fsspec)."""
        return parse_offset_checkpoint(text, self.path)

    def render(self, offsets: Mapping[TopicPartition, int]) -> str:
        """The text ``write`` would put in this file."""
        return render_offset_checkpoint(offsets, self.path)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """A leader epoch and the first offset written in it."""

    epoch: int
    start_offset: int


class _EpochFormatter:
    def to_line(self, entry: EpochEntry) -> str:
        return f"{int(entry.epoch)} {int(entry.start_offset)}"

    def from_line(self, line: str) -> EpochEntry:
        epoch, start_offset = _split(line, 2)
        return EpochEntry(_parse_int(epoch), _parse_int(start_offset))


def parse_leader_epoch_checkpoint(text: str, source: str) -> list[EpochEntry]:
    """The epochs of a leader-epoch checkpoint's text (a remote segment's ``.leader_epoch_checkpoint``);
    ``source`` names it in errors."""
    return parse_checkpoint(text, LeaderEpochCheckpointFile.CURRENT_VERSION, _EpochFormatter(), source)


class LeaderEpochCheckpointFile:
    """A partition's leader epochs: "epoch start_offset" lines, version 0."""

    CURRENT_VERSION = 0

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._checkpoint: CheckpointFile[EpochEntry] = CheckpointFile(path, self.CURRENT_VERSION, _EpochFormatter())

    @property
    def path(self) -> str:
        return self._checkpoint.path

    def __repr__(self) -> str:
        return f"LeaderEpochCheckpointFile({self.path})"

    def write(self, entries: Iterable[EpochEntry], sync: bool = True) -> None:
        self._checkpoint.write(entries, sync)

    def read(self) -> list[EpochEntry]:
        """The epochs in file order; [] if the file does not exist."""
        return self._checkpoint.read()
