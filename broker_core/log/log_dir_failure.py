"""Log directories taken offline by an I/O error (Kafka's LogDirFailureChannel).

When a write into a log dir fails — ``ENOSPC`` on a full disk, ``EIO`` — the
dir goes offline, as in Kafka: every later append to a partition in it
answers ``KAFKA_STORAGE_ERROR`` at once, without touching the disk, while
reads go on and the other dirs keep working. The cause is logged once, when
the dir goes offline. A dir comes back only with a restart (Kafka's rule: the
operator frees space or replaces the disk, then restarts), so nothing
written while the disk was failing is trusted without the recovery an
unclean start runs.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from ..errors import KafkaStorageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OfflineLogDir:
    log_dir: str
    cause: str


class LogDirFailureChannel:
    """Which log dirs are offline, and why."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[str, OfflineLogDir] = {}

    def mark_offline(self, log_dir: str, cause: str) -> OfflineLogDir:
        """Take ``log_dir`` offline (logged the first time only); returns its record."""
        with self._lock:
            found = self._offline.get(log_dir)
            if found is not None:
                return found
            found = self._offline[log_dir] = OfflineLogDir(log_dir, cause)
        log.error("log dir %s is offline: %s; appends to its partitions fail with KAFKA_STORAGE_ERROR "
                  "until the broker is restarted", log_dir, cause)
        return found

    def offline(self, log_dir: str) -> OfflineLogDir | None:
        with self._lock:
            return self._offline.get(log_dir)

    def offline_dirs(self) -> list[str]:
        with self._lock:
            return sorted(self._offline)

    def check_online(self, log_dir: str, what: object) -> None:
        """Raise KafkaStorageError naming ``what`` if ``log_dir`` is offline."""
        found = self.offline(log_dir)
        if found is not None:
            raise KafkaStorageError(f"{what}: log dir {log_dir} is offline ({found.cause})")
