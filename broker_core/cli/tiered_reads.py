"""The remote tier under a log dir opened by a reading command (``seglog consume --log-dir``): offsets below
the partition's first local segment are fetched from the remote tier's segments (``format.tiered_log``), the
rest from the embedded broker, so the command reads the whole log, remote first.

Options of the remote tier (endpoint, keys) come from ``--storage-option KEY=VALUE``; the tier itself from the
log dir's ``remote-tier.properties`` or ``--remote-storage-url``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from format.layout import TopicPartition

from ..key_values import parse_key_values
from .arguments import UsageError

if TYPE_CHECKING:
    from format.tiered_log import TieredLogDirectory

    from ..broker import FetchResult, OffsetAndTimestamp


def add_remote_tier_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                   help="an fsspec option of the remote tier, e.g. endpoint_url=http://127.0.0.1:8333, key=..., "
                        "secret=... (repeatable)")
    p.add_argument("--remote-storage-url", metavar="URL",
                   help="the remote tier (e.g. s3://bucket/prefix) when the log dir does not name it in "
                        "remote-tier.properties")


def tiered_log_directory(args: argparse.Namespace, log_dir: str) -> TieredLogDirectory:
    """The log dir ``log_dir`` with the remote tier the command line gives it."""
    from format.tiered_log import TieredLogDirectory

    try:
        options = parse_key_values(args.storage_option, "--storage-option")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return TieredLogDirectory(log_dir, remote_storage_url=args.remote_storage_url, remote_storage_options=options)


class TieredReads:
    """``fetch`` and ``list_offsets`` of ``broker`` extended below each partition's first local segment to the
    remote tier of ``directory``; everything else is the broker's."""

    def __init__(self, broker, directories: list[TieredLogDirectory]):
        self.broker = broker
        self.directories = directories

    def __getattr__(self, name: str):
        return getattr(self.broker, name)

    def _directory(self, tp: TopicPartition) -> TieredLogDirectory:
        for directory in self.directories:
            if directory.fs.isdir(directory.partition_dir(tp)):
                return directory
        return self.directories[0]

    def _remote_segments(self, topic: str, partition: int):
        tp = TopicPartition(topic, partition)
        listed = self._directory(tp).segments(tp)
        local = [s for s in listed if s.remote is None]
        return tp, [s for s in listed if s.remote is not None], (local[0].base_offset if local else None)

    def list_offsets(self, topic: str, partition: int, spec, isolation_level="read_uncommitted"
                     ) -> OffsetAndTimestamp | None:
        from ..broker import OffsetAndTimestamp

        if spec == "earliest":
            _, remote, _ = self._remote_segments(topic, partition)
            if remote:
                return OffsetAndTimestamp(remote[0].base_offset, -1)
        return self.broker.list_offsets(topic, partition, spec, isolation_level)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int | None = None,
              isolation_level="read_uncommitted") -> FetchResult:
        from ..broker import DEFAULT_FETCH_MAX_BYTES, FetchResult

        max_bytes = DEFAULT_FETCH_MAX_BYTES if max_bytes is None else max_bytes
        tp, remote, first_local = self._remote_segments(topic, partition)
        holding = [s for s in remote if s.base_offset <= offset <= s.remote.end_offset
                   and (first_local is None or offset < first_local)]
        if not holding:
            return self.broker.fetch(topic, partition, offset, max_bytes, isolation_level)
        segment = holding[0]
        # Up to the first local segment: a remote segment may run past its start, and it serves from there.
        until = segment.remote.end_offset + 1 if first_local is None else min(segment.remote.end_offset + 1,
                                                                               first_local)
        directory = self._directory(tp)
        try:
            with directory.reader(tp, segment) as reader:
                chunk = next(reader.read_chunks(offset, until, max_bytes), None)
        except FileNotFoundError:
            raise FileNotFoundError(f"offsets {offset} to {segment.remote.end_offset} of {tp} are in remote segment "
                                    f"{segment.remote.segment_id}, whose object {directory.location(tp, segment)} "
                                    f"is missing") from None
        if chunk is None:  # nothing left in this segment from offset on
            return self.fetch(topic, partition, until, max_bytes, isolation_level)
        position, data, batches = chunk
        first, last = batches[0], batches[-1]
        records = bytes(data[first.position - position:last.position - position + last.size_in_bytes])
        end = first_local if first_local is not None else segment.remote.end_offset + 1
        return FetchResult(topic, partition, records, end, remote[0].base_offset, end)
