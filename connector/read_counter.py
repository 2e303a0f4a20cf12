"""The bytes of segment files a batch reader's reads have read (``SeglogBatchReader.counter``): made with the
reader when a query is planned, added to by ``reading.read_range`` (or, through a broker, by
``remote.fetch_range``) where the reader reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReadCounter:
    """Bytes of segment files (``.log``) that reads counted by it have read."""

    bytes_read: int = 0
