"""The replica manager on an in-memory metadata store and simulated time: the partition states the
controller writes become leaders and followers on embedded brokers, followers' fetches move the high
watermark, and the leader's ISR changes are compare-and-sets the controller follows."""

from __future__ import annotations

import threading
import time

import pytest

from broker_core.broker import Broker
from broker_core.errors import NotEnoughReplicasError, NotLeaderOrFollowerError, RequestTimedOutError
from broker_core.server.replica_fetcher_manager import ReplicaFetcherManager
from broker_core.server.replica_manager import ReplicaManager
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches
from tests.broker_core.controller.controller_kit import FakeCluster

TP = TopicPartition("t", 0)
LAG_MS = 10_000


class Node:
    """One broker's log dir and replica manager over the fake cluster's store; fetchers find no leader
    endpoint (the records a follower would fetch are handed over by the test)."""

    def __init__(self, cluster: FakeCluster, broker_id: int, root) -> None:
        self.broker = Broker(str(root / f"broker-{broker_id}"), {"node.id": broker_id, "min.insync.replicas": 2,
                                                                 "replica.lag.time.max.ms": LAG_MS},
                             clock=cluster.clock, background=False, sole_replica=False)
        self.moved: list[TopicPartition] = []
        self.fetchers = ReplicaFetcherManager(broker_id, lambda leader: None)
        self.replicas = ReplicaManager(self.broker, cluster.zk, self.fetchers, on_high_watermark_moved=self.moved.append,
                                       clock=cluster.clock)

    def close(self) -> None:
        self.fetchers.shutdown()
        self.broker.close()


@pytest.fixture()
def cluster(tmp_path):
    cluster = FakeCluster([1, 2, 3])
    cluster.start_controller(1)
    cluster.admin.create_topic("t", replica_assignment={0: (2, 1, 3)})
    cluster.poll()
    nodes = {b: Node(cluster, b, tmp_path) for b in (1, 2, 3)}
    for node in nodes.values():
        node.replicas.refresh()
    cluster.nodes = nodes
    yield cluster
    for node in nodes.values():
        node.close()


def _records(*values: bytes) -> bytes:
    return build_batch([SimpleRecord(value=v) for v in values], default_timestamp=int(time.time() * 1000))


def test_the_broker_named_leader_in_etcd_leads_and_the_others_follow_it(cluster):
    leader = cluster.nodes[2].replicas.partition(TP)
    assert (leader.is_leader, leader.leader_epoch, sorted(leader.isr)) == (True, 0, [1, 2, 3])
    for b in (1, 3):
        follower = cluster.nodes[b].replicas.partition(TP)
        assert (follower.is_leader, follower.leader_id) == (False, 2)
        with pytest.raises(NotLeaderOrFollowerError, match="the leader is 2"):
            cluster.nodes[b].replicas.leader_partition(TP)
    snapshot = cluster.nodes[3].replicas.metadata_cache.partition(TP)
    assert (snapshot.leader, snapshot.replicas) == (2, (2, 1, 3))


def test_followers_fetches_move_the_high_watermark_to_the_smallest_log_end_of_the_isr(cluster):
    leader_node = cluster.nodes[2]
    leader = leader_node.replicas.leader_partition(TP)
    info = leader.append_records_to_leader(_records(b"a", b"b"), required_acks=-1)
    assert leader.log.high_watermark == 0
    assert leader.check_enough_replicas_reach_offset(info.last_offset + 1) == (False, None)
    leader_node.replicas.record_follower_fetch(TP, 1, 2, 0)
    assert leader.log.high_watermark == 0  # broker 3 is in the ISR and has nothing yet
    leader_node.replicas.record_follower_fetch(TP, 3, 2, 0)
    assert leader.log.high_watermark == 2
    assert leader.check_enough_replicas_reach_offset(2) == (True, None)
    assert leader_node.moved == [TP]


def test_a_follower_out_of_sync_leaves_the_isr_by_compare_and_set_and_the_controller_follows(cluster):
    leader_node = cluster.nodes[2]
    leader = leader_node.replicas.leader_partition(TP)
    leader.append_records_to_leader(_records(b"a"), required_acks=-1)
    before = cluster.zk.get_partition_state(TP)
    cluster.advance(LAG_MS // 2)
    leader_node.replicas.record_follower_fetch(TP, 1, 1, 0)  # broker 1 keeps up, broker 3 never fetches
    cluster.advance(LAG_MS // 2 + 1000)
    leader_node.replicas.maybe_shrink_isr()
    after = cluster.zk.get_partition_state(TP)
    assert (after.value.leader, after.value.leader_epoch, after.value.isr) == (2, 0, (1, 2))
    assert after.mod_revision > before.mod_revision
    assert (sorted(leader.isr), leader.partition_epoch) == ([1, 2], after.mod_revision)
    assert leader.log.high_watermark == 1  # broker 3 no longer holds it back
    cluster.poll()
    assert cluster.active_controller().partition_state(TP).isr == (1, 2)
    # min.insync.replicas=2 still holds with two; with one left acks=all is refused.
    cluster.advance(LAG_MS + 1000)
    leader.append_records_to_leader(_records(b"b"), required_acks=-1)
    cluster.advance(LAG_MS + 1000)
    leader_node.replicas.maybe_shrink_isr()
    with pytest.raises(NotEnoughReplicasError, match=r"the ISR \[2\] is smaller than min.insync.replicas 2"):
        leader.append_records_to_leader(_records(b"c"), required_acks=-1)


def test_an_isr_change_that_lost_the_race_to_another_write_is_dropped_and_the_fresh_state_applied(cluster):
    leader_node = cluster.nodes[2]
    leader = leader_node.replicas.leader_partition(TP)
    leader.append_records_to_leader(_records(b"a"), required_acks=-1)
    cluster.advance(LAG_MS + 1000)
    cluster.kill(3)
    cluster.expire_dead_sessions()
    cluster.poll()  # the controller takes broker 3 out of the ISR first
    leader_node.replicas.maybe_shrink_isr()  # proposes dropping 1 and 3 on the stale partition epoch
    assert leader.pending_isr_change is None
    leader_node.replicas.refresh()
    assert sorted(leader.isr) == [1, 2]
    assert sorted(cluster.zk.get_partition_state(TP).value.isr) == [1, 2]  # the controller's, not the proposal


def test_a_topic_deleted_in_etcd_loses_its_logs_on_every_replica(cluster):
    cluster.admin.delete_topic("t")
    cluster.poll()
    for node in cluster.nodes.values():
        node.replicas.refresh()
        assert node.broker.topics.get("t") is None
        assert node.replicas.partition(TP) is None


def test_a_coordinators_write_is_made_only_where_the_partition_is_led_and_returns_once_the_isr_has_it(cluster):
    for node in cluster.nodes.values():
        node.broker.leader_append = lambda tp, append, node=node: node.replicas.append_as_leader(tp, append, 5000)
    with pytest.raises(NotLeaderOrFollowerError, match="not the leader of t-0"):
        cluster.nodes[1].broker.append_control_marker("t", 0, 7, 0, 0, commit=True)
    assert cluster.nodes[1].broker.log_manager.get_log(TP).log_end_offset == 0
    leader_node = cluster.nodes[2]
    leader = leader_node.replicas.leader_partition(TP)
    seen_before_fetches: list[int] = []

    def followers_fetch() -> None:
        deadline = time.monotonic() + 5
        while leader.log.log_end_offset < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        seen_before_fetches.append(leader.log.high_watermark)
        for follower in (1, 3):
            leader_node.replicas.record_follower_fetch(TP, follower, 1, 0)

    fetching = threading.Thread(target=followers_fetch)
    fetching.start()
    written = leader_node.broker.append_control_marker("t", 0, 7, 0, 0, commit=True)
    fetching.join()
    assert (written.first_offset, seen_before_fetches, leader.log.high_watermark) == (0, [0], 1)
    assert next(iter_batches(leader.log.read(0, 1 << 20).records)).header.partition_leader_epoch == 0


def test_a_coordinators_write_the_isr_does_not_take_in_time_answers_request_timed_out(cluster):
    replicas = cluster.nodes[2].replicas
    with pytest.raises(RequestTimedOutError, match="did not reach offset 1 within 200 ms"):
        replicas.append_as_leader(TP, lambda lg, epoch: lg.append(_records(b"a"), leader_epoch=epoch), 200)
    assert replicas.leader_partition(TP).log.log_end_offset == 1