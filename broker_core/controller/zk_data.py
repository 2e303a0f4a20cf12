"""Kafka's ZooKeeper layout, kept in etcd: the paths and the JSON of every node, as pure functions.

Kafka's ``kafka.zk.ZkData``, path for path and field for field, so a reader who
knows a Kafka 0.11–2.x ZooKeeper tree finds the same here (under the
``etcd.connect`` chroot):

===========================================  =========================================================
``/cluster/id``                              ``{"version":"1","id":"<cluster id>"}``
``/controller``                              ``{"version":1,"brokerid":N,"timestamp":"<ms>"}`` (lease)
``/controller_epoch``                        ``N`` (plain digits)
``/brokers/ids/N``                           the broker's registration, version 4 (lease)
``/brokers/topics/T``                        ``{"version":1,"partitions":{"0":[1,2,3],...}}``
``/brokers/topics/T/partitions/P/state``     ``{"controller_epoch":E,"leader":L,"version":1,
                                             "leader_epoch":LE,"isr":[...]}``
``/config/topics/T``                         ``{"version":1,"config":{"min.insync.replicas":"2",...}}``
``/config/users/U``                          ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,...}}``
                                             (U URL-encoded, as Kafka's ``Sanitizer``)
``/admin/delete_topics/T``                   empty: a request to delete topic T
``/latest_producer_id_block``                ``{"version":1,"broker":N,"block_start":"S","block_end":"E"}``
``/admin/controlled_shutdown/N``             the attempt number: broker N asks to shut down (lease)
===========================================  =========================================================

ZooKeeper's tree has parent nodes (``/brokers/topics/T/partitions``) that etcd's
flat key space does not need; only the nodes with content exist here.
Decoders raise ``ValueError`` naming the path and the content at fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, unquote

from format.layout import TopicPartition

from ..network.endpoint import EndPoint, parse_listeners
from .partition_state import PartitionState

__all__ = [
    "CLUSTER_ID_PATH",
    "CONTROLLER_PATH",
    "CONTROLLER_EPOCH_PATH",
    "BROKER_IDS_PATH",
    "TOPICS_PATH",
    "DELETE_TOPICS_PATH",
    "CONTROLLED_SHUTDOWN_PATH",
    "TOPIC_CONFIGS_PATH",
    "USER_CONFIGS_PATH",
    "user_config_path",
    "user_from_config_path",
    "encode_user_config",
    "decode_user_config",
    "PRODUCER_ID_BLOCK_PATH",
    "encode_producer_id_block",
    "decode_producer_id_block",
    "topic_config_path",
    "encode_topic_config",
    "decode_topic_config",
    "controlled_shutdown_path",
    "BrokerInfo",
    "broker_path",
    "broker_id_from_path",
    "topic_path",
    "topic_from_path",
    "partition_state_path",
    "partition_from_state_path",
    "delete_topic_path",
    "encode_cluster_id",
    "decode_cluster_id",
    "encode_controller",
    "decode_controller",
    "encode_controller_epoch",
    "decode_controller_epoch",
    "encode_broker_info",
    "decode_broker_info",
    "encode_topic_assignment",
    "decode_topic_assignment",
    "encode_partition_state",
    "decode_partition_state",
]

CLUSTER_ID_PATH = "/cluster/id"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids/"
TOPICS_PATH = "/brokers/topics/"
DELETE_TOPICS_PATH = "/admin/delete_topics/"
TOPIC_CONFIGS_PATH = "/config/topics/"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
# Kafka's brokers asked with a ControlledShutdown request; here the request is a key under the broker's lease, the
# way partition states reach the brokers (seglog's own node: ZooKeeper-era Kafka had none).
CONTROLLED_SHUTDOWN_PATH = "/admin/controlled_shutdown/"
_PARTITIONS = "/partitions/"
_STATE = "/state"

# The registration version that carries endpoints and rack (Kafka 0.10.1 and later).
BROKER_INFO_VERSION = 4


# --- paths ----------------------------------------------------------------------------


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}{broker_id}"


def broker_id_from_path(path: str) -> int:
    if not path.startswith(BROKER_IDS_PATH) or not path[len(BROKER_IDS_PATH):].isdigit():
        raise ValueError(f"{path} is not a broker registration path ({BROKER_IDS_PATH}N)")
    return int(path[len(BROKER_IDS_PATH):])


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}{topic}"


def topic_from_path(path: str) -> str | None:
    """The topic of ``/brokers/topics/T``; ``None`` for a key below it (a partition's state)."""
    if not path.startswith(TOPICS_PATH):
        raise ValueError(f"{path} is not under {TOPICS_PATH}")
    rest = path[len(TOPICS_PATH):]
    return None if "/" in rest or not rest else rest


def partition_state_path(tp: TopicPartition) -> str:
    return f"{TOPICS_PATH}{tp.topic}{_PARTITIONS}{tp.partition}{_STATE}"


def partition_from_state_path(path: str) -> TopicPartition | None:
    """The partition of ``/brokers/topics/T/partitions/P/state``; ``None`` for any other key."""
    if not path.startswith(TOPICS_PATH) or not path.endswith(_STATE):
        return None
    topic, sep, partition = path[len(TOPICS_PATH):-len(_STATE)].partition(_PARTITIONS)
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}{topic}"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS_PATH}{topic}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN_PATH}{broker_id}"


# --- content --------------------------------------------------------------------------


def _json(path: str, data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc}): {data[:200]!r}") from None


def _field(path: str, obj: Any, name: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict) or name not in obj:
        raise ValueError(f"{path}: no field {name!r} in {obj!r}")
    value = obj[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"{path}: field {name!r} is {value!r}, not {getattr(kind, '__name__', kind)}")
    return value


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _int_list(path: str, name: str, values: Any) -> tuple[int, ...]:
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError(f"{path}: {name} {values!r} is not a list of broker ids")
    return tuple(values)


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _field(CLUSTER_ID_PATH, _json(CLUSTER_ID_PATH, data), "id", str)


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id; Kafka 0.8's plain-digits form is read too."""
    text = data.decode(errors="replace").strip()
    if text.isdigit():
        return int(text)
    return _field(CONTROLLER_PATH, _json(CONTROLLER_PATH, data), "brokerid", int)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    text = data.decode(errors="replace").strip()
    if not text.isdigit():
        raise ValueError(f"{CONTROLLER_EPOCH_PATH}: {data[:50]!r} is not a controller epoch")
    return int(text)


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker as it registers itself: id, endpoints (advertised listeners) and rack."""

    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker_info(broker: BrokerInfo, timestamp_ms: int) -> bytes:
    """Kafka's version-4 registration; ``host``/``port`` repeat the PLAINTEXT endpoint for old readers."""
    plaintext = next((e for e in broker.endpoints if e.security_protocol == "PLAINTEXT"), None)
    return _dump({
        "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in broker.endpoints},
        "endpoints": [e.connection_string for e in broker.endpoints],
        "rack": broker.rack,
        "jmx_port": -1,
        "host": plaintext.host if plaintext else None,
        "timestamp": str(timestamp_ms),
        "port": plaintext.port if plaintext else -1,
        "version": BROKER_INFO_VERSION,
    })


def decode_broker_info(broker_id: int, data: bytes) -> BrokerInfo:
    path = broker_path(broker_id)
    obj = _json(path, data)
    endpoints = _field(path, obj, "endpoints", list)
    protocols: Mapping[str, str] = obj.get("listener_security_protocol_map") or {}
    protocol_map = ",".join(f"{name}:{protocol}" for name, protocol in protocols.items())
    parsed = parse_listeners(",".join(endpoints), path, protocol_map or None) if endpoints else []
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ValueError(f"{path}: rack {rack!r} is not a string")
    return BrokerInfo(broker_id, tuple(parsed), rack)


def encode_topic_assignment(assignment: Mapping[int, tuple[int, ...] | list[int]], topic_id: str | None = None
                            ) -> bytes:
    """A topic's replicas and, as Kafka's ``/brokers/topics/T`` holds it since 2.8, its ``topic_id``: one id for
    the topic on every broker (its partitions' ``partition.metadata``, its directory in the remote tier)."""
    obj = {"version": 1, "partitions": {str(p): list(assignment[p]) for p in sorted(assignment)}}
    if topic_id is not None:
        obj["topic_id"] = topic_id
    return _dump(obj)


def decode_topic_id(topic: str, data: bytes) -> str | None:
    """The topic's id in its assignment; None for a topic written without one."""
    path = topic_path(topic)
    found = _json(path, data).get("topic_id")
    if found is not None and not isinstance(found, str):
        raise ValueError(f"{path}: topic_id {found!r} is not a string")
    return found


def decode_topic_assignment(topic: str, data: bytes) -> dict[int, tuple[int, ...]]:
    """Partition → replicas (the first is the preferred leader)."""
    path = topic_path(topic)
    partitions = _field(path, _json(path, data), "partitions", dict)
    assignment = {}
    for partition, replicas in partitions.items():
        if not partition.isdigit():
            raise ValueError(f"{path}: partition {partition!r} is not a number")
        assignment[int(partition)] = _int_list(path, f"replicas of partition {partition}", replicas)
    return dict(sorted(assignment.items()))


def encode_producer_id_block(broker_id: int, block_start: int, block_end: int) -> bytes:
    """The last block of producer ids granted (``block_end`` inclusive), as Kafka's ZkProducerIdManager writes it."""
    return _dump({"version": 1, "broker": broker_id, "block_start": str(block_start), "block_end": str(block_end)})


def decode_producer_id_block(data: bytes) -> tuple[int, int]:
    """(block_start, block_end) of the last block granted."""
    path = PRODUCER_ID_BLOCK_PATH
    obj = _json(path, data)
    bounds = []
    for name in ("block_start", "block_end"):
        value = _field(path, obj, name, str)
        if not value.isdigit():
            raise ValueError(f"{path}: field {name!r} is {value!r}, not a number")
        bounds.append(int(value))
    return bounds[0], bounds[1]


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": {k: str(v) for k, v in sorted(config.items())}})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    """A topic's overrides of the broker defaults."""
    path = topic_config_path(topic)
    config = _field(path, _json(path, data), "config", dict)
    for key, value in config.items():
        if not isinstance(value, str):
            raise ValueError(f"{path}: the value of {key!r} is {value!r}, not a string")
    return dict(config)


def encode_partition_state(state: PartitionState) -> bytes:
    return _dump({"controller_epoch": state.controller_epoch, "leader": state.leader, "version": 1,
                  "leader_epoch": state.leader_epoch, "isr": list(state.isr)})


def decode_partition_state(tp: TopicPartition, data: bytes) -> PartitionState:
    path = partition_state_path(tp)
    obj = _json(path, data)
    leader, leader_epoch = _field(path, obj, "leader", int), _field(path, obj, "leader_epoch", int)
    isr = _int_list(path, "isr", _field(path, obj, "isr", list))
    controller_epoch = _field(path, obj, "controller_epoch", int)
    try:
        return PartitionState(leader, leader_epoch, isr, controller_epoch)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


# --- users: their SCRAM credentials, as Kafka keeps them (/config/users/U) ------------------------------

USER_CONFIGS_PATH = "/config/users/"


def user_config_path(user: str) -> str:
    """``/config/users/U``, the name URL-encoded (a ``/`` or ``%`` in it cannot make another path)."""
    return f"{USER_CONFIGS_PATH}{quote(user, safe='')}"


def user_from_config_path(path: str) -> str:
    if not path.startswith(USER_CONFIGS_PATH) or path == USER_CONFIGS_PATH:
        raise ValueError(f"{path} is not a user config path ({USER_CONFIGS_PATH}U)")
    return unquote(path[len(USER_CONFIGS_PATH):])


def encode_user_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": {k: str(v) for k, v in sorted(config.items())}})


def decode_user_config(user: str, data: bytes) -> dict[str, str]:
    """A user's config entries (its SCRAM credentials by mechanism name). Errors never show the values:
    they are credentials."""
    path = user_config_path(user)
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    config = obj.get("config") if isinstance(obj, dict) else None
    if not isinstance(config, dict) or not all(isinstance(v, str) for v in config.values()):
        raise ValueError(f"{path}: no \"config\" object of strings")
    return dict(config)
