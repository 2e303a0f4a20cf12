"""``ServerView``: what the console reads of a running broker, and nothing it could write with.

It reads the server's ``Broker`` (topics, logs, fetches), its group coordinator (live groups from memory),
the cluster id and the brokers of the cluster: this node's listeners on a single broker, the
metadata cache's live brokers in cluster mode. In cluster mode the topics and their partitions' leaders,
replicas and in-sync replicas are the metadata cache's too, the offsets and sizes those of the replicas this
broker holds (unknown for the others). Every answer comes from memory or an index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from format.layout import TopicPartition

from ..broker import PartitionDescription, TopicDescription
from ..errors import KafkaError, UnknownTopicOrPartitionError
from ..group_offsets import GroupDescription
from ..live_groups import describe_live_group
from .segments import SegmentDescription, describe_segments

if TYPE_CHECKING:
    from ..broker import Broker
    from ..log.log import Log
    from ..server.broker_server import BrokerServer
    from ..server.metadata_cache import MetadataCache

#: The topic settings the console shows beside a topic's partitions (Kafka's names).
RETENTION_CONFIG_NAMES = ("cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
                          "delete.retention.ms", "min.cleanable.dirty.ratio", "local.retention.ms",
                          "local.retention.bytes", "remote.storage.enable")


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    endpoints: tuple[str, ...]  # listener://host:port
    rack: str | None = None


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int | None
    node_id: int  # the broker serving the console
    brokers: tuple[BrokerNode, ...]


class ServerView:
    """A read interface over a running ``BrokerServer``: ``ServerView.of(server)``."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.broker: Broker = server.broker
        self.cluster_id = server.cluster_id

    @classmethod
    def of(cls, server: BrokerServer) -> ServerView:
        return cls(server)

    def _metadata_cache(self) -> MetadataCache | None:
        replica_manager = getattr(self.server.cluster_mode, "replica_manager", None)
        return None if replica_manager is None else replica_manager.metadata_cache

    # --- cluster ----------------------------------------------------------------------

    def cluster(self) -> ClusterDescription:
        node_id = self.broker.node_id
        cache = self._metadata_cache()
        if cache is not None:
            controller, brokers = cache.controller_id(), tuple(
                BrokerNode(b.id, tuple(e.connection_string for e in b.endpoints), b.rack)
                for _, b in sorted(cache.alive_brokers().items()))
        else:  # a single broker is its own controller
            controller, brokers = node_id, (BrokerNode(node_id, tuple(
                e.connection_string for e in self.server.bound_endpoints), self.server.config.broker_rack),)
        return ClusterDescription(self.cluster_id, controller, node_id, brokers)

    # --- topics -----------------------------------------------------------------------

    def topic_names(self) -> list[str]:
        cache = self._metadata_cache()
        return cache.topic_names() if cache is not None else sorted(self.broker.list_topics())

    def _cached_partitions(self, cache: MetadataCache, topic: str) -> dict:
        partitions = cache.topic(topic)
        if partitions is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return partitions

    def partition_count(self, topic: str) -> int:
        cache = self._metadata_cache()
        return self.broker.partitions_for(topic) if cache is None else len(self._cached_partitions(cache, topic))

    def describe_topic(self, name: str) -> TopicDescription:
        cache = self._metadata_cache()
        if cache is None:
            return self.broker.describe_topic(name)
        partitions = self._cached_partitions(cache, name)
        local = self.broker.topics.get(name)
        described = []
        for p, meta in sorted(partitions.items()):
            log = self.replica_log(TopicPartition(name, p))
            if log is None:  # replicated on other brokers only: its offsets and size are theirs to tell
                described.append(PartitionDescription(p, meta.leader, -1, -1, -1, None, None, meta.replicas, meta.isr))
            else:
                described.append(PartitionDescription(p, meta.leader, log.log_start_offset, log.log_end_offset,
                                                      log.high_watermark, log.size, len(log.segments), meta.replicas,
                                                      meta.isr))
        return TopicDescription(name, local.topic_id if local else "", described,
                                dict(local.config) if local else {})

    def retention_config(self, name: str) -> dict[str, str]:
        """The topic's effective retention and segment settings (its overrides over the broker's defaults)."""
        props = self.broker.log_config(name).to_props()
        return {key: props[key] for key in RETENTION_CONFIG_NAMES if key in props}

    def replica_log(self, tp: TopicPartition) -> Log | None:
        return self.server.replica_log(tp)

    def held_log(self, topic: str, partition: int) -> Log:
        """``replica_log``, or UnknownTopicOrPartitionError saying this broker holds no replica of it."""
        tp = TopicPartition(topic, partition)
        log = self.replica_log(tp)
        if log is None:
            raise UnknownTopicOrPartitionError(f"partition {tp} is not on this broker")
        return log

    def segments(self, topic: str, partition: int) -> list[SegmentDescription]:
        return describe_segments(self.held_log(topic, partition))

    # --- consumer groups --------------------------------------------------------------

    def group_ids(self) -> list[str]:
        return self.server.group_coordinator.group_ids()

    def describe_group(self, group_id: str) -> GroupDescription:
        return describe_live_group(self.server.group_coordinator, self.server.high_watermark, group_id)

    def group_lag(self) -> dict[str, int]:
        """Each live group's total lag over the partitions it has committed or been assigned."""
        out = {}
        for group_id in self.group_ids():
            try:
                rows = self.describe_group(group_id).partitions
            except KafkaError:
                continue  # deleted since listed, or its coordinator partition is loading
            out[group_id] = sum(row.lag for row in rows if row.lag is not None)
        return out
