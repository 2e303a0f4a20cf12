"""Consumer-group members in their own processes (``group_member.py``), watched from the test.

A ``MemberProcess`` reads its member's JSON lines on a thread: the history of
its assignments (with generation and member id where the client tells them),
its current assignment and every (partition, offset) it consumed. ``kill``
is a crash (SIGKILL: no LeaveGroup, no last commit); ``stop`` a clean close.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.consumer_protocol import decode_assignment
from broker_core.offsets_topic import (OFFSETS_TOPIC, GroupMetadataKey, decode_group_metadata_value, decode_key,
                                       partition_for_group)
from format.layout import TopicPartition
from format.record_batch import iter_batches

MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")


@dataclass
class Assignment:
    partitions: tuple[int, ...]
    generation: int
    member_id: str
    at: float  # time.monotonic() when the parent read it


@dataclass
class MemberProcess:
    lib: str
    bootstrap: str
    topic: str
    group: str
    session_timeout_ms: int
    process: subprocess.Popen = field(init=False)
    assignments: list[Assignment] = field(default_factory=list)
    consumed: list[tuple[int, int]] = field(default_factory=list)
    closed: bool = False
    _reader: threading.Thread = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), self.lib, self.bootstrap, self.topic, self.group,
             str(self.session_timeout_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._reader = threading.Thread(target=self._read, name=f"member-{self.lib}-{self.process.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                if "assigned" in event:
                    self.assignments.append(Assignment(tuple(event["assigned"]), event["generation"],
                                                       event["member"], time.monotonic()))
                elif "consumed" in event:
                    self.consumed.extend((p, o) for p, o in event["consumed"])
                elif "closed" in event:
                    self.closed = True

    @property
    def current(self) -> tuple[int, ...] | None:
        """The partitions of the last assignment, None before the first."""
        with self._lock:
            return self.assignments[-1].partitions if self.assignments else None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """Crash: no LeaveGroup, no commit of what the last poll returned."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._reader.join(10)

    def stop(self, timeout_s: float = 20) -> None:
        """Close the consumer cleanly (commit, LeaveGroup)."""
        if self.alive:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._reader.join(10)


@dataclass(frozen=True)
class StoredGeneration:
    generation: int
    assignment: dict[str, tuple[TopicPartition, ...]]  # member id -> partitions


def stored_generations(broker, group: str) -> list[StoredGeneration]:
    """Every generation of ``group`` the coordinator wrote to ``__consumer_offsets``, in log order.

    Reads the group's partition of the offsets topic record by record, so it
    sees each generation's assignment as it was stored, not only the latest.
    """
    count = broker.partitions_for(OFFSETS_TOPIC)
    partition = partition_for_group(group, count)
    log = broker.log_manager.log_or_raise(TopicPartition(OFFSETS_TOPIC, partition))
    offset, end = log.log_start_offset, log.high_watermark
    out = []
    while offset < end:
        fetched = broker.fetch(OFFSETS_TOPIC, partition, offset, 1 << 20)
        batches = list(iter_batches(fetched.records))
        if not batches:
            break
        for batch in batches:
            for record in batch.records():
                if record.offset < offset or record.key is None or record.value is None:
                    continue
                key = decode_key(record.key)
                if isinstance(key, GroupMetadataKey) and key.group == group:
                    value = decode_group_metadata_value(record.value)
                    out.append(StoredGeneration(value.generation, {
                        m.member_id: tuple(decode_assignment(m.assignment)) for m in value.members}))
        offset = batches[-1].header.next_offset
    return out
