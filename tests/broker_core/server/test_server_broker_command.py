"""``seglog broker`` as a user runs it: a process serving a log dir until SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from broker_core.client.protocol_client import ProtocolClient
from broker_core.meta_properties import read_meta_properties
from broker_core.protocol import ApiKey
from format import layout

pytestmark = pytest.mark.slow

STARTED = re.compile(r"started \(cluster (\S+)\) on PLAINTEXT://127\.0\.0\.1:(\d+)")


def start(log_dir, *extra: str) -> tuple[subprocess.Popen, str, int]:
    proc = subprocess.Popen([sys.executable, "-m", "broker_core.cli", "broker", "--log-dir", str(log_dir),
                             "--listeners", "PLAINTEXT://127.0.0.1:0", "--log-level", "WARNING", *extra],
                            stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        match = STARTED.search(line)
        if match:
            return proc, match[1], int(match[2])
    proc.wait(10)
    raise AssertionError(f"the broker did not start (exit {proc.returncode}): {''.join(lines)}")


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def test_the_broker_command_serves_until_sigterm_and_shuts_down_cleanly(tmp_path):
    proc, cluster_id, port = start(tmp_path, "--node-id", "3", "--config", "num.partitions=2")
    try:
        with ProtocolClient(f"127.0.0.1:{port}") as client:
            metadata = client.send(ApiKey.METADATA, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True})
    finally:
        err = stop(proc)
    assert "shut down" in err
    assert metadata["cluster_id"] == cluster_id and metadata["controller_id"] == 3
    assert len(metadata["topics"][0]["partitions"]) == 2
    assert [b["node_id"] for b in metadata["brokers"]] == [3]
    meta = read_meta_properties(str(tmp_path))
    assert (meta.cluster_id, meta.node_id) == (cluster_id, 3)
    assert os.path.exists(tmp_path / layout.CLEAN_SHUTDOWN_FILE)


def test_the_cluster_id_is_kept_across_runs_and_a_changed_node_id_is_refused(tmp_path):
    proc, first_id, _ = start(tmp_path)
    stop(proc)
    proc, second_id, _ = start(tmp_path)
    stop(proc)
    assert first_id == second_id
    refused = subprocess.run([sys.executable, "-m", "broker_core.cli", "broker", "--log-dir", str(tmp_path),
                              "--listeners", "PLAINTEXT://127.0.0.1:0", "--node-id", "7"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert "node id 0" in refused.stderr and "node.id 7" in refused.stderr


@pytest.mark.parametrize("listeners, message", [
    ("SSL://127.0.0.1:0", "configuration ssl.keystore.location"),
    ("127.0.0.1:9092", "NAME://host:port"),
])
def test_listeners_the_broker_cannot_serve_are_refused(tmp_path, listeners, message):
    refused = subprocess.run([sys.executable, "-m", "broker_core.cli", "broker", "--log-dir", str(tmp_path),
                              "--listeners", listeners], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert message in refused.stderr
