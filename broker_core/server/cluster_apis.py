"""The requests a broker answers differently in cluster mode: the cluster's metadata from etcd, writes to
partition leaders only, ``acks=all`` waiting for the ISR, topics created and deleted through etcd.

``ClusterApis.install`` replaces these handlers of ``KafkaApis``:

* **Metadata / DescribeCluster**: every live broker (its endpoint on the
  listener asked), the controller, and for each partition its leader and
  leader epoch, replicas, ISR and offline replicas (assigned to brokers that
  are not registered); a partition with no leader answers LEADER_NOT_AVAILABLE.
* **Produce**: only the leader appends (NOT_LEADER_OR_FOLLOWER elsewhere),
  stamped with its leader epoch; ``acks=all`` is refused with
  NOT_ENOUGH_REPLICAS while the ISR is below ``min.insync.replicas`` and
  otherwise waits as a ``DelayedProduce`` until the ISR has the records or
  the request's ``timeout.ms``.
* **FindCoordinator**: the leader of the key's partition of
  ``__consumer_offsets`` or ``__transaction_state`` (``InternalTopics``
  creates the topic on first use).
* **AlterConfigs / IncrementalAlterConfigs** of a topic: its overrides in
  ``/config/topics/T``, applied by every broker holding it.
* **CreateTopics / CreatePartitions / DeleteTopics**: through ``AdminZkClient``
  (replica placement with ``replication.factor``, ``default.replication.factor``
  or an explicit ``replica.assignment``); the controller then elects leaders,
  and every broker holding a replica creates (or deletes) its logs.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from format import layout
from format.errors import InvalidTopicError as FormatInvalidTopicError
from format.layout import TopicPartition

from ..controller.admin_zk_client import AdminZkClient
from ..controller.partition_state import NO_LEADER
from ..coordinator.group import wire as group_wire
from ..coordinator.group.requests import COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION
from ..coordinator.transaction.transaction_log import TRANSACTION_STATE_TOPIC, partition_for_transactional_id
from ..errors import (NONE, CoordinatorNotAvailableError, InvalidConfigurationError, InvalidRequestError,
                      InvalidTopicError, KafkaError, LeaderNotAvailableError, TopicAlreadyExistsError,
                      UnknownServerError, UnknownTopicOrPartitionError)
from ..offsets_topic import OFFSETS_TOPIC, partition_for_group
from ..network.request_channel import Request
from ..protocol import ApiKey
from ..protocol import Request as KafkaRequest
from ..purgatory import DelayedOperationPurgatory, TopicPartitionOperationKey
from .delayed_produce import DelayedProduce, ProducePartitionStatus
from .internal_topics import InternalTopics
from .metadata_cache import PartitionMetadata
from .replica_manager import ReplicaManager

if TYPE_CHECKING:
    from .kafka_apis import KafkaApis

__all__ = ["ClusterApis"]

log = logging.getLogger(__name__)

ZERO_UUID = bytes(16)
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


class ClusterApis:
    """Cluster-mode handlers over ``apis`` (which keeps answering everything else)."""

    def __init__(self, apis: KafkaApis, replica_manager: ReplicaManager, admin: AdminZkClient,
                 produce_purgatory: DelayedOperationPurgatory[DelayedProduce]) -> None:
        self.apis = apis
        self.replica_manager = replica_manager
        self.metadata_cache = replica_manager.metadata_cache
        self.admin = admin
        self.produce_purgatory = produce_purgatory
        self.internal_topics = InternalTopics(apis.config, admin, lambda: len(self.metadata_cache.alive_brokers()))

    def install(self) -> None:
        self.apis.replica_manager = self.replica_manager
        self.apis.config_admin.topic_overrides = self._topic_overrides
        self.apis.config_admin.store_topic_overrides = self._store_topic_overrides
        self.apis._handlers.update({
            ApiKey.METADATA: self.handle_topic_metadata_request,
            ApiKey.DESCRIBE_CLUSTER: self.handle_describe_cluster_request,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.handle_describe_topic_partitions_request,
            ApiKey.PRODUCE: self.handle_produce_request,
            ApiKey.CREATE_TOPICS: self.handle_create_topics_request,
            ApiKey.CREATE_PARTITIONS: self.handle_create_partitions_request,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics_request,
            ApiKey.FIND_COORDINATOR: self.handle_find_coordinator_request,
        })

    def _send(self, request: Request, parsed: KafkaRequest, body: dict) -> None:
        self.apis._send(request, parsed, body)

    # --- Metadata --------------------------------------------------------------------

    def _brokers(self, request: Request) -> list[dict]:
        listener = self.apis._endpoint_for(request).listener_name
        brokers = []
        for broker_id, info in sorted(self.metadata_cache.alive_brokers().items()):
            endpoint = self.metadata_cache.endpoint(broker_id, listener)
            if endpoint is not None:
                brokers.append({"node_id": broker_id, "host": endpoint.host or "127.0.0.1", "port": endpoint.port,
                                "rack": info.rack})
        return brokers

    def handle_topic_metadata_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        wanted = body.get("topics")
        if parsed.header.api_version == 0 and not wanted:
            wanted = None
        allow_auto_create = (bool(body.get("allow_auto_topic_creation", True))
                             and self.apis.config.auto_create_topics_enable)
        include_operations = bool(body.get("include_topic_authorized_operations", False))
        names = self.metadata_cache.topic_names() if wanted is None else [e.get("name") for e in wanted]
        topics = [self._topic_metadata(name, allow_auto_create and wanted is not None, include_operations)
                  for name in names]
        controller = self.metadata_cache.controller_id()
        self._send(request, parsed, {
            "throttle_time_ms": 0, "brokers": self._brokers(request), "cluster_id": self.apis.cluster_id,
            "controller_id": -1 if controller is None else controller, "topics": topics,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED})

    def _topic_metadata(self, name: str | None, allow_auto_create: bool, include_operations: bool) -> dict:
        from .kafka_apis import TOPIC_AUTHORIZED_OPERATIONS

        def error(code: int) -> dict:
            return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": False,
                    "partitions": [], "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}

        if name is None:
            return error(UnknownTopicOrPartitionError.code)
        partitions = self.metadata_cache.topic(name)
        if partitions is None:
            try:
                layout.validate_topic_name(name)
            except FormatInvalidTopicError:
                return error(InvalidTopicError.code)
            if not allow_auto_create:
                return error(UnknownTopicOrPartitionError.code)
            try:
                self.admin.create_topic(name)
                log.info("auto-created topic %s", name)
            except TopicAlreadyExistsError:
                pass
            except KafkaError as exc:
                return error(exc.code)
            return error(LeaderNotAvailableError.code)  # as Kafka answers a topic just created
        entries = [self._partition_entry(name, index) for index in sorted(partitions)]
        return {"error_code": NONE, "name": name, "topic_id": ZERO_UUID,
                "is_internal": name in layout.INTERNAL_TOPICS, "partitions": entries,
                "topic_authorized_operations": (TOPIC_AUTHORIZED_OPERATIONS if include_operations
                                                else AUTHORIZED_OPERATIONS_OMITTED)}

    def _partition_entry(self, topic: str, index: int) -> dict:
        meta = self.metadata_cache.partition(TopicPartition(topic, index))
        if meta is None:
            return {"error_code": UnknownTopicOrPartitionError.code, "partition_index": index, "leader_id": NO_LEADER,
                    "leader_epoch": -1, "replica_nodes": [], "isr_nodes": [], "offline_replicas": []}
        alive = self.metadata_cache.alive_brokers()
        leader = meta.leader if meta.leader in alive else NO_LEADER
        return {"error_code": LeaderNotAvailableError.code if leader == NO_LEADER else NONE,
                "partition_index": index, "leader_id": leader, "leader_epoch": meta.leader_epoch,
                "replica_nodes": list(meta.replicas), "isr_nodes": list(meta.isr),
                "offline_replicas": [b for b in meta.replicas if b not in alive]}

    def handle_describe_topic_partitions_request(self, request: Request, parsed: KafkaRequest) -> None:
        from .describe_topic_partitions import DescribedTopic, describe_topic_partitions
        from .kafka_apis import TOPIC_AUTHORIZED_OPERATIONS

        topics = {name: DescribedTopic(ZERO_UUID, len(self.metadata_cache.topic(name) or {}),
                                       name in layout.INTERNAL_TOPICS)
                  for name in self.metadata_cache.topic_names()}
        self._send(request, parsed, describe_topic_partitions(
            parsed.body, topics,
            lambda topic, p: {**self._partition_entry(topic, p), "eligible_leader_replicas": [], "last_known_elr": []},
            TOPIC_AUTHORIZED_OPERATIONS))

    def handle_describe_cluster_request(self, request: Request, parsed: KafkaRequest) -> None:
        from .kafka_apis import CLUSTER_AUTHORIZED_OPERATIONS, ENDPOINT_TYPE_BROKER

        body = parsed.body
        if body["endpoint_type"] != ENDPOINT_TYPE_BROKER:
            self.apis.handle_describe_cluster_request(request, parsed)  # answered with its error
            return
        controller = self.metadata_cache.controller_id()
        self._send(request, parsed, {
            "throttle_time_ms": 0, "error_code": NONE, "error_message": None,
            "endpoint_type": ENDPOINT_TYPE_BROKER, "cluster_id": self.apis.cluster_id,
            "controller_id": -1 if controller is None else controller,
            "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                         "is_fenced": False} for b in self._brokers(request)],
            "cluster_authorized_operations": (CLUSTER_AUTHORIZED_OPERATIONS
                                              if body["include_cluster_authorized_operations"]
                                              else AUTHORIZED_OPERATIONS_OMITTED)})

    # --- topic configs (AlterConfigs, IncrementalAlterConfigs) ----------------------

    def _topic_overrides(self, name: str) -> dict[str, str] | None:
        if self.metadata_cache.topic(name) is None:
            return None
        return self.admin.zk_client.get_topic_config(name)

    def _store_topic_overrides(self, name: str, overrides: dict[str, str], removed: list[str]) -> None:
        """Into ``/config/topics/T`` for every broker holding the topic (their replica managers apply it),
        and into this broker's logs at once, so that its next answer shows the change."""
        self.admin.zk_client.set_topic_config(name, overrides)
        if self.apis.broker.topics.get(name) is not None:
            self.apis.broker.alter_topic_config(name, overrides, removed)

    # --- FindCoordinator ---------------------------------------------------------------

    def handle_find_coordinator_request(self, request: Request, parsed: KafkaRequest) -> None:
        """Each key's coordinator: the leader of its partition of ``__consumer_offsets`` (a group) or
        ``__transaction_state`` (a transactional id), created on first use; COORDINATOR_NOT_AVAILABLE while
        the topic or the partition has no leader."""
        version = parsed.header.api_version
        find = group_wire.parse_find_coordinator(parsed.body, version)
        listener = self.apis._endpoint_for(request).listener_name
        answers = []
        for key in find.keys:
            try:
                answers.append((key, NONE, self._coordinator_node(find.key_type, key, listener)))
            except KafkaError as exc:
                answers.append((key, exc.code, None))
        self._send(request, parsed, group_wire.find_coordinators_response(version, answers))

    def _coordinator_node(self, key_type: int, key: str, listener: str) -> tuple[int, str, int]:
        if key_type == COORDINATOR_TYPE_GROUP:
            topic, partition_for = OFFSETS_TOPIC, partition_for_group
        elif key_type == COORDINATOR_TYPE_TRANSACTION and key:
            topic, partition_for = TRANSACTION_STATE_TOPIC, partition_for_transactional_id
        else:
            raise InvalidRequestError(f"no coordinator for key type {key_type} and key {key!r}")
        meta = self._internal_partition(topic, partition_for, key)
        endpoint = (self.metadata_cache.endpoint(meta.leader, listener)
                    if meta.leader in self.metadata_cache.alive_brokers() else None)
        if endpoint is None:
            raise CoordinatorNotAvailableError(f"{meta.topic_partition} has no leader now")
        return meta.leader, endpoint.host or "127.0.0.1", endpoint.port

    def _internal_partition(self, topic: str, partition_for: Callable[[str, int], int], key: str
                            ) -> PartitionMetadata:
        """The partition of the coordinators' ``topic`` holding ``key``; the topic is created on first use
        (COORDINATOR_NOT_AVAILABLE meanwhile)."""
        partitions = self.metadata_cache.topic(topic)
        if not partitions:
            self.internal_topics.create(topic)  # raises COORDINATOR_NOT_AVAILABLE: asked again later
        return partitions[partition_for(key, len(partitions))]

    def offsets_partition_for(self, group_id: str) -> TopicPartition:
        """The cluster's ``__consumer_offsets`` partition of a group (AddOffsetsToTxn)."""
        return self._internal_partition(OFFSETS_TOPIC, partition_for_group, group_id).topic_partition

    # --- Produce ---------------------------------------------------------------------

    def handle_produce_request(self, request: Request, parsed: KafkaRequest) -> None:
        self.apis.answer_produce(request, parsed, self._append, self._await_replicas)

    def _await_replicas(self, timeout_ms: int, waiting: list[tuple[dict, TopicPartition, int]],
                        respond: Callable[[], None]) -> None:
        """``acks=all``: a ``DelayedProduce`` in the purgatory until every partition's ISR has its records (or
        the request's time is up); each partition's error goes into its response entry first."""
        statuses = [(entry, ProducePartitionStatus(tp, offset)) for entry, tp, offset in waiting]

        def complete(_statuses=None) -> None:
            for entry, status in statuses:
                if status.error is not None:
                    entry.update(error_code=status.error.code, error_message=str(status.error))
            respond()

        operation = DelayedProduce(timeout_ms, [status for _, status in statuses], self.replica_manager.partition,
                                   complete)
        keys = [TopicPartitionOperationKey(s.topic_partition.topic, s.topic_partition.partition) for _, s in statuses]
        self.produce_purgatory.try_complete_else_watch(operation, keys)

    def _append(self, tp: TopicPartition, records, acks: int) -> tuple[dict, int | None]:
        """Append to the partition this broker leads; the response entry and, when it landed, the offset the
        ISR must reach."""
        try:
            partition = self.replica_manager.leader_partition(tp)
            info = partition.append_records_to_leader(bytes(records or b""), acks)
        except KafkaError as exc:
            return self.apis.produce_error(tp.partition, exc), None
        except Exception as exc:
            log.exception("appending to %s failed", tp)
            return self.apis.produce_error(tp.partition, UnknownServerError(f"{tp}: {exc}")), None
        # Followers (and consumers, if the high watermark moved) waiting on the partition may answer now.
        self.apis.fetch_purgatory.check_and_complete(TopicPartitionOperationKey(tp.topic, tp.partition))
        return self.apis.produce_answer(tp, info), info.last_offset + 1

    # --- topics ----------------------------------------------------------------------

    def handle_create_topics_request(self, request: Request, parsed: KafkaRequest) -> None:
        self.apis.answer_create_topics(request, parsed, self._create_topic)

    def _create_topic(self, topic: dict, validate_only: bool) -> dict:
        name = topic["name"]
        try:
            layout.validate_topic_name(name)
        except FormatInvalidTopicError as exc:
            raise InvalidTopicError(str(exc)) from None
        overrides = {}
        for c in topic.get("configs") or []:
            if c["value"] is None:
                raise InvalidConfigurationError(f"Null value not supported for topic configs: {c['name']}",
                                                config_name=c["name"])
            overrides[c["name"]] = str(c["value"])
        self.apis.config.log_config_defaults().with_overrides(overrides)  # validates
        explicit = {a["partition_index"]: tuple(a["broker_ids"]) for a in topic.get("assignments") or []} or None
        if validate_only:
            if self.metadata_cache.topic(name) is not None:
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
            assignment = explicit or {}
        else:
            assignment = self.admin.create_topic(name, -1 if explicit else topic["num_partitions"],
                                                 -1 if explicit else topic["replication_factor"], explicit,
                                                 overrides)
        factor = len(next(iter(assignment.values()))) if assignment else topic["replication_factor"]
        return {"name": name, "topic_id": ZERO_UUID, "error_code": NONE, "error_message": None,
                "num_partitions": len(assignment) if assignment else topic["num_partitions"],
                "replication_factor": factor, "configs": []}

    def handle_create_partitions_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        validate_only = bool(body.get("validate_only", False))
        results = []
        for topic in body["topics"]:
            name = topic["name"]
            try:
                assignments = topic.get("assignments")
                if not validate_only:
                    first = len(self.metadata_cache.topic(name) or {})
                    explicit = ({first + n: tuple(a["broker_ids"]) for n, a in enumerate(assignments)}
                                if assignments else None)
                    self.admin.add_partitions(name, topic["count"], explicit)
                results.append({"name": name, "error_code": NONE, "error_message": None})
            except KafkaError as exc:
                results.append({"name": name, "error_code": exc.code, "error_message": str(exc)})
        self._send(request, parsed, {"throttle_time_ms": 0, "results": results})

    def handle_delete_topics_request(self, request: Request, parsed: KafkaRequest) -> None:
        body = parsed.body
        names = list(body.get("topic_names") or []) + [t.get("name") for t in body.get("topics") or []]
        responses = []
        for name in names:
            entry = {"name": name, "topic_id": ZERO_UUID, "error_code": NONE, "error_message": None}
            try:
                if name is None:
                    raise UnknownTopicOrPartitionError("topics are deleted by name in cluster mode")
                self.admin.delete_topic(name)
            except KafkaError as exc:
                entry.update(error_code=exc.code, error_message=str(exc))
            responses.append(entry)
        self._send(request, parsed, {"throttle_time_ms": 0, "responses": responses})
