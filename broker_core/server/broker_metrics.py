"""What a running broker exports to Prometheus: one collector reading the broker's state at each scrape.

Names are Kafka's JMX metrics as the Prometheus JMX exporter's usual rules
(Strimzi's ``kafka-metrics.yaml``) turn them into Prometheus names: the
domain, the ``type`` and the ``name`` joined by ``_`` and lowercased, a
``PerSec`` meter a ``_total`` counter without ``PerSec``, a ``Percent``
gauge ending in ``_percent``, the other MBean keys as labels. So
``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T`` is
``kafka_server_brokertopicmetrics_messagesin_total{topic="T"}``. Kafka's
request-time histograms (``RequestQueueTimeMs`` …) are Prometheus histograms
(``_bucket``, ``_sum``, ``_count``) rather than the exporter's quantiles.
Consumer lag, which Kafka's brokers do not export, takes kafka_exporter's
names with the issue's labels: ``kafka_consumergroup_lag{group,topic,partition}``.

Everything that is state — log sizes, segments and offsets, partitions under
their replication factor, groups and their lag, queues, connections,
purgatories, the cleaner — is read here, at scrape time; only what must be
counted as it happens (records and bytes in and out, requests, errors and
their times, idle time) is counted on the request path, by
``BrokerTopicStats``, ``RequestMetrics``, the processors and the handlers.

The lag is the coordinator's committed offset against the partition's high
watermark, which is what ``seglog groups describe --bootstrap`` shows (its
OffsetFetch and ListOffsets answer from the same two), through the same
``describe_live_group`` as the web console; in a cluster only the leader of a
partition tells its high watermark.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..coordinator.group.group_state import GroupState
from ..errors import NONE, KafkaError, error_for_code
from ..network.request_metrics import TIME_METRICS, now_ns
from ..live_groups import describe_live_group
from .metadata_cache import NO_LEADER

if TYPE_CHECKING:
    from .broker_server import BrokerServer

log = logging.getLogger(__name__)

#: Kafka's GroupMetadataManager gauges, by the state they count.
_GROUP_STATE_METRICS = {GroupState.PREPARING_REBALANCE: "numgroupspreparingrebalance",
                        GroupState.COMPLETING_REBALANCE: "numgroupscompletingrebalance",
                        GroupState.STABLE: "numgroupsstable", GroupState.DEAD: "numgroupsdead",
                        GroupState.EMPTY: "numgroupsempty"}


def error_name(code: int) -> str:
    """Kafka's name of an error code, as the ``error`` label of ErrorsPerSec holds it."""
    return "NONE" if code == NONE else error_for_code(code).kafka_error_name


class _IdleRatio:
    """The share of time some threads spent idle since the previous scrape (since start on the first)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, int]] = {}
        self._since_ns = now_ns()

    def ratio(self, key: str, idle_ns: int, threads: int = 1) -> float:
        now = now_ns()
        last_now, last_idle = self._last.get(key, (self._since_ns, 0))
        self._last[key] = (now, idle_ns)
        elapsed = (now - last_now) * threads
        if elapsed <= 0:
            return 1.0
        return min(1.0, max(0.0, (idle_ns - last_idle) / elapsed))


class BrokerMetricsCollector(Collector):
    """The metrics of one ``BrokerServer`` (register it with that broker's own ``CollectorRegistry``)."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self._idle = _IdleRatio()

    def collect(self) -> Iterator[Metric]:
        for part in (self._requests, self._topics, self._network, self._logs, self._replicas, self._groups,
                     self._cleaner, self._purgatories):
            try:
                yield from part()
            except Exception:  # one part failing must not cost the scrape every other figure
                log.exception("metrics: collecting %s failed", part.__name__.lstrip("_"))

    # --- kafka.network: RequestMetrics, RequestChannel, SocketServer, Processor --------------

    def _requests(self) -> Iterator[Metric]:
        channel = self.server.request_channel
        if channel is None:
            return
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests answered (RequestsPerSec), per API and version",
                                       labels=["request", "version"])
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors",
                                     "Error codes in responses (ErrorsPerSec), per API and error, NONE included",
                                     labels=["request", "error"])
        times = {metric: HistogramMetricFamily(f"kafka_network_requestmetrics_{metric.lower()}",
                                               f"Kafka's {metric}, per API, in milliseconds", labels=["request"])
                 for metric in TIME_METRICS}
        for stats in channel.metrics.snapshot():
            for version, count in sorted(stats.requests.items()):
                requests.add_metric([stats.request, str(version)], count)
            for code, count in sorted(stats.errors.items()):
                errors.add_metric([stats.request, error_name(code)], count)
            for metric, snapshot in stats.times.items():
                times[metric].add_metric([stats.request], [(_le(bound), count) for bound, count in snapshot.buckets],
                                         snapshot.total)
        yield requests
        yield errors
        yield from times.values()

    def _network(self) -> Iterator[Metric]:
        server = self.server
        channel, socket_server, pool = server.request_channel, server.socket_server, server.handler_pool
        if channel is None or socket_server is None:
            return
        yield GaugeMetricFamily("kafka_network_requestchannel_requestqueuesize",
                                "Requests waiting for a handler thread", value=channel.queue_size)
        yield GaugeMetricFamily("kafka_network_requestchannel_responsequeuesize",
                                "Responses waiting for their network thread",
                                value=sum(p.response_queue_size for p in socket_server.processors))
        connections = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                        "Open client connections", labels=["listener", "networkProcessor"])
        idle = GaugeMetricFamily("kafka_network_processor_idle_percent",
                                 "Share of time a network thread waited for work (0 to 1) since the previous scrape",
                                 labels=["networkProcessor"])
        idle_total = 0
        for processor in socket_server.processors:
            for listener, count in sorted(processor.connection_counts().items()):
                connections.add_metric([listener, str(processor.processor_id)], count)
            idle_ns = processor.idle_ns
            idle_total += idle_ns
            idle.add_metric([str(processor.processor_id)],
                            self._idle.ratio(f"processor-{processor.processor_id}", idle_ns))
        yield connections
        yield idle
        yield GaugeMetricFamily("kafka_network_socketserver_networkprocessoravgidle_percent",
                                "Share of time the network threads waited for work (0 to 1) since the previous "
                                "scrape", value=self._idle.ratio("processors", idle_total,
                                                                 len(socket_server.processors)))
        if pool is not None:
            yield GaugeMetricFamily("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                                    "Share of time the request handler threads waited for a request (0 to 1) since "
                                    "the previous scrape",
                                    value=self._idle.ratio("handlers", sum(t.idle_ns for t in pool.threads),
                                                           len(pool.threads)))

    # --- kafka.server: BrokerTopicMetrics, ReplicaManager, DelayedOperationPurgatory -------------------

    def _topics(self) -> Iterator[Metric]:
        apis = self.server.apis
        if apis is None:
            return
        families = {field: CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", text, labels=["topic"])
                    for field, name, text in (
                        ("messages_in", "messagesin", "Records appended by Produce requests (MessagesInPerSec)"),
                        ("bytes_in", "bytesin", "Bytes of record batches appended by Produce requests (BytesInPerSec)"),
                        ("bytes_out", "bytesout", "Bytes of record batches sent to consumers (BytesOutPerSec)"))}
        for topic, stats in sorted(apis.topic_stats.snapshot(set(self.server.broker.list_topics())).items()):
            for field, family in families.items():
                family.add_metric([topic], getattr(stats, field))
        yield from families.values()
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                                  "Bytes of record batches sent to followers (ReplicationBytesOutPerSec)",
                                  value=apis.topic_stats.replication_bytes_out)

    def _purgatories(self) -> Iterator[Metric]:
        server = self.server
        purgatories = [server.fetch_purgatory]
        if server.cluster_mode is not None:
            purgatories.append(server.cluster_mode.produce_purgatory)
        if server.group_coordinator is not None:
            purgatories += [server.group_coordinator.heartbeat_purgatory, server.group_coordinator.rebalance_purgatory]
        if server.transaction_coordinator is not None:
            purgatories.append(server.transaction_coordinator.purgatory)
        size = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_purgatorysize",
                                 "Operations watched in a purgatory, once per key (PurgatorySize)",
                                 labels=["delayedOperation"])
        delayed = GaugeMetricFamily("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                                    "Operations waiting in a purgatory (NumDelayedOperations)",
                                    labels=["delayedOperation"])
        for purgatory in purgatories:
            if purgatory is not None:
                size.add_metric([purgatory.name], purgatory.watched_count())
                delayed.add_metric([purgatory.name], purgatory.num_delayed())
        yield size
        yield delayed

    def _replicas(self) -> Iterator[Metric]:
        """ReplicaManager's partition figures; on a single broker every partition is led here and in sync."""
        server = self.server
        broker = server.broker
        if broker is None:
            return
        under = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                                  "1 while a partition led here has fewer in-sync replicas than replicas",
                                  labels=["topic", "partition"])
        replica_manager = server.cluster_mode.replica_manager if server.cluster_mode is not None else None
        offline = 0
        if replica_manager is None:
            partitions = leaders = len(broker.log_manager.all_logs())
            under_replicated = under_min_isr = 0
        else:
            held = replica_manager.partitions()
            partitions = len(held)
            led = [p for p in held if p.is_leader]
            leaders = len(led)
            under_replicated = under_min_isr = 0
            for partition in led:
                is_under = len(partition.isr) < len(partition.assignment)
                under_replicated += is_under
                under_min_isr += partition.is_under_min_isr
                tp = partition.topic_partition
                under.add_metric([tp.topic, str(tp.partition)], int(is_under))
            cache = replica_manager.metadata_cache
            if cache.controller_id() == broker.node_id:  # Kafka's controller alone reports offline partitions
                offline = sum(1 for partitions_of in cache.snapshot.topics.values()
                              for meta in partitions_of.values() if meta.leader == NO_LEADER)
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount", "Partitions held here",
                                value=partitions)
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount", "Partitions led here", value=leaders)
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here with fewer in-sync replicas than replicas",
                                value=under_replicated)
        yield GaugeMetricFamily("kafka_server_replicamanager_underminisrpartitioncount",
                                "Partitions led here with fewer in-sync replicas than min.insync.replicas",
                                value=under_min_isr)
        yield under
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader (reported by the controller; 0 elsewhere)",
                                value=offline)

    # --- kafka.log: Log, LogCleaner, LogCleanerManager ---------------------------------------------

    def _logs(self) -> Iterator[Metric]:
        broker = self.server.broker
        if broker is None:
            return
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's local segments", labels=labels)
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Local segments of the partition",
                                     labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The partition's log start offset", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "The partition's log end offset", labels=labels)
        for tp in sorted(broker.log_manager.all_logs()):
            lg = self.server.replica_log(tp)
            if lg is None:
                continue
            try:
                values = [tp.topic, str(tp.partition)]
                size.add_metric(values, lg.size)
                segments.add_metric(values, len(lg.segments))
                start.add_metric(values, lg.log_start_offset)
                end.add_metric(values, lg.log_end_offset)
            except Exception as exc:  # deleted or taken offline under the scrape
                log.debug("metrics: %s left out: %s", tp, exc)
        yield from (size, segments, start, end)

    def _cleaner(self) -> Iterator[Metric]:
        broker = self.server.broker
        cleaner = broker.log_manager.cleaner if broker is not None else None
        if cleaner is None:
            return
        stats = cleaner.last_stats
        yield GaugeMetricFamily("kafka_log_logcleaner_max_clean_time_secs",
                                "Seconds the last clean took (max-clean-time-secs)",
                                value=stats.elapsed_s if stats is not None else 0.0)
        yield GaugeMetricFamily("kafka_log_logcleaner_cleaner_recopy_percent",
                                "Bytes written as a share of bytes read by the last clean, in percent "
                                "(cleaner-recopy-percent)",
                                value=100.0 * stats.bytes_written / max(stats.bytes_read, 1) if stats else 0.0)
        yield GaugeMetricFamily("kafka_log_logcleaner_max_buffer_utilization_percent",
                                "How full the last clean's offset map was, in percent "
                                "(max-buffer-utilization-percent)",
                                value=100.0 * stats.buffer_utilization if stats is not None else 0.0)
        yield GaugeMetricFamily("kafka_log_logcleaner_deadthreadcount", "Cleaner threads that died",
                                value=cleaner.dead_thread_count)
        uncleanable = GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_partitions_count",
                                        "Partitions the cleaner gave up on", labels=["logDirectory"])
        for log_dir in broker.log_manager.log_dirs:
            uncleanable.add_metric([log_dir], len(cleaner.manager.uncleanable_partitions(log_dir)))
        yield uncleanable

    # --- kafka.coordinator.group: GroupMetadataManager, and the groups' lag -----------------------

    def _groups(self) -> Iterator[Metric]:
        server = self.server
        coordinator, broker = server.group_coordinator, server.broker
        if coordinator is None or broker is None:
            return
        by_state = dict.fromkeys(_GROUP_STATE_METRICS, 0)
        offsets_count = 0
        labels = ["group", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "The partition's high watermark minus the group's committed offset",
                                labels=labels)
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset",
                                    labels=labels)
        group_ids = coordinator.group_ids()
        for group_id in group_ids:
            group = coordinator.group(group_id)
            if group is None:
                continue
            with group.lock:
                state = group.state
                offsets_count += len(group.offsets)
            by_state[state] = by_state.get(state, 0) + 1
            try:
                rows = describe_live_group(coordinator, server.high_watermark, group_id).partitions
            except KafkaError:
                continue  # deleted since listed, or its partition moved away
            for row in rows:
                if row.current_offset is None:
                    continue  # assigned, nothing committed yet
                values = [group_id, row.topic, str(row.partition)]
                current.add_metric(values, row.current_offset)
                if row.lag is not None:
                    lag.add_metric(values, row.lag)
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield GaugeMetricFamily(prefix + "numgroups", "Consumer groups coordinated here", value=len(group_ids))
        for state, name in _GROUP_STATE_METRICS.items():
            yield GaugeMetricFamily(prefix + name, f"Groups in state {state.value}", value=by_state[state])
        yield GaugeMetricFamily(prefix + "numoffsets", "Committed offsets held by the coordinator",
                                value=offsets_count)
        yield lag
        yield current


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))
