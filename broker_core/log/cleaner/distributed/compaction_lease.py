"""The job's right to swap segments into a log dir: its lock file, or a lease from the broker running on it.

``LockFileLease`` holds a log dir no broker runs on (its ``.lock``, as an
embedded broker holds it) and swaps the cleaned segments in itself;
``BrokerLease`` holds the partitions against the broker that owns the log dir,
through seglog's CompactionLease request, and has that broker swap them in
(ReplaceSegments). ``compaction_lease`` picks one.
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from format.fs import is_local
from format.layout import TopicPartition
from format.log_dir import LogDirectory

from ....client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from ....client.protocol_client import ProtocolClient
from ....errors import LogDirInUseError, error_for_code
from ....protocol.api_keys import SeglogApiKey
from ....protocol.messages.compaction import ACQUIRE, RELEASE, RENEW
from ...log_manager import LogDirLock
from . import CompactionError
from .segment_swap import swap_partition

if TYPE_CHECKING:
    from .clean_stage import GroupResult
    from .partition_plan import PartitionPlan

log = logging.getLogger(__name__)

DEFAULT_LEASE_MS = 60_000


class LockFileLease:
    """The right to swap segments in a log dir no broker is running on.

    A local log dir is leased by its lock file, as an embedded broker holds
    it: a running broker holding it makes the job fail at once (unless it is
    reached through ``BrokerLease``), and no broker can start (and remove the
    job's ``.cleaned`` files) while the job runs. A log dir on object storage
    has no running owner and is not locked. The driver swaps the cleaned
    segments in itself, by Kafka's renames, and settles what an interrupted
    swap left before planning.
    """

    settles_leftovers = True

    def __init__(self, fs, root: str):
        self.fs = fs
        self.root = root
        self._lock = None

    def __enter__(self) -> "LockFileLease":
        if is_local(self.fs):
            try:
                self._lock = LogDirLock(self.root)
            except LogDirInUseError as exc:
                raise CompactionError(f"cannot compact {self.root}: {exc}; a running broker owns it: pass its "
                                      f"listener as bootstrap (--bootstrap HOST:PORT) to compact through it, "
                                      f"or stop it") from None
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def swap(self, plan: PartitionPlan, results: Sequence[GroupResult]) -> list[str]:
        """Swap the partition's cleaned groups in; returns the replaced files to delete."""
        return swap_partition(self.fs, self.root, plan, results)


class BrokerLease:
    """The right to swap segments in a log dir a running broker owns, held against that broker
    through its admin API (seglog's CompactionLease request): the broker pauses its own cleaner on
    the leased partitions, the lease is renewed in the background every third of ``lease_ms``
    (a job that dies lets it lapse and the broker resumes cleaning), and the broker, which has the
    logs open, swaps the job's cleaned segments in (ReplaceSegments) and moves its checkpoint."""

    settles_leftovers = False  # the owner settles its own directory when it loads it

    def __init__(self, bootstrap: str, partitions: Sequence[TopicPartition], lease_ms: int = DEFAULT_LEASE_MS,
                 client_factory: Callable[[str], object] | None = None):
        self.bootstrap = bootstrap
        self.partitions = list(partitions)
        self.lease_ms = lease_ms
        self.lease_id = f"seglog-compaction-{uuid.uuid4()}"
        self._client_factory = client_factory or ProtocolClient
        self._client = None
        self._send_lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self.lost: str | None = None  # why the lease was lost, if it was

    def _send(self, api_key, body: dict) -> dict:
        with self._send_lock:
            return self._client.send(api_key, body, version=0)

    def _lease(self, operation: int, topics: list | None = None) -> dict:
        return self._send(SeglogApiKey.COMPACTION_LEASE, {"lease_id": self.lease_id, "operation": operation,
                                                          "lease_ms": self.lease_ms, "topics": topics or []})

    def __enter__(self) -> "BrokerLease":
        self._client = self._client_factory(self.bootstrap)
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        try:
            response = self._lease(ACQUIRE, [{"name": t, "partitions": sorted(ps)}
                                                   for t, ps in sorted(by_topic.items())])
            if response["error_code"]:
                refused = [f"{t['name']}-{p['partition_index']}: {_error_text(p)}" for t in response["topics"]
                           for p in t["partitions"] if p["error_code"]]
                raise CompactionError(f"the broker at {self.bootstrap} refused to lease "
                                      f"{'; '.join(refused) or _error_text(response)}")
        except BaseException:
            self._client.close()
            raise
        self._renewer = threading.Thread(target=self._renew, name="compaction-lease", daemon=True)
        self._renewer.start()
        return self

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_ms / 3000):
            try:
                response = self._lease(RENEW)
            except Exception as exc:  # a later renewal may still get through before the lease lapses
                log.warning("renewing compaction lease %s failed: %s", self.lease_id, exc)
                continue
            if response["error_code"]:
                self.lost = _error_text(response)
                return

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(10)
        try:
            if self.lost is None:
                self._lease(RELEASE)
        except Exception as error:  # the lease lapses on its own
            log.warning("releasing compaction lease %s failed: %s", self.lease_id, error)
        finally:
            self._client.close()

    def swap(self, plan: PartitionPlan, results: Sequence[GroupResult]) -> list[str]:
        """Ask the broker to swap the partition's cleaned groups in; it deletes the replaced files."""
        if self.lost is not None:
            raise CompactionError(f"{plan.topic_partition}: the lease on the broker at {self.bootstrap} was lost "
                                  f"({self.lost}); nothing was swapped in")
        segments = [{"base_offset": r.base_offset, "replaced_base_offsets": list(r.replaced)}
                    for r in sorted(results, key=lambda r: r.base_offset)]
        tp = plan.topic_partition
        response = self._send(SeglogApiKey.REPLACE_SEGMENTS, {"lease_id": self.lease_id, "topics": [
            {"name": tp.topic, "partitions": [{"partition_index": tp.partition,
                                               "cleaned_through_offset": plan.first_uncleanable_offset,
                                               "segments": segments}]}]})
        for topic in response["topics"]:
            for partition in topic["partitions"]:
                if partition["error_code"]:
                    raise CompactionError(f"{tp}: the broker at {self.bootstrap} did not swap the cleaned "
                                          f"segments in: {_error_text(partition)}")
        return []


def _error_text(entry: Mapping) -> str:
    name = getattr(error_for_code(entry["error_code"]), "name", str(entry["error_code"]))
    message = entry.get("error_message")
    return f"{name}" + (f" ({message})" if message else "")


def compaction_lease(directory: LogDirectory, topics: Sequence[str], bootstrap: str | None = None,
                     lease_ms: int = DEFAULT_LEASE_MS,
                     security: ClientSecurity = PLAINTEXT_CLIENT) -> LockFileLease | BrokerLease:
    """The lease the job holds on ``directory``: against the broker at
    ``bootstrap`` (reached with ``security``) when one runs on it, else the log dir's lock file."""
    if bootstrap is None:
        return LockFileLease(directory.fs, directory.root)
    present = directory.topics(include_internal=True)
    return BrokerLease(bootstrap, [TopicPartition(t, p) for t in topics for p in present.get(t, ())], lease_ms,
                       client_factory=functools.partial(ProtocolClient, security=security))
