"""Committing a query's consumer-group offsets: to a running broker's coordinator, or into the log dir.

With the option ``bootstrap`` the offsets go to that broker's group
coordinator as an OffsetCommit, as any consumer outside a generation commits
them; the broker owns ``__consumer_offsets`` and every Kafka tool sees them at
once. Without it (embedded, ``path`` only) they are appended to the log dir's
``__consumer_offsets`` by an embedded broker, which holds the directory's lock
for the moment it takes.
"""

from __future__ import annotations

import logging
from typing import Mapping

from format.fs import is_local
from format.layout import TopicPartition
from format.log_dir import LogDirectory

from .options import SourceOptions

log = logging.getLogger(__name__)


def commit_group_offsets(options: SourceOptions, offsets: Mapping[TopicPartition, int]) -> None:
    """Store ``offsets`` as the committed position of ``options.group_id``."""
    if options.bootstrap:
        from .client_options import open_broker

        with open_broker(options.bootstrap, options.client_props) as broker:
            broker.commit_offsets(options.group_id, dict(offsets))
        log.info("committed offsets of group %s through %s: %s", options.group_id, options.bootstrap, dict(offsets))
        return
    from broker_core import Broker

    directory = LogDirectory(options.path, options.storage_options)
    if not is_local(directory.fs):
        raise RuntimeError(f"option groupId: offsets can only be committed into a local log directory, not "
                           f"{options.path}; give the option bootstrap to commit through a running broker")
    # Raises LogDirInUseError while a running broker holds the directory.
    with Broker(directory.root, background=False) as broker:
        broker.commit_offsets(options.group_id, dict(offsets))
    log.info("committed offsets of group %s: %s", options.group_id, dict(offsets))
