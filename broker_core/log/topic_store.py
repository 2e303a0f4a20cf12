"""Topic metadata kept in the log directories: name, topic id, partition count,
configuration overrides.

Kafka keeps this in its metadata log; an embedded seglog keeps one small JSON
document, written atomically (temp file, fsync, rename) into every log
directory with a version counter, so losing or reverting one directory's copy
cannot lose a topic. Each partition directory also gets Kafka's
``partition.metadata`` file naming the topic id.

Creating partitions and deleting a topic touch many directories, so the
store records the change as pending before the first directory is touched
and commits it after the last (``begin`` / ``commit``): an interrupted
creation is rolled back and an interrupted deletion finished at the next
open, by the broker, from ``pending()``. Readers of the document see
committed topics only (the ``topics`` list); pending changes sit beside it.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import uuid
from dataclasses import dataclass, replace
from typing import ClassVar, Sequence

from format import layout
from format.checkpoint import fsync_dir
from format.fs import filesystem_for, join

from .kafka_topics import kafka_topics
from .topic_metadata import TopicMetadata

STORE_FILE = "seglog-topics.json"
STORE_FORMAT_VERSION = 1


def new_topic_id() -> str:
    """A Kafka topic id: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class PendingChange:
    """A change to a topic's partition directories that has begun and not been committed.

    ``CREATE`` adds partitions ``committed_partitions .. topic.partitions - 1`` (a new
    topic has 0 committed partitions); ``DELETE`` removes every partition of the topic.
    """

    CREATE: ClassVar[str] = "create"
    DELETE: ClassVar[str] = "delete"

    action: str
    topic: TopicMetadata
    committed_partitions: int

    def to_json(self) -> dict:
        return {"action": self.action, "topic": self.topic.to_json(),
                "committed_partitions": self.committed_partitions}

    @classmethod
    def from_json(cls, doc: dict) -> "PendingChange":
        return cls(doc["action"], TopicMetadata.from_json(doc["topic"]), int(doc["committed_partitions"]))


def read_topics(fs, root: str) -> dict[str, TopicMetadata]:
    """The committed topics of the log dir ``root`` through fsspec (readers of a dir they do not
    own, on local disk or in a bucket); a dir without a topic store (one Apache Kafka wrote) has
    the topics of its partition directories. Raises ValueError naming the file when it cannot be read."""
    path = join(fs, root, STORE_FILE)
    try:
        doc = json.loads(fs.cat_file(path))
        return {t["name"]: TopicMetadata.from_json(t) for t in doc.get("topics", [])}
    except FileNotFoundError:
        return kafka_topics(fs, root)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable topic metadata: {exc}") from exc


def atomic_write(path: str, text: str, mode: int = 0o666) -> None:
    """Replace ``path`` with ``text`` durably: a temp file (created with ``mode``, less the umask), fsync,
    rename, fsync of the directory."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    if mode != 0o666:
        os.fchmod(fd, mode)  # a temp file left by an earlier crash keeps its own mode otherwise
    with open(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def newest_copy(log_dirs: Sequence[str], file_name: str, what: str) -> tuple[dict, str] | None:
    """The copy of ``file_name`` (a JSON object with a ``version`` counter, kept in every log dir) with
    the highest version, and its path; None when no dir has one. An unreadable copy raises ``ValueError``
    naming the file and ``what`` it holds."""
    best: tuple[dict, str] | None = None
    for d in log_dirs:
        path = os.path.join(d, file_name)
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable {what}: {exc}") from None
        version = doc.get("version", 0) if isinstance(doc, dict) else None
        if not isinstance(version, int):
            raise ValueError(f"{path}: unreadable {what}: no version counter")
        if best is None or version > best[0]["version"]:
            best = (doc, path)
    return best


def write_partition_metadata(partition_dir: str, topic_id: str) -> None:
    """Kafka's ``partition.metadata``: the topic id this directory belongs to."""
    atomic_write(os.path.join(partition_dir, layout.PARTITION_METADATA_FILE), f"version: 0\ntopic_id: {topic_id}\n")


class TopicStore:
    """The topics of a broker, persisted in each of its log directories."""

    def __init__(self, log_dirs: list[str]):
        self.log_dirs = list(log_dirs)
        self._lock = threading.Lock()
        self._version = 0
        self._topics: dict[str, TopicMetadata] = {}
        self._pending: dict[str, PendingChange] = {}
        self._load()

    def _load(self) -> None:
        newest = newest_copy(self.log_dirs, STORE_FILE, "topic metadata")
        if newest is not None:
            best = newest[0]
            self._version = int(best.get("version", 0))
            self._topics = {t["name"]: TopicMetadata.from_json(t) for t in best.get("topics", [])}
            pending = (PendingChange.from_json(p) for p in best.get("pending", []))
            self._pending = {p.topic.name: p for p in pending}
        else:
            # A log dir Apache Kafka wrote: its topics are those of its partition directories,
            # taken into the store with the first change.
            for d in self.log_dirs:
                self._topics.update(kafka_topics(*filesystem_for(d)))

    def _save(self) -> None:
        self._version += 1
        doc = {"format": STORE_FORMAT_VERSION, "version": self._version,
               "topics": [t.to_json() for t in sorted(self._topics.values(), key=lambda t: t.name)]}
        if self._pending:
            doc["pending"] = [p.to_json() for _, p in sorted(self._pending.items())]
        text = json.dumps(doc, indent=1, sort_keys=True)
        for d in self.log_dirs:
            atomic_write(os.path.join(d, STORE_FILE), text)

    def get(self, name: str) -> TopicMetadata | None:
        with self._lock:
            return self._topics.get(name)

    def all(self) -> list[TopicMetadata]:
        with self._lock:
            return sorted(self._topics.values(), key=lambda t: t.name)

    def update(self, name: str, **changes) -> TopicMetadata:
        with self._lock:
            topic = replace(self._topics[name], **changes)
            self._topics[name] = topic
            self._save()
            return topic

    # --- changes to partition directories, committed or rolled back as a whole ---

    def pending(self) -> list[PendingChange]:
        """Changes begun and not committed (an interrupted creation or deletion)."""
        with self._lock:
            return [p for _, p in sorted(self._pending.items())]

    def begin(self, change: PendingChange) -> None:
        """Record ``change`` before its first directory is touched."""
        with self._lock:
            if change.topic.name in self._pending:
                raise ValueError(f"topic {change.topic.name!r} already has a pending {change.action}")
            self._pending[change.topic.name] = change
            if change.action == PendingChange.DELETE:
                self._topics.pop(change.topic.name, None)  # gone for readers from now on
            self._save()

    def commit(self, name: str) -> None:
        """The pending change of ``name`` is complete: a creation's partitions become the topic's."""
        with self._lock:
            change = self._pending.pop(name)
            if change.action == PendingChange.CREATE:
                self._topics[name] = change.topic
            self._save()

    def abandon(self, name: str) -> None:
        """Forget the pending change of ``name`` once it was undone (a creation rolled back)."""
        with self._lock:
            if self._pending.pop(name, None) is not None:
                self._save()
