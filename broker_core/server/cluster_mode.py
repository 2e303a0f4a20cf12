"""A broker joining a cluster through etcd (``etcd.connect``): what ``BrokerServer`` adds in cluster mode.

Start-up, in Kafka's order: the cluster id is read from etcd (the first broker
writes it) and checked against ``meta.properties``; after the logs are loaded
and the listeners bound, the broker registers ``/brokers/ids/N`` under its
session lease, the ``ReplicaManager`` applies the partition states that name
it (leader or follower, the followers' fetcher threads), and a
``ControllerEventManager`` stands for controller (the broker that wins acts;
the others take over when it goes). A broker whose session expired (paused or cut off from etcd past
``broker.session.timeout.ms``) registers again under a new one. Shutdown first has the controller move
this broker's leaderships away while it still serves (controlled shutdown,
``controlled.shutdown.enable``, asked through etcd as partition states are
told), then runs the other way and revokes the lease.

Only this module (and what it imports) needs etcd: a broker without
``etcd.connect`` never loads it.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Mapping

from format.layout import TopicPartition

from ..broker import Broker
from ..client.client_security import ClientSecurity
from ..clock import SYSTEM_CLOCK, Clock
from ..config import BrokerConfig
from ..controller.admin_zk_client import AdminZkClient
from ..controller.controller_event_manager import ControllerEventManager
from ..controller.etcd_connect import parse_etcd_connect
from ..controller.etcd_metadata_store import EtcdMetadataStore
from ..controller.kafka_controller import KafkaController
from ..controller.kafka_zk_client import BrokerRegistrationConflictError, KafkaZkClient
from ..controller.session_lease import SessionLease
from ..controller.zk_data import BrokerInfo
from ..controller.metadata_store import MetadataStoreError
from ..errors import InvalidConfigurationError
from ..log.log import LogAppendInfo
from ..meta_properties import ensure_meta_properties, random_uuid, read_meta_properties
from ..network.endpoint import EndPoint
from ..offsets_topic import OFFSETS_TOPIC
from ..security.acl_etcd_store import EtcdAclStore
from ..purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from .cluster_apis import ClusterApis
from .coordinator_elections import CoordinatorElections
from .delayed_produce import DelayedProduce
from .kafka_apis import KafkaApis
from .producer_id_manager import ZkProducerIdManager
from .replica_fetcher_manager import ReplicaFetcherManager
from .replica_manager import ReplicaManager
from .txn_marker_sender import WriteTxnMarkersSender

__all__ = ["ClusterMode"]

log = logging.getLogger(__name__)


class ClusterMode:
    """The cluster side of one broker: ``cluster_id`` before the logs load, ``start`` once they have."""

    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        assert config.etcd_connect, "cluster mode needs etcd.connect"
        self.config = config
        self.clock = clock
        self.store = EtcdMetadataStore(parse_etcd_connect(config.etcd_connect))
        self.zk_client = KafkaZkClient(self.store, clock)
        self.lease: SessionLease | None = None
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] | None = None
        self.fetcher_manager: ReplicaFetcherManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.controller: ControllerEventManager | None = None
        self.coordinator_elections: CoordinatorElections | None = None
        self.marker_sender: WriteTxnMarkersSender | None = None
        self._fetch_purgatory: DelayedOperationPurgatory | None = None
        self._broker_info: BrokerInfo | None = None
        self._stopping = threading.Event()

    def acl_store(self) -> EtcdAclStore:
        """The cluster's ACLs, in etcd (read by the authorizer when ``authorizer.class.name`` is set)."""
        return EtcdAclStore(self.store)

    def cluster_id(self, log_dirs: list[str]) -> str:
        """The cluster's id from etcd (this broker's proposal when it is the first), checked against the
        ``meta.properties`` of ``log_dirs``."""
        stored = [m.cluster_id for m in (read_meta_properties(d) for d in log_dirs) if m is not None]
        cluster_id = self.zk_client.get_or_create_cluster_id(stored[0] if stored else random_uuid())
        if stored and stored[0] != cluster_id:
            raise InvalidConfigurationError(
                f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored[0]} in meta.properties. The "
                f"broker is trying to join the wrong cluster. Configured etcd.connect may be wrong.")
        return ensure_meta_properties(log_dirs, self.config.node_id, cluster_id)

    def producer_id_manager(self) -> ZkProducerIdManager:
        """Producer ids unique across the cluster: blocks granted through ``/latest_producer_id_block``."""
        return ZkProducerIdManager(lambda size: self.zk_client.allocate_producer_id_block(self.config.node_id, size))

    def _leads(self, tp: TopicPartition) -> bool:
        partition = self.replica_manager.partition(tp)
        return partition is not None and partition.is_leader

    def start(self, broker: Broker, apis: KafkaApis, advertised: Mapping[str, EndPoint],
              fetch_purgatory: DelayedOperationPurgatory, inter_broker_listener: str,
              inter_broker_security: ClientSecurity) -> None:
        """``inter_broker_listener``: the listener replica fetchers and marker senders reach other brokers on
        (``inter.broker.listener.name``), with ``inter_broker_security`` (its security protocol, this broker's
        certificates and SASL login)."""
        config = self.config
        self._fetch_purgatory = fetch_purgatory
        self.produce_purgatory = DelayedOperationPurgatory("Produce", clock=self.clock, broker_id=config.node_id)
        cache_holder: list[ReplicaManager] = []

        def leader_endpoint(broker_id: int) -> EndPoint | None:
            return cache_holder[0].metadata_cache.endpoint(broker_id, inter_broker_listener) if cache_holder else None

        self.fetcher_manager = ReplicaFetcherManager(config.node_id, leader_endpoint,
                                                     remote_log_reader=broker.remote_log_reader,
                                                     security=inter_broker_security)
        self.coordinator_elections = CoordinatorElections(config.node_id, apis.group_coordinator,
                                                          apis.transaction_coordinator)
        self.replica_manager = ReplicaManager(broker, self.zk_client, self.fetcher_manager,
                                              on_high_watermark_moved=self._on_high_watermark_moved,
                                              on_leadership_change=self.coordinator_elections.on_leadership_change,
                                              on_appended=self._wake_fetches, clock=self.clock)
        cache_holder.append(self.replica_manager)
        if broker.remote_log_manager is not None:
            # Only a partition's leader copies to and deletes from the remote tier.
            broker.remote_log_manager.is_leader = self._leads
        broker.leader_append = self._leader_append
        admin = AdminZkClient(self.zk_client, config.num_partitions, config.default_replication_factor)
        self.lease = SessionLease(self.store, config.broker_session_timeout_ms, config.broker_heartbeat_interval_ms,
                                  on_expired=self._on_session_expired, name=f"broker-{config.node_id}")
        self.controller = ControllerEventManager(KafkaController(config, self.zk_client, self.lease.lease, self.clock))
        cluster_apis = ClusterApis(apis, self.replica_manager, admin, self.produce_purgatory)
        cluster_apis.install()
        # The transaction coordinator sends the markers of partitions led elsewhere with WriteTxnMarkers, and
        # finds a group's offsets partition in the cluster's __consumer_offsets.
        self.marker_sender = WriteTxnMarkersSender.for_metadata(
            config.node_id, self.replica_manager.metadata_cache, inter_broker_listener,
            request_timeout_ms=config.request_timeout_ms, security=inter_broker_security)
        apis.transaction_coordinator.markers.destinations = self.marker_sender
        apis.transaction_coordinator.offsets_partition_for = cluster_apis.offsets_partition_for
        self._broker_info = BrokerInfo(config.node_id, tuple(advertised.values()), config.broker_rack)
        self._register()
        self.replica_manager.startup()
        self.controller.start()
        log.info("[BrokerServer id=%d] registered in cluster %s at %s", config.node_id, config.etcd_connect,
                 ", ".join(e.connection_string for e in advertised.values()))

    def _register(self) -> None:
        """``/brokers/ids/N`` under this broker's lease. A registration of this node id under another lease is
        waited out for up to ``broker.session.timeout.ms`` (a broker restarted at once after a crash finds its
        previous session still alive until then); one that outlives it is another live broker: refused."""
        deadline = time.monotonic() + self.config.broker_session_timeout_ms / 1000 + 2
        while True:
            try:
                self.zk_client.register_broker(self._broker_info, self.lease.lease)
                return
            except BrokerRegistrationConflictError as exc:
                if time.monotonic() >= deadline:
                    raise
                log.warning("[BrokerServer id=%d] %s; waiting for that session to end (broker.session.timeout.ms "
                            "%d)", self.config.node_id, exc, self.config.broker_session_timeout_ms)
                time.sleep(self.config.broker_heartbeat_interval_ms / 1000)

    def _leader_append(self, tp: TopicPartition, append) -> LogAppendInfo:
        """A coordinator's write, as the partition's leader with acks=all: within ``offsets.commit.timeout.ms``
        for ``__consumer_offsets``, ``request.timeout.ms`` otherwise (as Kafka's coordinators wait)."""
        timeout_ms = (self.config.offsets_commit_timeout_ms if tp.topic == OFFSETS_TOPIC
                      else self.config.request_timeout_ms)
        return self.replica_manager.append_as_leader(tp, append, timeout_ms)

    def _wake_fetches(self, tp: TopicPartition) -> None:
        if self._fetch_purgatory is not None:
            self._fetch_purgatory.check_and_complete(TopicPartitionOperationKey(tp.topic, tp.partition))

    def _on_high_watermark_moved(self, tp: TopicPartition) -> None:
        key = TopicPartitionOperationKey(tp.topic, tp.partition)
        if self.produce_purgatory is not None:
            self.produce_purgatory.check_and_complete(key)
        if self._fetch_purgatory is not None:
            self._fetch_purgatory.check_and_complete(key)

    def _on_session_expired(self, lease: int) -> None:
        log.error("[BrokerServer id=%d] its session lease %x expired (paused or cut off from etcd for longer than "
                  "broker.session.timeout.ms): its registration is gone and other brokers took over its "
                  "leaderships; registering again with a new session", self.config.node_id, lease)
        threading.Thread(target=self._rejoin, name=f"rejoin-{self.config.node_id}", daemon=True).start()

    def _rejoin(self) -> None:
        """A new session after the last one expired, as a Kafka broker re-registers when its ZooKeeper session
        expires: a new lease, ``/brokers/ids/N`` under it, the controller election stood again. The
        controller then treats the broker as one starting: it follows its partitions' leaders and joins their
        ISRs once caught up. Retried until it succeeds or the broker stops."""
        config = self.config
        while not self._stopping.is_set():
            try:
                old, self.lease = self.lease, SessionLease(
                    self.store, config.broker_session_timeout_ms, config.broker_heartbeat_interval_ms,
                    on_expired=self._on_session_expired, name=f"broker-{config.node_id}")
                old.close(revoke=False)
                self.zk_client.register_broker(self._broker_info, self.lease.lease)
                self.controller.on_session_renewed(self.lease.lease)
                log.info("[BrokerServer id=%d] registered again with session lease %x", config.node_id,
                         self.lease.lease)
                return
            except MetadataStoreError as exc:
                log.warning("[BrokerServer id=%d] registering again failed (%s); retrying", config.node_id, exc)
                self._stopping.wait(config.broker_heartbeat_interval_ms / 1000)

    def controlled_shutdown(self) -> bool:
        """Have the controller move this broker's leaderships away before it stops (Kafka's controlledShutdown):
        the request goes through etcd (``/admin/controlled_shutdown/N`` under the session lease), and each
        attempt waits up to ``controlled.shutdown.retry.backoff.ms`` for the partition states to show no
        leadership left here; up to ``controlled.shutdown.max.retries`` attempts. Whether it succeeded."""
        config = self.config
        if not config.controlled_shutdown_enable or self.lease is None:
            return False
        for attempt in range(1, config.controlled_shutdown_max_retries + 1):
            try:
                self.zk_client.request_controlled_shutdown(config.node_id, self.lease.lease, attempt)
                deadline = time.monotonic() + config.controlled_shutdown_retry_backoff_ms / 1000
                while True:
                    remaining = self._partitions_still_led()
                    if not remaining:
                        log.info("[BrokerServer id=%d] controlled shutdown succeeded", config.node_id)
                        return True
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.05)
                reason = f"it still leads {', '.join(str(tp) for tp in remaining)}"
            except MetadataStoreError as exc:
                reason = str(exc)
            log.warning("[BrokerServer id=%d] controlled shutdown attempt %d of %d failed (%s)%s", config.node_id,
                        attempt, config.controlled_shutdown_max_retries, reason,
                        "; retrying" if attempt < config.controlled_shutdown_max_retries else "")
        log.warning("[BrokerServer id=%d] proceeding to shut down without a complete controlled shutdown",
                    config.node_id)
        return False

    def _partitions_still_led(self) -> list[TopicPartition]:
        """The partitions with other replicas that etcd still says this broker leads."""
        assignments = {t: a.value for t, a in self.zk_client.get_all_topic_assignments().items()}
        return [tp for tp, held in self.zk_client.get_all_partition_states().items()
                if held.value.leader == self.config.node_id
                and len(assignments.get(tp.topic, {}).get(tp.partition, ())) > 1]

    def _complete_delayed_produces(self) -> None:
        if self.produce_purgatory is not None:
            for key in self.produce_purgatory.watched_keys():
                for operation in self.produce_purgatory.cancel_for_key(key):
                    operation.force_complete()

    def shutdown(self) -> None:
        """Stop standing for controller, stop fetching and applying states, then end the session."""
        self._stopping.set()
        for step in (self._complete_delayed_produces,
                     lambda: self.coordinator_elections and self.coordinator_elections.shutdown(),
                     lambda: self.controller and self.controller.close(),
                     lambda: self.replica_manager and self.replica_manager.shutdown(),
                     lambda: self.fetcher_manager and self.fetcher_manager.shutdown(),
                     lambda: self.marker_sender and self.marker_sender.close(),
                     lambda: self.produce_purgatory and self.produce_purgatory.shutdown(),
                     lambda: self.lease and self.lease.close(),
                     self.store.close):
            try:
                step()
            except Exception:  # noqa: BLE001 - the rest of the shutdown must run
                log.exception("[BrokerServer id=%d] a cluster shutdown step failed", self.config.node_id)
