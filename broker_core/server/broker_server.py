"""The broker as a network server: the embedded ``Broker`` behind the Kafka protocol (Kafka's BrokerServer).

``BrokerServer`` wires the parts together and owns their order:

start-up — bind the metrics listener when ``metrics.listener`` names one
(``/healthz`` answers from here on, ``/readyz`` says what is still loading),
open the ``Broker`` (which locks and recovers the log dirs),
check or write ``meta.properties`` (the cluster id), start the group
and transaction coordinators (one background thread loads
``__consumer_offsets``, then ``__transaction_state``; they answer
COORDINATOR_LOAD_IN_PROGRESS until done), bind the listeners,
start the handler threads, then the network threads;

shutdown — stop the group coordinator first (parked JoinGroup and SyncGroup
requests are answered NOT_COORDINATOR, so none holds shutdown up), stop
accepting and reading requests, answer parked fetches at
once, wait until every request taken has been answered, write the last
responses, close the connections, stop the threads, then close the
``Broker``: flush, checkpoint and write the clean-shutdown marker, so the
next start skips recovery; the metrics listener closes last.

Each server has its own ``CollectorRegistry`` (``metrics_registry``: several
brokers may run in one process), holding ``BrokerMetricsCollector`` and the
process's standard collectors.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Mapping

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector

from ..broker import Broker
from ..client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from ..clock import SYSTEM_CLOCK, Clock
from ..config import BrokerConfig
from ..coordinator.group import GroupCoordinator
from ..coordinator.transaction import TransactionCoordinator, TxnMarker
from ..offsets_topic import OFFSETS_TOPIC
from ..purgatory import TopicPartitionOperationKey
from ..meta_properties import ensure_meta_properties
from ..metrics.metrics_listener import MetricsListener, WsgiApp
from ..network.channel_builder import AuthenticatorFactory, sasl_authenticator_factory, sasl_enabled_mechanisms
from ..network.endpoint import EndPoint, advertised_endpoints, inter_broker_listener_name, parse_listeners
from ..network.listener_config import ListenerConfig
from ..network.request_channel import DEFAULT_QUEUED_MAX_REQUESTS, RequestChannel
from ..network.socket_server import SocketServer
from ..purgatory import DelayedOperationPurgatory
from ..security.authorizer import Authorizer, authorizer_for
from ..security.credential_store import CredentialStore
from .broker_metrics import BrokerMetricsCollector

if TYPE_CHECKING:
    from format.layout import TopicPartition

    from ..log.log import Log
from .inter_broker_security import inter_broker_security
from .credential_stores import open_credential_store
from .delayed_fetch import DelayedFetch
from .handler_pool import KafkaRequestHandlerPool
from .kafka_apis import KafkaApis

log = logging.getLogger(__name__)

DEFAULT_SHUTDOWN_TIMEOUT_MS = 30_000
#: Kafka settings the server reads that BrokerConfig keeps among its unknown ("extra") keys.
SERVER_CONFIG_NAMES = frozenset({"queued.max.requests", "listener.security.protocol.map"})


class BrokerServer:
    """A running broker: ``startup``, serve, ``shutdown``; also a context manager."""

    def __init__(self, config: BrokerConfig | Mapping[str, object], *, clock: Clock = SYSTEM_CLOCK,
                 credential_store: CredentialStore | None = None, http_app: WsgiApp | None = None) -> None:
        """``http_app``: a WSGI application the metrics listener serves every path but its own with (by
        default the web console, ``broker_core.console``)."""
        self.config = config if isinstance(config, BrokerConfig) else BrokerConfig.from_props(config)
        self.clock = clock
        #: The users SASL listeners authenticate (SCRAM credentials; PLAIN checks passwords against them): the
        #: store given, else from start-up etcd's /config/users in cluster mode and the log dirs' file otherwise.
        self.credential_store: CredentialStore | None = credential_store
        self.broker: Broker | None = None
        self.cluster_id: str | None = None
        self.socket_server: SocketServer | None = None
        self.apis: KafkaApis | None = None
        self.authorizer: Authorizer | None = None
        self._request_channel: RequestChannel | None = None
        self._handler_pool: KafkaRequestHandlerPool | None = None
        self._fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.transaction_coordinator: TransactionCoordinator | None = None
        self._coordinator_loader: threading.Thread | None = None
        #: Cluster mode (``etcd.connect``): registration, replicas, fetchers, the controller.
        self.cluster_mode = None
        #: ``inter.broker.listener.name``: the listener brokers of a cluster reach each other on.
        self.inter_broker_listener: str | None = None
        #: How this broker connects to the others on that listener (its security protocol, as a client).
        self.inter_broker_security: ClientSecurity = PLAINTEXT_CLIENT
        #: This broker's metrics (never the process-wide default registry).
        self.metrics_registry = CollectorRegistry(auto_describe=False)
        self.metrics_registry.register(BrokerMetricsCollector(self))
        ProcessCollector(registry=self.metrics_registry)
        PlatformCollector(registry=self.metrics_registry)
        #: ``metrics.listener``: /metrics, /healthz, /readyz (and ``http_app``); None when not configured.
        self.metrics_listener: MetricsListener | None = None
        self._http_app = http_app
        self._console = None  # the web console the metrics listener serves when no http_app is given
        self._lock = threading.Lock()
        self._started = False
        self._shut_down = threading.Event()

    # --- lifecycle ------------------------------------------------------------

    def startup(self) -> BrokerServer:
        config = self.config
        try:
            if config.metrics_listener is not None:
                self.metrics_listener = MetricsListener(config.metrics_listener, self.metrics_registry,
                                                        self.not_ready, app=self._http_app).start()
            self.inter_broker_listener = self._inter_broker_listener()
            # As Kafka does, meta.properties is checked before any log is loaded: a start refused for
            # a foreign cluster or node id leaves the logs untouched.
            log_dirs = [os.path.abspath(d) for d in config.log_dirs]
            if config.etcd_connect:
                from .cluster_mode import ClusterMode  # only cluster mode needs etcd

                self.cluster_mode = ClusterMode(config, self.clock)
                self.cluster_id = self.cluster_mode.cluster_id(log_dirs)
            else:
                self.cluster_id = ensure_meta_properties(log_dirs, config.node_id)
            self.broker = Broker(list(config.log_dirs), config, clock=self.clock,
                                 sole_replica=self.cluster_mode is None)
            if self.cluster_mode is not None:
                self.broker.producer_ids = self.cluster_mode.producer_id_manager()
            if self.credential_store is None:
                self.credential_store = open_credential_store(
                    log_dirs, self.cluster_mode.store if self.cluster_mode is not None else None)
            producer_ids = self.broker.producer_ids
            # The coordinators run on the broker's clock (the server's); the group coordinator's
            # timer also expires offsets every offsets.retention.check.interval.ms.
            self.group_coordinator = GroupCoordinator.for_broker(self.broker)
            # In a cluster a coordinator holds the partitions its broker is elected leader of, loaded then.
            self.group_coordinator.startup(load=False, elected_partitions_only=self.cluster_mode is not None)
            self.broker.group_coordinator = self.group_coordinator
            self._fetch_purgatory = DelayedOperationPurgatory("Fetch", clock=self.clock, broker_id=config.node_id)
            self.transaction_coordinator = TransactionCoordinator.for_broker(self.broker)
            self.transaction_coordinator.markers.add_listener(self._on_marker_written)
            self.transaction_coordinator.startup(load=False, elected_partitions_only=self.cluster_mode is not None)
            self.broker.transaction_coordinator = self.transaction_coordinator
            self._coordinator_loader = threading.Thread(target=self._load_coordinators, daemon=True,
                                                        name=f"coordinator-loader-{config.node_id}")
            self._coordinator_loader.start()
            queue_size = int(config.extra.get("queued.max.requests", DEFAULT_QUEUED_MAX_REQUESTS))
            self._request_channel = RequestChannel(queue_size)
            self.socket_server = SocketServer(config, self._request_channel, clock=self.clock,
                                              sasl_authenticators=self._sasl_authenticators)
            advertised = advertised_endpoints(self.socket_server.bound_endpoints, config.advertised_listeners,
                                              config.extra)
            self.authorizer = authorizer_for(config, log_dirs, None if self.cluster_mode is None
                                             else self.cluster_mode.acl_store())
            self.apis = KafkaApis(self.broker, self._request_channel, cluster_id=self.cluster_id,
                                  advertised=advertised, fetch_purgatory=self._fetch_purgatory,
                                  producer_id_manager=producer_ids, group_coordinator=self.group_coordinator,
                                  transaction_coordinator=self.transaction_coordinator,
                                  credentials=self.credential_store, authorizer=self.authorizer)
            if self.cluster_mode is not None:
                self.cluster_mode.start(self.broker, self.apis, advertised, self._fetch_purgatory,
                                        self.inter_broker_listener, self.inter_broker_security)
            self._handler_pool = KafkaRequestHandlerPool(self._request_channel, self.apis, config.num_io_threads)
            self._handler_pool.start()
            self.socket_server.startup()
            if self.metrics_listener is not None and self._http_app is None:
                from ..console import ServerView, console_app

                self._console = console_app(ServerView.of(self))
                self.metrics_listener.app = self._console
        except BaseException:
            self.shutdown()
            raise
        self._started = True
        log.info("[BrokerServer id=%d] started: cluster %s, listening on %s", config.node_id, self.cluster_id,
                 ", ".join(e.connection_string for e in self.socket_server.bound_endpoints))
        return self

    def shutdown(self, timeout_ms: int = DEFAULT_SHUTDOWN_TIMEOUT_MS) -> None:
        """Finish in-flight requests (up to ``timeout_ms``), then stop everything; safe to call twice."""
        with self._lock:
            if self._shut_down.is_set():
                return
            self._shut_down.set()
        log.info("[BrokerServer id=%d] shutting down", self.config.node_id)
        try:
            if self.cluster_mode is not None and self.socket_server is not None:
                # While it still serves: clients find the new leaders through its answers.
                self.cluster_mode.controlled_shutdown()
            if self._console is not None:
                self._console.close()  # its lag sampler reads the coordinator about to stop
            if self.transaction_coordinator is not None:
                self.transaction_coordinator.shutdown()
            if self.group_coordinator is not None:
                self.group_coordinator.shutdown()
            if self.socket_server is not None:
                self.socket_server.stop_processing_requests()
            if self.apis is not None:
                self.apis.complete_delayed_fetches()
            if self.authorizer is not None:
                self.authorizer.close()
            if self.cluster_mode is not None:
                self.cluster_mode.shutdown()  # answers the produces waiting for acks=all
            if self._request_channel is not None and not self._request_channel.wait_until_idle(timeout_ms / 1000):
                log.warning("[BrokerServer id=%d] %d requests still unanswered after %d ms; closing anyway",
                            self.config.node_id, self._request_channel.in_flight, timeout_ms)
            if self._handler_pool is not None:
                self._handler_pool.shutdown()
            if self.socket_server is not None:
                self.socket_server.shutdown()
            if self._fetch_purgatory is not None:
                self._fetch_purgatory.shutdown()
        finally:
            if self._coordinator_loader is not None:
                self._coordinator_loader.join()  # it reads the logs the broker is about to close
            try:
                if self.broker is not None:
                    self.broker.close()  # flush, checkpoints, clean-shutdown marker
            finally:
                if self.metrics_listener is not None:
                    self.metrics_listener.stop()
        log.info("[BrokerServer id=%d] shut down", self.config.node_id)

    def replica_log(self, tp: TopicPartition) -> Log | None:
        """The partition's log where this broker holds a replica of it. (In a cluster a broker keeps an empty
        log of every partition of a topic, of those it is no replica of too: those are not its.)"""
        if self.broker is None:
            return None
        if self.cluster_mode is not None and self.cluster_mode.replica_manager is not None \
                and self.cluster_mode.replica_manager.partition(tp) is None:
            return None
        return self.broker.log_manager.get_log(tp)

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """Where a consumer's ListOffsets ``latest`` stands for ``tp`` as this broker can tell: its replica's
        high watermark, in a cluster only where it leads the partition (a follower's trails); None otherwise."""
        if self.cluster_mode is not None and self.cluster_mode.replica_manager is not None:
            partition = self.cluster_mode.replica_manager.partition(tp)
            if partition is None or not partition.is_leader:
                return None
        log = self.replica_log(tp)
        return None if log is None else log.high_watermark

    def not_ready(self) -> list[str]:
        """What keeps the broker from being ready (``/readyz``): nothing once the log dirs are loaded, both
        coordinators have loaded their topics and the listeners serve."""
        if self._shut_down.is_set():
            return ["the broker is shutting down"]
        missing = []
        if self.broker is None:
            missing.append("log dirs: loading")
        if self.group_coordinator is None or self.group_coordinator.is_loading:
            missing.append("group coordinator: loading __consumer_offsets")
        if self.transaction_coordinator is None or self.transaction_coordinator.is_loading:
            missing.append("transaction coordinator: loading __transaction_state")
        if not self._started:
            missing.append("listeners: not serving yet")
        return missing

    def _inter_broker_listener(self) -> str:
        """``inter.broker.listener.name`` (the first listener when unset), checked before anything starts; in a
        cluster also how this broker reaches the others there (``inter_broker_security``): a TLS keystore or
        truststore, SASL mechanism or JAAS login that cannot work stops it here."""
        config = self.config
        endpoints = parse_listeners(config.listeners, "listeners", config.extra.get("listener.security.protocol.map"))
        value = config.extra.get("inter.broker.listener.name")
        name = inter_broker_listener_name(value, [e.listener_name for e in endpoints])
        endpoint = next(e for e in endpoints if e.listener_name == name)
        if config.etcd_connect:
            listener = ListenerConfig(config, name, endpoint.security_protocol)
            self.inter_broker_security = inter_broker_security(config, name, endpoint.security_protocol,
                                                               sasl_enabled_mechanisms(listener)[0])
        return name

    def _sasl_authenticators(self, endpoint: EndPoint) -> AuthenticatorFactory:
        # The handlers' ApiVersions answer, once KafkaApis exists (it is built after the listeners bind).
        return sasl_authenticator_factory(self.config, endpoint, self.credential_store,
                                          lambda frame: self.apis.api_versions_response(frame), self.clock)

    def _load_coordinators(self) -> None:
        """Replay ``__consumer_offsets`` into the group coordinator, then ``__transaction_state`` into the
        transaction coordinator (the loader thread): groups first, so the offsets of transactions the
        transaction coordinator completes while loading find their groups."""
        try:
            if self.cluster_mode is None:
                self.group_coordinator.load()
        except Exception:
            # Clients keep getting COORDINATOR_LOAD_IN_PROGRESS and retry; the log says why.
            log.exception("[BrokerServer id=%d] loading the consumer groups failed", self.config.node_id)
            return
        try:
            self.transaction_coordinator.load()
        except Exception:
            log.exception("[BrokerServer id=%d] loading the transactions failed", self.config.node_id)

    def _on_marker_written(self, marker: TxnMarker) -> None:
        """A transaction marker landed: fetches waiting for the partition's last stable offset may answer,
        and offsets a transaction committed in ``__consumer_offsets`` count or vanish."""
        tp = marker.topic_partition
        if self._fetch_purgatory is not None:
            self._fetch_purgatory.check_and_complete(TopicPartitionOperationKey(tp.topic, tp.partition))
        if tp.topic == OFFSETS_TOPIC and self.group_coordinator is not None:
            self.group_coordinator.on_transaction_completed(tp.partition, marker.producer_id, marker.commit)

    def __enter__(self) -> BrokerServer:
        return self.startup()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # --- what the metrics read ------------------------------------------------------

    @property
    def request_channel(self) -> RequestChannel | None:
        return self._request_channel

    @property
    def handler_pool(self) -> KafkaRequestHandlerPool | None:
        return self._handler_pool

    @property
    def fetch_purgatory(self) -> DelayedOperationPurgatory[DelayedFetch] | None:
        return self._fetch_purgatory

    # --- where it listens ----------------------------------------------------------

    @property
    def bound_endpoints(self) -> list[EndPoint]:
        if self.socket_server is None:
            raise RuntimeError("BrokerServer: not started")
        return self.socket_server.bound_endpoints

    def bound_port(self, listener_name: str | None = None) -> int:
        if self.socket_server is None:
            raise RuntimeError("BrokerServer: not started")
        return self.socket_server.bound_port(listener_name)

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the first listener, as a client's ``bootstrap.servers``."""
        endpoint = self.bound_endpoints[0]
        host = endpoint.host or "127.0.0.1"
        return f"{host}:{endpoint.port}"
