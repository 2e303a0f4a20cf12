"""Starting a real ``BrokerServer`` for tests: an ephemeral loopback port over a given log dir."""

from __future__ import annotations

from broker_core.server.broker_server import BrokerServer


def start_broker(log_dir, **props) -> BrokerServer:
    """A started broker on 127.0.0.1 (port chosen by the OS) with small thread pools."""
    settings = {"log.dirs": str(log_dir), "listeners": "PLAINTEXT://127.0.0.1:0", "num.network.threads": 2,
                "num.io.threads": 4}
    settings.update(props)
    return BrokerServer(settings).startup()
