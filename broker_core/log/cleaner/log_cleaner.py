"""The broker's log cleaner: ``log.cleaner.threads`` threads that each, in a loop, take the
dirtiest compacted log and clean it (Kafka's LogCleaner and CleanerThread).

Each thread has its own offset map, ``log.cleaner.dedupe.buffer.size`` divided
among the threads; all of them share one I/O throttle at
``log.cleaner.io.max.bytes.per.second``. A thread that finds nothing to clean
waits ``log.cleaner.backoff.ms``. A failure other than an abort marks the
partition uncleanable (it is skipped until it is deleted or the broker
restarts), as Kafka does.

``clean_filthiest_log`` is one iteration of a thread's loop; tests drive it
with a simulated clock, and ``seglog compact`` calls ``compact`` to clean
every compacted log now, whatever its dirty ratio.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from format.layout import TopicPartition

from ...errors import KafkaStorageError
from .cleaner import Cleaner, CleanerStats, LogCleaningAbortedError, LogToClean, Throttler
from .log_cleaner_manager import LogCleanerManager
from .offset_map import OffsetMap

log = logging.getLogger(__name__)


class ThreadShutdown(LogCleaningAbortedError):
    """The cleaner is shutting down."""


@dataclass(frozen=True)
class CleanResult:
    """One clean of one log, for reports."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    bytes_before: int
    bytes_after: int
    stats: CleanerStats | None
    error: str | None = None


class LogCleaner:
    def __init__(self, config, log_dirs: Iterable[str], logs: Callable[[], dict], clock):
        self.config = config
        self.clock = clock
        self.manager = LogCleanerManager(log_dirs, logs)
        self.throttler = Throttler(config.log_cleaner_io_max_bytes_per_second, clock)
        self.threads = max(1, config.log_cleaner_threads)
        self._cleaners: dict[int, Cleaner] = {}
        self._workers: list[threading.Thread] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        #: The figures of the latest clean that finished (the broker's cleaner metrics read them).
        self.last_stats: CleanerStats | None = None

    # --- cleaners and threads -------------------------------------------------

    def cleaner(self, cleaner_id: int = 0) -> Cleaner:
        """The cleaner of thread ``cleaner_id``; its offset map is allocated on first use."""
        with self._lock:
            found = self._cleaners.get(cleaner_id)
            if found is None:
                memory = self.config.log_cleaner_dedupe_buffer_size // self.threads
                found = Cleaner(cleaner_id, OffsetMap(memory, self.config.log_cleaner_io_buffer_load_factor),
                                self.clock, throttler=self.throttler, check_done=self._check_done,
                                producer_id_expiration_ms=self.config.producer_id_expiration_ms)
                self._cleaners[cleaner_id] = found
            return found

    def _check_done(self, tp: TopicPartition) -> None:
        if self._stop.is_set():
            raise ThreadShutdown(f"the cleaner is shutting down; cleaning of {tp} stops")
        if self.manager.is_aborted(tp):
            raise LogCleaningAbortedError(f"cleaning of {tp} was aborted")

    def startup(self) -> None:
        if self._workers:
            return
        self._stop.clear()
        for i in range(self.threads):
            worker = threading.Thread(target=self._run, args=(i,), name=f"kafka-log-cleaner-thread-{i}",
                                      daemon=True)
            self._workers.append(worker)
            worker.start()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout_s)
        self._workers = []

    @property
    def running(self) -> bool:
        return any(w.is_alive() for w in self._workers)

    @property
    def dead_thread_count(self) -> int:
        """Cleaner threads started and no longer alive while the cleaner runs (Kafka's DeadThreadCount)."""
        return 0 if self._stop.is_set() else sum(1 for w in self._workers if not w.is_alive())

    def _run(self, cleaner_id: int) -> None:
        backoff_s = self.config.log_cleaner_backoff_ms / 1000
        while not self._stop.is_set():
            cleaned = False
            try:
                cleaned = self.clean_filthiest_log(cleaner_id) is not None
            except Exception:
                log.exception("log cleaner thread %d failed", cleaner_id)
            self.manager.maintain_uncleanable_partitions()
            if not cleaned:
                self._stop.wait(backoff_s)

    # --- one iteration ------------------------------------------------------------

    def clean_filthiest_log(self, cleaner_id: int = 0, *, force: bool = False,
                            topics: Iterable[str] | None = None) -> CleanResult | None:
        """Clean the dirtiest log, if any is dirty enough; None when there was nothing to clean."""
        to_clean = self.manager.grab_filthiest_compacted_log(self.clock.milliseconds(), force=force, topics=topics)
        if to_clean is None:
            return None
        return self.clean_log(self.cleaner(cleaner_id), to_clean)

    def clean_log(self, cleaner: Cleaner, to_clean: LogToClean) -> CleanResult:
        tp = to_clean.topic_partition
        lg = to_clean.log
        before = lg.size
        end = to_clean.first_dirty_offset
        stats = None
        error = None
        try:
            end, stats = cleaner.clean(to_clean)
            self.last_stats = stats
        except LogCleaningAbortedError:
            log.info("cleaning of %s was aborted", tp)
        except KafkaStorageError as exc:
            log.info("cleaning of %s stopped: %s", tp, exc)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.error("cleaning of %s failed; marking it uncleanable: %s", tp, error, exc_info=True)
            self.manager.mark_uncleanable(os.path.dirname(lg.dir), tp)
        finally:
            self.manager.done_cleaning(tp, os.path.dirname(lg.dir), end)
        return CleanResult(tp, to_clean.first_dirty_offset, end, before, lg.size, stats, error)

    def compact(self, topics: Iterable[str] | None = None, cleaner_id: int = 0,
                on_start: Callable[[LogToClean], None] | None = None) -> list[CleanResult]:
        """Clean every compacted log (of ``topics``) until nothing cleanable is left, ignoring
        ``min.cleanable.dirty.ratio``: what an operator asks for with ``seglog compact``."""
        results = []
        topics = None if topics is None else list(topics)
        while True:
            to_clean = self.manager.grab_filthiest_compacted_log(self.clock.milliseconds(), force=True,
                                                                 topics=topics)
            if to_clean is None:
                return results
            if on_start is not None:
                on_start(to_clean)
            result = self.clean_log(self.cleaner(cleaner_id), to_clean)
            results.append(result)
            if result.error is None and result.end_offset <= to_clean.first_dirty_offset:
                raise RuntimeError(f"cleaning {to_clean.topic_partition} made no progress from offset "
                                   f"{to_clean.first_dirty_offset}: log.cleaner.dedupe.buffer.size is too small "
                                   f"for one batch's keys")
            if result.error is not None:
                continue  # marked uncleanable: the next round skips it

    # --- for the log manager ---------------------------------------------------------

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.manager.abort_cleaning(tp)

    def update_checkpoints(self, log_dir: str, update: tuple[TopicPartition, int] | None = None,
                           remove: TopicPartition | None = None) -> None:
        self.manager.update_checkpoints(log_dir, update, remove)
