"""The web console of a broker in a cluster (cluster mode over etcd): the live brokers and the controller
from the metadata cache, and the partitions this broker does not hold with their leaders and replicas."""

from __future__ import annotations

import pytest

from broker_core.console import ServerView, console_app
from broker_core.server.broker_server import BrokerServer
from tests.broker_core.cluster.cluster_kit import ClusterKit
from tests.broker_core.console.console_kit import get, serve

pytestmark = pytest.mark.slow

ONE_REPLICA = {"default.replication.factor": "1", "offsets.topic.replication.factor": "1",
               "transaction.state.log.replication.factor": "1"}


@pytest.fixture()
def cluster_member(tmp_path, etcd_server):
    """Broker 1 in its own process and broker 2, whose console is tested, in this one."""
    kit = ClusterKit(tmp_path, etcd_server.connect("/seglog"), size=1, **ONE_REPLICA)
    kit.start_all()
    server = None
    try:
        server = BrokerServer({**kit.props, "node.id": 2, "log.dirs": str(tmp_path / "broker-2"),
                               "listeners": "PLAINTEXT://127.0.0.1:0"}).startup()
        kit.wait_until(lambda: kit.live_brokers() == [1, 2], "both brokers registered")
        yield kit, server
    finally:
        if server is not None:
            server.shutdown(timeout_ms=10_000)
        kit.close()


def test_in_a_cluster_the_console_lists_the_live_brokers_and_the_leaders_of_partitions_held_elsewhere(
        cluster_member):
    kit, server = cluster_member
    result = kit.create_topic("spread", partitions=4, replication_factor=1, configs={"min.insync.replicas": "1"})
    assert result["error_code"] == 0, result
    app = console_app(ServerView.of(server))
    try:
        with serve(app) as base:
            def described():
                status, body = get(base, "/api/topic", topic="spread")
                return body if status == 200 and all(p["leader"] >= 0 for p in body["partitions"]) else None

            topic = kit.wait_until(described, "broker 2 knows every partition of spread and its leader")
            status, cluster = get(base, "/api/cluster")
            assert status == 200
            assert [b["node_id"] for b in cluster["brokers"]] == [1, 2]
            assert cluster["controller_id"] == kit.controller_id()
            assert cluster["node_id"] == 2
            leaders = {p["partition"]: p["leader"] for p in topic["partitions"]}
            assert set(leaders.values()) == {1, 2}  # four partitions of one replica are spread over both
            for p in topic["partitions"]:
                assert p["replicas"] == p["isr"] == [p["leader"]]
                if p["leader"] == 2:  # held here: its log's figures
                    assert (p["log_end_offset"], p["segments"]) == (0, 1)
                else:  # held by broker 1 only
                    assert (p["log_end_offset"], p["size_bytes"], p["segments"]) == (-1, None, None)
                    for path in ("/api/segments", "/api/records"):
                        status, body = get(base, path, topic="spread", partition=p["partition"])
                        assert status == 404 and "is not on this broker" in body["message"], path
            status, topics = get(base, "/api/topics")
            assert "spread" in [t["name"] for t in topics["topics"]]
    finally:
        app.close()
