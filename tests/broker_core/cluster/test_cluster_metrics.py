"""The metrics of a replicated cluster: three ``seglog broker`` processes and a real etcd on loopback, each
broker serving ``/metrics``; a follower killed leaves the partition under-replicated at its leader."""

from __future__ import annotations

import pytest

from tests.broker_core.cluster.cluster_kit import ClusterKit
from tests.broker_core.metrics.metrics_kit import scrape

pytestmark = pytest.mark.slow


def metrics_url(kit: ClusterKit, node_id: int) -> str:
    (line,) = [line for line in kit.brokers[node_id].lines if "metrics on " in line]
    return line.split("metrics on ")[1].strip().removesuffix("/metrics")


def test_a_killed_follower_leaves_the_partition_under_replicated_in_its_leaders_metrics(tmp_path, etcd_server):
    kit = ClusterKit(tmp_path, etcd_server.connect("/metrics"), **{"metrics.listener": "http://127.0.0.1:0"})
    kit.start_all()
    try:
        kit.create_topic("t")
        view = kit.wait_for_isr("t", (1, 2, 3))
        leader = scrape(metrics_url(kit, view.leader))
        assert leader.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
        assert leader.value("kafka_cluster_partition_underreplicated", topic="t", partition="0") == 0
        assert leader.value("kafka_server_replicamanager_leadercount") >= 1
        follower = next(b for b in (1, 2, 3) if b not in (view.leader, kit.controller_id()))
        assert scrape(metrics_url(kit, follower)).all("kafka_cluster_partition_underreplicated", topic="t") == []
        kit.kill(follower)
        kit.wait_for_isr("t", tuple(b for b in (1, 2, 3) if b != follower))
        leader = scrape(metrics_url(kit, view.leader))
        assert leader.value("kafka_server_replicamanager_underreplicatedpartitions") == 1
        assert leader.value("kafka_cluster_partition_underreplicated", topic="t", partition="0") == 1
        assert leader.value("kafka_server_replicamanager_underminisrpartitioncount") == 0  # two of three in sync
        controller = scrape(metrics_url(kit, kit.controller_id()))
        assert controller.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    finally:
        kit.close()
