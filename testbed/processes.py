"""Loopback ports and the lifetime of a server process: is a port free, has the server answered, stop it."""

from __future__ import annotations

import collections
import os
import random
import socket
import subprocess
import time
import urllib.error
import urllib.request


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# Servers the tests start listen on ports below the kernel's ephemeral range (32768.. on Linux), so that
# no client's outgoing connection takes a port between its choice and its use, nor while a server is
# down for a restart. SeaweedFS puts a gRPC sibling at port + 10000: pairs come from their own block.
SINGLE_PORTS = range(22768, 30000)
PAIRED_PORTS = range(20000, 22768)
PAIR_OFFSET = 10000
# Ports this process handed out lately. A port is free until its server binds it, so two draws before
# that (a Kafka node's broker and controller listeners) could otherwise both get it.
_RECENT: collections.deque[int] = collections.deque(maxlen=256)


def worker_share(ports: range) -> range:
    """The part of ``ports`` this process draws from: under pytest-xdist each worker (``gw0``, ``gw1``, ...)
    has a slice of its own, so that two workers never choose the same port at once; else all of it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return ports
    index = int(worker[2:]) % count
    size = len(ports) // count
    return ports[index * size:(index + 1) * size]


def free_port(rng: random.Random | None = None, taken: tuple[int, ...] = ()) -> int:
    """A free loopback port below the kernel's ephemeral range (so that a server can be restarted on it),
    from this process's share (``worker_share``), not in ``taken`` and none of the last 256 this process
    handed out."""
    return _draw(SINGLE_PORTS, rng, taken, ())


def free_port_pair(rng: random.Random | None = None, taken: tuple[int, ...] = ()) -> int:
    """A free loopback port whose sibling ``port + PAIR_OFFSET`` (SeaweedFS's gRPC port) is free too."""
    return _draw(PAIRED_PORTS, rng, taken, (PAIR_OFFSET,))


def _draw(block: range, rng: random.Random | None, taken: tuple[int, ...], siblings: tuple[int, ...]) -> int:
    rng = rng or random.Random()
    ports = worker_share(block)
    for _ in range(200):
        port = rng.choice(ports)
        if (port not in taken and port not in _RECENT
                and all(port_free(port + offset) for offset in (0, *siblings))):
            _RECENT.append(port)
            return port
    also = "".join(f" with port + {offset} free too" for offset in siblings)
    raise RuntimeError(f"no free loopback port in {ports.start}..{ports.stop - 1}{also}")


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
        except urllib.error.HTTPError as refused:  # an answer too: a 403 from a server that wants credentials
            if accept(refused):
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer on {url} within {timeout_s:.0f} s; see {log_path}")
        time.sleep(interval_s)


def stop_process(proc: subprocess.Popen, timeout_s: float = 15) -> None:
    """SIGTERM, then SIGKILL if it has not ended within ``timeout_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=15)


def pinned_to(cpu: int | None):
    """A ``preexec_fn`` that pins the child to ``cpu``, or None when ``cpu`` is None."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})
