"""Committing a query's consumer-group offsets into the log dir's ``__consumer_offsets``."""

from __future__ import annotations

import logging
from typing import Mapping

from format.fs import is_local
from format.layout import TopicPartition

from .discovery import LogDirectory
from .options import SourceOptions

log = logging.getLogger(__name__)


def commit_group_offsets(options: SourceOptions, offsets: Mapping[TopicPartition, int]) -> None:
    """Store ``offsets`` as the committed position of ``options.group_id``.

    The log dir must be local: the commit is appended by an embedded broker, which
    holds the directory's lock for the moment it takes.
    """
    from broker_core.group_offsets import commit_offsets_to_log_dir

    directory = LogDirectory(options.path, options.storage_options)
    if not is_local(directory.fs):
        raise RuntimeError(f"option groupId: offsets can only be committed into a local log directory, not "
                           f"{options.path}")
    commit_offsets_to_log_dir(directory.root, options.group_id, dict(offsets))
    log.info("committed offsets of group %s: %s", options.group_id, dict(offsets))
