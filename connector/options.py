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

EARLIEST = -2
LATEST = -1
VIEWS = ("offsets", "groups", "segments")
_TOPIC_SELECTORS = ("subscribe", "subscribePattern", "assign")
_KNOWN = {
    "path", "bootstrap", "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy", "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
    "minpartitions", "maxrecordsperpartition", "failondataloss", "includeheaders", "groupid", "view",
    "topic", "compression", "chunkbytes", "kafka.bootstrap.servers", "kafka.group.id",
}


class SeglogOptionError(ValueError):
    """A bad data source option; the message names it."""


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
    view: str | None = None
    chunk_bytes: int = 4 * 1024 * 1024
    raw: Mapping[str, str] = field(default_factory=dict)

    def selects(self, topic: str) -> bool:
        if self.subscribe:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return re.fullmatch(self.subscribe_pattern, topic) is not None
        return topic in self.assign


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
            return OffsetSpec("timestamp", timestamp=int(value))
        except ValueError:
            raise SeglogOptionError(f"option {ts_name} must be a timestamp in milliseconds, not {value!r}") \
                from None
    if by_ts_name.lower() in opts:
        return OffsetSpec("timestamps", _partition_map(by_ts_name, opts[by_ts_name.lower()]))
    value = opts.get(name.lower(), default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())
    if value.lower() == "group":
        if not allow_group:
            raise SeglogOptionError(f"option {name}=group is only for startingOffsets")
        return OffsetSpec("group")
    return OffsetSpec("offsets", _partition_map(name, value))


def parse_options(options: Mapping[str, str], *, streaming: bool | None = False) -> SourceOptions:
    """Check every option; raise SeglogOptionError naming the first bad one.

    ``streaming=None`` checks what holds in both modes (at ``load()``, before the mode is known).
    """
    opts = _lower(options)
    unknown = sorted(k for k in opts if k not in _KNOWN and not k.startswith("storage.")
                     and not k.startswith("kafka."))
    if unknown:
        raise SeglogOptionError(f"unknown option {unknown[0]!r}; seglog takes Spark's Kafka source options "
                                f"plus path, storage.*, groupId and view")
    view = opts.get("view")
    if view is not None and view.lower() not in VIEWS:
        raise SeglogOptionError(f"option view must be one of {', '.join(VIEWS)}, not {view!r}")
    path = opts.get("path")
    bootstrap = opts.get("bootstrap") or opts.get("kafka.bootstrap.servers")
    if bootstrap is not None and "," in bootstrap:
        bootstrap = bootstrap.split(",")[0].strip()  # one broker serves every partition
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
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SeglogOptionError(f"option subscribePattern is not a valid regular expression: {exc}") from None
    if "assign" in opts:
        doc = _json("assign", opts["assign"])
        if not isinstance(doc, dict) or not all(isinstance(v, list) and all(isinstance(p, int) for p in v)
                                                for v in doc.values()):
            raise SeglogOptionError(f'option assign must look like {{"topic": [0, 1]}}, not {opts["assign"]!r}')
        assign = {t: tuple(sorted(set(ps))) for t, ps in doc.items()}
    starting = _offset_spec(opts, "starting", "latest" if streaming else "earliest", allow_group=True)
    ending = _offset_spec(opts, "ending", "latest", allow_group=False)
    if streaming is True and any(n in opts for n in ("endingoffsets", "endingtimestamp",
                                                     "endingoffsetsbytimestamp")):
        raise SeglogOptionError("ending offsets (endingOffsets, endingTimestamp, endingOffsetsByTimestamp) "
                                "are for batch queries only")
    if streaming is False and starting.kind == "latest":
        raise SeglogOptionError("option startingOffsets=latest is for streaming queries only")
    if streaming is False and ending.kind == "earliest":
        raise SeglogOptionError("option endingOffsets=earliest is not allowed in a batch query")
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if spec.kind == "offsets":
            for topic, parts in spec.offsets.items():
                for p, offset in parts.items():
                    if offset < EARLIEST or (offset == EARLIEST and spec is ending):
                        raise SeglogOptionError(f"option {name}: offset {offset} of {topic}-{p} is not valid")
    group_id = opts.get("groupid") or opts.get("kafka.group.id")
    if starting.kind == "group" and not group_id:
        raise SeglogOptionError("option startingOffsets=group needs the option groupId")
    min_offsets = _positive_int(opts, "minOffsetsPerTrigger")
    max_offsets = _positive_int(opts, "maxOffsetsPerTrigger")
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise SeglogOptionError(f"option minOffsetsPerTrigger ({min_offsets}) is larger than "
                                f"maxOffsetsPerTrigger ({max_offsets})")
    chunk = _positive_int(opts, "chunkBytes")
    return SourceOptions(
        path=path, storage_options=storage_options_from(options), bootstrap=bootstrap,
        subscribe=subscribe, subscribe_pattern=pattern, assign=assign, starting=starting, ending=ending,
        max_offsets_per_trigger=max_offsets, min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=_duration_ms(opts, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_positive_int(opts, "minPartitions"),
        max_records_per_partition=_positive_int(opts, "maxRecordsPerPartition"),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        group_id=group_id, view=view.lower() if view else None,
        chunk_bytes=chunk or 4 * 1024 * 1024, raw=dict(options))
