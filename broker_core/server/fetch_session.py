"""Incremental fetch sessions (KIP-227): the session cache and the context of each fetch (Kafka's FetchSession).

A client fetching many partitions sends them all once, in a *full* fetch (epoch 0); the broker caches them in a
session and answers with its id. From then on the client sends *incremental* fetches (the session id and the
next epoch) naming only the partitions whose fetch offset or max bytes changed, plus the ones to forget, and the
broker answers only the partitions that have records or whose high watermark, log start offset, last stable
offset, error, preferred read replica or diverging epoch changed since it last told the client.

``FetchManager.new_context`` turns a request's session id and epoch into one of four contexts:

- sessionless (id 0, epoch -1; or closing session N with epoch -1): every partition, session id 0 in the answer;
- full (epoch 0; closes session N first when it names one): every partition, and a new session when the cache
  has room (``max.incremental.fetch.session.cache.slots``; 0 keeps none) or can evict one;
- incremental (id N, epoch = the session's next): the session's partitions after the request's changes;
- an error (``FETCH_SESSION_ID_NOT_FOUND``, ``INVALID_FETCH_SESSION_EPOCH``, ``FETCH_SESSION_TOPIC_ID_ERROR``),
  answered with no partitions.

The caller reads ``context.partitions()`` and hands the per-partition outcome to
``context.update_and_generate_response``, which says which partitions go into the response; a fetch parked in
the purgatory answers through the same context later. No sockets and no wire dicts: time is the injected clock.
"""

from __future__ import annotations

import random
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from format.layout import TopicPartition

from ..clock import SYSTEM_CLOCK, Clock

__all__ = [
    "FETCH_SESSION_ID_NOT_FOUND", "FETCH_SESSION_TOPIC_ID_ERROR", "FINAL_EPOCH", "INITIAL_EPOCH",
    "INVALID_FETCH_SESSION_EPOCH", "INVALID_SESSION_ID", "TOPIC_ID_MIN_VERSION", "CachedPartition", "FetchContext",
    "FetchManager", "FetchMetadata", "FetchSession", "FetchSessionCache", "FetchSessionCacheStats",
    "FullFetchContext", "IncrementalFetchContext", "PartitionData", "PartitionResponse", "SessionErrorContext",
    "SessionResponse", "SessionlessFetchContext", "next_epoch",
]

NONE = 0
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
FETCH_SESSION_TOPIC_ID_ERROR = 106

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_INT_MAX = 0x7FFFFFFF
#: Fetch names topics by id from this version on (KIP-516); a session keeps the way it was created.
TOPIC_ID_MIN_VERSION = 13


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: -1 stays -1, the largest int32 wraps to 1 (0 only ever starts a session)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _INT_MAX else epoch + 1


@dataclass(frozen=True)
class FetchMetadata:
    """A request's session id and epoch (Kafka's FetchMetadata)."""

    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        """Epoch 0 (open a session) or -1 (fetch without one): the request names every partition it wants."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(frozen=True)
class PartitionData:
    """What a fetch asks of one partition (Kafka's FetchRequest.PartitionData)."""

    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


@dataclass(frozen=True)
class PartitionResponse:
    """What a session compares of one partition's answer to decide whether to send it."""

    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    preferred_read_replica: int = -1
    has_records: bool = False
    diverging_epoch: bool = False


@dataclass(frozen=True)
class SessionResponse:
    """The response-wide session fields and, per partition handed in, whether it goes into the response."""

    error_code: int
    session_id: int
    included: tuple[bool, ...]


@dataclass
class CachedPartition:
    """One partition of a session: the request it last made and what the client was last told about it."""

    topic_partition: TopicPartition
    #: The fetch offset, max bytes, the fetcher's log start offset and epochs last asked for.
    request: PartitionData
    high_watermark: int = -1
    #: The partition's log start offset on this broker (``request.log_start_offset`` is the fetcher's own).
    local_log_start_offset: int = -1
    last_stable_offset: int = -1

    @property
    def fetch_offset(self) -> int:
        return self.request.fetch_offset

    def maybe_update_response(self, response: PartitionResponse, update: bool) -> bool:
        """Whether the client must hear about this partition (Kafka's maybeUpdateResponseData); with ``update``,
        what it is told becomes what the session remembers."""
        must_respond = response.has_records or response.preferred_read_replica >= 0 or response.diverging_epoch
        if self.high_watermark != response.high_watermark:
            must_respond = True
            if update:
                self.high_watermark = response.high_watermark
        if self.local_log_start_offset != response.log_start_offset:
            must_respond = True
            if update:
                self.local_log_start_offset = response.log_start_offset
        if self.last_stable_offset != response.last_stable_offset:
            must_respond = True
            if update:
                self.last_stable_offset = response.last_stable_offset
        if response.error_code != NONE:
            # Forgetting the high watermark makes the partition go out again once the error is gone.
            must_respond = True
            if update:
                self.high_watermark = -1
        return must_respond


@dataclass
class FetchSession:
    """One session: its partitions in the order they are read (answered ones move to the back, so a partition
    left out by a full response's size limit comes first next time), its epoch and when it was last used."""

    id: int
    privileged: bool
    partitions: OrderedDict[TopicPartition, CachedPartition]
    creation_ms: int
    last_used_ms: int
    epoch: int
    uses_topic_ids: bool = False
    #: The size the cache last accounted for; -1 while the session is not in the cache.
    cached_size: int = -1
    #: Whether a new session may evict this one, as of the last ``touch`` (Kafka's two evictable trees).
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False

    def update(self, fetch_data: Iterable[tuple[TopicPartition, PartitionData]],
               to_forget: Iterable[TopicPartition]) -> tuple[list[TopicPartition], list[TopicPartition],
                                                            list[TopicPartition]]:
        """An incremental request's changes: partitions added, updated and removed."""
        added, updated, removed = [], [], []
        for tp, data in fetch_data:
            cached = self.partitions.get(tp)
            if cached is None:
                self.partitions[tp] = CachedPartition(tp, data)
                added.append(tp)
            else:
                cached.request = data
                updated.append(tp)
        for tp in to_forget:
            if self.partitions.pop(tp, None) is not None:
                removed.append(tp)
        return added, updated, removed

    def evictable_key(self) -> tuple[bool, int, int]:
        """Sessions compare by privilege, then size, then id: the smallest is evicted first."""
        return (self.privileged, self.cached_size, self.id)


@dataclass(frozen=True)
class FetchSessionCacheStats:
    """The cache's gauges and counters (Kafka's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached,
    IncrementalFetchSessionEvictionsPerSec as a count), plus the sessions created and incremental fetches served."""

    num_incremental_fetch_sessions: int
    num_incremental_fetch_partitions_cached: int
    incremental_fetch_session_evictions: int
    sessions_created: int
    incremental_fetches: int


class FetchSessionCache:
    """At most ``max_entries`` sessions (``max.incremental.fetch.session.cache.slots``).

    When full, a new session evicts, in this order: the least recently used session when unused for more than
    ``eviction_ms`` (``min.incremental.fetch.session.eviction.ms``); else the least valuable session that may be
    evicted — one created more than ``eviction_ms`` ago (privileged ones included only for a privileged
    newcomer, which may also evict any consumer session), when the newcomer is privileged and it is not, or
    has more partitions. One lock guards the cache and its sessions.
    """

    def __init__(self, max_entries: int, eviction_ms: int, *, rng: random.Random | None = None) -> None:
        if max_entries < 0:
            raise ValueError(f"max.incremental.fetch.session.cache.slots must be >= 0, got {max_entries}")
        if eviction_ms < 0:
            raise ValueError(f"min.incremental.fetch.session.eviction.ms must be >= 0, got {eviction_ms}")
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.lock = threading.RLock()
        self._rng = rng if rng is not None else random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self._num_partitions = 0
        self._evictions = 0
        self._created = 0
        self._incremental_fetches = 0

    def get(self, session_id: int) -> FetchSession | None:
        with self.lock:
            return self._sessions.get(session_id)

    def __len__(self) -> int:
        with self.lock:
            return len(self._sessions)

    def stats(self) -> FetchSessionCacheStats:
        with self.lock:
            return FetchSessionCacheStats(len(self._sessions), self._num_partitions, self._evictions, self._created,
                                          self._incremental_fetches)

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, _INT_MAX - 1)
            if session_id not in self._sessions:
                return session_id

    def maybe_create_session(self, now: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create_partitions: Callable[[], OrderedDict[TopicPartition, CachedPartition]]) -> int:
        """A new session's id, or ``INVALID_SESSION_ID`` when there is no room and nothing may be evicted."""
        with self.lock:
            if len(self._sessions) >= self.max_entries and not self.try_evict(privileged, size, now):
                return INVALID_SESSION_ID
            session = FetchSession(self._new_session_id(), privileged, create_partitions(), now, now,
                                   next_epoch(INITIAL_EPOCH), uses_topic_ids)
            self._sessions[session.id] = session
            self._created += 1
            self.touch(session, now)
            return session.id

    def try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Evict one session to make room for a new one of ``size`` partitions; whether one was."""
        with self.lock:
            if not self._sessions:
                return False
            least_recent = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
            if now - least_recent.last_used_ms > self.eviction_ms:
                self._evict(least_recent)
                return True
            candidates = [s for s in self._sessions.values()
                          if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
            if not candidates:
                return False
            cheapest = min(candidates, key=FetchSession.evictable_key)
            # The newcomer's id counts as 0: a session of equal privilege and size stays.
            if (privileged, size, 0) < cheapest.evictable_key():
                return False
            self._evict(cheapest)
            return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self._evictions += 1

    def remove(self, session_id: int) -> FetchSession | None:
        with self.lock:
            session = self._sessions.pop(session_id, None)
            if session is not None:
                self._num_partitions -= session.cached_size
                session.cached_size = -1
            return session

    def touch(self, session: FetchSession, now: int) -> None:
        """The session was used at ``now``: its size is accounted again and its evictability decided anew."""
        with self.lock:
            session.last_used_ms = now
            if session.cached_size != -1:
                self._num_partitions -= session.cached_size
            session.cached_size = len(session.partitions)
            self._num_partitions += session.cached_size
            old = now - session.creation_ms > self.eviction_ms
            session.evictable_by_privileged = not session.privileged or old
            session.evictable_by_all = old

    def count_incremental_fetch(self) -> None:
        with self.lock:
            self._incremental_fetches += 1


class FetchContext:
    """How one fetch request relates to sessions: which partitions to read and what to answer."""

    #: A session error answered instead of any partition (``SessionErrorContext``), else NONE.
    error_code: int = NONE

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        """The partitions to read, in order, with what is asked of each."""
        raise NotImplementedError

    def update_and_generate_response(self, updates: Sequence[tuple[TopicPartition, PartitionResponse]]
                                     ) -> SessionResponse:
        """``updates``: the outcome of each partition of ``partitions()``, in that order."""
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    """A request whose session is unknown or out of step: answered with the error and no partitions."""

    def __init__(self, error_code: int, metadata: FetchMetadata) -> None:
        self.error_code = error_code
        self.metadata = metadata

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        return []

    def update_and_generate_response(self, updates: Sequence[tuple[TopicPartition, PartitionResponse]]
                                     ) -> SessionResponse:
        return SessionResponse(self.error_code, INVALID_SESSION_ID, (False,) * len(updates))


class SessionlessFetchContext(FetchContext):
    """A fetch outside any session: every partition, session id 0."""

    def __init__(self, fetch_data: Sequence[tuple[TopicPartition, PartitionData]]) -> None:
        self.fetch_data = list(fetch_data)

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        return self.fetch_data

    def update_and_generate_response(self, updates: Sequence[tuple[TopicPartition, PartitionResponse]]
                                     ) -> SessionResponse:
        return SessionResponse(NONE, INVALID_SESSION_ID, (True,) * len(updates))


class FullFetchContext(FetchContext):
    """A full fetch: every partition, and a new session holding them when the cache takes one."""

    def __init__(self, clock: Clock, cache: FetchSessionCache, fetch_data: Sequence[tuple[TopicPartition,
                                                                                          PartitionData]],
                 is_from_follower: bool, uses_topic_ids: bool) -> None:
        self.clock = clock
        self.cache = cache
        self.fetch_data = list(fetch_data)
        self.is_from_follower = is_from_follower
        self.uses_topic_ids = uses_topic_ids

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        return self.fetch_data

    def update_and_generate_response(self, updates: Sequence[tuple[TopicPartition, PartitionResponse]]
                                     ) -> SessionResponse:
        requested = dict(self.fetch_data)

        def create_partitions() -> OrderedDict[TopicPartition, CachedPartition]:
            cached: OrderedDict[TopicPartition, CachedPartition] = OrderedDict()
            for tp, response in updates:
                partition = CachedPartition(tp, requested[tp])
                partition.maybe_update_response(response, True)
                cached[tp] = partition
            return cached

        session_id = self.cache.maybe_create_session(self.clock.milliseconds(), self.is_from_follower,
                                                     len(updates), self.uses_topic_ids, create_partitions)
        return SessionResponse(NONE, session_id, (True,) * len(updates))


class IncrementalFetchContext(FetchContext):
    """An incremental fetch in session ``session``, whose epoch has already moved past the request's."""

    def __init__(self, cache: FetchSessionCache, metadata: FetchMetadata, session: FetchSession) -> None:
        self.cache = cache
        self.metadata = metadata
        self.session = session

    def partitions(self) -> list[tuple[TopicPartition, PartitionData]]:
        with self.cache.lock:
            return [(tp, cached.request) for tp, cached in self.session.partitions.items()]

    def update_and_generate_response(self, updates: Sequence[tuple[TopicPartition, PartitionResponse]]
                                     ) -> SessionResponse:
        with self.cache.lock:
            if self.session.epoch != next_epoch(self.metadata.epoch):
                # Another request of this session (a duplicate, or one resent while this one waited) came between.
                return SessionResponse(INVALID_FETCH_SESSION_EPOCH, self.session.id, (False,) * len(updates))
            included = []
            for tp, response in updates:
                cached = self.session.partitions.get(tp)
                if cached is None:  # forgotten by a later request while this one waited
                    included.append(False)
                    continue
                must_respond = cached.maybe_update_response(response, True)
                if must_respond:
                    self.session.partitions.move_to_end(tp)
                included.append(must_respond)
            return SessionResponse(NONE, self.session.id, tuple(included))


class FetchManager:
    """Gives each fetch request its context (Kafka's FetchManager.newContext)."""

    def __init__(self, cache: FetchSessionCache, clock: Clock = SYSTEM_CLOCK) -> None:
        self.cache = cache
        self.clock = clock

    def new_context(self, version: int, metadata: FetchMetadata,
                    fetch_data: Sequence[tuple[TopicPartition, PartitionData]], to_forget: Sequence[TopicPartition],
                    is_from_follower: bool) -> FetchContext:
        uses_topic_ids = version >= TOPIC_ID_MIN_VERSION
        if metadata.is_full:
            if metadata.session_id != INVALID_SESSION_ID:
                # A full request closes the session it names.
                self.cache.remove(metadata.session_id)
            if metadata.epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(self.clock, self.cache, fetch_data, is_from_follower, uses_topic_ids)
        with self.cache.lock:
            session = self.cache.get(metadata.session_id)
            if session is None:
                return SessionErrorContext(FETCH_SESSION_ID_NOT_FOUND, metadata)
            if session.epoch != metadata.epoch:
                return SessionErrorContext(INVALID_FETCH_SESSION_EPOCH, metadata)
            if session.uses_topic_ids != uses_topic_ids:
                return SessionErrorContext(FETCH_SESSION_TOPIC_ID_ERROR, metadata)
            session.update(fetch_data, to_forget)
            if not session.partitions:
                # Nothing left to fetch in it: the session closes and this request is answered without one.
                self.cache.remove(session.id)
                return SessionlessFetchContext(fetch_data)
            self.cache.touch(session, self.clock.milliseconds())
            session.epoch = next_epoch(session.epoch)
            self.cache.count_incremental_fetch()
            return IncrementalFetchContext(self.cache, metadata, session)
