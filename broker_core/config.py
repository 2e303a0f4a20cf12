"""Topic and broker configuration, with Kafka's names, defaults and validation.

This module owns three things:

* ``LogConfig`` — the topic-level settings one ``Log`` runs with
  (``segment.bytes``, ``retention.ms``, ``cleanup.policy``, ...);
* ``BrokerConfig`` — the broker's own settings, including the ``log.*``
  family that supplies every topic's defaults (``log_config_defaults``);
* ``ConfigEntry`` — one line of a DescribeConfigs answer, with Kafka's
  config sources.

Keys are Kafka's, and values are parsed and checked the way Kafka's
``ConfigDef`` does it, so a properties file or an AlterConfigs request that a
Kafka broker takes is taken here, and one Kafka refuses is refused with
Kafka's wording: ``Invalid value -5 for configuration segment.bytes: Value
must be at least 14``.

Defaults are Kafka 3.9's, with these differences, each for a reason:

* ``num.recovery.threads.per.data.dir`` is 2, Kafka 4.0's default (KIP-1030);
  loading a directory is I/O bound and two threads help on any disk.
* ``segment.bytes`` keeps 3.x's minimum of 14 rather than 4.0's 1 MiB, so
  tests and small embedded logs can roll tiny segments.
* ``message.timestamp.after.max.ms`` keeps 3.x's unlimited default rather
  than 4.0's one hour, matching the 3.x brokers pipelines move from.
* ``offsets.topic.replication.factor`` and
  ``transaction.state.log.replication.factor`` are 1, not 3, for a single
  broker, which cannot hold three replicas (Kafka's own single-node example
  config sets 1 too); a broker of a cluster (``etcd.connect``) takes Kafka's
  3 unless they are set (``internal_topic_replication_factor``).
* ``node.id`` defaults to 0 rather than being required.
* ``max.partitions`` (KIP-578's name; Kafka never shipped the limit) caps the
  partitions the broker holds, internal topics included, at 20,000: a
  ``CreateTopics`` or ``CreatePartitions`` that would pass it is refused with
  POLICY_VIOLATION before anything is created.

Cluster mode adds ``etcd.connect`` (seglog's own, in ``zookeeper.connect``'s
form; unset, the broker is the single broker it always was) and keeps Kafka's
names and defaults for the rest: ``broker.session.timeout.ms`` and
``broker.heartbeat.interval.ms`` (KRaft's, here the etcd lease of a broker's
registration and its renewal), ``broker.rack``, ``auto.leader.rebalance.enable``,
``leader.imbalance.*``, ``controlled.shutdown.*``.

Settings Kafka deprecated before 4.0 (``message.format.version``,
``message.timestamp.difference.max.ms``, ``message.downconversion.enable``)
and the replication-throttle settings are not known here.

``metrics.listener`` (seglog's own; Kafka exports metrics through JMX) is the
``http://host:port`` where the broker serves Prometheus's ``/metrics`` and
the health endpoints ``/healthz`` and ``/readyz``; unset, there is no listener.

Tiered storage (KIP-405) keeps Kafka's names: the broker's
``remote.log.storage.system.enable``, ``remote.log.manager.task.interval.ms``,
``remote.log.manager.task.retry.backoff.ms`` / ``.backoff.max.ms``,
``log.local.retention.ms`` / ``.bytes``; the topic's ``remote.storage.enable``,
``local.retention.ms`` / ``.bytes`` (-2: the total, ``retention.ms`` /
``.bytes``). Kafka leaves the storage manager pluggable; seglog's is fsspec,
configured by ``remote.storage.url`` and ``remote.storage.options.<name>``
(fsspec storage options, e.g. ``endpoint_url``, ``key``, ``secret``: kept in
memory only, ``remote_storage_options``, and never shown).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from .errors import InvalidConfigurationError
from .metrics.listener_url import parse_metrics_listener

__all__ = [
    "LONG_MAX",
    "INT_MAX",
    "DOUBLE_MAX",
    "CLEANUP_POLICY_COMPACT",
    "CLEANUP_POLICY_DELETE",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "COMPRESSION_TYPES",
    "DYNAMIC_TOPIC_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
    "CONFIG_SOURCE_IDS",
    "TOPIC_CONFIG_NAMES",
    "TOPIC_LIST_CONFIG_NAMES",
    "TOPIC_CONFIG_SYNONYMS",
    "BROKER_CONFIG_NAMES",
    "ConfigEntry",
    "LogConfig",
    "BrokerConfig",
]

DEFAULT_MAX_PARTITIONS = 20_000
#: Broker settings ``remote.storage.options.<name>`` are the remote tier's fsspec storage options.
REMOTE_STORAGE_OPTIONS_PREFIX = "remote.storage.options."

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
DOUBLE_MAX = 1.7976931348623157e308

CLEANUP_POLICY_COMPACT = "compact"
CLEANUP_POLICY_DELETE = "delete"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
#: ``compression.type`` values: the codecs plus "producer" (keep what the
#: producer sent) and "uncompressed".
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# DescribeConfigs sources, by the names Kafka's admin client shows.
DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"
DEFAULT_CONFIG = "DEFAULT_CONFIG"
#: The ``config_source`` byte a DescribeConfigs (v1+) response carries for each source.
CONFIG_SOURCE_IDS: Mapping[str, int] = MappingProxyType({
    "UNKNOWN": 0,
    DYNAMIC_TOPIC_CONFIG: 1,
    "DYNAMIC_BROKER_CONFIG": 2,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
    STATIC_BROKER_CONFIG: 4,
    DEFAULT_CONFIG: 5,
})

_MS_PER_MINUTE = 60 * 1000
_MS_PER_HOUR = 60 * _MS_PER_MINUTE
# LegacyRecord.RECORD_OVERHEAD_V0: a segment must hold at least one record.
_MIN_SEGMENT_BYTES = 14


# --- parsing and validation, as Kafka's ConfigDef does it -----------------------


class _Type(enum.Enum):
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    SHORT = "SHORT"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"


_INTEGER_BOUNDS = {
    _Type.SHORT: (-(1 << 15), (1 << 15) - 1, "a 16-bit integer (short)"),
    _Type.INT: (-(1 << 31), (1 << 31) - 1, "a 32-bit integer"),
    _Type.LONG: (-(1 << 63), (1 << 63) - 1, "a 64-bit integer (long)"),
}
# What Java's Integer.parseInt / Double.parseDouble accept, no more: Python's
# int() and float() would also take "1_000" or non-ASCII digits.
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?|[+-]?(?:NaN|Infinity)")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")

Validator = Callable[[str, Any], None]


def _java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it ("0.5", "1.0E-5", "1.7976931348623157E308")."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(float(value))  # Python's shortest repr is plain decimal in this range, as Java's is
    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    scale = int(exponent) + len(digits) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{scale}"


def _render(value: object) -> str:
    """A value as Kafka prints it in messages and in DescribeConfigs."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, (tuple, list, frozenset, set)):
        return ",".join(_render(v) for v in value)
    return str(value)


def _invalid(name: str, value: object, reason: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(
        f"Invalid value {_render(value)} for configuration {name}: {reason}", config_name=name, value=value)


def _parse(name: str, type_: _Type, value: object, nullable: bool) -> Any:
    """Turn a property value (text, or an already-typed Python value) into ``type_``."""
    if value is None:
        if nullable:
            return None
        raise _invalid(name, value, "Value must be non-null")
    text = value.strip() if isinstance(value, str) else None
    if type_ is _Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise _invalid(name, value, "Expected value to be either true or false")
    if type_ is _Type.STRING:
        if text is None:
            raise _invalid(name, value, f"Expected value to be a string, but it was a {type(value).__name__}")
        return text
    if type_ in _INTEGER_BOUNDS:
        low, high, described = _INTEGER_BOUNDS[type_]
        # bool is an int in Python but not a number to Kafka.
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif text is not None and _INTEGER_TEXT.fullmatch(text):
            number = int(text)
        elif text is not None:
            raise _invalid(name, value, f"Not a number of type {type_.value}")
        else:
            raise _invalid(name, value, f"Expected value to be {described}, but it was a {type(value).__name__}")
        if not low <= number <= high:
            raise _invalid(name, value, f"Not a number of type {type_.value}")
        return number
    if type_ is _Type.DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if text is not None and _DOUBLE_TEXT.fullmatch(text):
            return float(text.rstrip("dDfF"))  # Java's optional type suffix
        if text is not None:
            raise _invalid(name, value, "Not a number of type DOUBLE")
        raise _invalid(name, value, f"Expected value to be a double, but it was a {type(value).__name__}")
    if type_ is _Type.LIST:
        if text is not None:
            return tuple(_LIST_SEPARATOR.split(text)) if text else ()
        if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value)
        raise _invalid(name, value, "Expected a comma separated list.")
    raise AssertionError(f"unhandled config type {type_}")


def _at_least(minimum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        # "not >=" rather than "<" so that NaN fails too.
        if value is not None and not value >= minimum:
            raise _invalid(name, value, f"Value must be at least {_render(minimum)}")
    return check


def _between(minimum: int | float, maximum: int | float) -> Validator:
    def check(name: str, value: Any) -> None:
        _at_least(minimum)(name, value)
        if value is not None and not value <= maximum:
            raise _invalid(name, value, f"Value must be no more than {_render(maximum)}")
    return check


def _one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in allowed:
            raise _invalid(name, value, f"String must be one of: {', '.join(allowed)}")
    return check


def _each_one_of(*allowed: str) -> Validator:
    item_check = _one_of(*allowed)

    def check(name: str, value: Any) -> None:
        for item in value:
            item_check(name, item)
    return check


def _gzip_level(name: str, value: Any) -> None:
    # -1 is zlib's "default level"; otherwise 1 (fastest) to 9 (smallest).
    if value > 9 or (value < 1 and value != -1):
        raise _invalid(name, value, "Value must be between 1 and 9 or equal to -1")


def _metrics_listener(name: str, value: Any) -> None:
    try:
        parse_metrics_listener(value)
    except ValueError as exc:
        raise _invalid(name, value, str(exc)) from None


def _non_empty_dirs(name: str, value: Any) -> None:
    if not value or any(not d for d in value):
        raise _invalid(name, value, "At least one log directory must be given, and none may be empty")


@dataclass(frozen=True)
class _Key:
    """One configuration key: its Kafka name, type, check and the field that holds it."""

    name: str
    type: _Type
    validator: Validator | None = None
    nullable: bool = False
    attr: str = ""

    def __post_init__(self) -> None:
        if not self.attr:
            object.__setattr__(self, "attr", self.name.replace(".", "_"))


def _coerce_fields(instance: object, keys: Iterable[_Key]) -> None:
    """Parse and check every field of a frozen config dataclass in place."""
    for key in keys:
        value = _parse(key.name, key.type, getattr(instance, key.attr), key.nullable)
        if key.validator is not None and value is not None:
            key.validator(key.name, value)
        object.__setattr__(instance, key.attr, value)


def _canonical_policy(policy: tuple[str, ...]) -> tuple[str, ...]:
    # Order and repeats carry no meaning in cleanup.policy; one spelling keeps
    # "compact,delete" and "delete,compact" equal.
    return tuple(p for p in (CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE) if p in policy)


def _check_compaction_lags(min_name: str, min_lag: int, max_name: str, max_lag: int) -> None:
    if min_lag > max_lag:
        raise InvalidConfigurationError(
            f"Invalid value {min_lag} for configuration {min_name}: it is greater than {max_name} ({max_lag})",
            config_name=min_name, value=min_lag)


# --- topic configuration ----------------------------------------------------------

_TOPIC_KEYS: tuple[_Key, ...] = (
    _Key("segment.bytes", _Type.INT, _at_least(_MIN_SEGMENT_BYTES)),
    _Key("segment.ms", _Type.LONG, _at_least(1)),
    _Key("segment.jitter.ms", _Type.LONG, _at_least(0)),
    _Key("segment.index.bytes", _Type.INT, _at_least(4)),
    _Key("index.interval.bytes", _Type.INT, _at_least(0)),
    _Key("flush.messages", _Type.LONG, _at_least(1)),
    _Key("flush.ms", _Type.LONG, _at_least(0)),
    # -1 means unlimited for both retention settings; retention.bytes takes
    # any negative number as unlimited, as Kafka does.
    _Key("retention.ms", _Type.LONG, _at_least(-1)),
    _Key("retention.bytes", _Type.LONG),
    _Key("max.message.bytes", _Type.INT, _at_least(0)),
    _Key("message.timestamp.type", _Type.STRING, _one_of(CREATE_TIME, LOG_APPEND_TIME)),
    _Key("message.timestamp.before.max.ms", _Type.LONG, _at_least(0)),
    _Key("message.timestamp.after.max.ms", _Type.LONG, _at_least(0)),
    _Key("cleanup.policy", _Type.LIST, _each_one_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE)),
    _Key("min.cleanable.dirty.ratio", _Type.DOUBLE, _between(0, 1)),
    _Key("delete.retention.ms", _Type.LONG, _at_least(0)),
    _Key("min.compaction.lag.ms", _Type.LONG, _at_least(0)),
    _Key("max.compaction.lag.ms", _Type.LONG, _at_least(1)),
    _Key("file.delete.delay.ms", _Type.LONG, _at_least(0)),
    _Key("compression.type", _Type.STRING, _one_of(*COMPRESSION_TYPES)),
    _Key("compression.gzip.level", _Type.INT, _gzip_level),
    _Key("compression.lz4.level", _Type.INT, _between(1, 17)),
    _Key("compression.zstd.level", _Type.INT, _between(-131072, 22)),
    _Key("preallocate", _Type.BOOLEAN),
    _Key("min.insync.replicas", _Type.INT, _at_least(1)),
    _Key("unclean.leader.election.enable", _Type.BOOLEAN),
    _Key("remote.storage.enable", _Type.BOOLEAN),
    _Key("local.retention.ms", _Type.LONG, _at_least(-2)),
    _Key("local.retention.bytes", _Type.LONG, _at_least(-2)),
)
_TOPIC_KEYS_BY_NAME = {key.name: key for key in _TOPIC_KEYS}

#: Every topic-level configuration name this broker knows.
TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(_TOPIC_KEYS_BY_NAME)
#: The topic configurations whose value is a comma-separated list (what APPEND and SUBTRACT change).
TOPIC_LIST_CONFIG_NAMES: frozenset[str] = frozenset(key.name for key in _TOPIC_KEYS if key.type is _Type.LIST)

#: For each topic setting, the broker settings that supply its default, the
#: one that wins first (``retention.ms`` <- ``log.retention.ms``, then
#: ``log.retention.minutes``, then ``log.retention.hours``).
TOPIC_CONFIG_SYNONYMS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "max.message.bytes": ("message.max.bytes",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "cleanup.policy": ("log.cleanup.policy",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": ("log.preallocate",),
    "min.insync.replicas": ("min.insync.replicas",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "remote.storage.enable": (),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
})


@dataclass(frozen=True)
class ConfigEntry:
    """One configuration of a DescribeConfigs answer: its value and where the value came from."""

    name: str
    value: str | None
    source: str
    read_only: bool = False
    is_sensitive: bool = False


@dataclass(frozen=True)
class LogConfig:
    """The settings of one topic's logs, under Kafka's names with ``_`` for ``.``.

    Construct it directly with Python values, or from properties with
    ``from_props`` (text like "compact,delete" or "true" is parsed); either
    way every value is checked and a bad one raises
    ``InvalidConfigurationError`` naming the key.
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * _MS_PER_HOUR
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    # Kafka leaves flushing to the OS page cache and to replication by default.
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * _MS_PER_HOUR
    retention_bytes: int = -1
    # 1 MiB of records plus the 12-byte log overhead (offset and length) of a batch.
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    cleanup_policy: tuple[str, ...] = (CLEANUP_POLICY_DELETE,)
    min_cleanable_dirty_ratio: float = 0.5
    delete_retention_ms: int = 24 * _MS_PER_HOUR
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    #: The broker's ``remote.log.storage.system.enable`` (not a topic setting): Kafka validates a topic's
    #: ``remote.storage.enable`` against it.
    remote_log_storage_system_enable: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        _coerce_fields(self, _TOPIC_KEYS)
        object.__setattr__(self, "cleanup_policy", _canonical_policy(self.cleanup_policy))
        _check_compaction_lags("min.compaction.lag.ms", self.min_compaction_lag_ms,
                               "max.compaction.lag.ms", self.max_compaction_lag_ms)
        if self.remote_storage_enable:
            self._check_remote_storage()

    def _check_remote_storage(self) -> None:
        # Kafka's LogConfig.validateTopicLogConfigValues for a topic with remote storage, in its order and words.
        if not self.remote_log_storage_system_enable:
            raise InvalidConfigurationError(
                "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote "
                "log storage.", config_name="remote.storage.enable", value=True)
        if self.compact:
            raise InvalidConfigurationError("Remote log storage is unsupported for the compacted topics",
                                            config_name="remote.storage.enable", value=True)
        for local_name, local, total_name, total in (
                ("local.retention.bytes", self.local_retention_bytes, "retention.bytes", self.retention_bytes),
                ("local.retention.ms", self.local_retention_ms, "retention.ms", self.retention_ms)):
            if total != -1 and local != -2:
                if local == -1:
                    raise _invalid(local_name, local, f"Value must not be -1 as {total_name} value is set as {total}")
                if local > total:
                    raise _invalid(local_name, local, f"Value must not be more than {total_name} property value: "
                                                      f"{total}")

    def check_update(self, new: LogConfig) -> None:
        """Refuse a topic config change from this config to ``new`` that Kafka refuses: turning
        ``remote.storage.enable`` off (the remote tier would be left unread and undeleted)."""
        if self.remote_storage_enable and not new.remote_storage_enable:
            raise InvalidConfigurationError("Disabling remote storage feature on the topic level is not supported.",
                                            config_name="remote.storage.enable", value=False)

    @property
    def local_retention_ms_resolved(self) -> int:
        """How long a segment stays on local disk: ``local.retention.ms``, or ``retention.ms`` for -2."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_resolved(self) -> int:
        """How many bytes stay on local disk: ``local.retention.bytes``, or ``retention.bytes`` for -2."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    # -- reading --

    @property
    def compact(self) -> bool:
        """Whether the cleaner compacts this log (``cleanup.policy`` has "compact")."""
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """Whether retention deletes old segments (``cleanup.policy`` has "delete")."""
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """How long a segment may stay active: ``segment.ms``, shortened on compacted topics
        so that no record waits longer than ``max.compaction.lag.ms`` to become cleanable."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        """The size a new segment file starts at: all of ``segment.bytes`` when preallocating."""
        return self.segment_bytes if self.preallocate else 0

    # -- building --

    @classmethod
    def from_props(cls, props: Mapping[str, str | int | float | bool], defaults: LogConfig | None = None
                   ) -> LogConfig:
        """``defaults`` (Kafka's when ``None``) with ``props`` applied; unknown names are refused."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for name, value in props.items():
            key = _TOPIC_KEYS_BY_NAME.get(name)
            if key is None:
                raise InvalidConfigurationError(f"Unknown topic config name: {name}", config_name=name, value=value)
            changes[key.attr] = value
        return dataclasses.replace(base, **changes)

    def with_overrides(self, props: Mapping[str, str | int | float | bool]) -> LogConfig:
        """This config with a topic's overrides applied."""
        return LogConfig.from_props(props, defaults=self)

    # -- writing --

    def to_props(self) -> dict[str, str]:
        """Every setting as Kafka writes it ("true", "compact,delete", "0.5")."""
        return {key.name: _render(getattr(self, key.attr)) for key in _TOPIC_KEYS}

    def overrides(self, defaults: LogConfig) -> dict[str, str]:
        """The settings whose value differs from ``defaults``: what a topic must store to be this config."""
        base = defaults.to_props()
        return {name: value for name, value in self.to_props().items() if value != base[name]}

    def describe(self, overrides: Mapping[str, str], broker: BrokerConfig) -> list[ConfigEntry]:
        """DescribeConfigs for a topic with this config, sorted by name.

        ``overrides`` are the topic's own settings (source DYNAMIC_TOPIC_CONFIG);
        a setting whose broker synonym was set explicitly is
        STATIC_BROKER_CONFIG; the rest are Kafka's DEFAULT_CONFIG.
        """
        entries = []
        for name, value in sorted(self.to_props().items()):
            if name in overrides:
                source = DYNAMIC_TOPIC_CONFIG
            elif any(s in broker.static_overrides for s in TOPIC_CONFIG_SYNONYMS[name]):
                source = STATIC_BROKER_CONFIG
            else:
                source = DEFAULT_CONFIG
            entries.append(ConfigEntry(name, value, source))
        return entries


# --- broker configuration ---------------------------------------------------------

_BROKER_KEYS: tuple[_Key, ...] = (
    _Key("node.id", _Type.INT, _at_least(0)),
    _Key("log.dirs", _Type.LIST, _non_empty_dirs),
    _Key("listeners", _Type.STRING),
    _Key("advertised.listeners", _Type.STRING, nullable=True),
    _Key("num.partitions", _Type.INT, _at_least(1)),
    _Key("max.partitions", _Type.INT, _at_least(1)),
    _Key("default.replication.factor", _Type.INT),
    _Key("auto.create.topics.enable", _Type.BOOLEAN),
    _Key("message.max.bytes", _Type.INT, _at_least(0)),
    _Key("log.segment.bytes", _Type.INT, _at_least(_MIN_SEGMENT_BYTES)),
    _Key("log.roll.ms", _Type.LONG, _at_least(1), nullable=True),
    _Key("log.roll.hours", _Type.INT, _at_least(1)),
    _Key("log.roll.jitter.ms", _Type.LONG, _at_least(0), nullable=True),
    _Key("log.roll.jitter.hours", _Type.INT, _at_least(0)),
    _Key("log.retention.ms", _Type.LONG, nullable=True),
    _Key("log.retention.minutes", _Type.INT, nullable=True),
    _Key("log.retention.hours", _Type.INT),
    _Key("log.retention.bytes", _Type.LONG),
    _Key("log.retention.check.interval.ms", _Type.LONG, _at_least(1)),
    _Key("log.cleanup.policy", _Type.LIST, _each_one_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE)),
    _Key("log.index.size.max.bytes", _Type.INT, _at_least(4)),
    _Key("log.index.interval.bytes", _Type.INT, _at_least(0)),
    _Key("log.flush.interval.messages", _Type.LONG, _at_least(1)),
    _Key("log.flush.interval.ms", _Type.LONG, nullable=True),
    _Key("log.flush.scheduler.interval.ms", _Type.LONG),
    _Key("log.flush.offset.checkpoint.interval.ms", _Type.INT, _at_least(0)),
    _Key("log.flush.start.offset.checkpoint.interval.ms", _Type.INT, _at_least(0)),
    _Key("log.segment.delete.delay.ms", _Type.LONG, _at_least(0)),
    _Key("log.preallocate", _Type.BOOLEAN),
    _Key("log.message.timestamp.type", _Type.STRING, _one_of(CREATE_TIME, LOG_APPEND_TIME)),
    _Key("log.message.timestamp.before.max.ms", _Type.LONG, _at_least(0)),
    _Key("log.message.timestamp.after.max.ms", _Type.LONG, _at_least(0)),
    _Key("log.cleaner.enable", _Type.BOOLEAN),
    _Key("log.cleaner.threads", _Type.INT, _at_least(0)),
    _Key("log.cleaner.dedupe.buffer.size", _Type.LONG),
    _Key("log.cleaner.io.buffer.size", _Type.INT, _at_least(0)),
    _Key("log.cleaner.io.buffer.load.factor", _Type.DOUBLE),
    _Key("log.cleaner.io.max.bytes.per.second", _Type.DOUBLE),
    _Key("log.cleaner.min.cleanable.ratio", _Type.DOUBLE, _between(0, 1)),
    _Key("log.cleaner.delete.retention.ms", _Type.LONG, _at_least(0)),
    _Key("log.cleaner.min.compaction.lag.ms", _Type.LONG, _at_least(0)),
    _Key("log.cleaner.max.compaction.lag.ms", _Type.LONG, _at_least(1)),
    _Key("log.cleaner.backoff.ms", _Type.LONG, _at_least(0)),
    _Key("compression.type", _Type.STRING, _one_of(*COMPRESSION_TYPES)),
    _Key("compression.gzip.level", _Type.INT, _gzip_level),
    _Key("compression.lz4.level", _Type.INT, _between(1, 17)),
    _Key("compression.zstd.level", _Type.INT, _between(-131072, 22)),
    _Key("num.recovery.threads.per.data.dir", _Type.INT, _at_least(1)),
    _Key("min.insync.replicas", _Type.INT, _at_least(1)),
    _Key("unclean.leader.election.enable", _Type.BOOLEAN),
    _Key("etcd.connect", _Type.STRING, nullable=True),
    _Key("broker.session.timeout.ms", _Type.INT, _at_least(1)),
    _Key("broker.heartbeat.interval.ms", _Type.INT, _at_least(1)),
    _Key("broker.rack", _Type.STRING, nullable=True),
    _Key("auto.leader.rebalance.enable", _Type.BOOLEAN),
    _Key("leader.imbalance.per.broker.percentage", _Type.INT, _between(0, 100)),
    _Key("leader.imbalance.check.interval.seconds", _Type.LONG, _at_least(1)),
    _Key("controlled.shutdown.enable", _Type.BOOLEAN),
    _Key("controlled.shutdown.max.retries", _Type.INT),
    _Key("controlled.shutdown.retry.backoff.ms", _Type.LONG),
    _Key("replica.lag.time.max.ms", _Type.LONG, _at_least(0)),
    _Key("replica.high.watermark.checkpoint.interval.ms", _Type.LONG, _at_least(1)),
    _Key("remote.log.index.file.cache.total.size.bytes", _Type.LONG, _at_least(1)),
    _Key("socket.request.max.bytes", _Type.INT, _at_least(1)),
    _Key("fetch.zero.copy.enable", _Type.BOOLEAN),
    _Key("metrics.listener", _Type.STRING, _metrics_listener, nullable=True),
    _Key("socket.send.buffer.bytes", _Type.INT, _at_least(-1)),
    _Key("max.connections", _Type.INT, _at_least(0)),
    _Key("connections.max.idle.ms", _Type.LONG),
    # SASL (the listeners that authenticate with it are the listeners' settings).
    _Key("sasl.enabled.mechanisms", _Type.LIST),
    _Key("connections.max.reauth.ms", _Type.LONG, _at_least(0)),
    _Key("num.network.threads", _Type.INT, _at_least(1)),
    _Key("num.io.threads", _Type.INT, _at_least(1)),
    _Key("max.incremental.fetch.session.cache.slots", _Type.INT, _at_least(0)),
    _Key("min.incremental.fetch.session.eviction.ms", _Type.INT, _at_least(0)),
    _Key("request.timeout.ms", _Type.INT, _at_least(0)),
    _Key("offsets.topic.num.partitions", _Type.INT, _at_least(1)),
    _Key("offsets.topic.replication.factor", _Type.SHORT, _at_least(1)),
    _Key("offsets.topic.segment.bytes", _Type.INT, _at_least(1)),
    _Key("offsets.retention.minutes", _Type.INT, _at_least(1)),
    _Key("offsets.retention.check.interval.ms", _Type.LONG, _at_least(1)),
    _Key("offsets.commit.timeout.ms", _Type.INT, _at_least(1)),
    _Key("group.initial.rebalance.delay.ms", _Type.INT),
    _Key("group.min.session.timeout.ms", _Type.INT),
    _Key("group.max.session.timeout.ms", _Type.INT),
    _Key("group.max.size", _Type.INT, _at_least(1)),
    _Key("producer.id.expiration.ms", _Type.INT, _at_least(1)),
    _Key("producer.id.expiration.check.interval.ms", _Type.INT, _at_least(1)),
    _Key("transaction.state.log.num.partitions", _Type.INT, _at_least(1)),
    _Key("transaction.state.log.replication.factor", _Type.SHORT, _at_least(1)),
    _Key("transaction.state.log.segment.bytes", _Type.INT, _at_least(1)),
    _Key("transaction.state.log.min.isr", _Type.INT, _at_least(1)),
    _Key("transaction.state.log.load.buffer.size", _Type.INT, _at_least(1)),
    _Key("transaction.max.timeout.ms", _Type.INT, _at_least(1)),
    _Key("transactional.id.expiration.ms", _Type.INT, _at_least(1)),
    _Key("transaction.abort.timed.out.transaction.cleanup.interval.ms", _Type.INT, _at_least(1)),
    _Key("transaction.remove.expired.transaction.cleanup.interval.ms", _Type.INT, _at_least(1)),
    _Key("remote.log.storage.system.enable", _Type.BOOLEAN),
    _Key("remote.storage.url", _Type.STRING, nullable=True),
    _Key("remote.log.manager.task.interval.ms", _Type.LONG, _at_least(1)),
    _Key("remote.log.manager.task.retry.backoff.ms", _Type.LONG, _at_least(1)),
    _Key("remote.log.manager.task.retry.backoff.max.ms", _Type.LONG, _at_least(1)),
    _Key("log.local.retention.ms", _Type.LONG, _at_least(-2)),
    _Key("log.local.retention.bytes", _Type.LONG, _at_least(-2)),
    # Authorization (Kafka's names): any non-empty authorizer.class.name turns seglog's authorizer on.
    _Key("authorizer.class.name", _Type.STRING),
    _Key("super.users", _Type.STRING, nullable=True),
    _Key("allow.everyone.if.no.acl.found", _Type.BOOLEAN),
)
_BROKER_KEYS_BY_NAME = {key.name: key for key in _BROKER_KEYS}
# Older spellings of the same setting; the one in _BROKER_KEYS wins when both are given.
_BROKER_ALIASES = {"log.dir": "log.dirs", "broker.id": "node.id"}

#: Every broker configuration name this broker knows (aliases included).
BROKER_CONFIG_NAMES: frozenset[str] = frozenset(_BROKER_KEYS_BY_NAME) | frozenset(_BROKER_ALIASES)


@dataclass(frozen=True)
class BrokerConfig:
    """The broker's settings, under Kafka's names with ``_`` for ``.``.

    ``log.*`` settings are the defaults of every topic (``log_config_defaults``).
    Where Kafka offers one setting in several units (``log.retention.ms`` /
    ``.minutes`` / ``.hours``), the fields hold what was given and the
    ``*_millis`` properties resolve them with Kafka's precedence.

    ``static_overrides`` names the settings given explicitly (what
    DescribeConfigs reports as STATIC_BROKER_CONFIG); ``extra`` keeps settings
    this broker does not know, which Kafka also accepts with a warning.
    """

    node_id: int = 0
    log_dirs: tuple[str, ...] = ("/tmp/kafka-logs",)
    listeners: str = "PLAINTEXT://:9092"
    advertised_listeners: str | None = None
    num_partitions: int = 1
    max_partitions: int = DEFAULT_MAX_PARTITIONS
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    message_max_bytes: int = 1024 * 1024 + 12
    log_segment_bytes: int = 1024 * 1024 * 1024
    log_roll_ms: int | None = None
    log_roll_hours: int = 7 * 24
    log_roll_jitter_ms: int | None = None
    log_roll_jitter_hours: int = 0
    log_retention_ms: int | None = None
    log_retention_minutes: int | None = None
    log_retention_hours: int = 7 * 24
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 5 * _MS_PER_MINUTE
    log_cleanup_policy: tuple[str, ...] = (CLEANUP_POLICY_DELETE,)
    log_index_size_max_bytes: int = 10 * 1024 * 1024
    log_index_interval_bytes: int = 4096
    log_flush_interval_messages: int = LONG_MAX
    log_flush_interval_ms: int | None = None
    log_flush_scheduler_interval_ms: int = LONG_MAX
    log_flush_offset_checkpoint_interval_ms: int = 60_000
    log_flush_start_offset_checkpoint_interval_ms: int = 60_000
    log_segment_delete_delay_ms: int = 60_000
    log_preallocate: bool = False
    log_message_timestamp_type: str = CREATE_TIME
    log_message_timestamp_before_max_ms: int = LONG_MAX
    log_message_timestamp_after_max_ms: int = LONG_MAX
    log_cleaner_enable: bool = True
    log_cleaner_threads: int = 1
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024
    log_cleaner_io_buffer_size: int = 512 * 1024
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_io_max_bytes_per_second: float = DOUBLE_MAX
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_delete_retention_ms: int = 24 * _MS_PER_HOUR
    log_cleaner_min_compaction_lag_ms: int = 0
    log_cleaner_max_compaction_lag_ms: int = LONG_MAX
    log_cleaner_backoff_ms: int = 15_000
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    num_recovery_threads_per_data_dir: int = 2
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    # Cluster mode (off without etcd.connect): etcd holds what Kafka 0.11 held in ZooKeeper.
    etcd_connect: str | None = None
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    broker_rack: str | None = None
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    replica_lag_time_max_ms: int = 30_000
    replica_high_watermark_checkpoint_interval_ms: int = 5_000
    # The remote segments' indexes cached on local disk, at most this many bytes (Kafka's default: 1 GiB).
    remote_log_index_file_cache_total_size_bytes: int = 1_073_741_824
    socket_request_max_bytes: int = 100 * 1024 * 1024
    # seglog's own: a fetch on a plaintext listener sends CRC-checked records from the segment files (sendfile).
    fetch_zero_copy_enable: bool = True
    # seglog's own: http://host:port of /metrics (Prometheus), /healthz and /readyz; none when unset.
    metrics_listener: str | None = None
    # SO_SNDBUF of client connections. Kafka's default is 102400; seglog's is -1 (the OS's, which Linux
    # autotunes), so a loopback or LAN consumer is not held to 100 KiB in flight.
    socket_send_buffer_bytes: int = -1
    max_connections: int = INT_MAX
    connections_max_idle_ms: int = 10 * _MS_PER_MINUTE
    # Kafka's default is GSSAPI, which seglog does not serve: its default is the mechanisms it does serve.
    # Names it does not serve (GSSAPI, OAUTHBEARER) are accepted here and refused at the SASL handshake.
    sasl_enabled_mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    # 0: sessions never expire and clients are not asked to re-authenticate (KIP-368).
    connections_max_reauth_ms: int = 0
    num_network_threads: int = 3
    num_io_threads: int = 8
    max_incremental_fetch_session_cache_slots: int = 1000
    min_incremental_fetch_session_eviction_ms: int = 120_000
    request_timeout_ms: int = 30_000
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 1
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 10 * _MS_PER_MINUTE
    offsets_commit_timeout_ms: int = 5000
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 30 * _MS_PER_MINUTE
    group_max_size: int = INT_MAX
    producer_id_expiration_ms: int = 24 * 60 * _MS_PER_MINUTE  # the cleaner's DEFAULT_PRODUCER_ID_EXPIRATION_MS
    producer_id_expiration_check_interval_ms: int = 10 * _MS_PER_MINUTE
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 1
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_state_log_min_isr: int = 2
    transaction_state_log_load_buffer_size: int = 5 * 1024 * 1024
    transaction_max_timeout_ms: int = 15 * _MS_PER_MINUTE
    transactional_id_expiration_ms: int = 7 * 24 * _MS_PER_HOUR
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _MS_PER_HOUR
    remote_log_storage_system_enable: bool = False
    remote_storage_url: str | None = None
    remote_log_manager_task_interval_ms: int = 30_000
    remote_log_manager_task_retry_backoff_ms: int = 500
    remote_log_manager_task_retry_backoff_max_ms: int = 30_000
    log_local_retention_ms: int = -2
    log_local_retention_bytes: int = -2
    # Authorization: ACLs are checked when authorizer.class.name is set (any authorizer a Kafka user names).
    authorizer_class_name: str = ""
    super_users: str | None = None
    allow_everyone_if_no_acl_found: bool = False
    #: ``remote.storage.options.<name>``: the remote tier's fsspec storage options (credentials among them),
    #: kept out of ``extra``, of DescribeConfigs and of every file.
    remote_storage_options: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False, compare=False)
    static_overrides: frozenset[str] = frozenset()
    extra: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        _coerce_fields(self, _BROKER_KEYS)
        object.__setattr__(self, "log_cleanup_policy", _canonical_policy(self.log_cleanup_policy))
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))
        object.__setattr__(self, "remote_storage_options", MappingProxyType(dict(self.remote_storage_options)))
        if self.remote_log_storage_system_enable and not self.remote_storage_url:
            raise InvalidConfigurationError(
                "Invalid value null for configuration remote.storage.url: it must be set when "
                "remote.log.storage.system.enable is true", config_name="remote.storage.url", value=None)
        # A value that differs from the default was set by someone, even when
        # the config was built in Python rather than from properties.
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        changed = {key.name for key in _BROKER_KEYS if getattr(self, key.attr) != defaults[key.attr]}
        object.__setattr__(self, "static_overrides", frozenset(self.static_overrides) | changed)
        self._check_resolved_times()
        _check_compaction_lags("log.cleaner.min.compaction.lag.ms", self.log_cleaner_min_compaction_lag_ms,
                               "log.cleaner.max.compaction.lag.ms", self.log_cleaner_max_compaction_lag_ms)

    def _check_resolved_times(self) -> None:
        # Kafka checks retention after resolving units and mapping negatives to
        # -1, so only zero can be wrong; name the setting that supplied it.
        retention = self.log_retention_time_millis
        if retention == 0:
            name, value = self._retention_source()
            raise _invalid(name, value, "Value must be -1 (unlimited) or at least 1 ms")

    def _retention_source(self) -> tuple[str, int]:
        if self.log_retention_ms is not None:
            return "log.retention.ms", self.log_retention_ms
        if self.log_retention_minutes is not None:
            return "log.retention.minutes", self.log_retention_minutes
        return "log.retention.hours", self.log_retention_hours

    # -- building --

    @classmethod
    def from_props(cls, props: Mapping[str, str | int | float | bool | None]) -> BrokerConfig:
        """A broker config from properties (a ``server.properties`` file's worth, as a mapping).

        ``log.dir`` and ``broker.id`` are accepted as the older spellings of
        ``log.dirs`` and ``node.id``; ``node.id`` and ``broker.id`` must agree
        when both are given. Unknown names go to ``extra``.
        """
        changes: dict[str, Any] = {}
        extra: dict[str, str] = {}
        remote_options: dict[str, str] = {}
        given: set[str] = set()
        for name, value in props.items():
            key = _BROKER_KEYS_BY_NAME.get(name)
            if name.startswith(REMOTE_STORAGE_OPTIONS_PREFIX):
                remote_options[name[len(REMOTE_STORAGE_OPTIONS_PREFIX):]] = (
                    value if isinstance(value, str) else _render(value))
            elif key is not None:
                given.add(name)
                changes[key.attr] = value
            elif name not in _BROKER_ALIASES:
                extra[name] = value if isinstance(value, str) else _render(value)
        for alias, current in _BROKER_ALIASES.items():
            if alias in props:
                given.add(alias)
                # The current spelling wins when both are given.
                changes.setdefault(_BROKER_KEYS_BY_NAME[current].attr, props[alias])
        if "node.id" in props and "broker.id" in props:
            node_id = _parse("node.id", _Type.INT, props["node.id"], False)
            broker_id = _parse("broker.id", _Type.INT, props["broker.id"], False)
            if node_id != broker_id:
                raise InvalidConfigurationError(
                    f"Invalid value {broker_id} for configuration broker.id: it must equal node.id ({node_id})",
                    config_name="broker.id", value=broker_id)
        return cls(**changes, static_overrides=frozenset(given), extra=extra, remote_storage_options=remote_options)

    # -- resolved settings --

    @property
    def log_roll_time_millis(self) -> int:
        """``segment.ms`` for topics: ``log.roll.ms``, else ``log.roll.hours``."""
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * _MS_PER_HOUR

    @property
    def log_roll_time_jitter_millis(self) -> int:
        """``segment.jitter.ms`` for topics: ``log.roll.jitter.ms``, else ``log.roll.jitter.hours``."""
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * _MS_PER_HOUR

    @property
    def log_retention_time_millis(self) -> int:
        """``retention.ms`` for topics: ms, else minutes, else hours; any negative value is -1 (unlimited)."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * _MS_PER_MINUTE
        else:
            millis = self.log_retention_hours * _MS_PER_HOUR
        return -1 if millis < 0 else millis

    @property
    def log_flush_interval_millis(self) -> int:
        """``flush.ms`` for topics: ``log.flush.interval.ms``, else ``log.flush.scheduler.interval.ms``."""
        if self.log_flush_interval_ms is not None:
            return self.log_flush_interval_ms
        return self.log_flush_scheduler_interval_ms

    def internal_topic_replication_factor(self, key: str) -> int:
        """``offsets.topic.replication.factor`` or ``transaction.state.log.replication.factor`` (``key``): as
        set, else 1 on a single broker and Kafka's 3 in a cluster."""
        if key in self.static_overrides or not self.etcd_connect:
            return getattr(self, key.replace(".", "_"))
        return 3

    def log_config_defaults(self) -> LogConfig:
        """The topic settings every topic starts from, taken from this broker's ``log.*`` settings."""
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_time_millis,
            segment_jitter_ms=self.log_roll_time_jitter_millis,
            segment_index_bytes=self.log_index_size_max_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_millis,
            retention_ms=self.log_retention_time_millis,
            retention_bytes=self.log_retention_bytes,
            max_message_bytes=self.message_max_bytes,
            message_timestamp_type=self.log_message_timestamp_type,
            message_timestamp_before_max_ms=self.log_message_timestamp_before_max_ms,
            message_timestamp_after_max_ms=self.log_message_timestamp_after_max_ms,
            cleanup_policy=self.log_cleanup_policy,
            min_cleanable_dirty_ratio=self.log_cleaner_min_cleanable_ratio,
            delete_retention_ms=self.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=self.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=self.log_cleaner_max_compaction_lag_ms,
            file_delete_delay_ms=self.log_segment_delete_delay_ms,
            compression_type=self.compression_type,
            compression_gzip_level=self.compression_gzip_level,
            compression_lz4_level=self.compression_lz4_level,
            compression_zstd_level=self.compression_zstd_level,
            preallocate=self.log_preallocate,
            min_insync_replicas=self.min_insync_replicas,
            unclean_leader_election_enable=self.unclean_leader_election_enable,
            local_retention_ms=self.log_local_retention_ms,
            local_retention_bytes=self.log_local_retention_bytes,
            remote_log_storage_system_enable=self.remote_log_storage_system_enable,
        )
