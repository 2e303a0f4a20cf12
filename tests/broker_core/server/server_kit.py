"""Starting a real broker for tests on an ephemeral loopback port: a ``BrokerServer`` in this
process, or ``seglog broker`` in its own (``BrokerProcess``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

from broker_core.server.broker_server import BrokerServer


def start_broker(log_dir, **props) -> BrokerServer:
    """A started broker on 127.0.0.1 (port chosen by the OS) with small thread pools."""
    settings = {"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                "num.io.threads": 4}
    settings.update(props)
    return BrokerServer(settings).startup()


def committed_offsets(bootstrap: str, group: str, topic: str | None = None) -> dict[int, int]:
    """A group's committed offsets by partition (of ``topic``, or of every topic), as an admin
    client reads them (OffsetFetch)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        offsets = admin.list_group_offsets(group)
    finally:
        admin.close()
    offsets = offsets.get(group, offsets)  # newer kafka-python answers by group
    return {tp.partition: meta.offset for tp, meta in offsets.items() if topic is None or tp.topic == topic}


class BrokerProcess:
    """``seglog broker`` run as a user runs it, in its own process; its standard error is
    collected (``stderr_text``) so that a chatty broker never blocks on a full pipe."""

    STARTED = re.compile(r"started \(cluster (\S+)\) on PLAINTEXT://127\.0\.0\.1:(\d+)")

    def __init__(self, log_dirs, *extra: str, preexec_fn=None, timeout_s: float = 120):
        args = [sys.executable, "-m", "broker_core.cli", "broker", "--listeners", "PLAINTEXT://127.0.0.1:0",
                "--log-level", "WARNING"]
        for d in log_dirs:
            args += ["--log-dir", str(d)]
        self.proc = subprocess.Popen([*args, *extra], stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
        self.lines: list[str] = []
        started = threading.Event()
        self.port = 0

        def drain() -> None:
            for line in self.proc.stderr:
                self.lines.append(line)
                match = self.STARTED.search(line)
                if match:
                    self.port = int(match[2])
                    started.set()

        self._drain = threading.Thread(target=drain, name=f"broker-{self.proc.pid}-stderr", daemon=True)
        self._drain.start()
        deadline = time.monotonic() + timeout_s
        while not started.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait(10)
                self._drain.join(10)
                raise AssertionError(f"the broker did not start (exit {self.proc.returncode}): {self.stderr_text}")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def stderr_text(self) -> str:
        return "".join(self.lines)

    def open_descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM, then wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._drain.join(10)
        return self.proc.returncode
