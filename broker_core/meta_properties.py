"""``meta.properties``: which cluster and node a log directory belongs to (Kafka's MetaProperties).

Kafka writes this Java properties file into every log directory when the
directory is formatted, and refuses to start when the directories disagree
or belong to another node — so a directory copied from another broker, or a
node id changed by mistake, is caught before any data is served. seglog
writes the same file (version 1, KRaft's layout) the first time a broker
starts on a directory::

    #
    #<date>
    cluster.id=Y2LsYqTUSMyV8rmV2EtVZw
    directory.id=q7dvvhOFQBqNBSm2vIqP7A
    node.id=0
    version=1

The cluster id is what Metadata and DescribeCluster report.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from dataclasses import dataclass
from typing import Sequence

from format import layout
from format.checkpoint import fsync_dir
from format.properties import parse_properties

from .errors import InvalidConfigurationError

META_PROPERTIES_VERSION = 1


def random_uuid() -> str:
    """A Kafka ``Uuid`` as text: 16 random bytes in URL-safe base64 without padding."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        # Kafka never hands out ids starting with '-' (they read like command-line flags).
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class MetaProperties:
    """The identity of one log directory."""

    cluster_id: str
    node_id: int
    directory_id: str
    version: int = META_PROPERTIES_VERSION

    def to_text(self) -> str:
        stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
        return (f"#\n#{stamp}\ncluster.id={self.cluster_id}\ndirectory.id={self.directory_id}\n"
                f"node.id={self.node_id}\nversion={self.version}\n")


def read_meta_properties(log_dir: str) -> MetaProperties | None:
    """The directory's meta.properties, or None if it has none yet."""
    path = os.path.join(log_dir, layout.META_PROPERTIES_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        props = parse_properties(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidConfigurationError(f"{path}: not a properties file: byte 0x{data[exc.start]:02x} at position "
                                        f"{exc.start} is not text") from None
    numbers = {}
    for key, default in (("version", "0"), ("node.id", props.get("broker.id"))):
        text = props.get(key, default)
        if text is None:
            raise InvalidConfigurationError(f"{path}: no node.id")
        try:
            numbers[key] = int(text)
        except ValueError:
            raise InvalidConfigurationError(f"{path}: {key}={text!r} is not a number") from None
    version, node_id = numbers["version"], numbers["node.id"]
    cluster_id = props.get("cluster.id")
    if not cluster_id:
        raise InvalidConfigurationError(f"{path}: no cluster.id")
    return MetaProperties(cluster_id, node_id, props.get("directory.id", ""), version)


def write_meta_properties(log_dir: str, meta: MetaProperties) -> None:
    """Write atomically: a temp file, fsync, rename, fsync the directory."""
    path = os.path.join(log_dir, layout.META_PROPERTIES_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(meta.to_text())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(log_dir)


def ensure_meta_properties(log_dirs: Sequence[str], node_id: int, cluster_id: str | None = None) -> str:
    """Check the directories' meta.properties agree with each other and with ``node_id``; write missing ones.

    Returns the cluster id: the one the directories already carry, else
    ``cluster_id``, else a new random one. Raises InvalidConfigurationError
    when directories name different clusters or another node, as Kafka
    refuses to start then.
    """
    found = {d: read_meta_properties(d) for d in log_dirs}
    cluster_ids = {m.cluster_id for m in found.values() if m is not None}
    if len(cluster_ids) > 1:
        raise InvalidConfigurationError(
            "the log directories belong to different clusters: "
            + ", ".join(f"{d} has {m.cluster_id}" for d, m in found.items() if m is not None))
    for d, meta in found.items():
        if meta is not None and meta.node_id != node_id:
            raise InvalidConfigurationError(f"Stored node id {meta.node_id} in {d} doesn't match the configured "
                                            f"node.id {node_id}")
    existing = next(iter(cluster_ids), None)
    if existing is not None and cluster_id is not None and existing != cluster_id:
        raise InvalidConfigurationError(f"the log directories belong to cluster {existing}, not {cluster_id}")
    chosen = existing or cluster_id or random_uuid()
    for d, meta in found.items():
        if meta is None:
            os.makedirs(d, exist_ok=True)
            write_meta_properties(d, MetaProperties(chosen, node_id, random_uuid()))
    return chosen
