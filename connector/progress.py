"""How far a streaming query is behind the log, per micro-batch, as Spark's Kafka source reports it.

Spark's Kafka source puts ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``avgOffsetsBehindLatest`` in each micro-batch's progress
(``query.lastProgress["sources"][i]["metrics"]``): for every partition, the
latest offset it saw when planning the batch minus the batch's end offset.
A source earns that ``metrics`` map by implementing Spark's
``ReportsSourceMetrics``; Spark 4.2 gives a Python data source no way to:
its streams (``PythonMicroBatchStream`` and the admission-control and
AvailableNow variants) implement ``SupportsAdmissionControl`` and
``reportLatestOffset`` but not ``ReportsSourceMetrics``, and the Python
side has no call for metrics, so a ``seglog`` source's ``metrics`` stay
empty.

Both figures the Kafka source computes from are in the progress all the
same: the batch's ``endOffset`` and the ``latestOffset`` the seglog source
reported while planning it (in availableNow, as for Kafka, the latest
offsets the trigger set out to read). ``source_metrics`` computes the Kafka
source's metrics from one source's progress, so that

    source_metrics(query.lastProgress["sources"][0])["maxOffsetsBehindLatest"]

reads what ``query.lastProgress["sources"][0]["metrics"]["maxOffsetsBehindLatest"]``
reads for Spark's Kafka source. ``LagListener`` (``attach_lag_listener(spark)``)
does it for every progress event of every query in the session, keeps the
last batch's figures per query id and logs them.
"""

from __future__ import annotations

import decimal
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger(__name__)

__all__ = ["BatchLag", "LagListener", "attach_lag_listener", "offsets_behind_latest", "source_metrics"]

MIN_OFFSETS_BEHIND_LATEST = "minOffsetsBehindLatest"
MAX_OFFSETS_BEHIND_LATEST = "maxOffsetsBehindLatest"
AVG_OFFSETS_BEHIND_LATEST = "avgOffsetsBehindLatest"

# What Spark calls a Python data source's stream in a progress's source description (then "@<hash>").
_PYTHON_STREAM = "org.apache.spark.sql.execution.datasources.v2.python.PythonMicroBatchStream"


def _partition_offsets(offsets: str | Mapping | None) -> dict[tuple[str, str], int] | None:
    """Offsets in Spark's Kafka layout ({"topic": {"0": 23}}), as JSON or parsed; None when not that."""
    if isinstance(offsets, str):
        if offsets in ("", "null", "None"):  # a progress names a missing offset so
            return None
        try:
            offsets = json.loads(offsets)
        except ValueError:
            return None
    if not isinstance(offsets, Mapping):
        return None
    out = {}
    for topic, partitions in offsets.items():
        if not isinstance(partitions, Mapping):
            return None
        for partition, offset in partitions.items():
            if not isinstance(offset, int) or isinstance(offset, bool):
                return None
            out[(topic, partition)] = offset
    return out


def _java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (how Spark's Kafka source writes the average)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = decimal.Decimal(repr(float(value))).normalize().as_tuple()
    mantissa = f"{digits[0]}." + ("".join(map(str, digits[1:])) or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(digits) - 1 + exponent}"


def offsets_behind_latest(end_offset: str | Mapping | None, latest_offset: str | Mapping | None) -> dict[str, str]:
    """Spark's Kafka source's metrics for a batch that ended at ``end_offset`` when the latest offsets were
    ``latest_offset`` (both in the Kafka layout, as JSON or parsed): for each partition of the latest offsets
    that the batch read, latest minus end; min, max and average, as strings. Empty when either is missing."""
    end, latest = _partition_offsets(end_offset), _partition_offsets(latest_offset)
    if end is None or latest is None:
        return {}
    behind = [offset - end[tp] for tp, offset in latest.items() if tp in end]
    if not behind:
        return {}
    return {MIN_OFFSETS_BEHIND_LATEST: str(min(behind)), MAX_OFFSETS_BEHIND_LATEST: str(max(behind)),
            AVG_OFFSETS_BEHIND_LATEST: _java_double(sum(behind) / len(behind))}


def _field(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def source_metrics(source: Any) -> dict[str, str]:
    """The metrics of one source of a query's progress (an item of ``lastProgress["sources"]`` or a
    ``SourceProgress``): those the source reported, else, for a Python data source's stream whose offsets
    are in the Kafka layout (``seglog``), the offsets behind latest computed from its progress."""
    reported = dict(_field(source, "metrics") or {})
    if reported or not str(_field(source, "description") or "").startswith(_PYTHON_STREAM):
        return reported
    return offsets_behind_latest(_field(source, "endOffset"), _field(source, "latestOffset"))


@dataclass(frozen=True)
class BatchLag:
    """One micro-batch's metrics: ``sources[i]`` stands for ``lastProgress["sources"][i]["metrics"]``."""

    query_id: str
    run_id: str
    name: str | None
    batch_id: int
    sources: tuple[dict[str, str], ...]


class LagListener(StreamingQueryListener):
    """Computes, for each micro-batch of every query of the session, the offsets its seglog sources are
    behind the latest, as Spark's Kafka source reports them, and logs them (INFO, this module's logger).

    ``last[query_id]`` is the query's last batch (``BatchLag``), kept after the query ends."""

    def __init__(self):
        self.last: dict[str, BatchLag] = {}
        self._changed = threading.Condition()

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        lag = BatchLag(str(progress.id), str(progress.runId), progress.name, progress.batchId,
                       tuple(source_metrics(source) for source in progress.sources))
        for i, metrics in enumerate(lag.sources):
            if MAX_OFFSETS_BEHIND_LATEST in metrics:
                log.info("query %s batch %d source %d: offsets behind latest min %s, max %s, avg %s",
                         lag.name or lag.query_id, lag.batch_id, i, metrics[MIN_OFFSETS_BEHIND_LATEST],
                         metrics[MAX_OFFSETS_BEHIND_LATEST], metrics[AVG_OFFSETS_BEHIND_LATEST])
        with self._changed:
            self.last[lag.query_id] = lag
            self._changed.notify_all()

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def wait_for(self, query_id: str, batch_id: int, timeout_s: float) -> BatchLag:
        """The query's last batch once it is ``batch_id`` or later: progress events reach listeners
        asynchronously, after ``awaitTermination`` may have returned. Raises TimeoutError after
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                lag = self.last.get(str(query_id))
                if lag is not None and lag.batch_id >= batch_id:
                    return lag
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"query {query_id}: no progress of batch {batch_id} within {timeout_s}s "
                                       f"(last seen: {None if lag is None else lag.batch_id})")
                self._changed.wait(remaining)


def attach_lag_listener(spark) -> LagListener:
    """A ``LagListener`` added to ``spark``'s streaming queries (``spark.streams.addListener``)."""
    listener = LagListener()
    spark.streams.addListener(listener)
    return listener
