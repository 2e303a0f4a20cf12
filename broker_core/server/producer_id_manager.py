"""Producer ids for InitProducerId, never handed out twice, even across restarts (Kafka's ProducerIdManager).

Kafka's controller grants brokers blocks of 1000 ids and records each grant
in its metadata log before the broker uses it. Here the log directory plays
the controller: the end of the current block is written (atomically, fsynced)
to ``producer-id-block`` before an id from the block is given out, so a
restart — clean or not — continues after the last block, at worst skipping
the unused rest of it. One fsync per thousand producers, none per id.

In cluster mode the blocks come from etcd instead (``ZkProducerIdManager``,
Kafka's ZooKeeper-era name): ``/latest_producer_id_block`` is raised by
compare-and-set, so no two brokers hand out the same id.
"""

from __future__ import annotations

import os
import threading
from typing import Callable

from format.checkpoint import fsync_dir

PRODUCER_ID_BLOCK_FILE = "producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    """Increasing producer ids backed by a block counter file in ``log_dir``."""

    def __init__(self, log_dir: str, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"ProducerIdManager: block_size must be >= 1, got {block_size}")
        self.path = os.path.join(log_dir, PRODUCER_ID_BLOCK_FILE)
        self.block_size = block_size
        self._lock = threading.Lock()
        self._next = self._read_block_end()
        self._block_end = self._next  # exclusive: ids below it are granted to this run

    def _read_block_end(self) -> int:
        try:
            with open(self.path, encoding="ascii") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return 0
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{self.path}: expected the next producer id block, found {text!r}") from None
        if value < 0:
            raise ValueError(f"{self.path}: negative producer id block end {value}")
        return value

    def _grant_block(self) -> None:
        end = self._block_end + self.block_size
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{end}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_dir(os.path.dirname(self.path))
        self._block_end = end

    def generate_producer_id(self) -> int:
        """The next producer id; persisted before it is returned."""
        with self._lock:
            if self._next >= self._block_end:
                self._grant_block()
            producer_id = self._next
            self._next += 1
            return producer_id


class ZkProducerIdManager:
    """Producer ids from blocks granted by ``allocate_block(block_size) -> (first, last)`` (the cluster's
    ``/latest_producer_id_block``)."""

    def __init__(self, allocate_block: Callable[[int], tuple[int, int]],
                 block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError(f"ZkProducerIdManager: block_size must be >= 1, got {block_size}")
        self.block_size = block_size
        self._allocate_block = allocate_block
        self._lock = threading.Lock()
        self._next = 0
        self._last = -1  # inclusive: no block yet

    def generate_producer_id(self) -> int:
        """The next producer id; a new block is granted first when the current one is used up."""
        with self._lock:
            if self._next > self._last:
                self._next, self._last = self._allocate_block(self.block_size)
            producer_id = self._next
            self._next += 1
            return producer_id
