"""Fixtures shared by every test package: real servers started on loopback."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_pair(rng: random.Random) -> int:
    """A port whose gRPC sibling (port + 10000, SeaweedFS's convention) is free too."""
    for _ in range(200):
        port = rng.randrange(20000, 45000)
        if _port_free(port) and _port_free(port + 10000):
            return port
    raise RuntimeError("no free loopback port pair found")


def _weed_binary() -> str:
    candidate = os.path.join(os.path.dirname(sys.executable), "weed")
    return candidate if os.path.exists(candidate) else (shutil.which("weed") or "weed")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A SeaweedFS server with its S3 gateway on 127.0.0.1; yields storage options for s3fs."""
    rng = random.Random()
    data_dir = tmp_path_factory.mktemp("seaweedfs")
    ports = {}
    for name in ("master", "volume", "filer", "s3"):
        while True:
            port = free_port_pair(rng)
            if port not in ports.values():
                ports[name] = port
                break
    log = open(data_dir / "weed.log", "wb")
    proc = subprocess.Popen(
        [_weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data_dir}",
         f"-master.port={ports['master']}", f"-volume.port={ports['volume']}", f"-filer.port={ports['filer']}",
         "-s3", f"-s3.port={ports['s3']}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-volume.max=10"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    endpoint = f"http://127.0.0.1:{ports['s3']}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"SeaweedFS exited with {proc.returncode}; see {data_dir / 'weed.log'}")
            try:
                with urllib.request.urlopen(endpoint + "/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS did not answer on {endpoint} within 60 s")
            time.sleep(0.3)
        yield {"key": "seglog", "secret": "seglog-secret", "endpoint_url": endpoint}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


@pytest.fixture()
def s3_bucket(s3_server):
    """A fresh bucket on the SeaweedFS server; yields (bucket name, storage options)."""
    import s3fs

    fs = s3fs.S3FileSystem(**s3_server)
    name = f"seglog-{random.randrange(1 << 30):x}"
    fs.mkdir(name)
    # s3fs caches listings per instance; every test gets a fresh view.
    s3fs.S3FileSystem.clear_instance_cache()
    yield name, s3_server
    try:
        fs.rm(name, recursive=True)
    except FileNotFoundError:
        pass


class Tmpfs:
    """Small tmpfs mounts for full-disk tests, unmounted when the test ends."""

    def __init__(self, root):
        self.root = root
        self.mounted: list[str] = []

    def mount(self, size: str) -> str:
        """A fresh tmpfs of ``size`` (``"4m"``); skips the test where mounting is not allowed."""
        path = os.path.join(self.root, f"tmpfs-{len(self.mounted)}")
        os.makedirs(path)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        self.mounted.append(path)
        return path

    def resize(self, path: str, size: str) -> None:
        """Give a mounted tmpfs room again (or take it away)."""
        subprocess.run(["mount", "-o", f"remount,size={size}", path], check=True)

    def unmount_all(self) -> None:
        for path in self.mounted:
            subprocess.run(["umount", "-l", path], check=False)


@pytest.fixture()
def small_tmpfs(tmp_path):
    """A ``Tmpfs``: full-disk tests mount small filesystems with it (skipped where that is impossible)."""
    tmpfs = Tmpfs(str(tmp_path))
    try:
        yield tmpfs
    finally:
        tmpfs.unmount_all()


@pytest.fixture()
def descriptor_limit():
    """``descriptor_limit(256)`` is a ``preexec_fn`` that lowers a child's RLIMIT_NOFILE (soft and hard)."""
    import resource

    def limit(count: int):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (count, count))

    return limit
