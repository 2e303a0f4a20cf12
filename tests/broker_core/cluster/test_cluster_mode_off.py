"""Without ``etcd.connect`` a broker is the single broker it always was, and nothing loads etcd's client."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_broker_without_etcd_connect_never_loads_the_etcd_client(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from broker_core.broker import Broker
        from broker_core.server.broker_server import BrokerServer

        with Broker({str(tmp_path / 'embedded')!r}) as broker:
            broker.create_topic("t")
            broker.produce("t", [b"v"])
        with BrokerServer({{"log.dirs": {str(tmp_path / 'served')!r},
                            "listeners": "PLAINTEXT://127.0.0.1:0"}}) as server:
            leaders = server.apis.replica_manager
        print(sorted(m for m in sys.modules if m.startswith("etcd3gw") or m.endswith("etcd_metadata_store")),
              leaders)
        """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] None"
