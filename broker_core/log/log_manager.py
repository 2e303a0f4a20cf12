"""The logs of a broker across its log directories (Kafka's LogManager).

It owns the directories (a lock file in each), loads every partition's log at
start-up — in parallel, recovering what an unclean shutdown left — keeps the
recovery-point, log-start-offset and high-watermark (``replication-offset-checkpoint``,
every ``replica.high.watermark.checkpoint.interval.ms``) checkpoints, and runs the background work:
retention, time-based flushes, checkpointing and delayed file deletion; it also
starts the log cleaner's threads, and retention skips a log while it is cleaned. The
background work is a ``tick`` driven by an injected clock; a thread calls it
with the real clock, tests call it after moving a simulated one.

Once a dir's logs are loaded, the manager says in it whether its logs are replicas of replicated
partitions (``write_replication_marker``): readers of the files then stop at the checkpointed high
watermarks rather than at the log end. Read-only, it takes those high watermarks from the checkpoint
(``refresh_high_watermarks``).

Nothing in a log dir is written until its logs are loaded: checkpoints and the
clean-shutdown marker are written only from a state that was loaded, so a
failed open leaves the directory as it found it. Read-only (``read_only=True``)
it writes nothing at all: no lock, no directory created, no background work,
no checkpoint, no marker, no recovery that changes a file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from format import layout
from format.checkpoint import OffsetCheckpointFile, fsync_dir
from format.errors import CheckpointError
from format.layout import TopicPartition

from ..clock import SYSTEM_CLOCK, Clock
from ..config import BrokerConfig, LogConfig
from ..errors import KafkaStorageError, LogDirInUseError, LogDirNotFoundError, UnknownTopicOrPartitionError
from .log import Log, ProducerStateConfig
from .log_dir_capacity import check_room_for_partitions
from .log_dir_failure import LogDirFailureChannel
from .log_loader import UnreadableBytes
from .scheduler import Scheduler

log = logging.getLogger(__name__)


class LogDirLock:
    """An exclusive ``flock`` on ``<dir>/.lock``, as Kafka holds one per log dir.

    The broker holds one on each of its log dirs while it runs; the Spark compaction
    job takes one on a log dir no broker serves. A second holder is refused with
    ``LogDirInUseError``."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, layout.LOCK_FILE)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise LogDirInUseError(f"log directory {directory} is in use by another broker "
                                   f"(the lock on {self.path} is held)") from None

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def write_replication_marker(log_dir: str, replicated: bool) -> None:
    """Mark ``log_dir`` as holding replicas of replicated partitions (cluster mode), or unmark it (a single
    broker, whose every record is committed). Readers of the files (``format.log_dir``) stop at the high
    watermarks of ``replication-offset-checkpoint`` in a marked dir, at the log end in any other."""
    path = os.path.join(log_dir, layout.REPLICATED_MARKER_FILE)
    if replicated and not os.path.exists(path):
        with open(path, "wb") as f:
            os.fsync(f.fileno())
        fsync_dir(log_dir)
    elif not replicated and os.path.exists(path):
        os.remove(path)
        fsync_dir(log_dir)


class LogManager:
    def __init__(self, config: BrokerConfig, *, clock: Clock = SYSTEM_CLOCK,
                 log_config_for: Callable[[str], LogConfig] | None = None, read_only: bool = False,
                 sole_replica: bool = True):
        """``sole_replica``: every log is its partition's only replica (the single broker), so its high
        watermark is its log end; False keeps the checkpointed high watermarks for replication."""
        self.config = config
        self.clock = clock
        self.scheduler = Scheduler(clock)
        self.log_dirs = [os.path.abspath(d) for d in config.log_dirs]
        self._log_config_for = log_config_for or (lambda topic: config.log_config_defaults())
        self._logs: dict[TopicPartition, Log] = {}
        self._lock = threading.RLock()
        self._locks: list[LogDirLock] = []
        self._closed = False
        self.read_only = read_only
        self.sole_replica = sole_replica
        # Read-only: the log dirs a broker in cluster mode marked as holding replicas.
        self._replicated_dirs: set[str] = set()
        # The log dirs whose logs were all loaded: the only ones shutdown writes to.
        self._loaded_dirs: set[str] = set()
        self.dir_failures = LogDirFailureChannel()
        now = clock.milliseconds()
        self._last_retention_check = now
        self._last_recovery_checkpoint = now
        self._last_start_checkpoint = now
        self._last_high_watermark_checkpoint = now
        self._background: threading.Thread | None = None
        self._stop = threading.Event()
        self.producer_state_config = ProducerStateConfig(config.producer_id_expiration_ms,
                                                         config.producer_id_expiration_check_interval_ms)
        if read_only:
            for d in self.log_dirs:
                if not os.path.isdir(d):
                    raise LogDirNotFoundError(f"log directory {d} does not exist")
        else:
            try:
                for d in self.log_dirs:
                    os.makedirs(d, exist_ok=True)
                    self._locks.append(LogDirLock(d))
            except BaseException:
                self._release_locks()
                raise
        # Kafka's log cleaner, when log.cleaner.enable: its threads start with the background work.
        self.cleaner = None
        if config.log_cleaner_enable and not read_only:
            from .cleaner import LogCleaner

            self.cleaner = LogCleaner(config, self.log_dirs, self.all_logs, clock)

    # --- loading -----------------------------------------------------------

    def load_logs(self) -> None:
        """Open every partition directory of every log dir (Kafka's loadLogs).

        Every dir's checkpoints and marker are read before any dir is touched, so an
        unreadable checkpoint fails the open with nothing changed."""
        states = []
        for d in self.log_dirs:
            # Read-only, a replicated dir's logs are replicas: their high watermarks are the checkpointed ones.
            replicas = self.read_only and os.path.exists(os.path.join(d, layout.REPLICATED_MARKER_FILE))
            if replicas:
                self._replicated_dirs.add(d)
            clean_marker = os.path.join(d, layout.CLEAN_SHUTDOWN_FILE)
            recovery_points = OffsetCheckpointFile(os.path.join(d, layout.RECOVERY_POINT_CHECKPOINT_FILE)).read()
            start_offsets = OffsetCheckpointFile(os.path.join(d, layout.LOG_START_OFFSET_CHECKPOINT_FILE)).read()
            high_watermarks = OffsetCheckpointFile(os.path.join(d, layout.REPLICATION_OFFSET_CHECKPOINT_FILE)).read()
            states.append((d, clean_marker, os.path.exists(clean_marker), recovery_points, start_offsets,
                           high_watermarks))
        for d, clean_marker, had_clean_shutdown, recovery_points, start_offsets, high_watermarks in states:
            jobs = []
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if layout.is_deleted_dir(name):
                    if not self.read_only:
                        shutil.rmtree(path, ignore_errors=True)  # finish a topic deletion
                    continue
                try:
                    tp = layout.parse_partition_dir(name)
                except ValueError:
                    continue
                jobs.append((tp, path))
            threads = max(1, self.config.num_recovery_threads_per_data_dir)
            with ThreadPoolExecutor(threads, thread_name_prefix=f"log-recovery-{os.path.basename(d)}") as pool:
                replicas = d in self._replicated_dirs
                futures = {tp: pool.submit(Log.open, path, self._log_config_for(tp.topic),
                                           recovery_point=recovery_points.get(tp, 0),
                                           log_start_offset=start_offsets.get(tp, 0),
                                           # a replica the checkpoint does not name yet has nothing committed
                                           high_watermark=high_watermarks.get(tp, 0 if replicas else None),
                                           sole_replica=self.sole_replica and not replicas,
                                           had_clean_shutdown=had_clean_shutdown, clock=self.clock,
                                           scheduler=self.scheduler, read_only=self.read_only,
                                           producer_state_config=self.producer_state_config)
                           for tp, path in jobs}
                for tp, future in futures.items():
                    try:
                        loaded = future.result()
                    except FileNotFoundError as exc:
                        if not self.read_only:
                            raise
                        log.warning("not reading partition %s: %s", tp, exc)  # being created by its owner
                        continue
                    with self._lock:
                        if tp in self._logs:
                            loaded.close()
                            raise KafkaStorageError(f"partition {tp} is present in two log dirs: "
                                                    f"{self._logs[tp].dir} and {loaded.dir}")
                        self._logs[tp] = self._attach(loaded)
            self._loaded_dirs.add(d)
            if not self.read_only:
                write_replication_marker(d, not self.sole_replica)
            # The marker only speaks for the shutdown before this start.
            if had_clean_shutdown and not self.read_only:
                os.remove(clean_marker)
            log.info("loaded %d logs from %s (clean shutdown: %s%s)", len(jobs), d, had_clean_shutdown,
                     ", read-only" if self.read_only else "")

    def refresh_high_watermarks(self) -> None:
        """Read-only: take in the high watermarks the owner of a replicated log dir checkpointed since."""
        for d in self._replicated_dirs:
            path = os.path.join(d, layout.REPLICATION_OFFSET_CHECKPOINT_FILE)
            try:
                checkpointed = OffsetCheckpointFile(path).read()
            except CheckpointError as exc:
                log.warning("not taking in high watermarks from %s: %s", path, exc)
                continue
            for tp, lg in self.all_logs().items():
                if os.path.dirname(lg.dir) == d and tp in checkpointed:
                    lg.update_high_watermark(checkpointed[tp])

    def unreadable(self) -> dict[TopicPartition, UnreadableBytes]:
        """Read-only: what each partition's view could not read (it ends before that)."""
        return {tp: lg.unreadable for tp, lg in sorted(self.all_logs().items()) if lg.unreadable is not None}

    # --- logs -----------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._logs.get(tp)

    def log_or_raise(self, tp: TopicPartition) -> Log:
        found = self.get_log(tp)
        if found is None:
            raise UnknownTopicOrPartitionError(f"this broker has no partition {tp}")
        return found

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def _attach(self, lg: Log) -> Log:
        lg.failure_channel = self.dir_failures
        return lg

    def _partition_counts(self) -> dict[str, int]:
        """Partitions per online log dir."""
        counts = {d: 0 for d in self.log_dirs if self.dir_failures.offline(d) is None}
        for lg in self._logs.values():
            parent = os.path.dirname(lg.dir)
            if parent in counts:
                counts[parent] += 1
        return counts

    def _next_log_dir(self, counts: dict[str, int]) -> str:
        """The online log dir holding the fewest partitions, as Kafka picks one."""
        if not counts:
            raise KafkaStorageError(f"every log dir is offline: {', '.join(self.dir_failures.offline_dirs())}")
        return min(counts, key=lambda d: (counts[d], self.log_dirs.index(d)))

    def check_room_for(self, partitions: int, what: str) -> None:
        """Refuse (KafkaStorageError) to create ``partitions`` partition directories when the
        process lacks the descriptors or the online log dirs the inodes or space to hold them."""
        check_room_for_partitions(partitions, [d for d in self.log_dirs if self.dir_failures.offline(d) is None],
                                  what)

    def create_logs(self, tps: list[TopicPartition], config: LogConfig, topic_id: str | None = None) -> list[Log]:
        """Create (or return) the logs of ``tps``, each in the online log dir with the fewest partitions."""
        created = []
        with self._lock:
            counts = self._partition_counts()
            for tp in tps:
                existing = self._logs.get(tp)
                if existing is None:
                    log_dir = self._next_log_dir(counts)
                    existing = self._create_log(tp, log_dir, config, topic_id)
                    counts[log_dir] += 1
                created.append(existing)
        return created

    def _create_log(self, tp: TopicPartition, log_dir: str, config: LogConfig, topic_id: str | None) -> Log:
        directory = os.path.join(log_dir, layout.partition_dir_name(tp))
        created = Log.open(directory, config, had_clean_shutdown=True, clock=self.clock, scheduler=self.scheduler,
                           producer_state_config=self.producer_state_config, sole_replica=self.sole_replica)
        try:
            if topic_id is not None:
                from .topic_store import write_partition_metadata
                write_partition_metadata(directory, topic_id)
        except BaseException:
            created.close()
            raise
        self._logs[tp] = self._attach(created)
        return created

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig, topic_id: str | None = None) -> Log:
        return self.create_logs([tp], config, topic_id)[0]

    def delete_log(self, tp: TopicPartition) -> None:
        """Rename the partition dir to Kafka's ``-delete`` form and remove it in the background."""
        if self.cleaner is not None and self.get_log(tp) is not None:
            self.cleaner.abort_cleaning(tp)  # waits for a cleaner working on it to stop
        with self._lock:
            found = self._logs.pop(tp, None)
        if found is None:
            return
        try:
            found.close()
        except OSError as exc:
            # Trimming the indexes on close can fail on a failing disk; the files go anyway.
            log.warning("%s: closing before deletion failed: %s", found, exc)
        if self.cleaner is not None:
            self.cleaner.update_checkpoints(os.path.dirname(found.dir), remove=tp)
        doomed = os.path.join(os.path.dirname(found.dir), layout.deleted_dir_name(tp, uuid.uuid4().hex))
        os.replace(found.dir, doomed)
        self.scheduler.schedule(f"delete-dir-{tp}", lambda: shutil.rmtree(doomed, ignore_errors=True),
                                self.config.log_segment_delete_delay_ms)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for tp, lg in self.all_logs().items():
            if tp.topic == topic:
                lg.update_config(config)

    # --- background work -----------------------------------------------------

    def cleanup_logs(self) -> int:
        """One retention pass over every log (Kafka's cleanupLogs); returns segments deleted."""
        deleted = 0
        if self.cleaner is None:
            logs = list(self.all_logs().items())
        else:
            # Never beside the cleaner on one log: the logs it is not cleaning are paused meanwhile.
            logs = self.cleaner.manager.pause_cleaning_for_retention()
        try:
            for _, lg in logs:
                try:
                    deleted += lg.delete_old_segments_by_retention()
                except KafkaStorageError:
                    continue  # closed under us by a topic deletion
        finally:
            if self.cleaner is not None:
                self.cleaner.manager.resume_cleaning([tp for tp, _ in logs])
        return deleted

    def flush_dirty_logs(self) -> None:
        now = self.clock.milliseconds()
        for lg in self.all_logs().values():
            if lg.unflushed_messages > 0 and now - lg.last_flush_time >= lg.config.flush_ms:
                try:
                    lg.flush()
                except KafkaStorageError:
                    continue  # its dir is offline now (logged once); the other logs go on

    def checkpoint_recovery_points(self) -> None:
        self._checkpoint(layout.RECOVERY_POINT_CHECKPOINT_FILE, lambda lg: lg.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._checkpoint(layout.LOG_START_OFFSET_CHECKPOINT_FILE, lambda lg: lg.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        """Kafka's ReplicaManager.checkpointHighWatermarks: every log's high watermark, per log dir."""
        self._checkpoint(layout.REPLICATION_OFFSET_CHECKPOINT_FILE, lambda lg: lg.high_watermark)

    def _checkpoint(self, file_name: str, value: Callable[[Log], int]) -> None:
        if self.read_only:
            return
        # Only from a loaded state: a dir whose load failed keeps the checkpoints it had.
        by_dir: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs if d in self._loaded_dirs}
        for tp, lg in self.all_logs().items():
            parent = os.path.dirname(lg.dir)
            if parent in by_dir:
                by_dir[parent][tp] = value(lg)
        for d, entries in by_dir.items():
            if self.dir_failures.offline(d) is not None:
                continue  # Kafka checkpoints online dirs only
            path = os.path.join(d, file_name)
            try:
                OffsetCheckpointFile(path).write(entries)
            except OSError as exc:
                # As Kafka: a dir that cannot take its checkpoint (a full disk) goes offline.
                self.dir_failures.mark_offline(d, f"cannot write {path}: {exc.strerror or exc}")

    def tick(self) -> None:
        """Run whatever background work is due at the clock's current time."""
        now = self.clock.milliseconds()
        c = self.config
        if now - self._last_retention_check >= c.log_retention_check_interval_ms:
            self._last_retention_check = now
            self.cleanup_logs()
        self.flush_dirty_logs()
        if now - self._last_recovery_checkpoint >= c.log_flush_offset_checkpoint_interval_ms:
            self._last_recovery_checkpoint = now
            self.checkpoint_recovery_points()
        if now - self._last_start_checkpoint >= c.log_flush_start_offset_checkpoint_interval_ms:
            self._last_start_checkpoint = now
            self.checkpoint_log_start_offsets()
        if now - self._last_high_watermark_checkpoint >= c.replica_high_watermark_checkpoint_interval_ms:
            self._last_high_watermark_checkpoint = now
            self.checkpoint_high_watermarks()
        self.scheduler.run_due()

    def start_background(self, interval_s: float = 0.2) -> None:
        """Tick from a daemon thread (with the real clock)."""
        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.tick()
                except Exception:
                    log.exception("log manager background work failed")

        self._background = threading.Thread(target=loop, name="log-manager", daemon=True)
        self._background.start()
        if self.cleaner is not None:
            self.cleaner.startup()

    # --- shutdown -----------------------------------------------------------

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks = []

    def shutdown(self) -> None:
        """Flush, checkpoint, close, and mark each dir cleanly shut down (Kafka's shutdown)."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self.cleaner is not None:
            self.cleaner.shutdown()  # stops mid-clean; a half-written .cleaned segment is removed
        if self._background is not None:
            self._background.join(timeout=30)
        try:
            if not self.read_only:
                for lg in self.all_logs().values():
                    try:
                        lg.flush()
                    except KafkaStorageError:
                        continue  # its dir is offline: no clean-shutdown marker, recovered at the next start
                self.checkpoint_recovery_points()
                self.checkpoint_log_start_offsets()
                self.checkpoint_high_watermarks()
                self.scheduler.run_all()
            for lg in self.all_logs().values():
                lg.close()
            if not self.read_only:
                for d in self.log_dirs:
                    if d not in self._loaded_dirs or self.dir_failures.offline(d) is not None:
                        continue  # what a failing disk holds is recovered at the next start
                    with open(os.path.join(d, layout.CLEAN_SHUTDOWN_FILE), "w"):
                        pass
        finally:
            self._release_locks()

    def partitions_of(self, topics: Iterable[str]) -> list[TopicPartition]:
        wanted = set(topics)
        return sorted((tp for tp in self.all_logs() if tp.topic in wanted), key=lambda t: (t.topic, t.partition))
