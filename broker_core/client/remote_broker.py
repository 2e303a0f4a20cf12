"""The ``Broker`` facade's topic, produce and read methods, spoken to a running broker over the protocol.

What ``seglog topics|produce|consume --bootstrap HOST:PORT`` use instead of
opening the log directory (which the running broker has locked). Same method
names, arguments and results as ``Broker``, so the commands do not care which
one they hold; errors come back as the same ``KafkaError`` classes, built
from the response's error code. Records are partitioned exactly as the
embedded broker (and the Java producer) partitions them.

Consumer groups go to the group's coordinator, found with FindCoordinator and
found again when it moves (DescribeGroups, OffsetFetch, OffsetCommit,
DeleteGroups; ListGroups and ListTransactions to every broker), with the answers
``seglog groups`` prints for a log dir: ``GroupDescription`` and
``OffsetAndMetadata`` records. A coordinator still loading
``__consumer_offsets`` is waited for, as clients retry it, and so is an
offset an open transaction committed (``committed_offsets`` asks with
``require_stable``; ``describe_group`` does not, as kafka-consumer-groups.sh).
Transactions go to its transaction coordinator, producers to DescribeProducers.

Produce, Fetch and ListOffsets go to the partition's leader (as Metadata names
it; asked again while the leadership moves). Topic configs change through IncrementalAlterConfigs (AlterConfigs, which
replaces every override, for a broker without it). ``describe_topic`` takes
partition sizes from DescribeLogDirs; no Kafka API tells a partition's
segment count, so a remote description leaves ``segments`` unknown (None),
and sizes too from a broker without DescribeLogDirs.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

from format.compression import CompressionType
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch
from format.txn_index import AbortedTxn

from ..broker import (DEFAULT_FETCH_MAX_BYTES, FetchResult, OffsetAndTimestamp, PartitionDescription,
                      RecordMetadata, TopicDescription, isolation_level_of)
from ..coordinator.group.offset_and_metadata import OffsetAndMetadata
from ..coordinator.group.requests import COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION
from ..coordinator.transaction.requests import ListTransactionsRequest, TransactionDescription, TransactionListing
from ..errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, FencedLeaderEpochError,
                      GroupIdNotFoundError, KafkaError, LeaderNotAvailableError, NonEmptyGroupError,
                      NotCoordinatorError, NotLeaderOrFollowerError, UnknownLeaderEpochError,
                      UnknownTopicOrPartitionError, UnstableOffsetCommitError, UnsupportedVersionError,
                      error_for_code)
from ..group_offsets import GroupDescription, GroupMember, lag_rows, member_assignment
from ..log.producer_state_manager import ActiveProducer
from ..partitioner import StickyPartitioner, assign_partitions
from ..protocol import ApiKey
from ..protocol.config_resources import DELETE, RESOURCE_TOPIC, SET
from ..protocol.types import topic_id_text
from ..produced_records import as_record
from ..producer import DEFAULT_TRANSACTION_TIMEOUT_MS
from .client_security import PLAINTEXT_CLIENT, ClientSecurity
from .protocol_client import ProtocolClient
from .remote_producer import RemoteProducer

_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}
_DYNAMIC_TOPIC_CONFIG = 1
_TIMEOUT_MS = 30_000
# How long a group request waits for a coordinator that is loading or starting.
_COORDINATOR_WAIT_S = 30.0
_RETRIABLE_GROUP_ERRORS = frozenset({CoordinatorLoadInProgressError.code, CoordinatorNotAvailableError.code})
# How long a partition's request follows its leadership moving, and the errors that say it moved.
_LEADER_WAIT_S = 30.0
_LEADERSHIP_ERRORS = frozenset({NotLeaderOrFollowerError.code, LeaderNotAvailableError.code,
                                FencedLeaderEpochError.code, UnknownLeaderEpochError.code})


def _raise_for(code: int, message: str | None, what: str) -> None:
    if code != 0:
        raise error_for_code(code)(message or f"{what}: {error_for_code(code).kafka_error_name}")


class RemoteBroker:
    """A broker at ``bootstrap`` (``host:port``), used like an embedded ``Broker``; ``security``: how its
    listener is reached (TLS, SASL), for every broker of the cluster alike."""

    def __init__(self, bootstrap: str, security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.security = security
        self.client = ProtocolClient(bootstrap, client_id="seglog-cli", security=security)
        self._partitioner = StickyPartitioner()
        # Connections to the other brokers of a cluster, by node id (offsets are asked of partition leaders).
        self._node_clients: dict[int, ProtocolClient] = {}
        # Each topic's partition leaders, by partition (Metadata's answer, asked again when one moves).
        self._leaders: dict[str, dict[int, ProtocolClient]] = {}

    def __enter__(self) -> RemoteBroker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()
        self._forget_clients()

    def _client_for(self, node_id: int, brokers: list[dict]) -> ProtocolClient:
        """The connection to broker ``node_id`` of the Metadata answer's ``brokers`` (the bootstrap one when it
        is that broker or is not listed)."""
        broker = next((b for b in brokers if b["node_id"] == node_id), None)
        if broker is None:
            return self._node_clients.get(node_id, self.client)
        return self._client_at(node_id, broker["host"], broker["port"])

    def _client_at(self, node_id: int, host: str, port: int) -> ProtocolClient:
        """The connection to broker ``node_id`` at ``host:port`` (the bootstrap one when it is there)."""
        if (host, port) == self.client.address:
            return self.client
        client = self._node_clients.get(node_id)
        if client is None or client.address != (host, port):
            if client is not None:
                client.close()
            client = self._node_clients[node_id] = ProtocolClient(f"{host}:{port}", client_id="seglog-cli",
                                                                       security=self.security)
        return client

    def _leader(self, topic: str, partition: int, refresh: bool = False) -> ProtocolClient:
        """The connection to the leader of ``topic``-``partition`` as Metadata names it (asked again with
        ``refresh``); the bootstrap broker when Metadata names none it lists."""
        leaders = None if refresh else self._leaders.get(topic)
        if leaders is None:
            response = self.client.send(ApiKey.METADATA, {"topics": [{"name": topic}],
                                                          "allow_auto_topic_creation": False})
            brokers = response["brokers"]
            leaders = self._leaders[topic] = {p["partition_index"]: self._client_for(p["leader_id"], brokers)
                                              for t in response["topics"] for p in t["partitions"]}
        return leaders.get(partition, self.client)

    def _to_leader(self, topic: str, partition: int, api_key: ApiKey, body: Mapping[str, Any],
                   error_of: Callable[[dict], int]) -> dict:
        """Send a partition's request to its leader; again, with fresh metadata, while its leadership moves
        (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, a leader other than the bootstrap broker gone) for up
        to ``_LEADER_WAIT_S``."""
        deadline = time.monotonic() + _LEADER_WAIT_S
        refresh = False
        while True:
            leader = self._leader(topic, partition, refresh)
            try:
                response = leader.send(api_key, body)
            except OSError:
                # The bootstrap broker gone is an error at once; another broker gone, a leadership to look up.
                if leader is self.client or time.monotonic() >= deadline:
                    raise
                self._forget_clients()
            else:
                if error_of(response) not in _LEADERSHIP_ERRORS or time.monotonic() >= deadline:
                    return response
            refresh = True
            time.sleep(0.1)

    def _forget_clients(self) -> None:
        for client in self._node_clients.values():
            client.close()
        self._node_clients.clear()
        self._leaders.clear()

    # --- topics -----------------------------------------------------------

    def _metadata(self, topics: list[str] | None) -> list[dict]:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        return self.client.send(ApiKey.METADATA, body)["topics"]

    def list_topics(self) -> list[str]:
        return sorted(t["name"] for t in self._metadata(None))

    def partitions_for(self, topic: str) -> int:
        (meta,) = self._metadata([topic])
        _raise_for(meta["error_code"], f"topic {topic!r} does not exist", topic)
        return len(meta["partitions"])

    def create_topic(self, name: str, partitions: int | None = None,
                     config: Mapping[str, object] | None = None, *,
                     replication_factor: int | None = None) -> TopicDescription:
        response = self.client.send(ApiKey.CREATE_TOPICS, {"topics": [{
            "name": name, "num_partitions": -1 if partitions is None else partitions,
            "replication_factor": -1 if replication_factor is None else replication_factor,
            "assignments": [], "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()]}],
            "timeout_ms": _TIMEOUT_MS})
        (result,) = response["topics"]
        _raise_for(result["error_code"], result["error_message"], name)
        return self._describe_once_led(name)

    def _describe_once_led(self, name: str, timeout_s: float = 15.0) -> TopicDescription:
        """``describe_topic`` of a topic just created or grown: in a cluster its new partitions have no leader
        until the controller elects one, which is retried for (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.describe_topic(name)
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)

    def create_partitions(self, name: str, total: int) -> TopicDescription:
        response = self.client.send(ApiKey.CREATE_PARTITIONS, {
            "topics": [{"name": name, "count": total, "assignments": None}], "timeout_ms": _TIMEOUT_MS,
            "validate_only": False})
        (result,) = response["results"]
        _raise_for(result["error_code"], result["error_message"], name)
        return self._describe_once_led(name)

    def delete_topic(self, name: str) -> None:
        response = self.client.send(ApiKey.DELETE_TOPICS, {"topic_names": [name], "topics": [{"name": name}],
                                                            "timeout_ms": _TIMEOUT_MS})
        (result,) = response["responses"]
        _raise_for(result["error_code"], result["error_message"], name)

    def alter_topic_config(self, name: str, set_configs: Mapping[str, object] | None = None,
                           delete_configs: Iterable[str] = ()) -> dict[str, str]:
        """Set and remove per-topic overrides; returns the topic's overrides afterwards."""
        sets = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (set_configs or {}).items()}
        deletes = [k for k in dict.fromkeys(delete_configs) if k not in sets]  # a key set again is kept
        if self.client.serves(ApiKey.INCREMENTAL_ALTER_CONFIGS):
            configs = ([{"name": k, "config_operation": DELETE, "value": None} for k in deletes]
                       + [{"name": k, "config_operation": SET, "value": v} for k, v in sets.items()])
            api_key = ApiKey.INCREMENTAL_ALTER_CONFIGS
        else:
            # AlterConfigs replaces every override of the topic: the ones kept go along.
            wanted = {k: v for k, v in self._overrides(name).items() if k not in deletes}
            wanted.update(sets)
            configs = [{"name": k, "value": v} for k, v in wanted.items()]
            api_key = ApiKey.ALTER_CONFIGS
        response = self.client.send(api_key, {"resources": [
            {"resource_type": RESOURCE_TOPIC, "resource_name": name, "configs": configs}], "validate_only": False})
        (result,) = response["responses"]
        _raise_for(result["error_code"], result["error_message"], name)
        return self._overrides(name)

    def describe_topic(self, name: str) -> TopicDescription:
        response = self.client.send(ApiKey.METADATA, {"topics": [{"name": name}], "allow_auto_topic_creation": False})
        (meta,) = response["topics"]
        _raise_for(meta["error_code"], f"topic {name!r} does not exist", name)
        sizes = self._partition_sizes(name, [p["partition_index"] for p in meta["partitions"]])
        overrides = self._overrides(name)
        tiered = overrides.get("remote.storage.enable", "").lower() == "true"
        partitions = []
        for p in sorted(meta["partitions"], key=lambda p: p["partition_index"]):
            index = p["partition_index"]
            leader = self._client_for(p["leader_id"], response["brokers"])
            start = self._offset(name, index, _SPECS["earliest"], client=leader)
            end = self._offset(name, index, _SPECS["latest"], client=leader)
            size = None if sizes is None else sizes.get(index)
            tiers = self._tier_offsets(name, index, start.offset, leader) if tiered else {}
            partitions.append(PartitionDescription(index, p["leader_id"], start.offset, end.offset, end.offset,
                                                   size, None, tuple(p["replica_nodes"]), tuple(p["isr_nodes"]),
                                                   **tiers))
        return TopicDescription(name, topic_id_text(meta["topic_id"]), partitions, overrides)

    def _tier_offsets(self, name: str, index: int, log_start_offset: int, leader: ProtocolClient) -> dict[str, int]:
        """A tiered partition's local log start offset (ListOffsets earliest-local, -4) and the remote tier's
        first offset (the log start offset while the tier holds any, latest-tiered -5 at or past it; -1 when it
        holds none); nothing from a broker older than ListOffsets v9. No Kafka API tells the remote tier's
        bytes or segments: those are left out."""
        try:
            local = self._offset(name, index, -4, client=leader).offset
            highest_tiered = self._offset(name, index, -5, client=leader).offset
        except UnsupportedVersionError:
            return {}
        return {"local_log_start_offset": local,
                "remote_log_start_offset": log_start_offset if highest_tiered >= log_start_offset else -1}

    def _partition_sizes(self, name: str, partitions: list[int]) -> dict[int, int] | None:
        """Bytes of each of ``partitions`` of topic ``name``, from whichever log dir holds it (DescribeLogDirs);
        None from a broker that does not serve it."""
        if not self.client.serves(ApiKey.DESCRIBE_LOG_DIRS):
            return None
        response = self.client.send(ApiKey.DESCRIBE_LOG_DIRS,
                                    {"topics": [{"topic": name, "partitions": partitions}]})
        _raise_for(response["error_code"], None, "DescribeLogDirs")
        sizes: dict[int, int] = {}
        for result in response["results"]:
            # An offline log dir holds no readable partition: its partitions stay unknown.
            if result["error_code"] != 0:
                continue
            for topic in result["topics"]:
                if topic["name"] == name:
                    for p in topic["partitions"]:
                        if not p["is_future_key"]:
                            sizes[p["partition_index"]] = p["partition_size"]
        return sizes

    def _overrides(self, name: str) -> dict[str, str]:
        response = self.client.send(ApiKey.DESCRIBE_CONFIGS, {"resources": [
            {"resource_type": RESOURCE_TOPIC, "resource_name": name, "configuration_keys": None}]})
        (result,) = response["results"]
        _raise_for(result["error_code"], result["error_message"], name)
        return {c["name"]: c["value"] for c in result["configs"] if c["config_source"] == _DYNAMIC_TOPIC_CONFIG}

    def max_message_bytes(self, topic: str) -> int:
        """The topic's ``max.message.bytes`` as the broker applies it (its override or the default)."""
        response = self.client.send(ApiKey.DESCRIBE_CONFIGS, {"resources": [
            {"resource_type": RESOURCE_TOPIC, "resource_name": topic, "configuration_keys": ["max.message.bytes"]}]})
        (result,) = response["results"]
        _raise_for(result["error_code"], result["error_message"], topic)
        (config,) = [c for c in result["configs"] if c["name"] == "max.message.bytes"]
        return int(config["value"])

    # --- produce and read ---------------------------------------------------

    def produce(self, topic: str, records: Iterable[SimpleRecord | bytes | tuple], partition: int | None = None,
                compression: CompressionType | str = CompressionType.NONE, *, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False) -> list[RecordMetadata]:
        items = [as_record(r) for r in records]
        if not items:
            return []
        codec = CompressionType.from_name(compression) if isinstance(compression, str) else compression
        count = self.partitions_for(topic)
        now = int(time.time() * 1000)
        groups = assign_partitions(topic, ((r.key, len(r.value or b"")) for r in items), count, partition,
                                   self._partitioner)
        out: list[RecordMetadata | None] = [None] * len(items)
        for p, indexes in groups.items():
            batch = build_batch([items[i] for i in indexes], compression=codec, default_timestamp=now,
                                producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                                is_transactional=transactional)
            response = self._to_leader(topic, p, ApiKey.PRODUCE, {
                "transactional_id": None, "acks": -1, "timeout_ms": _TIMEOUT_MS,
                "topic_data": [{"name": topic, "partition_data": [{"index": p, "records": batch}]}]},
                lambda r: r["responses"][0]["partition_responses"][0]["error_code"])
            (result,) = response["responses"][0]["partition_responses"]
            _raise_for(result["error_code"], result["error_message"], f"{topic}-{p}")
            for n, i in enumerate(indexes):
                r = items[i]
                ts = result["log_append_time_ms"] if result["log_append_time_ms"] >= 0 else (
                    now if r.timestamp is None else r.timestamp)
                out[i] = RecordMetadata(topic, p, result["base_offset"] + n, ts)
        return out  # type: ignore[return-value]

    def producer(self, transactional_id: str | None = None,
                 transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> RemoteProducer:
        """An idempotent producer, as ``Broker.producer``; with ``transactional_id`` a transactional one."""
        return RemoteProducer(self, transactional_id, transaction_timeout_ms)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
              isolation_level: str | int = "read_uncommitted") -> FetchResult:
        level = int(isolation_level_of(isolation_level))
        response = self._to_leader(topic, partition, ApiKey.FETCH, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": max_bytes, "isolation_level": level,
            "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                         "partition_max_bytes": max_bytes}]}],
            "forgotten_topics_data": []},
            lambda r: r.get("error_code", 0) or r["responses"][0]["partitions"][0]["error_code"])
        _raise_for(response["error_code"], None, f"{topic}-{partition}")
        (data,) = response["responses"][0]["partitions"]
        _raise_for(data["error_code"], f"{topic}-{partition} at offset {offset}", f"{topic}-{partition}")
        aborted = data["aborted_transactions"]
        return FetchResult(topic, partition, bytes(data["records"] or b""), data["high_watermark"],
                           data["log_start_offset"], data["last_stable_offset"],
                           None if aborted is None else tuple(AbortedTxn(t["producer_id"], t["first_offset"], -1, -1)
                                                              for t in aborted))

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation_level: str | int = "read_uncommitted") -> OffsetAndTimestamp | None:
        if isinstance(spec, str):
            if spec not in _SPECS:
                raise ValueError(f"unknown offset spec {spec!r}: use earliest, latest, max_timestamp or a "
                                 f"timestamp in milliseconds")
            spec = _SPECS[spec]
        found = self._offset(topic, partition, spec, int(isolation_level_of(isolation_level)))
        return None if found.offset < 0 else found

    def _offset(self, topic: str, partition: int, timestamp: int, isolation_level: int = 0,
                client: ProtocolClient | None = None) -> OffsetAndTimestamp:
        body = {"replica_id": -1, "isolation_level": isolation_level,
                "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}]}
        response = (client.send(ApiKey.LIST_OFFSETS, body) if client is not None else self._to_leader(
            topic, partition, ApiKey.LIST_OFFSETS, body, lambda r: r["topics"][0]["partitions"][0]["error_code"]))
        (result,) = response["topics"][0]["partitions"]
        _raise_for(result["error_code"], f"{topic}-{partition}", f"{topic}-{partition}")
        return OffsetAndTimestamp(result["offset"], result["timestamp"])

    # --- consumer groups (the group coordinator) ---------------------------------

    def _group_request(self, api_key: ApiKey, body: Mapping[str, Any], error_of: Callable[[dict], int],
                       retriable: frozenset[int] = _RETRIABLE_GROUP_ERRORS, *, key: str | None = None,
                       key_type: int = COORDINATOR_TYPE_GROUP, client: ProtocolClient | None = None,
                       version: int | None = None) -> dict:
        """Send a request to the coordinator of ``key`` (found with FindCoordinator; without a key, to
        ``client`` or the bootstrap broker), again while the coordinator loads its topic, is not up yet or
        moved to another broker (or while ``error_of`` says another of the ``retriable`` errors)."""
        deadline = time.monotonic() + _COORDINATOR_WAIT_S
        while True:
            target = None
            try:
                target = client or (self.client if key is None else self._coordinator(key, key_type))
                response = target.send(api_key, body, version)
                error = error_of(response)
            except KafkaError as exc:  # no coordinator found yet
                if exc.code not in retriable or time.monotonic() >= deadline:
                    raise
                error, response = exc.code, None
            except OSError:  # a coordinator other than the bootstrap broker went away: find it again
                if target in (None, self.client) or key is None or time.monotonic() >= deadline:
                    raise
                self._forget_clients()
                error, response = CoordinatorNotAvailableError.code, None
            if response is not None and (error not in retriable | {NotCoordinatorError.code}
                                         or time.monotonic() >= deadline):
                return response
            time.sleep(0.1)

    def _coordinator(self, key: str, key_type: int) -> ProtocolClient:
        """The connection to the coordinator of ``key``; raises the error FindCoordinator answers."""
        response = self.client.send(ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type,
                                                              "coordinator_keys": [key]})
        answer = response["coordinators"][0] if response.get("coordinators") else response
        _raise_for(answer["error_code"], answer.get("error_message"), f"the coordinator of {key!r}")
        return self._client_at(answer["node_id"], answer["host"], answer["port"])

    def _brokers(self) -> list[dict]:
        return self.client.send(ApiKey.METADATA, {"topics": [], "allow_auto_topic_creation": False})["brokers"]

    def _ask_every_broker(self, api_key: ApiKey, body: Mapping[str, Any], what: str) -> list[dict]:
        """The answers of every live broker to a request each answers for what it coordinates (ListGroups,
        ListTransactions), as Kafka's admin client asks them."""
        answers = []
        for broker in self._brokers():
            response = self._group_request(api_key, body, lambda r: r["error_code"],
                                           client=self._client_at(broker["node_id"], broker["host"], broker["port"]))
            _raise_for(response["error_code"], None, what)
            answers.append(response)
        return answers

    def list_groups(self) -> list[str]:
        answers = self._ask_every_broker(ApiKey.LIST_GROUPS, {"states_filter": [], "types_filter": []}, "ListGroups")
        return sorted({g["group_id"] for response in answers for g in response["groups"]})

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        """Every offset the group committed (OffsetFetch for all partitions, ``require_stable``): an
        offset an open transaction committed is waited for until the transaction ends, as a
        read_committed consumer waits (UNSTABLE_OFFSET_COMMIT is retried)."""
        return self._fetch_offsets(group_id, require_stable=True)

    def _fetch_offsets(self, group_id: str, require_stable: bool) -> dict[TopicPartition, OffsetAndMetadata]:
        def group_error(r: dict) -> int:
            return r["groups"][0]["error_code"] if r.get("groups") else r.get("error_code", 0)

        def error_of(r: dict) -> int:
            topics = r["groups"][0]["topics"] if r.get("groups") else r["topics"]
            unstable = any(p["error_code"] == UnstableOffsetCommitError.code for t in topics for p in t["partitions"])
            return UnstableOffsetCommitError.code if unstable else group_error(r)

        response = self._group_request(ApiKey.OFFSET_FETCH, {
            "group_id": group_id, "topics": None, "groups": [{"group_id": group_id, "topics": None}],
            "require_stable": require_stable}, error_of, _RETRIABLE_GROUP_ERRORS | {UnstableOffsetCommitError.code},
            key=group_id)
        topics = response["groups"][0]["topics"] if response.get("groups") else response["topics"]
        _raise_for(group_error(response), None, f"group {group_id!r}")
        out = {}
        for topic in topics:
            for p in topic["partitions"]:
                _raise_for(p["error_code"], None, f"group {group_id!r} {topic['name']}-{p['partition_index']}")
                if p["committed_offset"] >= 0:
                    epoch = p["committed_leader_epoch"]
                    # The commit time is not on the wire: -1 says unknown.
                    out[TopicPartition(topic["name"], p["partition_index"])] = OffsetAndMetadata(
                        p["committed_offset"], p["metadata"] or "", -1, None if epoch < 0 else epoch)
        return dict(sorted(out.items()))

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        """Store ``offsets`` for the group as a consumer outside any generation does (OffsetCommit)."""
        if not offsets:
            return
        topics: dict[str, list[dict]] = {}
        for tp, offset in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "committed_offset": offset,
                                                    "committed_metadata": metadata})

        def first_error(r: dict) -> int:
            return next((p["error_code"] for t in r["topics"] for p in t["partitions"] if p["error_code"]), 0)

        response = self._group_request(ApiKey.OFFSET_COMMIT, {
            "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}, first_error,
            key=group_id)
        for topic in response["topics"]:
            for p in topic["partitions"]:
                _raise_for(p["error_code"], None, f"group {group_id!r}: committing {topic['name']}-"
                                                  f"{p['partition_index']}")

    def reset_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Move an inactive group to ``offsets``, as ``kafka-consumer-groups.sh --reset-offsets`` does."""
        state = self._describe(group_id)["group_state"]
        if state not in ("Empty", "Dead"):
            raise NonEmptyGroupError(f"Assignments can only be reset if the group '{group_id}' is inactive, but "
                                     f"the current state is {state}.")
        self.commit_offsets(group_id, offsets)

    def delete_group(self, group_id: str) -> None:
        response = self._group_request(ApiKey.DELETE_GROUPS, {"groups_names": [group_id]},
                                       lambda r: r["results"][0]["error_code"], key=group_id)
        (result,) = response["results"]
        _raise_for(result["error_code"], None, f"group {group_id!r}")

    def _describe(self, group_id: str) -> dict:
        response = self._group_request(ApiKey.DESCRIBE_GROUPS, {"groups": [group_id],
                                                                "include_authorized_operations": False},
                                       lambda r: r["groups"][0]["error_code"], key=group_id)
        (group,) = response["groups"]
        _raise_for(group["error_code"], None, f"group {group_id!r}")
        return group

    def describe_group(self, group_id: str) -> GroupDescription:
        """The live group: state, members with their assignments, committed offsets, log end offsets and lag."""
        group = self._describe(group_id)
        # As kafka-consumer-groups.sh: the offsets committed so far, an open transaction's not waited for.
        committed = self._fetch_offsets(group_id, require_stable=False)
        if group["group_state"] == "Dead" and not committed:
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
        members = tuple(GroupMember(m["member_id"], m["client_id"], m["client_host"], m.get("group_instance_id"),
                                    member_assignment(group_id, m["member_id"], group["protocol_type"],
                                                      m["member_assignment"]))
                        for m in group["members"])

        def latest(tp: TopicPartition) -> int | None:
            try:
                return self._offset(tp.topic, tp.partition, _SPECS["latest"]).offset
            except UnknownTopicOrPartitionError:
                return None

        rows = lag_rows(group_id, {tp: o.offset for tp, o in committed.items()}, members, latest)
        return GroupDescription(group_id, group["group_state"], group["protocol_type"],
                                group["protocol_data"] or None, members, rows)

    # --- transactions (the transaction coordinator) ------------------------------

    @property
    def node_id(self) -> int:
        """The node id of the broker at the bootstrap address (Metadata's broker list)."""
        brokers = self._brokers()
        host, port = self.client.address
        chosen = next((b for b in brokers if b["port"] == port and b["host"] == host), brokers[0])
        return chosen["node_id"]

    def find_transaction_coordinator(self, transactional_id: str) -> int:
        """FindCoordinator (key type TRANSACTION): the node id coordinating ``transactional_id``."""
        response = self._group_request(ApiKey.FIND_COORDINATOR, {
            "key": transactional_id, "key_type": COORDINATOR_TYPE_TRANSACTION,
            "coordinator_keys": [transactional_id]},
            _find_coordinator_error)
        answer = response["coordinators"][0] if response.get("coordinators") else response
        _raise_for(answer["error_code"], answer.get("error_message"), f"transactional id {transactional_id!r}")
        return answer["node_id"]

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """DescribeTransactions of one id, as ``Broker.describe_transaction`` answers it."""
        response = self._group_request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]},
                                       lambda r: r["transaction_states"][0]["error_code"], key=transactional_id,
                                       key_type=COORDINATOR_TYPE_TRANSACTION)
        (s,) = response["transaction_states"]
        return TransactionDescription(
            s["error_code"], s["transactional_id"], s["transaction_state"], s["transaction_timeout_ms"],
            s["transaction_start_time_ms"], s["producer_id"], s["producer_epoch"],
            tuple(sorted(TopicPartition(t["topic"], p) for t in s["topics"] for p in t["partitions"]))).checked()

    def list_transactions(self, request: ListTransactionsRequest | None = None) -> list[TransactionListing]:
        """ListTransactions of every broker with ``request``'s filters (the duration filter needs version 1)."""
        request = request or ListTransactionsRequest()
        answers = self._ask_every_broker(ApiKey.LIST_TRANSACTIONS, {
            "state_filters": list(request.state_filters), "producer_id_filters": list(request.producer_id_filters),
            "duration_filter": request.duration_filter_ms}, "ListTransactions")
        listings = {t["transactional_id"]: TransactionListing(t["transactional_id"], t["producer_id"],
                                                               t["transaction_state"])
                    for response in answers for t in response["transaction_states"]}
        return [listings[t] for t in sorted(listings)]

    def describe_producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        """DescribeProducers of one partition, as ``Broker.describe_producers`` answers it."""
        response = self.client.send(ApiKey.DESCRIBE_PRODUCERS,
                                    {"topics": [{"name": topic, "partition_indexes": [partition]}]})
        (answer,) = response["topics"][0]["partitions"]
        _raise_for(answer["error_code"], answer["error_message"], f"{topic}-{partition}")
        return sorted((ActiveProducer(p["producer_id"], p["producer_epoch"], p["last_sequence"], p["last_timestamp"],
                                      p["coordinator_epoch"], p["current_txn_start_offset"])
                       for p in answer["active_producers"]), key=lambda p: p.producer_id)


def _find_coordinator_error(response: dict) -> int:
    return response["coordinators"][0]["error_code"] if response.get("coordinators") else response["error_code"]
