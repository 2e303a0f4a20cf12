"""The controller on a real etcd: contending controllers, failover with a higher epoch (after a clean stop
and after a SIGKILL), leader election when a broker's session expires, and etcd restarting under a running
cluster."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from broker_core.controller.etcd_connect import parse_etcd_connect
from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
from broker_core.controller.kafka_zk_client import KafkaZkClient
from broker_core.controller.admin_zk_client import AdminZkClient
from broker_core.controller.controller_event_manager import ControllerEventManager
from broker_core.controller.partition_state import PartitionState
from format.layout import TopicPartition
from tests.broker_core.controller.controller_kit import EtcdNode, poll_until
from tests.broker_core.wait_kit import wait_until

T0 = TopicPartition("t", 0)
REPO = Path(__file__).resolve().parents[3]
CHROOT = "/seglog"


@pytest.fixture()
def nodes(etcd_server):
    started: list[EtcdNode] = []

    def start(broker_id: int, **config) -> EtcdNode:
        node = EtcdNode(etcd_server.connect(CHROOT), broker_id, **config)
        started.append(node)
        return node

    yield start
    for node in started:
        node.close()


@pytest.fixture()
def observer(etcd_server):
    """A separate connection that reads what the cluster wrote to etcd."""
    store = EtcdMetadataStore(parse_etcd_connect(etcd_server.connect(CHROOT)))
    yield KafkaZkClient(store)
    store.close()


def test_two_controllers_contending_one_wins_and_the_other_takes_over_with_a_higher_epoch(nodes, observer):
    first, second = nodes(1), nodes(2)
    barrier = threading.Barrier(2)

    def stand(node):
        barrier.wait()
        node.controller.startup()

    threads = [threading.Thread(target=stand, args=(n,)) for n in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted([first.controller.is_active, second.controller.is_active]) == [False, True]
    winner, other = (first, second) if first.controller.is_active else (second, first)
    assert observer.get_controller_id() == winner.broker_id
    assert observer.get_controller_epoch().value == winner.controller.epoch == 1
    # The winner's process is gone: its lease revoked, /controller with it.
    winner.gone(revoke=True)
    poll_until([other], lambda: other.controller.is_active)
    assert other.controller.epoch == 2
    assert (observer.get_controller_id(), observer.get_controller_epoch().value) == (other.broker_id, 2)


def test_a_broker_registration_expiring_after_the_session_timeout_triggers_leader_election(nodes, observer):
    controller_node, leader, follower = nodes(1), nodes(2), nodes(3)
    AdminZkClient(observer).create_topic("t", replica_assignment={0: [2, 3, 1]})
    controller_node.controller.startup()
    follower.controller.startup()
    assert observer.get_partition_state(T0).value == PartitionState(2, 0, (2, 3, 1), 1)
    # Broker 2 is SIGKILLed: no revoke, its session just stops being renewed.
    leader.gone(revoke=False)
    changes = poll_until([controller_node, follower], lambda: observer.get_partition_state(T0).value.leader != 2)
    assert observer.get_partition_state(T0).value == PartitionState(3, 1, (3, 1), 1)
    assert 2 not in {b for b in observer.get_all_brokers()}
    assert [(c.topic_partition, c.state.leader, c.reason) for c in changes] == [
        (T0, 3, "offline partition leader election")]
    assert follower.controller.is_active is False


def test_the_cluster_carries_on_after_etcd_restarts(etcd_server, nodes, observer):
    controller_node, leader, _ = nodes(1, session_timeout_ms=3000, heartbeat_ms=300), \
        nodes(2, session_timeout_ms=3000, heartbeat_ms=300), nodes(3, session_timeout_ms=3000, heartbeat_ms=300)
    AdminZkClient(observer).create_topic("t", replica_assignment={0: [2, 3, 1]})
    controller_node.controller.startup()
    etcd_server.restart()
    # Sessions, the controller and the states survive the restart; the controller's watch resumes.
    poll_until([controller_node], lambda: sorted(observer.get_all_brokers()) == [1, 2, 3])
    assert observer.get_controller_id() == 1 and controller_node.controller.is_active
    leader.gone(revoke=False)
    poll_until([controller_node], lambda: observer.get_partition_state(T0).value.leader == 3, timeout_s=20)
    assert observer.get_partition_state(T0).value == PartitionState(3, 1, (3, 1), 1)


def test_controller_threads_hand_over_and_deliver_the_changes_they_make(nodes, observer):
    first, second, third = nodes(1), nodes(2), nodes(3)
    AdminZkClient(observer).create_topic("t", replica_assignment={0: [1, 2, 3]})
    delivered: dict[int, list] = {1: [], 2: []}
    managers = {}
    for node in (first, second):
        managers[node.broker_id] = ControllerEventManager(node.controller, delivered[node.broker_id].extend)
    managers[1].start()
    wait_until(lambda: first.controller.is_active)
    managers[2].start()
    try:
        assert wait_until(lambda: [c.state.leader for c in delivered[1]] == [1])
        # Broker 1 stops cleanly: its controller resigns and its session ends.
        managers[1].close()
        first.gone(revoke=True)
        assert wait_until(lambda: second.controller.is_active and any(
            c.reason == "offline partition leader election" for c in delivered[2]))
        assert observer.get_partition_state(T0).value == PartitionState(2, 1, (2, 3), 2)
        result = managers[2].controlled_shutdown(2)
        assert result.remaining_partitions == ()
        assert observer.get_partition_state(T0).value == PartitionState(3, 2, (3,), 2)
        assert delivered[2][-1].state == PartitionState(3, 2, (3,), 2)
    finally:
        managers[2].close()
    assert third.controller.is_active is False


def _read_line(proc: subprocess.Popen, timeout_s: float = 20.0) -> str:
    """The process's next line of output, waiting at most ``timeout_s``."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    assert ready, f"no output from process {proc.pid} within {timeout_s} s"
    return proc.stdout.readline().strip()


def _start_broker_process(connect: str, broker_id: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("controller_process.py")), connect,
                             str(broker_id)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    assert _read_line(proc) == "registered"
    return proc


def test_when_the_controllers_process_is_sigkilled_another_takes_over_after_the_session_timeout(etcd_server,
                                                                                                  observer):
    connect = etcd_server.connect(CHROOT)
    first = _start_broker_process(connect, 1)
    second = None
    try:
        assert _read_line(first) == "controller 1"
        second = _start_broker_process(connect, 2)
        assert observer.get_controller_id() == 1
        killed_at = time.monotonic()
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        assert _read_line(second) == "controller 2"
        # The session timeout is 1 s: the takeover waits for it, and not much longer.
        assert time.monotonic() - killed_at < 10
        assert (observer.get_controller_id(), observer.get_controller_epoch().value) == (2, 2)
        assert sorted(observer.get_all_brokers()) == [2]
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
