"""``seglog …`` as a user runs it: a process in the background whose output lines are read as they
come, with deadlines, and which is stopped by a signal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

SEGLOG = os.path.join(os.path.dirname(sys.executable), "seglog")


def run(*args: str, stdin: str = "", timeout: float = 120, env: dict | None = None) -> tuple[int, str, str]:
    """``seglog args`` to its end: exit code, standard output, standard error."""
    result = subprocess.run([SEGLOG, *args], input=stdin, capture_output=True, text=True, timeout=timeout,
                            env=None if env is None else {**os.environ, **env})
    return result.returncode, result.stdout, result.stderr


class SeglogProcess:
    """``seglog args`` running; ``out`` and ``err`` fill with its lines as it writes them."""

    def __init__(self, *args: str, stdin: str | None = None):
        self.proc = subprocess.Popen([SEGLOG, *args], stdin=subprocess.PIPE if stdin is not None else None,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        self._changed = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()
        if stdin is not None:
            self.proc.stdin.write(stdin)
            self.proc.stdin.close()

    def _read(self, stream, lines: list[str]) -> None:
        for line in stream:
            with self._changed:
                lines.append(line.rstrip("\n"))
                self._changed.notify_all()

    def wait_for_lines(self, count: int, timeout: float = 30) -> list[str]:
        """The first ``count`` lines of standard output, once written."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.out) >= count or self.proc.poll() is not None, timeout):
                raise AssertionError(f"seglog wrote {len(self.out)} of {count} lines in {timeout} s: "
                                     f"{self.out[-5:]}, stderr {self.err[-5:]}")
        if len(self.out) < count:
            raise AssertionError(f"seglog exited ({self.proc.returncode}) after {len(self.out)} of {count} lines; "
                                 f"stderr {self.err[-5:]}")
        return self.out[:count]

    def wait_for_error_line(self, pattern: str, timeout: float = 60) -> re.Match:
        """The first line of standard error matching ``pattern``."""
        def found():
            return next((m for m in map(re.compile(pattern).search, self.err) if m), None)

        with self._changed:
            self._changed.wait_for(lambda: found() is not None or self.proc.poll() is not None, timeout)
        match = found()
        if match is None:
            raise AssertionError(f"no line of seglog's stderr matches {pattern!r}: {self.err[-5:]}")
        return match

    def still_running_after(self, seconds: float) -> bool:
        time.sleep(seconds)
        return self.proc.poll() is None

    def finish(self, signum: int | None = signal.SIGINT, timeout: float = 30) -> int:
        """Send ``signum`` (None: just wait) and return the exit code once both streams are read."""
        if signum is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)
        try:
            code = self.proc.wait(timeout)
        finally:
            self.close()
        for reader in self._readers:
            reader.join(timeout)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def start_broker(log_dir: str) -> tuple[SeglogProcess, str]:
    """``seglog broker`` on a free loopback port, once it listens; the process and its bootstrap address."""
    broker = SeglogProcess("broker", "--log-dir", log_dir, "--listeners", "PLAINTEXT://127.0.0.1:0",
                           "--log-level", "WARNING")
    try:
        port = broker.wait_for_error_line(r"started \(cluster \S+\) on PLAINTEXT://127\.0\.0\.1:(\d+)")[1]
    except BaseException:
        broker.close()
        raise
    return broker, f"127.0.0.1:{port}"
