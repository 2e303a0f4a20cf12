"""The replicas this broker holds in cluster mode, led or followed (Kafka's ``ReplicaManager``).

Each broker watches the cluster's metadata in etcd (``/brokers/``,
``/controller``) and, whenever it changes, reads the registrations, replica
assignments and partition states again, refreshes the ``MetadataCache`` and
applies every state that names this broker: a partition it is the leader of
becomes leader (``Partition.make_leader``: a new leader epoch starts at its log
end), one it follows becomes follower and is handed to the replica fetcher of
its leader, which truncates by leader epoch before fetching. A topic that
names this broker gets its local logs first, with the overrides of
``/config/topics/T``; a topic deleted from etcd loses them.

As leader, it takes in each follower's fetch (``record_follower_fetch``): the
follower's log end offset moves the high watermark, and a follower caught up
joins the ISR. Every ``replica.lag.time.max.ms / 2`` it shrinks the ISRs of
the partitions it leads by the followers that fell behind. An ISR change is
written by compare-and-set of the partition's state on its ``mod_revision``
(the partition epoch), as Kafka 0.11's leaders wrote ``/brokers/topics/T/
partitions/P/state`` on its ``zkVersion``; the controller follows those writes.

Why each broker watches etcd rather than the controller sending
``LeaderAndIsr``: etcd already delivers every write in order to every watcher,
survives a controller's death between deciding and telling, and needs no
inter-broker RPC; leader epochs (bumped by every election) fence whatever a
broker learns late.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from format.layout import TopicPartition

from ..broker import Broker
from ..clock import SYSTEM_CLOCK, Clock
from ..cluster.partition import LeaderAndIsr, Partition
from ..controller.kafka_zk_client import KafkaZkClient
from ..controller.metadata_store import MetadataStoreError
from ..controller.partition_state import NO_LEADER
from ..errors import (NotLeaderOrFollowerError, RequestTimedOutError, TopicAlreadyExistsError,
                      UnknownTopicOrPartitionError)
from ..log.log import Log, LogAppendInfo
from .metadata_cache import ClusterSnapshot, MetadataCache, PartitionMetadata

__all__ = ["ReplicaManager"]

log = logging.getLogger(__name__)

#: How often the metadata thread wakes when nothing changes (ms).
_POLL_INTERVAL_MS = 200
#: How long a blocked coordinator write waits before looking at its partition's high watermark again (s).
_HIGH_WATERMARK_RECHECK_S = 0.05
#: The metadata is read again this often even when the watch reports nothing (ms): a watch that lost events
#: without noticing cannot leave the broker behind for longer.
_FULL_REFRESH_INTERVAL_MS = 5000


class ReplicaManager:
    """The partitions of ``broker`` as replicas; ``startup`` then ``shutdown``.

    ``fetcher_manager`` is told which partitions to fetch from which leader;
    ``on_high_watermark_moved(tp)`` is called when a partition this broker leads
    has a new high watermark (waiting acks=all produces and consumer fetches
    complete then), ``on_appended(tp)`` after a coordinator's write to a
    partition it leads (parked follower fetches answer then);
    ``on_leadership_change(tp, leader_epoch)`` when this broker
    becomes leader of ``tp`` or starts a new leader epoch, and
    ``on_leadership_change(tp, None)`` when it stops leading it (the
    coordinators load and unload their partitions then).
    """

    def __init__(self, broker: Broker, zk_client: KafkaZkClient, fetcher_manager, *,
                 on_high_watermark_moved: Callable[[TopicPartition], None] = lambda tp: None,
                 on_leadership_change: Callable[[TopicPartition, int | None], None] = lambda tp, epoch: None,
                 on_appended: Callable[[TopicPartition], None] = lambda tp: None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.broker = broker
        self.config = broker.config
        self.broker_id = broker.node_id
        self.zk_client = zk_client
        self.fetcher_manager = fetcher_manager
        self.metadata_cache = MetadataCache()
        self.clock = clock
        self._notify_high_watermark_moved = on_high_watermark_moved
        self._on_leadership_change = on_leadership_change
        self._on_appended = on_appended
        self._high_watermark_moves = threading.Condition()
        self._partitions: dict[TopicPartition, Partition] = {}
        self._controller_epochs: dict[TopicPartition, int] = {}
        # Topics this broker learned from etcd: only these are deleted when etcd no longer has them.
        self._cluster_topics: set[str] = set()
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._watch = None
        self._thread = threading.Thread(target=self._run, name=f"replica-manager-{self.broker_id}", daemon=True)

    # --- lifecycle ----------------------------------------------------------------

    def startup(self) -> None:
        self._watch = self.zk_client.store.watch_prefix("/")
        self.refresh()
        self._thread.start()

    def shutdown(self) -> None:
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._watch is not None:
            self._watch.cancel()

    def _run(self) -> None:
        next_isr_check = self.clock.milliseconds() + self.config.replica_lag_time_max_ms // 2
        next_refresh = time.monotonic() + _FULL_REFRESH_INTERVAL_MS / 1000
        stale = False
        while not self._closed.is_set():
            try:
                events = self._watch.poll(_POLL_INTERVAL_MS / 1000)
                if events or stale or time.monotonic() >= next_refresh:
                    self.refresh()
                    stale = False
                    next_refresh = time.monotonic() + _FULL_REFRESH_INTERVAL_MS / 1000
                if self.clock.milliseconds() >= next_isr_check:
                    next_isr_check = self.clock.milliseconds() + self.config.replica_lag_time_max_ms // 2
                    self.maybe_shrink_isr()
            except MetadataStoreError as exc:
                log.warning("broker %d: the metadata store did not answer (%s); trying again", self.broker_id, exc)
                stale = True
                self._closed.wait(_POLL_INTERVAL_MS / 1000)
            except Exception:  # noqa: BLE001 - the thread must outlive one bad state
                log.exception("broker %d: applying the cluster metadata failed; trying again", self.broker_id)
                stale = True
                self._closed.wait(_POLL_INTERVAL_MS / 1000)

    # --- reading etcd -------------------------------------------------------------

    def refresh(self) -> None:
        """Read the cluster's metadata, refresh the cache and apply this broker's partition states."""
        brokers = {b: v.value for b, v in self.zk_client.get_all_brokers().items()}
        assignments = {t: a.value for t, a in self.zk_client.get_all_topic_assignments().items()}
        states = self.zk_client.get_all_partition_states()
        configs = self.zk_client.get_all_topic_configs()
        topics: dict[str, dict[int, PartitionMetadata]] = {}
        for topic, assignment in assignments.items():
            topics[topic] = {}
            for p, replicas in sorted(assignment.items()):
                tp = TopicPartition(topic, p)
                held = states.get(tp)
                topics[topic][p] = PartitionMetadata(tp, tuple(replicas), held.value if held else None,
                                                     held.mod_revision if held else -1)
        snapshot = ClusterSnapshot(brokers, self.zk_client.get_controller_id(), topics)
        with self._lock:
            self._apply(topics, configs)
        # After applying: this broker's answers never name it leader of a partition it does not lead yet.
        self.metadata_cache.update(snapshot)

    def _apply(self, topics: dict[str, dict[int, PartitionMetadata]], configs: dict[str, dict[str, str]]) -> None:
        for topic in sorted(self._cluster_topics - topics.keys()):
            self._delete_local_topic(topic)
        for topic, partitions in topics.items():
            mine = [m for m in partitions.values() if self.broker_id in m.replicas]
            if not mine:
                continue
            self._ensure_local_topic(topic, len(partitions), configs.get(topic, {}))
            for meta in mine:
                if meta.state is not None:
                    self._apply_state(meta)

    def _ensure_local_topic(self, topic: str, partitions: int, config: dict[str, str]) -> None:
        """The local logs of ``topic``: created, grown, and with the overrides of ``/config/topics/T``."""
        self._cluster_topics.add(topic)
        held = self.broker.topics.get(topic)
        try:
            if held is None:
                self.broker.create_replica_topic(topic, partitions, config, self.zk_client.get_topic_id(topic))
                return
            if held.partitions < partitions:
                self.broker.create_partitions(topic, partitions)
        except TopicAlreadyExistsError:
            return
        if dict(held.config) != config:
            self.broker.alter_topic_config(topic, config, [k for k in held.config if k not in config])

    def _delete_local_topic(self, topic: str) -> None:
        self._cluster_topics.discard(topic)
        gone = [tp for tp in self._partitions if tp.topic == topic]
        self.fetcher_manager.remove_partitions(gone)
        for tp in gone:
            if self._partitions.pop(tp).is_leader:
                self._on_leadership_change(tp, None)
            self._controller_epochs.pop(tp, None)
        if self.broker.topics.get(topic) is not None:
            log.info("broker %d: topic %s was deleted from the cluster; deleting its logs", self.broker_id, topic)
            try:
                self.broker.delete_topic(topic)
            except UnknownTopicOrPartitionError:
                pass

    def _apply_state(self, meta: PartitionMetadata) -> None:
        tp, state = meta.topic_partition, meta.state
        assert state is not None
        partition = self._partitions.get(tp)
        if partition is None:
            lg = self.broker.log_manager.get_log(tp)
            if lg is None:
                return
            partition = Partition(tp, self.broker_id, lg, self.clock,
                                  replica_lag_time_max_ms=self.config.replica_lag_time_max_ms)
            self._partitions[tp] = partition
        if meta.partition_epoch <= partition.partition_epoch and state.leader_epoch <= partition.leader_epoch:
            return  # known already (or older than what this broker holds)
        self._controller_epochs[tp] = state.controller_epoch
        leader_and_isr = LeaderAndIsr.from_partition_state(state, meta.partition_epoch)
        was_leader, old_epoch = partition.is_leader, partition.leader_epoch
        if state.leader == self.broker_id:
            self.fetcher_manager.remove_partitions([tp])
            if partition.make_leader(leader_and_isr, list(meta.replicas)):
                self._on_high_watermark_moved(tp)
            if not was_leader or partition.leader_epoch != old_epoch:
                self._on_leadership_change(tp, partition.leader_epoch)
        else:
            changed = partition.make_follower(leader_and_isr, list(meta.replicas))
            if was_leader:
                self._on_high_watermark_moved(tp)  # waiting produces answer NOT_LEADER_OR_FOLLOWER now
                self._on_leadership_change(tp, None)
            if state.leader == NO_LEADER:
                self.fetcher_manager.remove_partitions([tp])
            elif changed or was_leader:
                self.fetcher_manager.add_partition(state.leader, partition)

    # --- what the request handlers ask ------------------------------------------------

    def partition(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def partitions(self) -> list[Partition]:
        """Every partition this broker holds a replica of (the metrics count them)."""
        return list(self._partitions.values())

    def leader_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it; NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION)
        otherwise, so clients refresh their metadata."""
        partition = self._partitions.get(tp)
        if partition is None:
            if self.metadata_cache.partition(tp) is None:
                raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {tp}")
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} holds no replica of {tp}")
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} is not the leader of {tp} (the leader is "
                                           f"{partition.leader_id})")
        return partition

    def append_as_leader(self, tp: TopicPartition, append: Callable[[Log, int | None], LogAppendInfo],
                         timeout_ms: int) -> LogAppendInfo:
        """A coordinator's write (``Broker.leader_append``): ``append(log, leader_epoch)`` as the leader of
        ``tp`` with ``acks=all``, returning once the ISR has the records — as Kafka's coordinators append
        with required acks -1. NOT_LEADER_OR_FOLLOWER here when another broker leads it,
        NOT_ENOUGH_REPLICAS(_AFTER_APPEND) below ``min.insync.replicas``, REQUEST_TIMED_OUT after
        ``timeout_ms``. A topic the cluster does not know is written locally."""
        if self.metadata_cache.topic(tp.topic) is None:
            return append(self.broker.log_manager.log_or_raise(tp), None)
        partition = self.leader_partition(tp)
        info = partition.append_to_leader(append, required_acks=-1)
        self._on_appended(tp)
        self.await_high_watermark(partition, info.last_offset + 1, timeout_ms)
        return info

    def await_high_watermark(self, partition: Partition, required_offset: int, timeout_ms: int) -> None:
        """Block until the high watermark of ``partition`` (led here) reaches ``required_offset``; raises
        what ``check_enough_replicas_reach_offset`` finds, or REQUEST_TIMED_OUT after ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            done, error = partition.check_enough_replicas_reach_offset(required_offset)
            if error is not None:
                raise error
            if done:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed.is_set():
                raise RequestTimedOutError(f"{partition.topic_partition}: the in-sync replicas did not reach "
                                           f"offset {required_offset} within {timeout_ms} ms")
            with self._high_watermark_moves:
                # A move between the check and the wait is caught by the next check, at most this late.
                self._high_watermark_moves.wait(min(remaining, _HIGH_WATERMARK_RECHECK_S))

    def _on_high_watermark_moved(self, tp: TopicPartition) -> None:
        with self._high_watermark_moves:
            self._high_watermark_moves.notify_all()
        self._notify_high_watermark_moved(tp)

    def record_follower_fetch(self, tp: TopicPartition, replica_id: int, fetch_offset: int,
                              log_start_offset: int) -> None:
        """A follower fetched ``tp`` from ``fetch_offset``: its state, the high watermark, maybe the ISR."""
        partition = self.leader_partition(tp)
        result = partition.update_follower_fetch_state(replica_id, fetch_offset, log_start_offset)
        if result.isr_expansion is not None:
            self._write_isr(partition, result.isr_expansion)
        if result.high_watermark_moved:
            self._on_high_watermark_moved(tp)

    def maybe_shrink_isr(self) -> None:
        """Take the followers out of sync for ``replica.lag.time.max.ms`` out of the ISRs this broker leads."""
        for partition in list(self._partitions.values()):
            proposal = partition.maybe_shrink_isr()
            if proposal is not None:
                self._write_isr(partition, proposal)

    def _write_isr(self, partition: Partition, proposal: LeaderAndIsr) -> None:
        tp = partition.topic_partition
        state = proposal.to_partition_state(self._controller_epochs.get(tp, 0))
        try:
            revision = self.zk_client.update_partition_state(tp, state, proposal.partition_epoch)
        except MetadataStoreError as exc:
            partition.on_isr_update_failed(f"the metadata store did not answer: {exc}")
            return
        if revision is None:
            partition.on_isr_update_failed("the partition state changed since (its partition epoch "
                                           f"{proposal.partition_epoch} is stale)")
            return
        log.info("broker %d: ISR of %s is now %s (partition epoch %d)", self.broker_id, tp, list(state.isr), revision)
        if partition.on_isr_update_committed(LeaderAndIsr(proposal.leader, proposal.leader_epoch, proposal.isr,
                                                          revision)):
            self._on_high_watermark_moved(tp)
