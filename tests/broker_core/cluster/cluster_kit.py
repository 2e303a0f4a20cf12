"""The cluster tests' seglog cluster (``testbed.seglog_cluster.SeglogCluster``) with short session and lag
timeouts, so that a killed broker is noticed in seconds."""

from __future__ import annotations

from testbed.seglog_cluster import SeglogCluster

CLUSTER_PROPS = {
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "default.replication.factor": "3",
    "num.partitions": "1",
    "controlled.shutdown.retry.backoff.ms": "500",
}


class ClusterKit(SeglogCluster):
    """Brokers ``1..size`` over ``etcd_connect`` with ``CLUSTER_PROPS``, which ``props`` override."""

    def __init__(self, root, etcd_connect: str, size: int = 3, **props) -> None:
        """``listener`` and ``security`` (keywords) as ``SeglogCluster`` takes them."""
        super().__init__(root, etcd_connect, size, **{**CLUSTER_PROPS, **props})
