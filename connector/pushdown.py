"""Filters Spark pushes to the ``seglog`` source (``DataSourceReader.pushFilters``), as bounds on what a query
reads, and the narrowing of its planned offset ranges by them; the rows a task keeps within them are
``partition_read.keep_rows``'s. Plain functions: tested without Spark.

What is pushed, and what Spark still evaluates:

- ``topic`` and ``partition`` (=, IN, <, <=, >, >=) choose the partitions read: exact.
- ``offset`` (=, <, <=, >, >=) bounds each range: exact. ``offset IN (...)`` reads from the least to the
  greatest and leaves the rest to Spark.
- ``timestamp`` (=, <, <=, >, >=) starts each partition at the first offset whose largest timestamp so far
  reaches the lower bound (the time index's answer, as Kafka's ListOffsets by timestamp): every record before
  it is stamped below the bound, whatever the topic's ``message.timestamp.type``. An upper bound stops a
  partition early only where the log is stamped at append (``LogAppendTime``, whose stamps rise with the
  offsets); with ``CreateTime`` a producer may stamp a later record earlier, and nothing short of decoding it
  says so, so the range runs to its end. Within what is read, the reader keeps only the decoded rows inside
  the bounds (``partition_read.keep_rows``), so the filter is exact. ``timestamp IN (...)`` reads from the
  least to the greatest and leaves the rest to Spark.
- ``key = ...``: the reader keeps only the decoded rows with that key (exact); no batch is skipped unread.

Anything else (other columns, ``NOT``, ``IS NULL``, string matching, ``OR`` which Spark never pushes) is left
to Spark. Filter values are the Python values Spark gives (``int``, ``str``, ``bytes``, a ``datetime`` in UTC);
a value of another type leaves its filter to Spark unpushed. ``EXPLAIN FORMATTED`` lists the filters taken
(exact) as the scan's ``PushedFilters``.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping

from pyspark.sql.datasource import (EqualNullSafe, EqualTo, Filter, GreaterThan, GreaterThanOrEqual, In, LessThan,
                                    LessThanOrEqual)

from format.layout import TopicPartition

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_COMPARISONS = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In)


@dataclass(frozen=True)
class ReadBounds:
    """What the pushed filters let a query read; None where a column is unbounded. Offsets are
    ``from_offset <= offset < until_offset``; timestamps (milliseconds) ``min_timestamp <= t <= max_timestamp``."""

    topics: frozenset[str] | None = None
    min_topic: tuple[str, bool] | None = None  # (name, inclusive)
    max_topic: tuple[str, bool] | None = None
    partitions: frozenset[int] | None = None
    from_partition: int | None = None
    until_partition: int | None = None
    from_offset: int | None = None
    until_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    keys: frozenset[bytes] | None = None

    @property
    def is_unbounded(self) -> bool:
        return self == ReadBounds()

    @property
    def is_empty(self) -> bool:
        """No record can match (``partition = 1 AND partition = 2``, ``offset > 9 AND offset < 3``)."""
        return (self.topics == frozenset() or self.partitions == frozenset() or self.keys == frozenset()
                or (self.from_offset is not None and self.until_offset is not None
                    and self.until_offset <= self.from_offset)
                or (self.min_timestamp is not None and self.max_timestamp is not None
                    and self.max_timestamp < self.min_timestamp))

    def selects(self, tp: TopicPartition) -> bool:
        return ((self.topics is None or tp.topic in self.topics)
                and (self.min_topic is None or _above(tp.topic, *self.min_topic))
                and (self.max_topic is None or _above(self.max_topic[0], tp.topic, self.max_topic[1]))
                and (self.partitions is None or tp.partition in self.partitions)
                and (self.from_partition is None or tp.partition >= self.from_partition)
                and (self.until_partition is None or tp.partition < self.until_partition))

    def _and(self, **changes) -> "ReadBounds":
        merged = {}
        for name, value in changes.items():
            old = getattr(self, name)
            if old is None or value is None:
                merged[name] = value if old is None else old
            elif name in ("topics", "partitions", "keys"):
                merged[name] = old & value
            elif name == "min_topic":  # the greater name; of the same name, the exclusive bound
                merged[name] = max(old, value, key=lambda b: (b[0], not b[1]))
            elif name == "max_topic":  # the lesser name; of the same name, the exclusive bound
                merged[name] = min(old, value, key=lambda b: (b[0], b[1]))
            elif name in ("from_offset", "from_partition", "min_timestamp"):
                merged[name] = max(old, value)
            else:
                merged[name] = min(old, value)
        return replace(self, **merged)


def push_filters(filters: Iterable[Filter]) -> tuple[ReadBounds, list[Filter]]:
    """The bounds the filters (an AND) set, and the filters Spark must still evaluate, each one of
    ``filters`` itself (Spark matches them by reference)."""
    bounds = ReadBounds()
    remaining = []
    for f in filters:
        taken = _bound(f)
        if taken is None:
            remaining.append(f)
            continue
        changes, exact = taken
        bounds = bounds._and(**changes)
        if not exact:
            remaining.append(f)
    return bounds, remaining


def _bound(f: Filter) -> tuple[dict, bool] | None:
    """(bounds, exact) for one filter; None when it is not pushed."""
    if not isinstance(f, _COMPARISONS) or len(f.attribute) != 1:
        return None
    column = f.attribute[0].lower()
    values = tuple(f.value) if isinstance(f, In) else (f.value,)
    if not values:
        return None
    if column == "topic" and all(isinstance(v, str) for v in values):
        return _topic_bound(f, values), True
    if column in ("partition", "offset") and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        if column == "partition":
            if _is_range(f):
                return _range_bound(f, values[0], values[0], "from_partition", "until_partition"), True
            return {"partitions": frozenset(values)}, True
        low, high = min(values), max(values)
        return _range_bound(f, low, high, "from_offset", "until_offset"), not isinstance(f, In)
    if column == "timestamp" and all(_is_aware(v) for v in values):
        micros = [(v - _EPOCH) // datetime.timedelta(microseconds=1) for v in values]
        return _timestamp_bound(f, micros), not isinstance(f, In)
    if column == "key" and isinstance(f, EqualTo) and isinstance(f.value, (bytes, bytearray)):
        return {"keys": frozenset([bytes(f.value)])}, True
    return None


def _is_range(f: Filter) -> bool:
    return isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual))


def _is_aware(value) -> bool:
    return isinstance(value, datetime.datetime) and value.utcoffset() is not None


def _above(name: str, bound: str, inclusive: bool) -> bool:
    # Spark orders strings by their UTF-8 bytes, which is Python's code point order.
    return name >= bound if inclusive else name > bound


def _topic_bound(f: Filter, values: tuple) -> dict:
    if isinstance(f, GreaterThan):
        return {"min_topic": (values[0], False)}
    if isinstance(f, GreaterThanOrEqual):
        return {"min_topic": (values[0], True)}
    if isinstance(f, LessThan):
        return {"max_topic": (values[0], False)}
    if isinstance(f, LessThanOrEqual):
        return {"max_topic": (values[0], True)}
    return {"topics": frozenset(values)}


def _range_bound(f: Filter, low: int, high: int, lower: str, upper: str) -> dict:
    """Offsets ``lower <= o < upper`` from a comparison or IN."""
    if isinstance(f, (EqualTo, EqualNullSafe, In)):
        return {lower: low, upper: high + 1}
    if isinstance(f, GreaterThan):
        return {lower: low + 1}
    if isinstance(f, GreaterThanOrEqual):
        return {lower: low}
    if isinstance(f, LessThan):
        return {upper: low}
    return {upper: low + 1}


def _timestamp_bound(f: Filter, micros: list[int]) -> dict:
    """Millisecond bounds ``min_timestamp <= t <= max_timestamp`` on record timestamps ``t`` (Spark holds
    them as ``t * 1000`` microseconds) from a comparison with microseconds."""
    low, high = min(micros), max(micros)
    if isinstance(f, (EqualTo, EqualNullSafe, In)):
        exact = [m // 1000 for m in micros if m % 1000 == 0]
        if not exact:  # no millisecond stamp equals a value between two milliseconds
            return {"min_timestamp": 0, "max_timestamp": -1}
        return {"min_timestamp": min(exact), "max_timestamp": max(exact)}
    if isinstance(f, GreaterThan):
        return {"min_timestamp": low // 1000 + 1}
    if isinstance(f, GreaterThanOrEqual):
        return {"min_timestamp": -(-low // 1000)}
    if isinstance(f, LessThan):
        return {"max_timestamp": -(-high // 1000) - 1}
    return {"max_timestamp": high // 1000}


def narrow_ranges(bounds: ReadBounds, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], *,
                  first_reaching: Callable[[TopicPartition, int], int | None],
                  stamped_at_append: Callable[[TopicPartition, int], bool]
                  ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The planned ``start`` and ``end`` offsets narrowed to what ``bounds`` may match; a partition it
    excludes is left out, one it empties ends where it starts. ``start`` names every partition of ``end``.

    ``first_reaching(tp, t)`` is the first offset of ``tp`` whose largest timestamp so far is at least ``t``
    (None when no record is stamped that late); ``stamped_at_append(tp, offset)`` says whether the records
    of ``tp`` from ``offset`` on are stamped at append (``LogAppendTime``), so that none after it is stamped
    earlier."""
    new_start, new_end = {}, {}
    for tp, until in end.items():
        if not bounds.selects(tp):
            continue
        begin = start[tp]
        if bounds.from_offset is not None:
            begin = max(begin, bounds.from_offset)
        if bounds.until_offset is not None:
            until = min(until, bounds.until_offset)
        if bounds.is_empty or until <= begin:
            until = begin
        else:
            if bounds.min_timestamp is not None:
                found = first_reaching(tp, bounds.min_timestamp)
                begin = until if found is None else max(begin, min(found, until))
            if bounds.max_timestamp is not None and begin < until:
                found = first_reaching(tp, bounds.max_timestamp + 1)
                if found is not None and found < until and stamped_at_append(tp, found):
                    until = max(found, begin)
        new_start[tp] = begin
        new_end[tp] = until
    return new_start, new_end
