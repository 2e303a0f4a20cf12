"""A tiered broker against a remote tier, and what the tests check of the tier: which offsets it holds, and
that it holds nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.log.log import Log
from broker_core.log.remote import RemoteLogManager, RemoteStorageManager
from format import remote_tier
from format.layout import TopicPartition
from format.record_batch import iter_batches
from format.remote_tier import METADATA_SUFFIX, RemoteLogSegmentState

T0 = 1_800_000_000_000
TOPIC = "events"
#: Small segments (about four one-record batches each) and a local tail of about two segments.
TIERED_TOPIC = {"remote.storage.enable": "true", "segment.bytes": "1024", "local.retention.bytes": "2000",
                "retention.ms": "-1", "file.delete.delay.ms": "0"}


def tiered_config(url: str, options: dict[str, str], **extra) -> dict[str, object]:
    return {"remote.log.storage.system.enable": "true", "remote.storage.url": url,
            "remote.log.manager.task.interval.ms": "1000",
            **{f"remote.storage.options.{k}": v for k, v in options.items()}, **extra}


def open_broker(log_dir, url: str, options: dict[str, str], clock: MockTime | None = None, **extra) -> Broker:
    return Broker(str(log_dir), tiered_config(url, options, **extra), clock=clock or MockTime(current_time_ms=T0),
                  background=False)


def produce(broker: Broker, first: int, count: int) -> None:
    """``count`` records, one batch each, values ``value-<n>`` padded to 150 bytes."""
    for n in range(first, first + count):
        broker.produce(TOPIC, [(None, f"value-{n}".encode().ljust(150, b"."))], partition=0)


def manager_over(broker: Broker, fs, url: str, **kwargs) -> RemoteLogManager:
    """A remote log manager over the broker's logs writing through ``fs`` (a restart builds a new one)."""
    return RemoteLogManager(broker.config, broker.log_manager.all_logs, RemoteStorageManager(fs, url),
                            clock=broker.clock, **kwargs)


def tier_round(broker: Broker, manager: RemoteLogManager) -> None:
    """One remote log manager round, then one retention pass (which deletes copied local segments)."""
    manager.run_once()
    broker.log_manager.cleanup_logs()
    broker.log_manager.scheduler.run_due()


@dataclass
class TierView:
    remote: list[remote_tier.RemoteLogSegmentMetadata]
    objects: list[str]
    log: Log


def view(broker: Broker, fs, url: str) -> TierView:
    topic_id = broker.describe_topic(TOPIC).topic_id
    fs.invalidate_cache()
    directory = fs._strip_protocol(remote_tier.partition_path(url, TOPIC, topic_id, 0))
    try:
        objects = sorted(n for n in fs.ls(directory, detail=False) if n.rstrip("/") != directory.rstrip("/"))
    except FileNotFoundError:
        objects = []
    return TierView(remote_tier.list_segments(fs, url, TOPIC, topic_id, 0), objects,
                    broker.log_manager.get_log(TopicPartition(TOPIC, 0)))


def assert_tier_whole(broker: Broker, fs, url: str) -> TierView:
    """Every remote segment complete, every object belonging to one, the remote segments contiguous from the
    log start offset and meeting the local ones with no gap, and each remote ``.log`` holding exactly its
    offsets."""
    v = view(broker, fs, url)
    assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in v.remote), v.remote
    expected = sorted(fs._strip_protocol(remote_tier.segment_object(url, m, s))
                      for m in v.remote for s in (*m.objects, METADATA_SUFFIX))
    assert v.objects == expected, "objects of no complete segment (orphans) or missing objects"
    lg = v.log
    next_offset = lg.log_start_offset
    for m in v.remote:
        assert m.base_offset == next_offset, f"gap or overlap at {next_offset}: {m}"
        data = fs.cat_file(fs._strip_protocol(remote_tier.segment_object(url, m, ".log")))
        offsets = [b.header.base_offset for b in iter_batches(data)]
        assert offsets == list(range(m.base_offset, m.end_offset + 1))
        assert len(data) == m.size_in_bytes
        next_offset = m.end_offset + 1
    assert lg.local_log_start_offset <= next_offset, "a gap between the remote tier and the local segments"
    return v
