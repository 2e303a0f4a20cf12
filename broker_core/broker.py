"""The embedded broker: topics, produce, fetch and offsets over a log directory.

``Broker`` is what the socket server serves and what tests, tools and Spark
use in-process. It owns a LogManager and the topic metadata; it partitions
records as Kafka's Java producer does (murmur2 of the key; sticky for null
keys) and builds the batches itself, so embedded producers write exactly what a
Kafka client would send.

``Broker(log_dirs, read_only=True)`` reads a log dir without owning it: no
lock, nothing created or written, no recovery that changes a file — beside a
running ``seglog broker`` or on a read-only filesystem. It sees the valid
prefix of each partition (``unreadable()`` says what it could not read), takes
in what the owner appends as it is asked for offsets and fetches, and refuses
every write with ``LogDirReadOnlyError``.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from format import layout
from format.compression import CompressionType
from format.errors import InvalidTopicError as FormatInvalidTopicError
from format.fs import filesystem_for
from format.layout import TopicPartition
from format.control import ControlRecordType
from format.record import Record, SimpleRecord
from format.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, build_batch, iter_batches
from format.txn_index import AbortedTxn

from . import group_offsets
from .clock import SYSTEM_CLOCK, Clock
from .config import BrokerConfig, LogConfig
from .coordinator.group.offset_and_metadata import OffsetAndMetadata
from .errors import (InvalidConfigurationError, InvalidPartitionsError, InvalidReplicationFactorError,
                     InvalidRequestError, InvalidTopicError, KafkaStorageError, LogDirReadOnlyError,
                     PolicyViolationError, TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from .log.compaction_leases import CompactionLeases
from .log.log import (CONSUMER_REPLICA_ID, EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP,
                      LATEST_TIMESTAMP, MAX_TIMESTAMP, FetchIsolation, IsolationLevel, Log, LogAppendInfo)
from .log.log_loader import UnreadableBytes
from .log.log_manager import LogManager
from .log.producer_state_manager import ActiveProducer
from .log.remote import RemoteLogManager, RemoteStorageManager, write_remote_tier_file
from .log.remote.remote_index_cache import DIR_NAME as REMOTE_INDEX_CACHE_DIR
from .log.remote.remote_index_cache import RemoteIndexCache
from .log.remote.remote_log_reader import (RemoteLogReader, collect_aborted_transactions, fetch_offset_for_timestamp,
                                           log_start_offset_of, read_log, remote_storage_of, tier_of)
from .log.topic_store import PendingChange, TopicMetadata, TopicStore, new_topic_id
from .partitioner import StickyPartitioner, assign_partitions
from .produced_records import RecordMetadata, as_record
from .producer import DEFAULT_TRANSACTION_TIMEOUT_MS, Producer, Transaction
from .server.producer_id_manager import ProducerIdManager

if TYPE_CHECKING:
    from .coordinator.group.group_coordinator import GroupCoordinator
    from .coordinator.transaction import (ListTransactionsRequest, TransactionCoordinator, TransactionDescription,
                                          TransactionListing)

log = logging.getLogger(__name__)

DEFAULT_FETCH_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    # None: unknown (a remote broker tells sizes through DescribeLogDirs, and no Kafka API tells segments).
    size_bytes: int | None
    segments: int | None
    # The assigned replicas and the in-sync ones (the broker itself, on a single broker).
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    # With a remote tier (None without one): the first offset on local disk (``size_bytes`` and ``segments``
    # are local disk's), and the remote tier's first offset (-1 when it holds none), bytes and segments (None
    # while the tier cannot be listed).
    local_log_start_offset: int | None = None
    remote_log_start_offset: int | None = None
    remote_size_bytes: int | None = None
    remote_segments: int | None = None

    @property
    def is_under_replicated(self) -> bool:
        """Fewer replicas in sync than assigned (a description without replica lists is its leader alone)."""
        return len(self.isr or (self.leader,)) < len(self.replicas or (self.leader,))


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionDescription]
    config: dict[str, str] = field(default_factory=dict)  # overrides only

    @property
    def partition_count(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class FetchResult:
    topic: str
    partition: int
    records: bytes  # complete v2 batches, as stored
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    # read_committed: the aborted transactions overlapping ``records``; None for read_uncommitted.
    aborted_transactions: tuple[AbortedTxn, ...] | None = None

    def decoded(self, from_offset: int | None = None) -> list[Record]:
        """The records, without control records and, read_committed, without those of aborted
        transactions (found as Kafka's consumer finds them, from ``aborted_transactions``)."""
        pending = sorted(self.aborted_transactions or (), key=lambda t: t.first_offset)
        aborting: set[int] = set()
        out = []
        for batch in iter_batches(self.records):
            h = batch.header
            while pending and pending[0].first_offset <= h.last_offset:
                aborting.add(pending.pop(0).producer_id)
            if h.is_control:
                marker = batch.end_txn_marker()
                if marker is not None and marker.control_type == ControlRecordType.ABORT:
                    aborting.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in aborting:
                continue
            out.extend(r for r in batch.records() if from_offset is None or r.offset >= from_offset)
        return out


@dataclass(frozen=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


_SPEC = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max_timestamp": MAX_TIMESTAMP,
         "earliest_local": EARLIEST_LOCAL_TIMESTAMP, "latest_tiered": LATEST_TIERED_TIMESTAMP}
_ISOLATION = {"read_uncommitted": IsolationLevel.READ_UNCOMMITTED, "read_committed": IsolationLevel.READ_COMMITTED}


def isolation_level_of(level: str | int) -> IsolationLevel:
    """Kafka's ``isolation.level`` spelling or its wire value."""
    if isinstance(level, str):
        if level not in _ISOLATION:
            raise InvalidRequestError(f"unknown isolation level {level!r}: use read_uncommitted or read_committed")
        return _ISOLATION[level]
    try:
        return IsolationLevel(level)
    except ValueError:
        raise InvalidRequestError(f"unknown isolation level {level}: use 0 (read_uncommitted) or "
                                  f"1 (read_committed)") from None


class Broker:
    """An in-process broker over ``log_dirs``; use as a context manager."""

    def __init__(self, log_dirs: str | Sequence[str], config: Mapping[str, object] | BrokerConfig | None = None,
                 *, clock: Clock = SYSTEM_CLOCK, background: bool = True, read_only: bool = False,
                 sole_replica: bool = True):
        props = dict(config) if isinstance(config, Mapping) else {}
        dirs = [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)
        if isinstance(config, BrokerConfig):
            self.config = config
        else:
            props["log.dirs"] = ",".join(str(d) for d in dirs)
            self.config = BrokerConfig.from_props(props)
        self.clock = clock
        self.node_id = self.config.node_id
        self.read_only = read_only
        self._lock = threading.RLock()
        self._partitioner = StickyPartitioner()
        # ``sole_replica=False`` in cluster mode: a log's high watermark follows its in-sync replicas.
        self.log_manager = LogManager(self.config, clock=clock, log_config_for=self.log_config, read_only=read_only,
                                      sole_replica=sole_replica)
        try:
            self.topics = TopicStore(self.log_manager.log_dirs)
            if not read_only:
                self._check_remote_storage_system()
            self.log_manager.load_logs()
            if not read_only:
                self._settle_pending_changes()
            self._create_missing_partitions()
        except BaseException:
            self.log_manager.shutdown()  # writes only what was loaded
            raise
        #: The remote tier's reader when the broker config names a tier (fetches below the local log start).
        self.remote_log_reader = self._remote_log_reader()
        # Outside compaction jobs lease partitions here; lapsed leases expire on the log
        # manager's scheduler, by the broker's clock.
        self.compaction_leases = CompactionLeases(self.log_manager, clock)
        self.compaction_leases.schedule_expiration(self.log_manager.scheduler)
        #: Tiered storage (``remote.log.storage.system.enable``): copies rolled segments to the remote tier.
        self.remote_log_manager: RemoteLogManager | None = None
        if self.config.remote_log_storage_system_enable and not read_only:
            self.remote_log_manager = self._start_remote_log_manager()
        if background and not read_only:
            self.log_manager.start_background()
        #: The server's group coordinator when one runs over this broker (offsets in transactions go to it).
        self.group_coordinator: GroupCoordinator | None = None
        self._producer_ids: ProducerIdManager | None = None
        self._transaction_coordinator: TransactionCoordinator | None = None
        #: Cluster mode: how the coordinators' writes (``produce_batches(from_client=False)``, transaction
        #: markers) reach a replicated partition — ``leader_append(tp, append)`` runs ``append(log,
        #: leader_epoch)`` as the partition's leader and returns once the in-sync replicas have the records;
        #: NOT_LEADER_OR_FOLLOWER on a broker that does not lead it.
        self.leader_append: Callable[[TopicPartition, Callable[[Log, int | None], LogAppendInfo]],
                                     LogAppendInfo] | None = None
        self._closed = False

    def _check_remote_storage_system(self) -> None:
        """Refuse to start without ``remote.log.storage.system.enable`` over a topic with remote storage, in
        Kafka's words (LogConfig.validateRemoteStorageOnlyIfSystemEnabled for configs read from the store)."""
        if self.config.remote_log_storage_system_enable:
            return
        tiered = sorted(m.name for m in self.topics.all()
                        if str(m.config.get("remote.storage.enable", "false")).strip().lower() == "true")
        if tiered:
            raise InvalidConfigurationError(
                "You have to delete all topics with the property remote.storage.enable=true before disabling "
                f"tiered storage cluster-wide (remote.log.storage.system.enable=false; topics with it in "
                f"{', '.join(self.log_manager.log_dirs)}: {', '.join(tiered)})",
                config_name="remote.log.storage.system.enable", value=False)

    def _remote_log_reader(self) -> RemoteLogReader | None:
        storage = remote_storage_of(self.config)
        if storage is None:
            return None
        # A read-only broker writes nothing: it fetches the indexes it needs each time.
        cache = None if self.read_only else RemoteIndexCache(
            os.path.join(self.log_manager.log_dirs[0], REMOTE_INDEX_CACHE_DIR),
            self.config.remote_log_index_file_cache_total_size_bytes)
        return RemoteLogReader(storage, self._topic_id, cache, self.clock,
                               self.config.remote_log_manager_task_retry_backoff_max_ms)

    def _topic_id(self, topic: str) -> str | None:
        meta = self.topics.get(topic)
        return None if meta is None else meta.topic_id

    def _start_remote_log_manager(self) -> RemoteLogManager:
        url = self.config.remote_storage_url
        for log_dir in self.log_manager.log_dirs:
            write_remote_tier_file(log_dir, url)
        fs, _ = filesystem_for(url, self.config.remote_storage_options)
        # In a cluster nothing is tiered until the replica manager says which partitions this broker leads.
        sole = self.log_manager.sole_replica
        manager = RemoteLogManager(self.config, self.log_manager.all_logs, RemoteStorageManager(fs, url),
                                   clock=self.clock, is_leader=lambda tp: sole)
        manager.start_up(self.log_manager.scheduler)
        return manager

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            if self.remote_log_manager is not None:
                self.remote_log_manager.close()
            if self._transaction_coordinator is not None:
                self._transaction_coordinator.shutdown()
            self.log_manager.shutdown()

    def tick(self) -> None:
        """Run the background work that is due (for brokers built with ``background=False``)."""
        self._check_writable("run background work")
        self.log_manager.tick()

    # --- read-only -----------------------------------------------------------

    def _check_writable(self, action: str) -> None:
        if self.read_only:
            raise LogDirReadOnlyError(f"cannot {action}: log dir {', '.join(self.log_manager.log_dirs)} is open "
                                      f"read-only")

    def _readable_log(self, topic: str, partition: int, offset: int | None = None,
                      level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> Log:
        """The partition's log; a read-only view first takes in what the owner wrote and committed
        since — for a fetch at ``offset`` only once the view holds nothing there yet for ``level``
        (past the high watermark, or the last stable offset read_committed), since taking it in
        lists the partition's directory, which costs more than a fetch that catches up."""
        lg = self.log_manager.log_or_raise(TopicPartition(topic, partition))
        if self.read_only and (offset is None or offset >= lg.high_watermark or (
                level == IsolationLevel.READ_COMMITTED and offset >= lg.last_stable_offset)):
            lg.refresh()
            self.log_manager.refresh_high_watermarks()  # of a replicated log dir: what its owner checkpointed
        return lg

    def unreadable(self) -> dict[TopicPartition, UnreadableBytes]:
        """Read-only: what each partition's view could not read (it ends before that)."""
        return self.log_manager.unreadable()

    # --- topics -----------------------------------------------------------

    def log_config(self, topic: str) -> LogConfig:
        defaults = self.config.log_config_defaults()
        if self.read_only:
            # A reader takes the topics as their owner configured them; the owner checked them.
            defaults = replace(defaults, remote_log_storage_system_enable=True)
        meta = self.topics.get(topic) if hasattr(self, "topics") else None
        return defaults.with_overrides(meta.config) if meta and meta.config else defaults

    def _create_missing_partitions(self) -> None:
        """Create the directories of committed partitions that have none (a log dir replaced,
        emptied by hand) — unless the broker could not hold them: an earlier version saved a
        topic before creating its partitions, so a creation that failed left such a topic,
        which is then only reported, for ``delete_topic`` to remove. Read-only, they are
        only reported."""
        held = self.partition_count()
        for meta in self.topics.all():
            missing = [TopicPartition(meta.name, p) for p in range(meta.partitions)
                       if self.log_manager.get_log(TopicPartition(meta.name, p)) is None]
            if not missing:
                continue
            if self.read_only:
                log.warning("topic %r: %d of its %d partitions have no directory (the log dir is open "
                            "read-only: nothing is created)", meta.name, len(missing), meta.partitions)
                continue
            try:
                if held > self.config.max_partitions:
                    raise PolicyViolationError(f"the broker's topics have {held} partitions, more than "
                                               f"max.partitions={self.config.max_partitions}")
                self.log_manager.check_room_for(len(missing), f"topic {meta.name!r}")
                self.log_manager.create_logs(missing, self.log_config(meta.name), meta.topic_id)
            except (PolicyViolationError, KafkaStorageError) as exc:
                log.error("topic %r: %d of its %d partitions have no directory and are not created: %s; "
                          "delete the topic or raise the limit", meta.name, len(missing), meta.partitions, exc)

    def _meta(self, topic: str) -> TopicMetadata:
        meta = self.topics.get(topic)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        return meta

    def create_topic(self, name: str, partitions: int | None = None,
                     config: Mapping[str, object] | None = None, *,
                     replication_factor: int | None = None) -> TopicDescription:
        """Create a topic, all its partitions or none: the creation is checked against
        ``max.partitions``, the descriptors and the log dirs' room first, and a creation
        that fails (or is interrupted) half-way is rolled back (at the next open). One broker holds
        one replica: a ``replication_factor`` above 1 is INVALID_REPLICATION_FACTOR."""
        if replication_factor not in (None, 1):
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target replication factor "
                f"of {replication_factor} cannot be reached because only 1 broker(s) are registered.")
        return self.create_replica_topic(name, partitions, config)

    def create_replica_topic(self, name: str, partitions: int | None = None,
                             config: Mapping[str, object] | None = None, topic_id: str | None = None,
                             ) -> TopicDescription:
        """``create_topic`` for this broker's replicas of a cluster's topic, under the cluster's
        ``topic_id`` (a new id when None)."""
        self._check_writable(f"create topic {name!r}")
        try:
            layout.validate_topic_name(name)
        except FormatInvalidTopicError as exc:
            raise InvalidTopicError(str(exc)) from None
        partitions = self.config.num_partitions if partitions is None else partitions
        if partitions < 1:
            raise InvalidPartitionsError(f"topic {name!r}: the number of partitions must be at least 1, "
                                         f"not {partitions}")
        overrides = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (config or {}).items()}
        self.config.log_config_defaults().with_overrides(overrides)  # validates
        with self._lock:
            if self.topics.get(name) is not None:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            for other in self.topics.all():
                if layout.has_collision(name, other.name):
                    raise InvalidTopicError(f"topic {name!r} collides with existing topic {other.name!r}: "
                                            f"'.' and '_' are interchangeable in metric names")
            self.check_new_partitions(f"topic {name!r}", partitions)
            self._add_partitions(TopicMetadata(name, topic_id or new_topic_id(), partitions, overrides), 0)
        return self.describe_topic(name)

    def create_partitions(self, name: str, total: int) -> TopicDescription:
        self._check_writable(f"add partitions to topic {name!r}")
        with self._lock:
            meta = self._meta(name)
            if total <= meta.partitions:
                raise InvalidPartitionsError(f"topic {name!r} has {meta.partitions} partitions; the new count "
                                             f"{total} must be larger")
            self.check_new_partitions(f"topic {name!r}", total - meta.partitions)
            self._add_partitions(replace(meta, partitions=total), meta.partitions)
        return self.describe_topic(name)

    def partition_count(self) -> int:
        """Partitions the broker holds, those being created included."""
        return (sum(t.partitions for t in self.topics.all())
                + sum(p.topic.partitions - p.committed_partitions for p in self.topics.pending()
                      if p.action == PendingChange.CREATE))

    def check_new_partitions(self, what: str, added: int) -> None:
        """Refuse ``added`` new partitions beyond ``max.partitions`` (POLICY_VIOLATION) or beyond
        what the descriptors and log dirs hold (KAFKA_STORAGE_ERROR), before anything is written."""
        held = self.partition_count()
        if held + added > self.config.max_partitions:
            raise PolicyViolationError(
                f"{what}: {added} new partitions would make {held + added} on this broker, more than "
                f"max.partitions={self.config.max_partitions} (it holds {held})")
        self.log_manager.check_room_for(added, what)

    def _add_partitions(self, meta: TopicMetadata, committed: int) -> None:
        """Create partitions ``committed..meta.partitions-1``: recorded as pending first, committed last."""
        change = PendingChange(PendingChange.CREATE, meta, committed)
        self.topics.begin(change)
        tps = [TopicPartition(meta.name, p) for p in range(committed, meta.partitions)]
        try:
            # The topic's own settings: the store answers log_config() for committed topics only.
            self.log_manager.create_logs(tps, self.config.log_config_defaults().with_overrides(meta.config),
                                         meta.topic_id)
        except BaseException as exc:
            self._roll_back_creation(change)
            if isinstance(exc, OSError):
                raise KafkaStorageError(f"topic {meta.name!r}: creating partitions {committed}..{meta.partitions - 1} "
                                        f"failed ({exc}); nothing was created") from exc
            raise
        self.topics.commit(meta.name)

    def _roll_back_creation(self, change: PendingChange) -> None:
        for tp, _ in self._logs_of(change.topic.name, first_partition=change.committed_partitions):
            self.log_manager.delete_log(tp)
        self.topics.abandon(change.topic.name)

    def _logs_of(self, topic: str, first_partition: int = 0) -> list[tuple[TopicPartition, Log]]:
        return sorted((tp, lg) for tp, lg in self.log_manager.all_logs().items()
                      if tp.topic == topic and tp.partition >= first_partition)

    def _settle_pending_changes(self) -> None:
        """Roll back a creation, finish a deletion, that the last run left half-way."""
        for change in self.topics.pending():
            name = change.topic.name
            if change.action == PendingChange.CREATE:
                log.warning("topic %r: rolling back the creation of partitions %d..%d, interrupted before it "
                            "completed", name, change.committed_partitions, change.topic.partitions - 1)
                self._roll_back_creation(change)
            else:
                log.warning("topic %r: finishing its deletion, interrupted before it completed", name)
                self._delete_logs(name)
                self.topics.commit(name)

    def delete_topic(self, name: str) -> None:
        """Delete a topic; recorded first, so a deletion that stops half-way finishes at the next open."""
        self._check_writable(f"delete topic {name!r}")
        with self._lock:
            meta = self._meta(name)
            self.topics.begin(PendingChange(PendingChange.DELETE, meta, meta.partitions))
            self._delete_logs(name)
            self.topics.commit(name)

    def _delete_logs(self, topic: str) -> None:
        for tp, _ in self._logs_of(topic):
            self.log_manager.delete_log(tp)

    def list_topics(self) -> list[str]:
        return [t.name for t in self.topics.all()]

    def describe_topic(self, name: str) -> TopicDescription:
        meta = self._meta(name)
        parts = []
        for p in range(meta.partitions):
            lg = self._readable_log(name, p)
            tiers = {}
            remote = tier_of(lg, self.remote_log_reader)
            if remote is not None:
                tiers = dict(local_log_start_offset=lg.local_log_start_offset)
                try:
                    listed = remote.segments(lg.topic_partition)
                except KafkaStorageError:
                    pass  # the tier cannot be listed (logged): what it holds is not known now
                else:
                    tiers.update(remote_log_start_offset=listed[0].start_offset if listed else -1,
                                 remote_size_bytes=sum(s.metadata.size_in_bytes for s in listed),
                                 remote_segments=len(listed))
            parts.append(PartitionDescription(p, self.node_id, log_start_offset_of(lg, remote), lg.log_end_offset,
                                              lg.high_watermark, lg.size, len(lg.segments), (self.node_id,),
                                              (self.node_id,), **tiers))
        return TopicDescription(name, meta.topic_id, parts, dict(meta.config))

    def alter_topic_config(self, name: str, set_configs: Mapping[str, object] | None = None,
                           delete_configs: Iterable[str] = ()) -> dict[str, str]:
        """Set and remove per-topic overrides; returns the topic's overrides afterwards."""
        self._check_writable(f"alter topic {name!r}")
        with self._lock:
            meta = self._meta(name)
            overrides = dict(meta.config)
            for key in delete_configs:
                overrides.pop(key, None)
            for key, value in (set_configs or {}).items():
                overrides[key] = str(value).lower() if isinstance(value, bool) else str(value)
            config = self.config.log_config_defaults().with_overrides(overrides)  # validates
            self.log_config(name).check_update(config)
            self.topics.update(name, config=overrides)
            self.log_manager.update_config(name, config)
            return overrides

    # --- produce -----------------------------------------------------------

    def partitions_for(self, topic: str) -> int:
        return self._meta(topic).partitions

    def produce(self, topic: str, records: Iterable[SimpleRecord | bytes | tuple], partition: int | None = None,
                compression: CompressionType | str = CompressionType.NONE, *, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                transactional: bool = False) -> list[RecordMetadata]:
        """Append records, partitioned like the Java producer; returns where each landed, in order.

        With ``producer_id`` (and its ``producer_epoch``, and the partition's next ``base_sequence``)
        the records form one idempotent batch, as an idempotent producer sends it: the batch goes to
        one partition (give ``partition``), is checked against the partition's producer state, and a
        retry of it is answered with the offsets of the first write. ``transactional`` marks it part of
        the producer's open transaction."""
        self._check_writable(f"produce to topic {topic!r}")
        items = [as_record(r) for r in records]
        if not items:
            return []
        codec = CompressionType.from_name(compression) if isinstance(compression, str) else compression
        count = self.partitions_for(topic)
        now = self.clock.milliseconds()
        if producer_id != NO_PRODUCER_ID and partition is None:
            raise InvalidRequestError(f"topic {topic!r}: an idempotent batch of producer {producer_id} needs a "
                                      f"partition (its sequence numbers are the partition's)")
        groups = assign_partitions(topic, ((r.key, len(r.value or b"")) for r in items), count, partition,
                                   self._partitioner)
        out: list[RecordMetadata | None] = [None] * len(items)
        for p, indexes in groups.items():
            batch_records = [items[i] for i in indexes]
            info = self.produce_batches(topic, p, build_batch(
                batch_records, compression=codec, default_timestamp=now, producer_id=producer_id,
                producer_epoch=producer_epoch, base_sequence=base_sequence, is_transactional=transactional))
            for n, i in enumerate(indexes):
                r = items[i]
                ts = info.log_append_time if info.log_append_time >= 0 else (now if r.timestamp is None
                                                                              else r.timestamp)
                out[i] = RecordMetadata(topic, p, info.first_offset + n, ts)
        return out  # type: ignore[return-value]

    def produce_batches(self, topic: str, partition: int, records: bytes, *, from_client: bool = True) -> LogAppendInfo:
        """Append raw v2 batches, as a Produce request carries them (``from_client=False``: as a
        coordinator writes them, producer epochs checked but not sequences)."""
        self._check_writable(f"produce to topic {topic!r}")
        return self._append(TopicPartition(topic, partition),
                            lambda lg, epoch: lg.append(records, from_client=from_client, leader_epoch=epoch))

    def _append(self, tp: TopicPartition, append: Callable[[Log, int | None], LogAppendInfo]) -> LogAppendInfo:
        if self.leader_append is not None:
            return self.leader_append(tp, append)
        return append(self.log_manager.log_or_raise(tp), None)

    # --- producer ids, idempotent and transactional producers -----------------

    @property
    def producer_ids(self) -> ProducerIdManager:
        """The broker's producer ids (``producer-id-block`` in the first log dir), never handed out twice."""
        with self._lock:
            if self._producer_ids is None:
                self._check_writable("hand out producer ids")
                self._producer_ids = ProducerIdManager(self.log_manager.log_dirs[0])
            return self._producer_ids

    @producer_ids.setter
    def producer_ids(self, manager: ProducerIdManager) -> None:
        """Another source of producer ids (a cluster's, granted through etcd)."""
        with self._lock:
            self._producer_ids = manager

    @property
    def transaction_coordinator(self) -> TransactionCoordinator:
        """The transaction coordinator over this broker's ``__transaction_state``; an embedded broker
        starts it (and loads the topic) on first use, a server sets its own. Read-only, it is loaded
        from the files and only answers what it was asked to describe or list."""
        with self._lock:
            if self._transaction_coordinator is None:
                from .coordinator.transaction import TransactionCoordinator

                if self.read_only:
                    coordinator = TransactionCoordinator.reading(self)
                else:
                    coordinator = TransactionCoordinator.for_broker(self)
                    coordinator.startup()
                self._transaction_coordinator = coordinator
            return self._transaction_coordinator

    @transaction_coordinator.setter
    def transaction_coordinator(self, coordinator: TransactionCoordinator) -> None:
        with self._lock:
            self._transaction_coordinator = coordinator

    def producer(self, transactional_id: str | None = None,
                 transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> Producer:
        """An idempotent producer; with ``transactional_id`` a transactional one (fencing any earlier
        producer of that id and aborting its open transaction)."""
        return Producer(self, transactional_id, transaction_timeout_ms)

    def transaction(self, transactional_id: str,
                    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> Transaction:
        """One transaction as a ``with`` block: ``txn.produce(...)``, ``txn.send_offsets(group, {...})``;
        committed at the end of the block, aborted if it raises."""
        return Transaction(self.producer(transactional_id, transaction_timeout_ms))

    def find_transaction_coordinator(self, transactional_id: str) -> int:
        """The node id of the transaction coordinator of ``transactional_id``: this broker's."""
        return self.node_id

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """DescribeTransactions of one id: state, producer id and epoch, timeout, start and partitions;
        TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not hold."""
        (described,) = self.transaction_coordinator.describe_transactions([transactional_id])
        return described.checked()

    def list_transactions(self, request: ListTransactionsRequest | None = None) -> list[TransactionListing]:
        """ListTransactions: the transactional ids matching ``request``'s filters (all without one)."""
        from .coordinator.transaction import ListTransactionsRequest
        from .errors import error_for_code

        error, listings = self.transaction_coordinator.list_transactions(request or ListTransactionsRequest())
        if error:
            raise error_for_code(error)("listing transactions failed")
        return listings

    def describe_producers(self, topic: str, partition: int) -> list[ActiveProducer]:
        """DescribeProducers of one partition: each producer its state keeps — epoch, last sequence and
        timestamp, coordinator epoch, first offset of its open transaction — by producer id.
        Read-only, the state is rebuilt from the files as the owner left them."""
        return self._readable_log(topic, partition).active_producers()

    # --- fetch and offsets ---------------------------------------------------

    def append_control_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                              coordinator_epoch: int, commit: bool) -> LogAppendInfo:
        """End ``producer_id``'s transaction in the partition with a COMMIT or ABORT marker
        (``Log.append_control_marker``), as the transaction coordinator does."""
        self._check_writable(f"write a transaction marker to topic {topic!r}")
        return self._append(TopicPartition(topic, partition), lambda lg, epoch: lg.append_control_marker(
            producer_id, producer_epoch, coordinator_epoch, commit, leader_epoch=epoch))

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
              isolation_level: str | int = "read_uncommitted") -> FetchResult:
        """Batches from ``offset`` below the high watermark, as a consumer fetches; ``read_committed``
        stops at the last stable offset and lists the aborted transactions among them
        (``FetchResult.decoded`` leaves their records out)."""
        level = isolation_level_of(isolation_level)
        lg = self._readable_log(topic, partition, offset, level)
        info = read_log(lg, self.remote_log_reader, offset, max_bytes,
                        isolation=FetchIsolation.of(CONSUMER_REPLICA_ID, level))
        last_stable = lg.last_stable_offset
        aborted = None
        if level == IsolationLevel.READ_COMMITTED:
            batches = list(iter_batches(info.records))
            upper = batches[-1].header.next_offset if batches else offset
            aborted = tuple(collect_aborted_transactions(lg, self.remote_log_reader, offset, upper))
        return FetchResult(topic, partition, info.records, lg.high_watermark,
                           log_start_offset_of(lg, self.remote_log_reader), last_stable, aborted)

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation_level: str | int = "read_uncommitted") -> OffsetAndTimestamp | None:
        """``earliest`` (of either tier), ``earliest_local`` (on local disk), ``latest``, ``latest_tiered``
        (the last offset in the remote tier, -1 when none), ``max_timestamp`` or a timestamp in ms (first
        offset at or after it); ``latest`` is the last stable offset for ``read_committed``, and no answer
        lies past it."""
        if isinstance(spec, str):
            if spec not in _SPEC:
                raise InvalidRequestError(f"unknown offset spec {spec!r}: use earliest, earliest_local, latest, "
                                          f"latest_tiered, max_timestamp or a timestamp in milliseconds")
            spec = _SPEC[spec]
        level = isolation_level_of(isolation_level)
        lg = self._readable_log(topic, partition)
        found = fetch_offset_for_timestamp(lg, self.remote_log_reader, spec, level)
        if found is None:
            return None
        return OffsetAndTimestamp(found.offset, found.timestamp)

    # --- consumer group offsets (kept in __consumer_offsets by group_offsets) ---

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        self._check_writable(f"commit offsets of group {group_id!r}")
        group_offsets.commit_offsets(self, group_id, offsets, metadata)

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return group_offsets.committed_offsets(self, group_id)

    def reset_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Move the group to ``offsets``, each within its partition's log, as ``kafka-consumer-groups.sh
        --reset-offsets --execute`` does (the embedded broker runs no coordinator, so no member can object)."""
        self._check_writable(f"reset offsets of group {group_id!r}")
        group_offsets.reset_offsets(self, group_id, offsets)

    def list_groups(self) -> list[str]:
        return group_offsets.list_groups(self.log_manager.log_dirs)

    def describe_group(self, group_id: str) -> group_offsets.GroupDescription:
        """The group as its last stored generation left it, with offsets and lag."""
        return group_offsets.describe_consumer_group(self.log_manager.log_dirs, group_id)

    def delete_group(self, group_id: str) -> None:
        self._check_writable(f"delete group {group_id!r}")
        group_offsets.delete_group(self, group_id)
