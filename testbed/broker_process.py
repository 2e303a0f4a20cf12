"""``seglog broker`` run as a user runs it, in its own process, on a loopback port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time


class BrokerProcess:
    """``seglog broker`` run as a user runs it, in its own process; its standard error is
    collected (``stderr_text``) so that a chatty broker never blocks on a full pipe."""

    STARTED = re.compile(r"started \(cluster (\S+)\) on [\w-]+://127\.0\.0\.1:(\d+)")

    def __init__(self, log_dirs, *extra: str, port: int = 0, preexec_fn=None, timeout_s: float = 120,
                 listener: str = "PLAINTEXT"):
        """``port`` 0 lets the OS choose; a fixed one lets a restarted broker keep its clients' address;
        ``listener`` names its only listener (its security protocol from ``listener.security.protocol.map``)."""
        args = [sys.executable, "-m", "broker_core.cli", "broker", "--listeners", f"{listener}://127.0.0.1:{port}",
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

    def kill(self) -> int:
        """SIGKILL: the broker dies where it is (no flush, no clean-shutdown marker); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._drain.join(10)
        return self.proc.returncode

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
