"""Who a transactional sink write is: its ``transactional.id``, its group, and the batch it commits.

The exactly-once streaming sink writes each micro-batch in one Kafka
transaction and, in the same transaction, commits the micro-batch's id as the
offset of a consumer group named for the query. Both names derive from the
query's checkpoint location, so they are the same after a restart of the same
query and differ between queries:

* ``transactional.id`` = ``seglog-sink-<16 hex digits of SHA-256 of the
  checkpoint location>`` (or the option ``transactional.id`` /
  ``kafka.transactional.id``, as Kafka's producer spells it, when given);
* the group is named as the transactional id, and the batch id is committed as
  its offset of every topic-partition the micro-batch wrote to (Kafka keeps a
  group's offsets by topic-partition, of topics that exist), so the group's
  highest committed offset is the last micro-batch committed.

A restarted query's first transaction fences the crashed run's producer (a
new epoch of the same transactional id) and aborts its open transaction, so
data written before a crash but not committed never becomes visible to
``read_committed`` readers; the group's committed batch id then tells whether
a replayed micro-batch committed before the crash, in which case it is not
written again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from typing import Mapping

from format.layout import TopicPartition

from .options import SeglogOptionError

log = logging.getLogger(__name__)

_PREFIX = "seglog-sink-"
_TRANSACTIONAL_ID_OPTIONS = ("transactional.id", "kafka.transactional.id")
# A test hook: "<point>:<marker file>" makes the commit create the marker and wait at that point
# (before-write: the tasks' rows are staged, nothing is written and no broker is open;
# before-commit: the micro-batch's records are in the log, its transaction still open;
# after-commit: the transaction is committed, Spark not told yet; the Delta table sync's
# tables-dead-letters-committed and tables-table-committed), so a driver can be killed there.
PAUSE_ENV = "SEGLOG_SINK_PAUSE"
_PAUSE_S = 600.0


@dataclass(frozen=True)
class SinkTransaction:
    """One transactional write: the producer's transactional id, and the group and batch id it commits
    (``batch_id`` None: a batch write, atomic but with no batch to recognise again)."""

    transactional_id: str
    group_id: str
    batch_id: int | None = None

    def with_batch(self, batch_id: int) -> SinkTransaction:
        return SinkTransaction(self.transactional_id, self.group_id, batch_id)


def transactional_id_option(opts: Mapping[str, str]) -> str | None:
    """The ``transactional.id`` the options give (keys lower-cased), checked; None when absent."""
    for name in _TRANSACTIONAL_ID_OPTIONS:
        value = opts.get(name)
        if value is None:
            continue
        if not value.strip():
            raise SeglogOptionError(f"option {name} is empty")
        return value.strip()
    return None


def query_transaction(opts: Mapping[str, str]) -> SinkTransaction:
    """The transactional id and group of a streaming query, from its options (keys lower-cased)."""
    given = transactional_id_option(opts)
    if given is not None:
        return SinkTransaction(given, given)
    checkpoint = opts.get("checkpointlocation")
    if not checkpoint or not checkpoint.strip():
        raise SeglogOptionError("the exactly-once seglog sink names its transactions after the query: give the "
                                "option checkpointLocation (or transactional.id)")
    digest = hashlib.sha256(_normalized(checkpoint.strip()).encode()).hexdigest()[:16]
    name = f"{_PREFIX}{digest}"
    return SinkTransaction(name, name)


def _normalized(location: str) -> str:
    if "://" in location:
        scheme, rest = location.split("://", 1)
        if scheme.lower() != "file":
            return f"{scheme.lower()}://{rest.rstrip('/')}"
        location = rest
    return os.path.abspath(location)


def committed_batch_id(offsets: Mapping[TopicPartition, object]) -> int | None:
    """The last micro-batch the group committed, from its committed offsets; None: none yet."""
    return max((o.offset for o in offsets.values()), default=None)  # type: ignore[attr-defined]


def pause_at(point: str) -> None:
    """Wait at ``point`` when PAUSE_ENV names it, after creating its marker file."""
    setting = os.environ.get(PAUSE_ENV, "")
    name, _, marker = setting.partition(":")
    if name != point:
        return
    log.warning("seglog sink: pausing %s, as %s asks", point, PAUSE_ENV)
    if marker:
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
    time.sleep(_PAUSE_S)
