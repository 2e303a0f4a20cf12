"""The request handlers: what the broker does with each Kafka API (Kafka's KafkaApis).

``KafkaApis.handle`` parses a frame, finds the handler in a table keyed by
``ApiKey`` and runs it; every handler answers through the request channel
exactly once — now, or later for a fetch parked in the purgatory, or not at
all on the wire (a produce with acks=0, which still releases the connection).
Only APIs in the table are advertised by ApiVersions; a request for any other
closes the connection, as Kafka does for an API it does not know.

The broker is one node holding every partition: Metadata and
DescribeTopicPartitions name it leader of everything with itself as the only
replica and in-sync replica, at the partition's leader epoch — the newest in
its leader-epoch cache, 0 for a log seglog wrote alone (and no eligible
leader replicas). Fetch, ListOffsets and OffsetForLeaderEpoch fence a
request naming an older leader epoch (FENCED_LEADER_EPOCH, with the current
leader in Fetch v12) or a newer one (UNKNOWN_LEADER_EPOCH); ListOffsets
answers the epoch of the offset found, OffsetForLeaderEpoch the end offset of
an epoch from the epoch cache (KIP-101, KIP-320), and a Fetch v12 whose
last fetched epoch left this log's history gets the DivergingEpoch at once;
DescribeCluster names it the one broker and the controller; the high watermark is the log end offset; with no transactions yet the
last stable offset is the high watermark too, so read_committed reads what
read_uncommitted reads.

The group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups,
DeleteGroups) go to the ``GroupCoordinator``: ``coordinator.wire`` turns the
body of each version into the coordinator's typed request and its typed
result into the response body. JoinGroup and SyncGroup are answered when the
rebalance completes, from whichever thread completes it.

Configs: DescribeConfigs answers from the topic's overrides and the broker's
settings; AlterConfigs and IncrementalAlterConfigs go to the
``ConfigAdminManager``; DescribeLogDirs tells each log dir's partitions and
sizes and the space on its volume. DescribeProducers answers each partition's
producer state (ids, epochs, last sequences, open transactions).

seglog's own admin APIs, CompactionLease and ReplaceSegments, let an outside
compaction job lease partitions (pausing the broker's cleaner on them) and
have the broker swap its cleaned segments in; the ``CompactionLeases`` table
of the ``Broker`` does the work. They are served but never advertised.

Fetch v7+ keeps incremental fetch sessions (KIP-227, ``fetch_session``): the
``FetchManager`` gives each fetch its context, which says which partitions to
read and which of their answers to send; a fetch parked in the purgatory
answers through the same context.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Any, Callable, Iterable, Mapping

from format import layout
from format.errors import InvalidTopicError as FormatInvalidTopicError
from format.layout import TopicPartition

from ..broker import Broker
from ..config import (BROKER_CONFIG_NAMES, CONFIG_SOURCE_IDS, DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, LONG_MAX,
                      STATIC_BROKER_CONFIG, TOPIC_CONFIG_SYNONYMS, BrokerConfig, ConfigEntry, LogConfig)
from ..coordinator.group import GroupCoordinator, wire
from ..coordinator.group.broker_store import ensure_offsets_topic
from ..coordinator.group.requests import COORDINATOR_TYPE_TRANSACTION
from ..coordinator.transaction import TransactionCoordinator, TxnMarker
from ..coordinator.transaction import wire as txn_wire
from ..errors import IllegalSaslStateError
from ..errors import (NONE, FencedLeaderEpochError, InvalidConfigurationError, InvalidPartitionsError, InvalidReplicaAssignmentError,
                      InvalidReplicationFactorError, InvalidRequestError, InvalidRequiredAcksError, InvalidTopicError,
                      KafkaError, KafkaStorageError, TopicAlreadyExistsError, UnknownServerError, UnknownTopicIdError,
                      UnknownTopicOrPartitionError)
from ..errors import UnsupportedVersionError as UnsupportedVersionCodeError
from ..log.compaction_leases import CleanedSegment, LeasedPartition
from ..cluster.partition import check_leader_epoch
from ..log.log import (CONSUMER_REPLICA_ID, EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, INITIAL_LEADER_EPOCH,
                       LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Log)
from ..log.remote.remote_log_reader import fetch_offset_for_timestamp
from ..network.endpoint import EndPoint
from ..network.request_channel import CloseConnectionResponse, NoOpResponse, Request, RequestChannel, SendResponse
from ..network.request_metrics import error_codes
from ..offsets_topic import OFFSETS_TOPIC
from ..protocol import Request as KafkaRequest
from ..protocol import (ApiKey, ProtocolError, SeglogApiKey, UnsupportedVersionError, api_versions_fallback_response,
                        encode_response_buffers, parse_request, supported_apis)
from ..protocol.config_resources import RESOURCE_BROKER, RESOURCE_TOPIC
from ..protocol.messages.compaction import ACQUIRE, RELEASE, RENEW
from ..protocol.types import topic_id_bytes, topic_id_text
from ..purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from ..security.authorizer import Authorizer
from .acl_apis import AclApis
from .auth_helper import FilteredRequest, RequestContext, authorize_request
from .broker_topic_stats import BrokerTopicStats
from ..security.credential_admin import alter_user_scram_credentials, describe_user_scram_credentials
from ..security.credential_store import CredentialStore
from .credential_stores import open_credential_store
from .config_admin_manager import AlterableConfig, AlterConfigsResource, ConfigAdminManager
from .delayed_fetch import (READ_COMMITTED, DelayedFetch, FetchParams, FetchPartition, FetchPartitionStatus,
                            LogReadResult, read_from_local_log, release_results)
from .describe_topic_partitions import DescribedTopic, describe_topic_partitions
from .fetch_session import (FetchContext, FetchManager, FetchMetadata, FetchSessionCache, PartitionData,
                            PartitionResponse)
from .producer_id_manager import ProducerIdManager

log = logging.getLogger(__name__)

# Error codes the broker's exception table does not carry because only the wire needs them here.
OPERATION_NOT_ATTEMPTED = 55

# The oldest versions served, where the protocol package knows older ones:
# Produce v3 and Fetch v4 are the first to carry RecordBatch v2 only.
MIN_VERSIONS = {ApiKey.PRODUCE: 3, ApiKey.FETCH: 4}

# The first ListOffsets version of each offset spec (Kafka's ReplicaManager.timestampMinSupportedVersion):
# max timestamp at v7 (KIP-734), earliest-local at v8 (KIP-405), latest-tiered at v9 (KIP-1005).
TIMESTAMP_MIN_VERSIONS = {EARLIEST_TIMESTAMP: 1, LATEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
                          LATEST_TIERED_TIMESTAMP: 9}
ZERO_UUID = bytes(16)
# Listeners whose bytes travel as the broker writes them: a fetch there may send records from the files.
_CLEARTEXT_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")
# Kafka's AclOperation codes a topic supports; with no authorizer every one is allowed.
_TOPIC_OPERATIONS = (3, 4, 5, 6, 7, 8, 10, 11)  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in _TOPIC_OPERATIONS)
# The same for the cluster: CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE_CONFIGS ALTER_CONFIGS IDEMPOTENT_WRITE
# CREATE_TOKENS DESCRIBE_TOKENS.
_CLUSTER_OPERATIONS = (5, 7, 8, 9, 10, 11, 12, 13, 14)
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << op for op in _CLUSTER_OPERATIONS)
# DescribeCluster's endpoint types (KIP-919): a broker describes brokers; controllers it has none to show.
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
_ENDPOINT_TYPE_NAMES = {ENDPOINT_TYPE_BROKER: "BROKER", ENDPOINT_TYPE_CONTROLLER: "CONTROLLER"}
UNSUPPORTED_ENDPOINT_TYPE = 115
MISMATCHED_ENDPOINT_TYPE = 114
AUTHORIZED_OPERATIONS_OMITTED = -2147483648





def _java_value(value: object) -> str | None:
    """A broker setting as Kafka prints it in DescribeConfigs."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list, frozenset)):
        return ",".join(str(v) for v in value)
    return str(value)


class KafkaApis:
    """The handlers, keyed by API; ``handle`` is what the request handler threads call."""

    def __init__(self, broker: Broker, request_channel: RequestChannel, *, cluster_id: str,
                 advertised: Mapping[str, EndPoint], fetch_purgatory: DelayedOperationPurgatory[DelayedFetch],
                 producer_id_manager: ProducerIdManager, group_coordinator: GroupCoordinator | None = None,
                 transaction_coordinator: TransactionCoordinator | None = None,
                 credentials: CredentialStore | None = None,
                 authorizer: Authorizer | None = None) -> None:
        self.broker = broker
        #: ``authorizer.class.name`` set: every request is checked against the ACLs (``auth_helper.RULES``).
        self.authorizer = authorizer
        self.config: BrokerConfig = broker.config
        self.node_id = broker.node_id
        self.request_channel = request_channel
        self.cluster_id = cluster_id
        self.advertised = dict(advertised)
        self.fetch_purgatory = fetch_purgatory
        #: Records and bytes in and out per topic (the broker's metrics read them).
        self.topic_stats = BrokerTopicStats()
        self.fetch_manager = FetchManager(FetchSessionCache(self.config.max_incremental_fetch_session_cache_slots,
                                                            self.config.min_incremental_fetch_session_eviction_ms),
                                          broker.clock)
        self.producer_id_manager = producer_id_manager
        self.group_coordinator = group_coordinator
        self.transaction_coordinator = transaction_coordinator
        self.config_admin = ConfigAdminManager(broker)
        self.acl_apis = AclApis(self, authorizer)
        #: The users' SCRAM credentials (the log dirs' file, or etcd in cluster mode).
        self.credentials = credentials if credentials is not None else open_credential_store(self.config.log_dirs)
        self._handlers: dict[ApiKey | SeglogApiKey, Callable[[Request, KafkaRequest], None]] = {
            ApiKey.PRODUCE: self.handle_produce_request,
            ApiKey.FETCH: self.handle_fetch_request,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets_request,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.handle_offset_for_leader_epoch_request,
            ApiKey.METADATA: self.handle_topic_metadata_request,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster_request,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.handle_describe_topic_partitions_request,
            ApiKey.API_VERSIONS: self.handle_api_versions_request,
            ApiKey.SASL_HANDSHAKE: self.handle_sasl_handshake_request,
            ApiKey.SASL_AUTHENTICATE: self.handle_sasl_authenticate_request,
            ApiKey.CREATE_TOPICS: self.handle_create_topics_request,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics_request,
            ApiKey.INIT_PRODUCER_ID: self.handle_init_producer_id_request,
            ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs_request,
            ApiKey.ALTER_CONFIGS: self.handle_alter_configs_request,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs_request,
            ApiKey.DESCRIBE_LOG_DIRS: self.handle_describe_log_dirs_request,
            ApiKey.CREATE_PARTITIONS: self.handle_create_partitions_request,
            ApiKey.DESCRIBE_PRODUCERS: self.handle_describe_producers_request,
            ApiKey.CREATE_ACLS: self.acl_apis.handle_create_acls_request,
            ApiKey.DESCRIBE_ACLS: self.acl_apis.handle_describe_acls_request,
            ApiKey.DELETE_ACLS: self.acl_apis.handle_delete_acls_request,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.handle_describe_user_scram_credentials_request,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter_user_scram_credentials_request,
            SeglogApiKey.COMPACTION_LEASE: self.handle_compaction_lease_request,
            SeglogApiKey.REPLACE_SEGMENTS: self.handle_replace_segments_request,
        }
        if group_coordinator is not None:
            self._handlers.update({
                ApiKey.FIND_COORDINATOR: self.handle_find_coordinator_request,
                ApiKey.JOIN_GROUP: self.handle_join_group_request,
                ApiKey.SYNC_GROUP: self.handle_sync_group_request,
                ApiKey.HEARTBEAT: self.handle_heartbeat_request,
                ApiKey.LEAVE_GROUP: self.handle_leave_group_request,
                ApiKey.OFFSET_COMMIT: self.handle_offset_commit_request,
                ApiKey.OFFSET_FETCH: self.handle_offset_fetch_request,
                ApiKey.DESCRIBE_GROUPS: self.handle_describe_groups_request,
                ApiKey.LIST_GROUPS: self.handle_list_groups_request,
                ApiKey.DELETE_GROUPS: self.handle_delete_groups_request,
                ApiKey.OFFSET_DELETE: self.handle_offset_delete_request,
            })
        if transaction_coordinator is not None and group_coordinator is not None:
            self._handlers.update({
                ApiKey.ADD_PARTITIONS_TO_TXN: self.handle_add_partitions_to_txn_request,
                ApiKey.ADD_OFFSETS_TO_TXN: self.handle_add_offsets_to_txn_request,
                ApiKey.END_TXN: self.handle_end_txn_request,
                ApiKey.TXN_OFFSET_COMMIT: self.handle_txn_offset_commit_request,
                ApiKey.DESCRIBE_TRANSACTIONS: self.handle_describe_transactions_request,
                ApiKey.LIST_TRANSACTIONS: self.handle_list_transactions_request,
                ApiKey.WRITE_TXN_MARKERS: self.handle_write_txn_markers_request,
            })
        #: Cluster mode (``ClusterApis.install``): the partitions as replicas; None on a single broker.
        self.replica_manager = None
        self.api_versions = self._advertised_versions()
        self._pending_fetches: set[DelayedFetch] = set()
        self._pending_lock = threading.Lock()
        self._shutting_down = False

    def _advertised_versions(self) -> list[dict]:
        # seglog's own APIs stay out: a Kafka client must never see them.
        entries = []
        for entry in supported_apis(sorted(k for k in self._handlers if isinstance(k, ApiKey))):
            entry = dict(entry)
            floor = MIN_VERSIONS.get(ApiKey(entry["api_key"]))
            if floor is not None:
                entry["min_version"] = max(entry["min_version"], floor)
            if entry["min_version"] <= entry["max_version"]:
                entries.append(entry)
        return entries

    def _version_served(self, api_key: ApiKey | SeglogApiKey, version: int) -> bool:
        return version >= MIN_VERSIONS.get(api_key, 0)

    # --- dispatch -----------------------------------------------------------

    def handle(self, request: Request) -> None:
        """Parse ``request`` and run its handler; exactly one response follows."""
        try:
            parsed = parse_request(request.frame)
        except UnsupportedVersionError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                # A client newer than the broker: answer with the versions the
                # broker has, so it can retry with one of them (KIP-511).
                self.request_channel.send_response(
                    SendResponse(request, api_versions_fallback_response(exc.header)))
            else:
                self._close(request, f"unsupported request: {exc.message}")
            return
        except ProtocolError as exc:
            self._close(request, f"malformed request: {exc}")
            return
        header = parsed.header
        handler = self._handlers.get(header.api_key)
        if handler is None or not self._version_served(header.api_key, header.api_version):
            self._close(request, f"API {header.api_key} v{header.api_version} is not served")
            return
        if self.authorizer is not None:
            decision = authorize_request(self.request_context(request), parsed)
            if decision.close is not None:
                self._close(request, decision.close)
                return
            if decision.response is not None:
                self._send(request, parsed, decision.response)
                return
            parsed = decision.request
        handler(request, parsed)

    def request_context(self, request: Request) -> RequestContext:
        """What the authorizer needs of ``request``: its principal and host, and what this broker knows."""
        return RequestContext(self.authorizer, request.principal, request.client_address[0],
                              topic_exists=self._topic_exists, topic_name=lambda i: self._topic_ids().get(i),
                              auto_create_topics_enable=self.config.auto_create_topics_enable)

    def _topic_exists(self, name: str) -> bool:
        if self.replica_manager is not None:
            return self.replica_manager.metadata_cache.topic(name) is not None
        return self.broker.topics.get(name) is not None

    def _send(self, request: Request, parsed: KafkaRequest, body: dict) -> None:
        if isinstance(parsed, FilteredRequest):
            body = parsed.complete(body)  # the entries refused by the authorizer join the response
        request.times.error_codes = error_codes(body)  # counted with the request's times once it is answered
        self.request_channel.send_response(SendResponse(request, encode_response_buffers(parsed.header, body)))

    def _close(self, request: Request, reason: str) -> None:
        log.debug("closing connection %s from %s: %s", request.connection_id, request.client_address, reason)
        self.request_channel.send_response(CloseConnectionResponse(request, reason))

    # --- topics and ids ---------------------------------------------------------

    def _topic_ids(self) -> dict[bytes, str]:
        return {topic_id_bytes(meta.topic_id): meta.name for meta in self.broker.topics.all()}

    def _endpoint_for(self, request: Request) -> EndPoint:
        endpoint = self.advertised.get(request.listener_name)
        return endpoint if endpoint is not None else next(iter(self.advertised.values()))

    # --- ApiVersions ----------------------------------------------------------------

    def handle_api_versions_request(self, request: Request, parsed: KafkaRequest) -> None:
        self._send(request, parsed, {"error_code": NONE, "api_keys": self.api_versions, "throttle_time_ms": 0})

    def api_versions_response(self, frame: bytes) -> bytes:
        """The answer to an ApiVersions request ``frame``, both without size prefix: what a SASL listener's
        authenticator answers before the connection has authenticated."""
        try:
            parsed = parse_request(frame)
        except UnsupportedVersionError as exc:
            return api_versions_fallback_response(exc.header)[4:]
        body = {"error_code": NONE, "api_keys": self.api_versions, "throttle_time_ms": 0}
        return b"".join(encode_response_buffers(parsed.header, body))[4:]

    # --- SaslHandshake and SaslAuthenticate, after authentication ----------------------------

    def handle_sasl_handshake_request(self, request: Request, parsed: KafkaRequest) -> None:
        # Until a SASL connection has authenticated, its network thread answers these; what reaches the
        # handlers comes after that, or on a listener without SASL: out of place, as Kafka answers.
        self._send(request, parsed, {"error_code": IllegalSaslStateError.code, "mechanisms": []})

    def handle_sasl_authenticate_request(self, request: Request, parsed: KafkaRequest) -> None:
        self._send(request, parsed, {"error_code": IllegalSaslStateError.code, "error_message":
                                     "SaslAuthenticate request received after successful authentication",
                                     "auth_bytes": b"", "session_lifetime_ms": 0})

    # --- Metadata ---------------------------------------------------------------------

    def handle_topic_metadata_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        wanted = body.get("topics")
        if parsed.header.api_version == 0 and not wanted:
            wanted = None  # v0 has no null array: an empty one asks for every topic
        allow_auto_create = bool(body.get("allow_auto_topic_creation", True)) and self.config.auto_create_topics_enable
        include_operations = bool(body.get("include_topic_authorized_operations", False))
        topics = []
        if wanted is None:
            for meta in self.broker.topics.all():
                topics.append(self._topic_metadata(meta.name, include_operations))
        else:
            ids = None
            for entry in wanted:
                name = entry.get("name")
                topic_id = bytes(entry.get("topic_id") or ZERO_UUID)
                if name is None:
                    ids = self._topic_ids() if ids is None else ids
                    name = ids.get(topic_id)
                    if name is None:
                        # Name is nullable from v12 only.
                        unnamed = None if parsed.header.api_version >= 12 else ""
                        topics.append(self._topic_error(unnamed, topic_id, UnknownTopicIdError.code))
                        continue
                if self.broker.topics.get(name) is None:
                    error = self._maybe_auto_create(name, allow_auto_create)
                    if error is not None:
                        topics.append(self._topic_error(name, ZERO_UUID, error))
                        continue
                topics.append(self._topic_metadata(name, include_operations))
        endpoint = self._endpoint_for(request)
        self._send(request, parsed, {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": self.node_id, "host": endpoint.host, "port": endpoint.port, "rack": None}],
            "cluster_id": self.cluster_id,
            "controller_id": self.node_id,
            "topics": topics,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        })

    def _maybe_auto_create(self, name: str, allowed: bool) -> int | None:
        """Create ``name`` with the broker defaults if allowed; the error code to answer otherwise."""
        try:
            layout.validate_topic_name(name)
        except FormatInvalidTopicError:
            return InvalidTopicError.code
        if not allowed:
            return UnknownTopicOrPartitionError.code
        try:
            if name == OFFSETS_TOPIC:
                ensure_offsets_topic(self.broker)  # with the group coordinator's settings, as Kafka does
            else:
                self.broker.create_topic(name)
            log.info("auto-created topic %s", name)
        except TopicAlreadyExistsError:
            pass  # another request created it first
        except KafkaError as exc:
            return exc.code
        return None

    def _topic_error(self, name: str | None, topic_id: bytes, code: int) -> dict:
        return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False, "partitions": [],
                "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

    def _leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch: its log's (one broker never starts a new one)."""
        lg = self.broker.log_manager.get_log(TopicPartition(topic, partition))
        return INITIAL_LEADER_EPOCH if lg is None else lg.leader_epoch

    def _partition_metadata(self, topic: str, partition: int) -> dict:
        replicas = [self.node_id]
        return {"error_code": NONE, "partition_index": partition, "leader_id": self.node_id,
                "leader_epoch": self._leader_epoch(topic, partition), "replica_nodes": replicas,
                "isr_nodes": replicas, "offline_replicas": []}

    def _topic_metadata(self, name: str, include_operations: bool) -> dict:
        meta = self.broker.topics.get(name)
        if meta is None:  # deleted since it was listed
            return self._topic_error(name, ZERO_UUID, UnknownTopicOrPartitionError.code)
        partitions = [self._partition_metadata(name, p) for p in range(meta.partitions)]
        return {"error_code": NONE, "name": name, "topic_id": topic_id_bytes(meta.topic_id),
                "is_internal": name in layout.INTERNAL_TOPICS, "partitions": partitions,
                "topic_authorized_operations": (TOPIC_AUTHORIZED_OPERATIONS if include_operations
                                                else AUTHORIZED_OPERATIONS_OMITTED)}

    # --- DescribeCluster and DescribeTopicPartitions -------------------------------------

    def handle_describe_cluster_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        endpoint_type = body["endpoint_type"]
        response: dict = {"throttle_time_ms": 0, "error_code": NONE, "error_message": None,
                          "endpoint_type": ENDPOINT_TYPE_BROKER, "cluster_id": self.cluster_id,
                          "controller_id": -1, "brokers": [],
                          "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}
        if endpoint_type not in _ENDPOINT_TYPE_NAMES:
            response.update(error_code=UNSUPPORTED_ENDPOINT_TYPE,
                            error_message=f"Unsupported endpoint type {endpoint_type}")
        elif endpoint_type != ENDPOINT_TYPE_BROKER:
            response.update(error_code=MISMATCHED_ENDPOINT_TYPE,
                            error_message=f"The request was sent to an endpoint of type BROKER, but we wanted an "
                                          f"endpoint of type {_ENDPOINT_TYPE_NAMES[endpoint_type]}")
        else:
            endpoint = self._endpoint_for(request)
            response.update(
                controller_id=self.node_id,
                brokers=[{"broker_id": self.node_id, "host": endpoint.host, "port": endpoint.port, "rack": None,
                          "is_fenced": False}],
                cluster_authorized_operations=(CLUSTER_AUTHORIZED_OPERATIONS
                                               if body["include_cluster_authorized_operations"]
                                               else AUTHORIZED_OPERATIONS_OMITTED))
        self._send(request, parsed, response)

    def handle_describe_topic_partitions_request(self, request: Request, parsed: KafkaRequest) -> None:
        topics = {meta.name: DescribedTopic(topic_id_bytes(meta.topic_id), meta.partitions,
                                            meta.name in layout.INTERNAL_TOPICS)
                  for meta in self.broker.topics.all()}
        self._send(request, parsed, describe_topic_partitions(
            parsed.body, topics,
            # No eligible leader replicas (KIP-966) with one replica: empty lists, as Kafka answers.
            lambda topic, p: {**self._partition_metadata(topic, p), "eligible_leader_replicas": [],
                              "last_known_elr": []},
            TOPIC_AUTHORIZED_OPERATIONS))

    # --- Produce --------------------------------------------------------------------

    def handle_produce_request(self, request: Request, parsed: KafkaRequest) -> None:
        self.answer_produce(request, parsed, self._append)

    def answer_produce(self, request: Request, parsed: KafkaRequest,
                       append: Callable[[TopicPartition, Any, int], tuple[dict, int | None]],
                       await_replicas: Callable[[int, list[tuple[dict, TopicPartition, int]], Callable[[], None]],
                                                None] | None = None) -> None:
        """Produce: each partition's records appended by ``append(tp, records, acks)``, which gives the
        partition's response entry and the offset its in-sync replicas must reach before an ``acks=all``
        answer (None: answer as it is). Those are handed to ``await_replicas(timeout_ms, waiting, respond)``
        (cluster mode), which calls ``respond`` once they are there or the request's time is up."""
        body = parsed.body
        acks = body["acks"]
        responses = []
        waiting: list[tuple[dict, TopicPartition, int]] = []
        for topic in body["topic_data"]:
            name = topic["name"]
            partitions = []
            for data in topic["partition_data"]:
                tp = TopicPartition(name, data["index"])
                if acks not in (-1, 0, 1):
                    entry = self.produce_error(tp.partition, InvalidRequiredAcksError(
                        f"acks must be -1, 0 or 1, not {acks}"))
                else:
                    entry, required_offset = append(tp, data["records"], acks)
                    if acks == -1 and required_offset is not None:
                        waiting.append((entry, tp, required_offset))
                partitions.append(entry)
            responses.append({"name": name, "partition_responses": partitions})
        if acks == 0:
            # No answer is expected; an error can only be signalled by closing
            # the connection, which makes the client refresh its metadata.
            if any(p["error_code"] != NONE for r in responses for p in r["partition_responses"]):
                self._close(request, "a produce request with acks=0 failed")
            else:
                self.request_channel.send_response(NoOpResponse(request))
            return

        def respond() -> None:
            self._send(request, parsed, {"responses": responses, "throttle_time_ms": 0})

        if waiting and await_replicas is not None:
            await_replicas(body["timeout_ms"], waiting, respond)
        else:
            respond()

    def _append(self, tp: TopicPartition, records: Any, acks: int) -> tuple[dict, None]:
        """Append to this broker's log: every record it holds is committed, nothing to wait for."""
        try:
            info = self.broker.produce_batches(tp.topic, tp.partition, bytes(records or b""))
        except KafkaError as exc:
            return self.produce_error(tp.partition, exc), None
        except Exception as exc:
            log.exception("appending to %s failed", tp)
            return self.produce_error(tp.partition, UnknownServerError(f"{tp}: {exc}")), None
        # Fetches waiting on this partition may have enough bytes now.
        self.fetch_purgatory.check_and_complete(TopicPartitionOperationKey(tp.topic, tp.partition))
        return self.produce_answer(tp, info), None

    def produce_answer(self, tp: TopicPartition, info) -> dict:
        """A partition's entry of a Produce response for records appended as ``info`` says (counted in the
        topic's records and bytes in, unless it was a retried batch already in the log)."""
        if not info.duplicate:
            self.topic_stats.record_append(tp.topic, info.num_records, info.valid_bytes)
        return {"index": tp.partition, "error_code": NONE, "base_offset": info.first_offset,
                "log_append_time_ms": info.log_append_time, "log_start_offset": info.log_start_offset,
                "record_errors": [], "error_message": None}

    @staticmethod
    def produce_error(partition: int, error: KafkaError) -> dict:
        return {"index": partition, "error_code": error.code, "base_offset": -1, "log_append_time_ms": -1,
                "log_start_offset": -1, "record_errors": [], "error_message": str(error)}

    # --- Fetch --------------------------------------------------------------------

    def handle_fetch_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        params = FetchParams(max_wait_ms=max(0, body["max_wait_ms"]), min_bytes=max(0, body["min_bytes"]),
                             max_bytes=max(0, body.get("max_bytes", 0x7FFFFFFF)),
                             isolation_level=body.get("isolation_level", 0),
                             replica_id=body.get("replica_id", CONSUMER_REPLICA_ID),
                             zero_copy=self._zero_copy(request))
        context = self.fetch_manager.new_context(
            parsed.header.api_version, FetchMetadata(body.get("session_id", 0), body.get("session_epoch", -1)),
            [(TopicPartition(topic["topic"], part["partition"]),
              PartitionData(part["fetch_offset"], part.get("log_start_offset", -1), max(0, part["partition_max_bytes"]),
                            part["current_leader_epoch"], part.get("last_fetched_epoch", -1)))
             for topic in body["topics"] for part in topic["partitions"]],
            [TopicPartition(topic["topic"], index) for topic in body.get("forgotten_topics_data") or ()
             for index in topic["partitions"]],
            params.is_from_follower)
        if context.error_code != NONE:
            session = context.update_and_generate_response([])
            self._send(request, parsed, {"throttle_time_ms": 0, "error_code": session.error_code,
                                         "session_id": session.session_id, "responses": []})
            return
        # (topic, partition, error code or None, FetchPartition or None), in the order the context reads them.
        slots: list[tuple[str, int, int | None, FetchPartition | None]] = []
        for tp, data in context.partitions():
            name, index = tp.topic, tp.partition
            fenced = (self._check_leader(name, index) if self.replica_manager is not None else None) \
                or self._check_leader_epoch(name, index, data.current_leader_epoch)
            if fenced is not None:
                slots.append((name, index, fenced, None))
            else:
                fp = FetchPartition(name, index, data.fetch_offset, data.max_bytes, data.current_leader_epoch,
                                    data.last_fetched_epoch)
                slots.append((name, index, None, fp))
        partitions = [slot[3] for slot in slots if slot[3] is not None]
        results = read_from_local_log(self.broker.log_manager, params, partitions, self.broker.remote_log_reader)
        if params.is_from_follower:
            self._record_follower_fetches(params.replica_id, results)

        request.times.from_follower = params.is_from_follower

        def respond(final: list[LogReadResult]) -> None:
            response = self._fetch_response(slots, final, params, self._fetch_current_leader, context)
            self.topic_stats.record_fetched(response["responses"], params.is_from_follower)
            self._send(request, parsed, response)

        bytes_readable = sum(len(r.records) for r in results)
        error_reading = (any(r.error is not None or r.diverging_epoch is not None for r in results)
                         or len(partitions) != len(slots))
        if (params.max_wait_ms <= 0 or not partitions or bytes_readable >= params.min_bytes or error_reading
                or self._shutting_down):
            respond(results)
            return
        statuses = [FetchPartitionStatus(r.partition, r.fetch_offset_metadata) for r in results]
        release_results(results)  # completing reads again
        self._park_fetch(params, statuses, respond)

    def _zero_copy(self, request: Request) -> bool:
        """Whether a fetch's records may go out from the segment files (``fetch.zero.copy.enable``): on a
        listener whose bytes travel in the clear; TLS must encrypt them, so it reads them. (Fetch v4+ only:
        no down-conversion ever needs the bytes.)"""
        return self.config.fetch_zero_copy_enable and request.security_protocol in _CLEARTEXT_PROTOCOLS

    def _park_fetch(self, params: FetchParams, statuses: list[FetchPartitionStatus],
                    respond: Callable[[list[LogReadResult]], None]) -> None:
        """Wait in the purgatory for ``min_bytes`` or ``max_wait_ms``, then answer."""
        operation: DelayedFetch | None = None

        def on_complete(results: list[LogReadResult]) -> None:
            with self._pending_lock:
                self._pending_fetches.discard(operation)
            respond(results)

        operation = DelayedFetch(self.broker.log_manager, params, statuses, on_complete,
                                 self.broker.remote_log_reader)
        with self._pending_lock:
            self._pending_fetches.add(operation)
        keys = {TopicPartitionOperationKey(s.partition.topic, s.partition.partition) for s in statuses}
        self.fetch_purgatory.try_complete_else_watch(operation, keys)

    def _check_leader(self, topic: str, partition: int) -> int | None:
        """Cluster mode: the error code for a partition this broker does not lead (only leaders serve fetches)."""
        try:
            self.replica_manager.leader_partition(TopicPartition(topic, partition))
        except KafkaError as exc:
            return exc.code
        return None

    def _record_follower_fetches(self, replica_id: int, results: list[LogReadResult]) -> None:
        """The leader takes in where each follower fetched from (only reads that found the follower's history
        consistent with the log: no error, no diverging epoch)."""
        for result in results:
            if result.error is None and result.diverging_epoch is None:
                fp = result.partition
                try:
                    self.replica_manager.record_follower_fetch(TopicPartition(fp.topic, fp.partition), replica_id,
                                                               fp.fetch_offset, -1)
                except KafkaError as exc:
                    log.debug("fetch of %s-%d by broker %d not recorded: %s", fp.topic, fp.partition, replica_id,
                              exc)

    def _check_leader_epoch(self, topic: str, partition: int, current_leader_epoch: int) -> int | None:
        """The error code fencing a request that names another leader epoch than the partition's, or None."""
        lg = self.broker.log_manager.get_log(TopicPartition(topic, partition))
        if lg is None:
            return None  # answered as an unknown partition by the read
        try:
            check_leader_epoch(lg, current_leader_epoch, lg.leader_epoch)
        except KafkaError as exc:
            return exc.code
        return None

    def _fetch_current_leader(self, topic: str, partition: int) -> dict:
        """Fetch v12's CurrentLeader for a fenced partition (KIP-951): this broker, at the current epoch."""
        return {"leader_id": self.node_id, "leader_epoch": self._leader_epoch(topic, partition)}

    @staticmethod
    def _fetch_response(slots: list, results: list[LogReadResult], params: FetchParams,
                        current_leader: Callable[[str, int], dict], context: FetchContext) -> dict:
        read = iter(results)
        entries: list[dict] = []
        for name, index, code, fp in slots:
            aborted = [] if params.isolation_level == READ_COMMITTED else None
            if fp is not None:
                result = next(read)
                if result.aborted_transactions:
                    aborted = [{"producer_id": t.producer_id, "first_offset": t.first_offset}
                               for t in result.aborted_transactions]
                entry = {"partition_index": index, "error_code": result.error_code,
                         "high_watermark": result.high_watermark, "last_stable_offset": result.last_stable_offset,
                         "log_start_offset": result.log_start_offset, "aborted_transactions": aborted,
                         "preferred_read_replica": -1, "records": result.records}
                if result.diverging_epoch is not None:
                    entry["diverging_epoch"] = {"epoch": result.diverging_epoch.leader_epoch,
                                                "end_offset": result.diverging_epoch.end_offset}
            else:
                entry = {"partition_index": index, "error_code": code, "high_watermark": -1,
                         "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": aborted,
                         "preferred_read_replica": -1, "records": b""}
            if entry["error_code"] == FencedLeaderEpochError.code:
                entry["current_leader"] = current_leader(name, index)
            entries.append(entry)
        session = context.update_and_generate_response([
            (TopicPartition(name, index), PartitionResponse(
                entry["error_code"], entry["high_watermark"], entry["last_stable_offset"], entry["log_start_offset"],
                entry["preferred_read_replica"], len(entry["records"] or b"") > 0, "diverging_epoch" in entry))
            for (name, index, _, _), entry in zip(slots, entries)])
        responses: list[dict] = []
        for (name, _, _, _), entry, included in zip(slots, entries, session.included):
            if not included:
                continue
            # Consecutive partitions of one topic share one topic entry, as in the request.
            if responses and responses[-1]["topic"] == name:
                responses[-1]["partitions"].append(entry)
            else:
                responses.append({"topic": name, "partitions": [entry]})
        return {"throttle_time_ms": 0, "error_code": session.error_code, "session_id": session.session_id,
                "responses": responses}

    def complete_delayed_fetches(self) -> int:
        """Answer every parked fetch now (graceful shutdown); returns how many there were."""
        self._shutting_down = True
        with self._pending_lock:
            pending = list(self._pending_fetches)
        for operation in pending:
            operation.force_complete()
        return len(pending)

    # --- ListOffsets ----------------------------------------------------------------

    def handle_list_offsets_request(self, request: Request, parsed: KafkaRequest) -> None:
        topics = []
        for topic in parsed.body["topics"]:
            name = topic["name"]
            partitions = [self._list_offset(name, part, parsed.body.get("isolation_level", 0),
                                            parsed.body.get("replica_id", CONSUMER_REPLICA_ID),
                                            parsed.header.api_version)
                          for part in topic["partitions"]]
            topics.append({"name": name, "partitions": partitions})
        self._send(request, parsed, {"throttle_time_ms": 0, "topics": topics})

    def _list_offset(self, topic: str, part: dict, parsed_isolation_level: int, replica_id: int,
                     version: int) -> dict:
        index = part["partition_index"]
        timestamp = part["timestamp"]
        entry = {"partition_index": index, "error_code": NONE, "timestamp": -1, "offset": -1, "leader_epoch": -1}
        lg = self.broker.log_manager.get_log(TopicPartition(topic, index))
        if lg is None:
            entry["error_code"] = UnknownTopicOrPartitionError.code
            return entry
        fenced = ((self._check_leader(topic, index) if self.replica_manager is not None else None)
                  or self._check_leader_epoch(topic, index, part.get("current_leader_epoch", -1)))
        if fenced is not None:
            entry["error_code"] = fenced
            return entry
        if timestamp < 0 and version < TIMESTAMP_MIN_VERSIONS.get(timestamp, LONG_MAX):
            # Kafka's isListOffsetsTimestampUnsupported: an offset spec older versions do not know.
            entry["error_code"] = UnsupportedVersionCodeError.code
            return entry
        try:
            # A client's answer stops at the high watermark (the LSO at read_committed); a replica's
            # (Kafka's isClientRequest is false) has no isolation level and reaches the log end.
            level = parsed_isolation_level if replica_id == CONSUMER_REPLICA_ID else None
            found = fetch_offset_for_timestamp(lg, self.broker.remote_log_reader, timestamp, level)
        except KafkaError as exc:
            entry["error_code"] = exc.code
            return entry
        if found is not None:
            epoch = lg.leader_epoch_cache.epoch_for_offset(found.offset)
            if epoch is None:  # before every epoch known; a log no leader wrote to yet is in the first
                epoch = lg.leader_epoch if lg.latest_epoch is None else -1
            entry.update(timestamp=found.timestamp, offset=found.offset, leader_epoch=epoch)
        return entry

    # --- OffsetForLeaderEpoch ----------------------------------------------------------

    def handle_offset_for_leader_epoch_request(self, request: Request, parsed: KafkaRequest) -> None:
        topics = []
        for topic in parsed.body["topics"]:
            name = topic["topic"]
            partitions = [self._offset_for_leader_epoch(name, part) for part in topic["partitions"]]
            topics.append({"topic": name, "partitions": partitions})
        self._send(request, parsed, {"throttle_time_ms": 0, "topics": topics})

    def _offset_for_leader_epoch(self, topic: str, part: dict) -> dict:
        """Where the requested epoch ended in this leader's log (Kafka's lastOffsetForLeaderEpoch)."""
        index = part["partition"]
        entry = {"partition": index, "error_code": NONE, "leader_epoch": -1, "end_offset": -1}
        lg = self.broker.log_manager.get_log(TopicPartition(topic, index))
        if lg is None:
            entry["error_code"] = UnknownTopicOrPartitionError.code
            return entry
        try:
            if self.replica_manager is not None:
                self.replica_manager.leader_partition(TopicPartition(topic, index))  # only the leader answers
            if lg.failure_channel is not None:
                lg.failure_channel.check_online(os.path.dirname(lg.dir), lg)
            check_leader_epoch(lg, part["current_leader_epoch"], lg.leader_epoch)
            found = lg.end_offset_for_epoch(part["leader_epoch"])
        except KafkaError as exc:
            entry["error_code"] = exc.code
            return entry
        if found is not None:
            entry.update(leader_epoch=found.leader_epoch, end_offset=found.end_offset)
        return entry

    # --- CreateTopics -----------------------------------------------------------------

    def handle_create_topics_request(self, request: Request, parsed: KafkaRequest) -> None:
        self.answer_create_topics(request, parsed, self._create_topic)

    def answer_create_topics(self, request: Request, parsed: KafkaRequest,
                             create: Callable[[dict, bool], dict]) -> None:
        """CreateTopics: each topic of the request made by ``create(topic, validate_only)`` (in this broker's
        log dirs, or through etcd in cluster mode), a name given twice refused, each error in its topic's
        result."""
        body = parsed.body
        validate_only = bool(body.get("validate_only", False))
        names = [t["name"] for t in body["topics"]]
        duplicates = {n for n in names if names.count(n) > 1}
        results = []
        for topic in body["topics"]:
            name = topic["name"]
            if name in duplicates:
                results.append(self._create_topic_error(name, InvalidRequestError(
                    f"Create topics request from client contains multiple entries for topic {name}")))
                continue
            try:
                results.append(create(topic, validate_only))
            except KafkaError as exc:
                results.append(self._create_topic_error(name, exc))
        self._send(request, parsed, {"throttle_time_ms": 0, "topics": results})

    def _create_topic(self, topic: dict, validate_only: bool) -> dict:
        name = topic["name"]
        partitions = topic["num_partitions"]
        replication = topic["replication_factor"]
        assignments = topic.get("assignments") or []
        if assignments:
            if partitions != -1 or replication != -1:
                raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments "
                                          "were set. Both cannot be used at the same time.")
            for a in assignments:
                if list(a["broker_ids"]) != [self.node_id]:
                    raise InvalidReplicaAssignmentError(
                        f"partition {a['partition_index']} of {name} is assigned to brokers {a['broker_ids']}; "
                        f"only broker {self.node_id} exists")
            indexes = sorted(a["partition_index"] for a in assignments)
            if indexes != list(range(len(indexes))):
                raise InvalidReplicaAssignmentError(f"partitions of {name} must be numbered 0..n-1, got {indexes}")
            partitions = len(indexes)
        if partitions == -1:
            partitions = self.config.num_partitions
        if replication == -1:
            replication = self.config.default_replication_factor
        if partitions < 1:
            raise InvalidPartitionsError(f"Topic {name}: number of partitions was set to an invalid non-positive "
                                         f"value.")
        if replication != 1:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication} time(s): The target replication factor of "
                f"{replication} cannot be reached because only 1 broker(s) are registered.")
        configs = {}
        for c in topic.get("configs") or []:
            if c["value"] is None:
                raise InvalidConfigurationError(f"Null value not supported for topic configs: {c['name']}",
                                                config_name=c["name"])
            configs[c["name"]] = c["value"]
        if validate_only:
            try:
                layout.validate_topic_name(name)
            except FormatInvalidTopicError as exc:
                raise InvalidTopicError(str(exc)) from None
            if self.broker.topics.get(name) is not None:
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            self.broker.check_new_partitions(f"topic {name!r}", partitions)
            overrides = {k: str(v) for k, v in configs.items()}
            config = self.config.log_config_defaults().with_overrides(overrides)
            topic_id = ZERO_UUID
        else:
            description = self.broker.create_topic(name, partitions, configs)
            overrides = description.config
            config = self.broker.log_config(name)
            topic_id = topic_id_bytes(description.topic_id)
        return {"name": name, "topic_id": topic_id, "error_code": NONE, "error_message": None,
                "num_partitions": partitions, "replication_factor": 1,
                "configs": [{"name": e.name, "value": e.value, "read_only": e.read_only,
                             "config_source": CONFIG_SOURCE_IDS[e.source], "is_sensitive": e.is_sensitive}
                            for e in config.describe(overrides, self.config)]}

    @staticmethod
    def _create_topic_error(name: str, error: KafkaError) -> dict:
        return {"name": name, "topic_id": ZERO_UUID, "error_code": error.code, "error_message": str(error),
                "num_partitions": -1, "replication_factor": -1, "configs": None}

    # --- DeleteTopics -----------------------------------------------------------------

    def handle_delete_topics_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        wanted: list[tuple[str | None, bytes]] = [(n, ZERO_UUID) for n in body.get("topic_names") or []]
        wanted += [(t.get("name"), bytes(t.get("topic_id") or ZERO_UUID)) for t in body.get("topics") or []]
        ids = self._topic_ids() if any(name is None for name, _ in wanted) else {}
        responses = []
        for name, topic_id in wanted:
            resolved = name if name is not None else ids.get(topic_id)
            entry = {"name": resolved, "topic_id": topic_id, "error_code": NONE, "error_message": None}
            try:
                if resolved is None:
                    raise UnknownTopicIdError(f"no topic has id {topic_id_text(topic_id)}")
                meta = self.broker.topics.get(resolved)
                if meta is None:
                    raise UnknownTopicOrPartitionError(f"topic {resolved!r} does not exist")
                entry["topic_id"] = topic_id_bytes(meta.topic_id)
                self.broker.delete_topic(resolved)
                # Fetches waiting on the topic answer now, with UNKNOWN_TOPIC_OR_PARTITION.
                for p in range(meta.partitions):
                    self.fetch_purgatory.check_and_complete(TopicPartitionOperationKey(resolved, p))
            except KafkaError as exc:
                entry.update(error_code=exc.code, error_message=str(exc))
            responses.append(entry)
        self._send(request, parsed, {"throttle_time_ms": 0, "responses": responses})

    # --- CreatePartitions -------------------------------------------------------------

    def handle_create_partitions_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        validate_only = bool(body.get("validate_only", False))
        names = [t["name"] for t in body["topics"]]
        results = []
        for topic in body["topics"]:
            name = topic["name"]
            try:
                if names.count(name) > 1:
                    raise InvalidRequestError(f"Duplicate topic in request: {name}")
                self._create_partitions(name, topic["count"], topic.get("assignments"), validate_only)
                results.append({"name": name, "error_code": NONE, "error_message": None})
            except KafkaError as exc:
                results.append({"name": name, "error_code": exc.code, "error_message": str(exc)})
        self._send(request, parsed, {"throttle_time_ms": 0, "results": results})

    def _create_partitions(self, name: str, count: int, assignments: list | None, validate_only: bool) -> None:
        meta = self.broker.topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        if count <= meta.partitions:
            raise InvalidPartitionsError(f"Topic currently has {meta.partitions} partitions, which is higher than "
                                         f"or equal to the requested {count}.")
        if assignments is not None:
            if len(assignments) != count - meta.partitions:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {count - meta.partitions} but {len(assignments)} "
                    f"assignments provided.")
            for a in assignments:
                if list(a["broker_ids"]) != [self.node_id]:
                    raise InvalidReplicaAssignmentError(f"assignment {a['broker_ids']} names brokers other than "
                                                        f"{self.node_id}")
        if validate_only:
            self.broker.check_new_partitions(f"topic {name!r}", count - meta.partitions)
        else:
            self.broker.create_partitions(name, count)

    # --- DescribeConfigs ---------------------------------------------------------------

    def handle_describe_configs_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        include_synonyms = bool(body.get("include_synonyms", False))
        results = []
        for resource in body["resources"]:
            resource_type = resource["resource_type"]
            name = resource["resource_name"]
            keys = resource.get("configuration_keys")
            result = {"error_code": NONE, "error_message": None, "resource_type": resource_type,
                      "resource_name": name, "configs": []}
            try:
                if resource_type == RESOURCE_TOPIC:
                    entries = self._topic_config_entries(name, include_synonyms)
                elif resource_type == RESOURCE_BROKER:
                    if name not in ("", str(self.node_id)):
                        raise InvalidRequestError(f"Unexpected broker id, expected {self.node_id} or empty "
                                                  f"string, but received {name}")
                    entries = self._broker_config_entries()
                else:
                    raise InvalidRequestError(f"Unsupported resource type {resource_type} for DescribeConfigs")
                if keys is not None:
                    wanted = set(keys)
                    entries = [e for e in entries if e["name"] in wanted]
                result["configs"] = entries
            except KafkaError as exc:
                result.update(error_code=exc.code, error_message=str(exc))
            results.append(result)
        self._send(request, parsed, {"throttle_time_ms": 0, "results": results})

    @staticmethod
    def _config_entry(entry: ConfigEntry, synonyms: list[dict]) -> dict:
        return {"name": entry.name, "value": entry.value, "read_only": entry.read_only,
                "config_source": CONFIG_SOURCE_IDS[entry.source],
                "is_sensitive": entry.is_sensitive, "synonyms": synonyms, "config_type": 0, "documentation": None}

    def _topic_config_entries(self, name: str, include_synonyms: bool) -> list[dict]:
        meta = self.broker.topics.get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
        entries = self.broker.log_config(name).describe(meta.config, self.config)
        defaults = LogConfig().to_props() if include_synonyms else {}
        out = []
        for entry in entries:
            synonyms = []
            if include_synonyms:
                # Kafka's order: the topic's own value, then the broker's, then the default.
                if entry.name in meta.config:
                    synonyms.append({"name": entry.name, "value": meta.config[entry.name],
                                     "source": CONFIG_SOURCE_IDS[DYNAMIC_TOPIC_CONFIG]})
                broker_names = TOPIC_CONFIG_SYNONYMS.get(entry.name, ())
                for broker_name in broker_names:
                    if broker_name in self.config.static_overrides:
                        value = _java_value(getattr(self.config, broker_name.replace(".", "_"), None))
                        synonyms.append({"name": broker_name, "value": value,
                                         "source": CONFIG_SOURCE_IDS[STATIC_BROKER_CONFIG]})
                if broker_names:
                    synonyms.append({"name": broker_names[0], "value": defaults.get(entry.name),
                                     "source": CONFIG_SOURCE_IDS[DEFAULT_CONFIG]})
            out.append(self._config_entry(entry, synonyms))
        return out

    def _broker_config_entries(self) -> list[dict]:
        out = []
        for name in sorted(BROKER_CONFIG_NAMES):
            attr = name.replace(".", "_")
            if not hasattr(self.config, attr):
                continue  # an alias (log.dir, broker.id)
            source = STATIC_BROKER_CONFIG if name in self.config.static_overrides else DEFAULT_CONFIG
            # Static broker settings cannot be changed while the broker runs.
            entry = ConfigEntry(name, _java_value(getattr(self.config, attr)), source, read_only=True)
            out.append(self._config_entry(entry, []))
        return out

    # --- AlterConfigs and IncrementalAlterConfigs ---------------------------------------

    def handle_alter_configs_request(self, request: Request, parsed: KafkaRequest) -> None:
        resources = [AlterConfigsResource(r["resource_type"], r["resource_name"],
                                          tuple(AlterableConfig(c["name"], c["value"]) for c in r["configs"]))
                     for r in parsed.body["resources"]]
        errors = self.config_admin.alter_configs(resources, bool(parsed.body["validate_only"]))
        self._send_alter_configs_response(request, parsed, resources, errors)

    def handle_incremental_alter_configs_request(self, request: Request, parsed: KafkaRequest) -> None:
        resources = [AlterConfigsResource(r["resource_type"], r["resource_name"],
                                          tuple(AlterableConfig(c["name"], c["value"], c["config_operation"])
                                                for c in r["configs"]))
                     for r in parsed.body["resources"]]
        errors = self.config_admin.incremental_alter_configs(resources, bool(parsed.body["validate_only"]))
        self._send_alter_configs_response(request, parsed, resources, errors)

    def _send_alter_configs_response(self, request: Request, parsed: KafkaRequest,
                                     resources: list[AlterConfigsResource], errors: list[KafkaError | None]) -> None:
        responses = []
        for resource, error in zip(resources, errors):
            if error is not None:
                log.info("configs of resource %r (type %d) not altered: %s", resource.resource_name,
                         resource.resource_type, error)
            responses.append({"error_code": NONE if error is None else error.code,
                              "error_message": None if error is None else str(error),
                              "resource_type": resource.resource_type, "resource_name": resource.resource_name})
        self._send(request, parsed, {"throttle_time_ms": 0, "responses": responses})

    # --- DescribeLogDirs -----------------------------------------------------------------

    def handle_describe_log_dirs_request(self, request: Request, parsed: KafkaRequest) -> None:
        wanted = parsed.body["topics"]
        partitions = None if wanted is None else {
            TopicPartition(t["topic"], p) for t in wanted for p in t["partitions"]}
        logs_by_dir: dict[str, list[Log]] = {}
        for tp, lg in sorted(self.broker.log_manager.all_logs().items()):
            if partitions is None or tp in partitions:
                logs_by_dir.setdefault(os.path.dirname(lg.dir), []).append(lg)
        results = [self._describe_log_dir(d, logs_by_dir.get(d, [])) for d in self.broker.log_manager.log_dirs]
        self._send(request, parsed, {"throttle_time_ms": 0, "error_code": NONE, "results": results})

    @staticmethod
    def _describe_log_dir(log_dir: str, logs: list[Log]) -> dict:
        try:
            volume = os.statvfs(log_dir)
        except OSError as exc:
            log.warning("log dir %s cannot be described: %s", log_dir, exc)
            return {"error_code": KafkaStorageError.code, "log_dir": log_dir, "topics": [], "total_bytes": -1,
                    "usable_bytes": -1}
        topics: list[dict] = []
        for lg in logs:
            tp = lg.topic_partition
            # One replica and no log moving between dirs: no lag, never a future log.
            entry = {"partition_index": tp.partition, "partition_size": lg.size, "offset_lag": 0,
                     "is_future_key": False}
            if topics and topics[-1]["name"] == tp.topic:
                topics[-1]["partitions"].append(entry)
            else:
                topics.append({"name": tp.topic, "partitions": [entry]})
        return {"error_code": NONE, "log_dir": log_dir, "topics": topics,
                "total_bytes": min(volume.f_blocks * volume.f_frsize, LONG_MAX),
                "usable_bytes": min(volume.f_bavail * volume.f_frsize, LONG_MAX)}

    # --- the group APIs (answered by the group coordinator) ------------------------------
    # Each is: the body to a typed request (``wire``), the coordinator, the typed result to a body (``wire``).

    def handle_find_coordinator_request(self, request: Request, parsed: KafkaRequest) -> None:
        # One broker coordinates every group: the answer is this broker, as the client reached it.
        version = parsed.header.api_version
        find = wire.parse_find_coordinator(parsed.body, version)
        if find.key_type == COORDINATOR_TYPE_TRANSACTION and self.transaction_coordinator is not None:
            answers = self.transaction_coordinator.find_coordinator(find.keys)
        else:
            answers = self.group_coordinator.find_coordinator(find)
        endpoint = self._endpoint_for(request)
        self._send(request, parsed, wire.find_coordinator_response(version, answers, self.node_id, endpoint.host,
                                                                   endpoint.port))

    def handle_join_group_request(self, request: Request, parsed: KafkaRequest) -> None:
        # Answered when the rebalance completes, maybe from the thread of another
        # member's request or of the coordinator's timer, as a DelayedFetch is.
        version = parsed.header.api_version
        join = wire.parse_join_group(parsed.body, version, client_id=parsed.header.client_id or "",
                                     client_host=f"/{request.client_address[0]}")
        self.group_coordinator.join_group(
            join, lambda result: self._send(request, parsed, wire.join_group_response(result, version)))

    def handle_sync_group_request(self, request: Request, parsed: KafkaRequest) -> None:
        version = parsed.header.api_version
        self.group_coordinator.sync_group(
            wire.parse_sync_group(parsed.body, version),
            lambda result: self._send(request, parsed, wire.sync_group_response(result, version)))

    def handle_heartbeat_request(self, request: Request, parsed: KafkaRequest) -> None:
        heartbeat = wire.parse_heartbeat(parsed.body, parsed.header.api_version)
        self._send(request, parsed, wire.heartbeat_response(self.group_coordinator.heartbeat(heartbeat)))

    def handle_leave_group_request(self, request: Request, parsed: KafkaRequest) -> None:
        version = parsed.header.api_version
        result = self.group_coordinator.leave_group(wire.parse_leave_group(parsed.body, version))
        self._send(request, parsed, wire.leave_group_response(result, version))

    def handle_offset_commit_request(self, request: Request, parsed: KafkaRequest) -> None:
        """OffsetCommit: partitions this broker does not have get UNKNOWN_TOPIC_OR_PARTITION, the rest go
        to the coordinator, and the response lists every partition in request order (as Kafka's KafkaApis)."""
        commit = wire.parse_offset_commit(parsed.body, parsed.header.api_version)
        known = {tp: offset for tp, offset in commit.offsets.items() if self._has_partition(tp)}
        errors = {tp: UnknownTopicOrPartitionError.code for tp in commit.offsets if tp not in known}
        if known:
            errors.update(self.group_coordinator.commit_offsets(dataclasses.replace(commit, offsets=known)))
        self._send(request, parsed, wire.offset_commit_response(commit, errors))

    def _has_partition(self, tp: TopicPartition) -> bool:
        meta = self.broker.topics.get(tp.topic)
        return meta is not None and 0 <= tp.partition < meta.partitions

    def handle_offset_fetch_request(self, request: Request, parsed: KafkaRequest) -> None:
        version = parsed.header.api_version
        fetch = wire.parse_offset_fetch(parsed.body, version)
        self._send(request, parsed,
                   wire.offset_fetch_response(fetch, self.group_coordinator.fetch_offsets(fetch), version))

    def handle_describe_groups_request(self, request: Request, parsed: KafkaRequest) -> None:
        describe = wire.parse_describe_groups(parsed.body, parsed.header.api_version)
        self._send(request, parsed,
                   wire.describe_groups_response(describe, self.group_coordinator.describe_groups(describe)))

    def handle_list_groups_request(self, request: Request, parsed: KafkaRequest) -> None:
        error, groups = self.group_coordinator.list_groups(
            wire.parse_list_groups(parsed.body, parsed.header.api_version))
        self._send(request, parsed, wire.list_groups_response(error, groups))

    def handle_delete_groups_request(self, request: Request, parsed: KafkaRequest) -> None:
        results = self.group_coordinator.delete_groups(
            wire.parse_delete_groups(parsed.body, parsed.header.api_version))
        self._send(request, parsed, wire.delete_groups_response(results))

    def handle_offset_delete_request(self, request: Request, parsed: KafkaRequest) -> None:
        """OffsetDelete: partitions this broker does not have get UNKNOWN_TOPIC_OR_PARTITION, the rest go
        to the coordinator; a group-level error answers alone (as Kafka's KafkaApis)."""
        delete = wire.parse_offset_delete(parsed.body, parsed.header.api_version)
        known = tuple(tp for tp in delete.partitions if self._has_partition(tp))
        error, errors = self.group_coordinator.delete_offsets(dataclasses.replace(delete, partitions=known))
        merged = {tp: errors.get(tp, UnknownTopicOrPartitionError.code) for tp in delete.partitions}
        self._send(request, parsed, wire.offset_delete_response(error, merged))

    # --- InitProducerId ---------------------------------------------------------------

    def handle_init_producer_id_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        if self.transaction_coordinator is not None:
            version = parsed.header.api_version
            result = self.transaction_coordinator.init_producer_id(txn_wire.parse_init_producer_id(body, version))
            self._send(request, parsed, txn_wire.init_producer_id_response(result, version))
            return
        if body.get("transactional_id") is not None:
            # Transactions need the transaction coordinator, which this broker does not run yet.
            self._send(request, parsed, {"throttle_time_ms": 0, "error_code": InvalidRequestError.code,
                                         "producer_id": -1, "producer_epoch": -1})
            return
        # Idempotent producers get a fresh id each time, epoch 0, as Kafka
        # gives them when there is no transactional id.
        producer_id = self.producer_id_manager.generate_producer_id()
        self._send(request, parsed, {"throttle_time_ms": 0, "error_code": NONE, "producer_id": producer_id,
                                     "producer_epoch": 0})

    # --- DescribeProducers ---------------------------------------------------------------

    def handle_describe_producers_request(self, request: Request, parsed: KafkaRequest) -> None:
        """Each partition's producers from its producer state (Kafka's UnifiedLog.activeProducers); an
        invalid topic name answers INVALID_TOPIC_EXCEPTION, a topic or partition this broker does not
        have UNKNOWN_TOPIC_OR_PARTITION, an offline log dir KAFKA_STORAGE_ERROR."""
        topics = []
        for topic in parsed.body["topics"]:
            name = topic["name"]
            partitions = []
            for index in topic["partition_indexes"]:
                entry: dict[str, Any] = {"partition_index": index, "error_code": NONE, "error_message": None,
                                         "active_producers": []}
                try:
                    layout.validate_topic_name(name)
                    producers = self.broker.describe_producers(name, index)
                except FormatInvalidTopicError as exc:
                    entry.update(error_code=InvalidTopicError.code, error_message=str(exc))
                except KafkaError as exc:
                    entry.update(error_code=exc.code, error_message=str(exc))
                else:
                    entry["active_producers"] = [{
                        "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                        "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
                        "coordinator_epoch": p.coordinator_epoch,
                        "current_txn_start_offset": p.current_txn_start_offset} for p in producers]
                partitions.append(entry)
            topics.append({"name": name, "partitions": partitions})
        self._send(request, parsed, {"throttle_time_ms": 0, "topics": topics})

    # --- the transaction APIs (answered by the transaction coordinator) ---------------------
    # Each is: the body to a typed request (``txn_wire``), the coordinator, the typed result to a body.

    def handle_add_partitions_to_txn_request(self, request: Request, parsed: KafkaRequest) -> None:
        """Partitions this broker does not have get UNKNOWN_TOPIC_OR_PARTITION and the others
        OPERATION_NOT_ATTEMPTED, as Kafka's KafkaApis answers."""
        version = parsed.header.api_version
        adds = txn_wire.parse_add_partitions_to_txn(parsed.body, version)
        results = []
        for add in adds:
            unknown = [tp for tp in add.partitions if not self._has_partition(tp)]
            if unknown:
                results.append({tp: UnknownTopicOrPartitionError.code if tp in unknown
                                else OPERATION_NOT_ATTEMPTED for tp in add.partitions})
            else:
                results.append(self.transaction_coordinator.add_partitions_to_transaction(add))
        self._send(request, parsed, txn_wire.add_partitions_to_txn_response(version, adds, results))

    def handle_add_offsets_to_txn_request(self, request: Request, parsed: KafkaRequest) -> None:
        version = parsed.header.api_version
        error = self.transaction_coordinator.add_offsets_to_transaction(
            txn_wire.parse_add_offsets_to_txn(parsed.body, version))
        self._send(request, parsed, txn_wire.add_offsets_to_txn_response(error, version))

    def handle_end_txn_request(self, request: Request, parsed: KafkaRequest) -> None:
        version = parsed.header.api_version
        error = self.transaction_coordinator.end_transaction(txn_wire.parse_end_txn(parsed.body, version))
        self._send(request, parsed, txn_wire.end_txn_response(error, version))

    def handle_txn_offset_commit_request(self, request: Request, parsed: KafkaRequest) -> None:
        commit = txn_wire.parse_txn_offset_commit(parsed.body, parsed.header.api_version)
        known = {tp: offset for tp, offset in commit.offsets.items() if self._has_partition(tp)}
        errors = {tp: UnknownTopicOrPartitionError.code for tp in commit.offsets if tp not in known}
        if known:
            errors.update(self.group_coordinator.commit_transactional_offsets(
                dataclasses.replace(commit, offsets=known)))
        self._send(request, parsed, txn_wire.txn_offset_commit_response(commit, errors))

    def handle_describe_transactions_request(self, request: Request, parsed: KafkaRequest) -> None:
        ids = txn_wire.parse_describe_transactions(parsed.body, parsed.header.api_version)
        self._send(request, parsed,
                   txn_wire.describe_transactions_response(self.transaction_coordinator.describe_transactions(ids)))

    def handle_list_transactions_request(self, request: Request, parsed: KafkaRequest) -> None:
        listing = txn_wire.parse_list_transactions(parsed.body, parsed.header.api_version)
        error, listings = self.transaction_coordinator.list_transactions(listing)
        self._send(request, parsed, txn_wire.list_transactions_response(listing, error, listings))

    def handle_write_txn_markers_request(self, request: Request, parsed: KafkaRequest) -> None:
        """A transaction coordinator's markers for partitions this broker leads, each appended as the
        local coordinator appends its own (so fetches waiting on the last stable offset and offsets
        committed in the transaction hear of it); each partition's error as Kafka answers it:
        UNKNOWN_TOPIC_OR_PARTITION for one this broker does not have, NOT_LEADER_OR_FOLLOWER where
        it does not lead, INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED for an obsolete
        marker."""
        errors: dict[TxnMarker, int] = {}
        for marker in txn_wire.parse_write_txn_markers(parsed.body):
            if not self._has_partition(marker.topic_partition):
                errors[marker] = UnknownTopicOrPartitionError.code
                continue
            try:
                self.transaction_coordinator.markers.append_marker(marker)
            except KafkaError as exc:
                errors[marker] = exc.code
            except Exception:
                log.exception("writing the transaction marker %s failed", marker)
                errors[marker] = UnknownServerError.code
            else:
                errors[marker] = NONE
        self._send(request, parsed, txn_wire.write_txn_markers_response(errors))

    # --- CompactionLease and ReplaceSegments (seglog's own) -----------------------------

    def handle_compaction_lease_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        lease_id = body["lease_id"]
        operation = body["operation"]
        leases = self.broker.compaction_leases
        wanted = [TopicPartition(t["name"], p) for t in body["topics"] for p in t["partitions"]]
        try:
            if operation == ACQUIRE:
                outcome = leases.acquire(lease_id, wanted, body["lease_ms"])
                partitions = [outcome[tp] for tp in wanted]
            elif operation == RENEW:
                partitions = leases.renew(lease_id, body["lease_ms"])
            elif operation == RELEASE:
                partitions = leases.release(lease_id)
            else:
                raise InvalidRequestError(f"unknown compaction lease operation {operation} "
                                          f"(0 acquire, 1 renew, 2 release)")
        except KafkaError as exc:
            self._send(request, parsed, {"throttle_time_ms": 0, "error_code": exc.code, "error_message": str(exc),
                                         "topics": self._lease_topics(
                                             [LeasedPartition(tp, error=exc) for tp in wanted])})
            return
        first_error = next((p.error for p in partitions if p.error is not None), None)
        self._send(request, parsed, {
            "throttle_time_ms": 0,
            "error_code": NONE if first_error is None else first_error.code,
            "error_message": None if first_error is None else str(first_error),
            "topics": self._lease_topics(partitions),
        })

    @staticmethod
    def _lease_topics(partitions: list[LeasedPartition]) -> list[dict]:
        topics: list[dict] = []
        for p in partitions:
            tp = p.topic_partition
            entry = {"partition_index": tp.partition, "error_code": NONE if p.error is None else p.error.code,
                     "error_message": None if p.error is None else str(p.error), "log_dir": p.log_dir}
            # Consecutive partitions of one topic share one topic entry, as in the request.
            if topics and topics[-1]["name"] == tp.topic:
                topics[-1]["partitions"].append(entry)
            else:
                topics.append({"name": tp.topic, "partitions": [entry]})
        return topics

    def handle_replace_segments_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        lease_id = body["lease_id"]
        topics = []
        for topic in body["topics"]:
            partitions = []
            for part in topic["partitions"]:
                tp = TopicPartition(topic["name"], part["partition_index"])
                segments = [CleanedSegment(s["base_offset"], tuple(s["replaced_base_offsets"]))
                            for s in part["segments"]]
                entry = {"partition_index": tp.partition, "error_code": NONE, "error_message": None}
                try:
                    self.broker.compaction_leases.replace_segments(lease_id, tp, segments,
                                                                   part["cleaned_through_offset"])
                except KafkaError as exc:
                    entry.update(error_code=exc.code, error_message=str(exc))
                except Exception as exc:
                    log.exception("replacing segments of %s failed", tp)
                    entry.update(error_code=UnknownServerError.code, error_message=f"{tp}: {exc}")
                partitions.append(entry)
            topics.append({"name": topic["name"], "partitions": partitions})
        self._send(request, parsed, {"throttle_time_ms": 0, "topics": topics})

    # --- users: their SCRAM credentials (KIP-554) ----------------------------------------------

    def handle_describe_user_scram_credentials_request(self, request: Request, parsed: KafkaRequest) -> None:
        self._send(request, parsed, describe_user_scram_credentials(self.credentials, parsed.body))

    def handle_alter_user_scram_credentials_request(self, request: Request, parsed: KafkaRequest) -> None:
        self._send(request, parsed, alter_user_scram_credentials(self.credentials, parsed.body))

    # --- introspection ----------------------------------------------------------------

    @property
    def api_keys(self) -> Iterable[ApiKey | SeglogApiKey]:
        return self._handlers.keys()


__all__ = ["KafkaApis", "MIN_VERSIONS"]
