"""Tiered storage on the broker (Kafka's ``storage.internals.log`` remote classes, KIP-405):
``RemoteStorageManager`` moves a segment's files to and from the remote tier through fsspec,
``RemoteLogManager`` decides what to copy and what to delete, following ``format.remote_tier``'s layout and
metadata states, and ``RemoteLogReader`` reads tiered segments back for fetches and offsets."""

from .remote_log_manager import RemoteLogManager
from .remote_storage_manager import LogSegmentData, RemoteStorageManager, write_remote_tier_file

__all__ = ["LogSegmentData", "RemoteLogManager", "RemoteStorageManager", "write_remote_tier_file"]
