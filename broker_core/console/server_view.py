"""``ServerView``: what the console reads of a running broker, and nothing it could write with.

It holds the ``Broker`` (topics, logs, fetches), the group coordinator when one runs (live groups from
memory), the cluster id and the brokers of the cluster: this node's listeners on a single broker, the
metadata cache's live brokers in cluster mode. In cluster mode the topics and their partitions' leaders,
replicas and in-sync replicas are the metadata cache's too, the offsets and sizes those of the replicas this
broker holds (unknown for the others). Every answer comes from memory or an index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from format.layout import TopicPartition

from ..broker import PartitionDescription, TopicDescription
from ..errors import KafkaError, UnknownTopicOrPartitionError
from ..group_offsets import GroupDescription
from .live_groups import describe_live_group
from .segments import SegmentDescription, describe_segments

if TYPE_CHECKING:
    from ..broker import Broker
    from ..coordinator.group import GroupCoordinator
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
    """A read interface over a broker: ``ServerView.of(server)`` for a running ``BrokerServer``, or
    ``ServerView(broker, coordinator)`` around an embedded one (groups then come from the files)."""

    def __init__(self, broker: Broker, group_coordinator: GroupCoordinator | None = None, *,
                 cluster_id: str | None = None,
                 cluster: Callable[[], tuple[int | None, tuple[BrokerNode, ...]]] | None = None,
                 metadata_cache: Callable[[], MetadataCache | None] | None = None) -> None:
        self.broker = broker
        self.group_coordinator = group_coordinator
        self.cluster_id = cluster_id
        self._cluster = cluster
        self._metadata_cache = metadata_cache or (lambda: None)

    @classmethod
    def of(cls, server: BrokerServer) -> ServerView:
        def metadata_cache() -> MetadataCache | None:
            replica_manager = getattr(server.cluster_mode, "replica_manager", None)
            return None if replica_manager is None else replica_manager.metadata_cache

        def cluster() -> tuple[int | None, tuple[BrokerNode, ...]]:
            cache = metadata_cache()
            if cache is not None:
                return cache.controller_id(), tuple(
                    BrokerNode(b.id, tuple(e.connection_string for e in b.endpoints), b.rack)
                    for _, b in sorted(cache.alive_brokers().items()))
            # A single broker is its own controller.
            node = server.config.node_id
            return node, (BrokerNode(node, tuple(e.connection_string for e in server.bound_endpoints),
                                     server.config.broker_rack),)

        return cls(server.broker, server.group_coordinator, cluster_id=server.cluster_id, cluster=cluster,
                   metadata_cache=metadata_cache)

    # --- cluster ----------------------------------------------------------------------

    def cluster(self) -> ClusterDescription:
        node_id = self.broker.node_id
        if self._cluster is None:
            controller, brokers = node_id, (BrokerNode(node_id, ()),)
        else:
            controller, brokers = self._cluster()
        return ClusterDescription(self.cluster_id, controller, node_id, brokers)

    # --- topics -----------------------------------------------------------------------

    def topic_names(self) -> list[str]:
        cache = self._metadata_cache()
        return cache.topic_names() if cache is not None else sorted(self.broker.list_topics())

    def partition_count(self, topic: str) -> int:
        cache = self._metadata_cache()
        if cache is None:
            return self.broker.partitions_for(topic)
        partitions = cache.topic(topic)
        if partitions is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return len(partitions)

    def describe_topic(self, name: str) -> TopicDescription:
        cache = self._metadata_cache()
        if cache is None:
            return self.broker.describe_topic(name)
        partitions = cache.topic(name)
        if partitions is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
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
        """The partition's log when this broker holds a replica of it. (In a cluster a broker keeps an empty
        log of every partition of a topic, of those it is no replica of too: those are not shown.)"""
        log = self.broker.log_manager.get_log(tp)
        cache = self._metadata_cache()
        if log is None or cache is None:
            return log
        meta = cache.partition(tp)
        return log if meta is not None and self.broker.node_id in meta.replicas else None

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
        if self.group_coordinator is not None:
            return self.group_coordinator.group_ids()
        return self.broker.list_groups()

    def describe_group(self, group_id: str) -> GroupDescription:
        if self.group_coordinator is not None:
            return describe_live_group(self.group_coordinator, self._log_end_offset, group_id)
        return self.broker.describe_group(group_id)

    def _log_end_offset(self, tp: TopicPartition) -> int | None:
        log = self.broker.log_manager.get_log(tp)
        return None if log is None else log.log_end_offset

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
