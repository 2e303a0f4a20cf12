"""The options of the ``seglog`` data source, parsed and checked once, on the driver.

Names and meanings follow Spark's Kafka source so a pipeline moves by changing
``format("kafka")`` to ``format("seglog")``. Every problem is reported as a
``SeglogOptionError`` whose message names the option, so ``load()`` fails
before any job runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Mapping

from format.fs import storage_options_from
from format.tiered_log import TieredLogDirectory

from .client_options import client_security, security_props
from .option_error import SeglogOptionError

EARLIEST = -2
LATEST = -1
VIEWS = ("offsets", "groups", "segments")
_TOPIC_SELECTORS = ("subscribe", "subscribePattern", "assign")
_KNOWN = {
    "path", "bootstrap", "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy", "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
    "minpartitions", "maxrecordsperpartition", "failondataloss", "includeheaders", "groupid", "view",
    "topic", "compression", "chunkbytes", "kafka.bootstrap.servers", "kafka.group.id", "autooffsetreset",
    "kafka.auto.offset.reset", "isolation.level", "remote.storage.url",
}
# Kafka's auto.offset.reset: where a group without a committed offset starts.
OFFSET_RESET_POLICIES = ("earliest", "latest", "none")
# Kafka's isolation.level: read_committed stops at the last stable offset and leaves aborted
# transactions out. Kafka's consumer defaults to read_uncommitted.
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
# What startingTimestamp does for a partition with no record at or after it: Spark's
# Kafka source's values. seglog's default is latest (read nothing), not Spark's error.
TIMESTAMP_STRATEGIES = ("error", "latest")


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``earliest``/``latest``/``group``, per-partition offsets, or timestamps."""

    kind: str  # "earliest" | "latest" | "group" | "offsets" | "timestamp" | "timestamps"
    offsets: Mapping[str, Mapping[int, int]] = field(default_factory=dict)  # topic -> partition -> offset
    timestamp: int | None = None

    def for_partition(self, topic: str, partition: int) -> int | None:
        return self.offsets.get(topic, {}).get(partition)


@dataclass(frozen=True)
class SourceOptions:
    path: str | None
    storage_options: Mapping[str, object]
    bootstrap: str | None = None
    # The remote tier when the log dir does not name it (remote-tier.properties); storage.* reach it too.
    remote_storage_url: str | None = None
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    auto_offset_reset: str = "latest"
    starting_timestamp_strategy: str = "latest"
    isolation_level: str = "read_uncommitted"
    view: str | None = None
    chunk_bytes: int = 4 * 1024 * 1024
    raw: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The kafka.security.protocol, kafka.sasl.* and kafka.ssl.* options, without the prefix.
    client_props: Mapping[str, str] = field(default_factory=dict, repr=False)

    def selects(self, topic: str) -> bool:
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return topic in self.assign

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _bool(opts: dict, name: str, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise SeglogOptionError(f"option {name} must be true or false, not {value!r}")


def _positive_int(opts: dict, name: str) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise SeglogOptionError(f"option {name} must be a positive integer, not {value!r}") from None
    if number <= 0:
        raise SeglogOptionError(f"option {name} must be a positive integer, not {value!r}")
    return number


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$")
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


def _duration_ms(opts: dict, name: str, default: int) -> int:
    value = opts.get(name.lower())
    if value is None:
        return default
    match = _DURATION.match(value)
    if not match:
        raise SeglogOptionError(f"option {name} must be a duration such as 15m or 30s, not {value!r}")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def _json(name: str, value: str):
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise SeglogOptionError(f"option {name} is not valid JSON ({exc.msg} at character {exc.pos}): "
                                f"{value!r}") from None


def _partition_map(name: str, value: str) -> dict[str, dict[int, int]]:
    """Spark's offsets JSON: {"topic": {"0": 23, "1": -2}}."""
    doc = _json(name, value)
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise SeglogOptionError(f'option {name} must look like {{"topic": {{"0": 23}}}}, not {value!r}')
    out: dict[str, dict[int, int]] = {}
    for topic, parts in doc.items():
        for p, offset in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise SeglogOptionError(f"option {name}: partition {p!r} of topic {topic!r} is not a number") \
                    from None
            if not isinstance(offset, int) or isinstance(offset, bool):
                raise SeglogOptionError(f"option {name}: offset {offset!r} of {topic}-{p} is not an integer")
            out.setdefault(topic, {})[partition] = offset
    return out


def _offset_spec(opts: dict, prefix: str, default: str, allow_group: bool) -> OffsetSpec:
    name = f"{prefix}Offsets"
    by_ts_name = f"{prefix}OffsetsByTimestamp"
    ts_name = f"{prefix}Timestamp"
    given = [n for n in (name, by_ts_name, ts_name) if n.lower() in opts]
    if len(given) > 1:
        raise SeglogOptionError(f"options {' and '.join(given)} exclude each other: give one")
    if ts_name.lower() in opts:
        value = opts[ts_name.lower()]
        try:
            timestamp = int(value)
        except ValueError:
            timestamp = -1
        if timestamp < 0:
            raise SeglogOptionError(f"option {ts_name} must be a timestamp in milliseconds since 1970, not "
                                    f"{value!r}")
        return OffsetSpec("timestamp", timestamp=timestamp)
    if by_ts_name.lower() in opts:
        stamps = _partition_map(by_ts_name, opts[by_ts_name.lower()])
        for topic, parts in stamps.items():
            for p, stamp in parts.items():
                if stamp < EARLIEST:
                    raise SeglogOptionError(f"option {by_ts_name}: timestamp {stamp} of {topic}-{p} is not "
                                            f"valid (milliseconds since 1970, or -2 earliest, -1 latest)")
        return OffsetSpec("timestamps", stamps)
    value = opts.get(name.lower(), default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    if value.lower() == "group":
        if not allow_group:
            raise SeglogOptionError(f"option {name}=group is only for startingOffsets")
        return OffsetSpec("group")
    return OffsetSpec("offsets", _partition_map(name, value))


def _choice(opts: dict, names: tuple[str, ...], choices: tuple[str, ...], default: str) -> str:
    """The value of the first of ``names`` given (aliases), one of ``choices``."""
    for name in names:
        value = opts.get(name.lower())
        if value is not None:
            if value.strip().lower() not in choices:
                raise SeglogOptionError(f"option {name} must be one of {', '.join(choices)}, not {value!r}")
            return value.strip().lower()
    return default


def _isolation_level(opts: dict) -> str:
    """``isolation.level``, or ``kafka.isolation.level`` as Spark's Kafka source spells it; both may be
    given if they agree."""
    names = ("isolation.level", "kafka.isolation.level")
    given = {name: _choice(opts, (name,), ISOLATION_LEVELS, "") for name in names if name in opts}
    if len(set(given.values())) > 1:
        raise SeglogOptionError(f"options isolation.level ({opts['isolation.level']!r}) and kafka.isolation.level "
                                f"({opts['kafka.isolation.level']!r}) disagree: give one")
    return next(iter(given.values()), "read_uncommitted")


def _bootstrap(opts: dict) -> str | None:
    for name in ("bootstrap", "kafka.bootstrap.servers"):
        value = opts.get(name)
        if value is None:
            continue
        first = value.split(",")[0].strip()  # one broker serves every partition
        host, _, port = first.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise SeglogOptionError(f"option {'kafka.bootstrap.servers' if name != 'bootstrap' else name} must "
                                    f"be host:port (a running seglog broker), not {value!r}")
        return first
    return None


def check_mode(options: SourceOptions, streaming: bool) -> None:
    """The rules that depend on the query being a batch or a stream.

    Spark does not tell a Python data source at ``load()`` which one it is, so
    these are checked when the query plans its reads.
    """
    opts = _lower(options.raw)
    if streaming:
        given = [n for n in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp") if n.lower() in opts]
        if given:
            raise SeglogOptionError(f"option {given[0]} is for batch queries only: a stream has no end "
                                    f"(Spark's Kafka source refuses it too)")
        if options.view is not None:
            raise SeglogOptionError(f"option view={options.view} is for batch reads and the spark-sql shell")
        return
    if options.starting.kind == "latest":
        raise SeglogOptionError("option startingOffsets=latest is for streaming queries only: a batch query "
                                "starting at the log end reads nothing")
    for topic, parts in options.starting.offsets.items() if options.starting.kind == "offsets" else ():
        for p, offset in parts.items():
            if offset == LATEST:
                raise SeglogOptionError(f"option startingOffsets: offset -1 (latest) of {topic}-{p} is for "
                                        f"streaming queries only")


def parse_options(options: Mapping[str, str], *, streaming: bool | None = False) -> SourceOptions:
    """Check every option; raise SeglogOptionError naming the first bad one.

    ``streaming=None`` checks what holds in both modes (at ``load()``, before the mode is known).
    """
    opts = _lower(options)
    unknown = sorted(k for k in opts if k not in _KNOWN and not k.startswith("storage.")
                     and not k.startswith("kafka."))
    if unknown:
        raise SeglogOptionError(f"unknown option {unknown[0]!r}; seglog takes Spark's Kafka source options "
                                f"plus path, storage.*, remote.storage.url, groupId, autoOffsetReset, "
                                f"isolation.level and view")
    view = opts.get("view")
    if view is not None and view.lower() not in VIEWS:
        raise SeglogOptionError(f"option view must be one of {', '.join(VIEWS)}, not {view!r}")
    path = opts.get("path")
    if path is not None and not path.strip():
        raise SeglogOptionError("option path is empty: give the log directory (a local path, file:// or s3:// "
                                "URL)")
    bootstrap = _bootstrap(opts)
    remote_storage_url = opts.get("remote.storage.url")
    if remote_storage_url is not None and (path is None or "://" not in remote_storage_url):
        raise SeglogOptionError(f"option remote.storage.url={remote_storage_url!r}: give the remote tier of the log "
                                f"dir in option path as a URL (e.g. s3://bucket/prefix)")
    if path is None and bootstrap is None:
        raise SeglogOptionError("option path (the log directory: a local path, file:// or s3:// URL) or option "
                                "bootstrap (a running seglog broker, host:port) is required")
    selectors = [n for n in _TOPIC_SELECTORS if n.lower() in opts]
    if view is None and len(selectors) != 1:
        if not selectors:
            raise SeglogOptionError("one of the options subscribe, subscribePattern or assign is required")
        raise SeglogOptionError(f"options {' and '.join(selectors)} exclude each other: give exactly one "
                                f"of subscribe, subscribePattern or assign")
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: dict[str, tuple[int, ...]] = {}
    if "subscribe" in opts:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise SeglogOptionError("option subscribe names no topic")
    if "subscribepattern" in opts:
        pattern = opts["subscribepattern"]
        if not pattern.strip():
            raise SeglogOptionError("option subscribePattern is empty")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SeglogOptionError(f"option subscribePattern is not a valid regular expression: {exc}") from None
    if "assign" in opts:
        doc = _json("assign", opts["assign"])
        if not isinstance(doc, dict) or not doc or not all(
                isinstance(v, list) and v and all(type(p) is int and p >= 0 for p in v) for v in doc.values()):
            raise SeglogOptionError(f'option assign must look like {{"topic": [0, 1]}}, not {opts["assign"]!r}')
        assign = {t: tuple(sorted(set(ps))) for t, ps in doc.items()}
    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", allow_group=True)
    ending = _offset_spec(opts, "ending", "latest", allow_group=False)
    if ending.kind == "earliest":
        raise SeglogOptionError("option endingOffsets=earliest reads nothing: give latest or offsets")
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if spec.kind == "offsets":
            for topic, parts in spec.offsets.items():
                for p, offset in parts.items():
                    if offset < EARLIEST or (offset == EARLIEST and spec is ending):
                        raise SeglogOptionError(f"option {name}: offset {offset} of {topic}-{p} is not valid")
    group_id = opts.get("groupid", opts.get("kafka.group.id"))
    if group_id is not None and not group_id.strip():
        raise SeglogOptionError("option groupId is empty: give the consumer group's id")
    if starting.kind == "group" and not group_id:
        raise SeglogOptionError("option startingOffsets=group needs the option groupId")
    reset_names = ("autoOffsetReset", "kafka.auto.offset.reset")
    auto_offset_reset = _choice(opts, reset_names, OFFSET_RESET_POLICIES, "latest")
    reset_given = [n for n in reset_names if n.lower() in opts]
    if reset_given and starting.kind != "group":
        raise SeglogOptionError(f"option {reset_given[0]} goes with startingOffsets=group (where the group "
                                f"has no committed offset); startingOffsets is {opts.get('startingoffsets')!r}")
    strategy = _choice(opts, ("startingOffsetsByTimestampStrategy",), TIMESTAMP_STRATEGIES, "latest")
    min_offsets = _positive_int(opts, "minOffsetsPerTrigger")
    max_offsets = _positive_int(opts, "maxOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise SeglogOptionError(f"option minOffsetsPerTrigger ({min_offsets}) is larger than "
                                f"maxOffsetsPerTrigger ({max_offsets})")
    chunk = _positive_int(opts, "chunkBytes")
    isolation_level = _isolation_level(opts)
    client_props = security_props(options)
    if bootstrap is not None:
        client_security(client_props)  # a bad kafka.security.protocol, kafka.ssl.* or kafka.sasl.* fails load()
    parsed = SourceOptions(
        path=path, storage_options=storage_options_from(options), bootstrap=bootstrap,
        remote_storage_url=remote_storage_url,
        subscribe=subscribe, subscribe_pattern=pattern, assign=assign, starting=starting, ending=ending,
        max_offsets_per_trigger=max_offsets, min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        group_id=group_id, auto_offset_reset=auto_offset_reset, starting_timestamp_strategy=strategy,
        isolation_level=isolation_level, view=view.lower() if view else None,
        chunk_bytes=chunk or 4 * 1024 * 1024, raw=dict(options), client_props=client_props)
    if streaming is not None:
        check_mode(parsed, streaming)
    return parsed


def open_log_directory(options: SourceOptions) -> TieredLogDirectory:
    """The log dir of option ``path`` with its remote tier (named by the dir or by option remote.storage.url,
    reached with the storage.* options)."""
    return TieredLogDirectory(options.path, options.storage_options, remote_storage_url=options.remote_storage_url,
                              remote_storage_options=options.storage_options)
