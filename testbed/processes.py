"""Loopback ports and the lifetime of a server process: is a port free, has the server answered, stop it."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time
import urllib.request


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(rng: random.Random, taken: tuple[int, ...] = ()) -> int:
    """A free loopback port from 20000..44999 (outside the kernel's ephemeral range, so that a server can be
    restarted on it) and not in ``taken``."""
    for _ in range(200):
        port = rng.randrange(20000, 45000)
        if port not in taken and port_free(port):
            return port
    raise RuntimeError("no free loopback port")


def wait_until_answered(proc: subprocess.Popen, name: str, url: str, accept, log_path, timeout_s: float,
                        interval_s: float) -> None:
    """Poll ``url`` until ``accept(response)`` holds; an error naming ``log_path`` if ``proc`` exits first or
    ``timeout_s`` runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}; see {log_path}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if accept(response):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer on {url} within {timeout_s:.0f} s; see {log_path}")
        time.sleep(interval_s)


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 15 s."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


def pinned_to(cpu: int | None):
    """A ``preexec_fn`` that pins the child to ``cpu``, or None when ``cpu`` is None."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})
