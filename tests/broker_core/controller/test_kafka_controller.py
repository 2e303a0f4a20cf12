"""The controller's decisions on an in-memory store with simulated time: election and failover, leader
elections on broker failure, new and deleted topics and partitions, preferred leaders, controlled shutdown,
broker registrations."""

from __future__ import annotations

import logging

import pytest

from broker_core.controller import zk_data
from broker_core.controller.kafka_controller import KafkaController
from broker_core.controller.partition_state import NO_LEADER, PartitionState
from broker_core.controller.kafka_zk_client import BrokerRegistrationConflictError
from broker_core.controller.metadata_store import WatchEvent, WatchEventType
from broker_core.errors import (BrokerNotAvailableError, InvalidReplicaAssignmentError, NotControllerError,
                                UnknownTopicOrPartitionError)
from format.layout import TopicPartition
from tests.broker_core.controller.controller_kit import FakeCluster

T0 = TopicPartition("t", 0)


def _leaders(changes):
    return {(c.topic_partition.topic, c.topic_partition.partition): c.state.leader for c in changes}


# --- controller election ------------------------------------------------------------------------------


def test_the_first_broker_to_stand_wins_and_the_controller_epoch_starts_at_one():
    cluster = FakeCluster([1, 2, 3])
    first, _ = cluster.start_controller(2)
    second, _ = cluster.start_controller(1)
    assert (first.is_active, first.epoch) == (True, 1)
    assert (second.is_active, second.epoch) == (False, 0)
    assert cluster.zk.get_controller_id() == 2
    assert cluster.zk.get_controller_epoch().value == 1
    assert cluster.store.get(zk_data.CONTROLLER_PATH).lease == cluster.leases[2]


def test_when_the_controllers_session_expires_another_broker_takes_over_with_a_higher_epoch():
    cluster = FakeCluster([1, 2, 3])
    cluster.start_controller(1)
    cluster.start_controller(2)
    cluster.start_controller(3)
    cluster.kill(1)
    cluster.expire_dead_sessions()
    cluster.poll()
    active = cluster.active_controller()
    assert active.broker_id in (2, 3)
    assert active.epoch == 2
    assert cluster.zk.get_controller_epoch().value == 2
    assert active.live_broker_ids == {2, 3}


def test_a_controller_that_shuts_down_hands_over_at_once():
    cluster = FakeCluster([1, 2])
    first, _ = cluster.start_controller(1)
    cluster.start_controller(2)
    first.shutdown()
    cluster.controllers.pop(1)
    cluster.poll()
    assert cluster.active_controller().broker_id == 2
    assert cluster.zk.get_controller_epoch().value == 2


def test_a_deposed_controllers_writes_are_refused_by_the_epoch_fence():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [1, 2, 3]})
    old, _ = cluster.start_controller(1)
    assert cluster.state("t", 0).leader == 1
    # The old controller's process pauses past its session; another broker takes over meanwhile.
    paused_lease = cluster.leases.pop(1)
    cluster.expire_dead_sessions()
    new, _ = cluster.start_controller(2)
    assert new.epoch == 2
    before = cluster.state("t", 0)
    # Waking up, the old controller still believes it is active and acts before reading any event.
    assert old.is_active
    with pytest.raises(NotControllerError, match="controller epoch 1 is no longer current"):
        old.controlled_shutdown(3)
    assert not old.is_active
    assert cluster.state("t", 0) == before
    assert paused_lease not in cluster.leases.values()


def test_a_broker_whose_session_expired_stands_for_controller_again_only_with_a_new_session():
    cluster = FakeCluster([1])
    expired = cluster.leases.pop(1)
    cluster.expire_dead_sessions()
    controller = KafkaController(cluster.config(1), cluster.zk, expired, cluster.clock)
    assert controller.startup() == []
    assert not controller.is_active and cluster.zk.get_controller_id() is None
    cluster.start_broker(1)
    controller.on_session_renewed(cluster.leases[1])
    assert (controller.is_active, controller.epoch) == (True, 1)


# --- new topics and partitions --------------------------------------------------------------------


def test_a_new_topics_partitions_get_their_first_live_replica_as_leader_and_the_live_replicas_as_isr():
    cluster = FakeCluster([1, 2, 3])
    controller, _ = cluster.start_controller(1)
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3, 1], 1: [3, 1, 2]})
    changes = cluster.poll()
    assert sorted((c.topic_partition.partition, c.state, c.replicas, c.is_new) for c in changes) == [
        (0, PartitionState(2, 0, (2, 3, 1), 1), (2, 3, 1), True),
        (1, PartitionState(3, 0, (3, 1, 2), 1), (3, 1, 2), True),
    ]
    assert cluster.state("t", 1) == PartitionState(3, 0, (3, 1, 2), 1)
    assert [c.partition_epoch for c in changes] == [
        cluster.store.get(zk_data.partition_state_path(c.topic_partition)).mod_revision for c in changes]


def test_a_new_partition_leaves_dead_replicas_out_of_its_first_isr():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3, 1]})
    cluster.kill(2)
    cluster.expire_dead_sessions()
    cluster.start_controller(1)
    assert cluster.state("t", 0) == PartitionState(3, 0, (3, 1), 1)


def test_an_explicit_assignment_naming_an_unregistered_broker_is_refused():
    cluster = FakeCluster([1, 3])
    with pytest.raises(InvalidReplicaAssignmentError, match="partition 0 names brokers \\[2\\], which are not "
                                                            "registered \\(live brokers: \\[1, 3\\]\\)"):
        cluster.admin.create_topic("t", replica_assignment={0: [2, 3, 1]})
    assert cluster.zk.get_topic_assignment("t") is None


def test_a_topic_created_while_there_is_no_controller_gets_its_states_from_the_next_one():
    cluster = FakeCluster([1, 2])
    cluster.admin.create_topic("t", 2, 2)
    _, changes = cluster.start_controller(1)
    assert sorted(c.topic_partition.partition for c in changes) == [0, 1]
    assert all(len(cluster.state("t", p).isr) == 2 for p in (0, 1))


def test_a_partition_increase_gets_states_for_the_new_partitions_only():
    cluster = FakeCluster([1, 2, 3])
    cluster.start_controller(1)
    cluster.admin.create_topic("t", 2, 3)
    cluster.poll()
    before = cluster.state("t", 0)
    added = cluster.admin.add_partitions("t", 4)
    changes = cluster.poll()
    assert sorted(added) == [2, 3]
    assert sorted(c.topic_partition.partition for c in changes) == [2, 3]
    assert all(c.state.leader == added[c.topic_partition.partition][0] for c in changes)
    assert cluster.state("t", 0) == before


def test_the_default_replication_factor_is_used_when_none_is_given():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.default_replication_factor = 2
    cluster.admin.num_partitions = 3
    assignment = cluster.admin.create_topic("t")
    assert len(assignment) == 3 and all(len(replicas) == 2 for replicas in assignment.values())


# --- broker failure -----------------------------------------------------------------------------


def test_when_a_leaders_registration_vanishes_the_next_in_sync_replica_leads_with_a_bumped_leader_epoch():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3, 1], 1: [3, 1, 2]})
    cluster.start_controller(1)
    cluster.kill(2)
    cluster.expire_dead_sessions()
    changes = cluster.poll()
    assert cluster.state("t", 0) == PartitionState(3, 1, (3, 1), 1)
    assert ("t", 0) in _leaders(changes)
    # Broker 2 only followed partition 1: it leaves the ISR, the leader stays.
    assert cluster.state("t", 1) == PartitionState(3, 1, (3, 1), 1)


def test_a_dead_broker_leaves_every_isr():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", 6, 3)
    cluster.start_controller(1)
    cluster.kill(3)
    cluster.expire_dead_sessions()
    cluster.poll()
    states = [cluster.state("t", p) for p in range(6)]
    assert all(3 not in s.isr and s.leader in (1, 2) for s in states)


def test_with_unclean_election_disabled_a_partition_whose_isr_is_gone_stays_without_leader():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3]})
    cluster.start_controller(1)
    # Broker 3 fell out of the ISR (its leader shrank it), then the leader died.
    cluster.write_state(T0, PartitionState(2, 0, (2,), 1))
    cluster.kill(2)
    cluster.expire_dead_sessions()
    cluster.poll()
    # The last in-sync replica stays in the ISR so it can lead again, cleanly, when it returns.
    assert cluster.state("t", 0) == PartitionState(NO_LEADER, 1, (2,), 1)


def test_unclean_leader_election_elects_an_out_of_sync_replica_and_logs_it(caplog):
    cluster = FakeCluster([1, 2, 3], unclean_leader_election_enable=True)
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3]})
    cluster.start_controller(1)
    cluster.write_state(T0, PartitionState(2, 0, (2,), 1))
    cluster.kill(2)
    with caplog.at_level(logging.WARNING, logger="broker_core.controller.kafka_controller"):
        cluster.expire_dead_sessions()
        changes = cluster.poll()
    assert cluster.state("t", 0) == PartitionState(3, 1, (3,), 1)
    assert [c.unclean for c in changes if c.topic_partition == T0] == [True]
    assert "unclean leader election for t-0: broker 3 leads although it was not in the ISR [2]" in caplog.text


@pytest.mark.parametrize("broker_setting, topic_setting, leader", [
    (False, "true", 3), (True, "false", NO_LEADER), (True, None, 3), (False, None, NO_LEADER)])
def test_a_topics_own_unclean_leader_election_setting_overrides_the_brokers(broker_setting, topic_setting, leader):
    cluster = FakeCluster([1, 2, 3], unclean_leader_election_enable=broker_setting)
    overrides = {} if topic_setting is None else {"unclean.leader.election.enable": topic_setting}
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3]}, config=overrides)
    cluster.start_controller(1)
    cluster.write_state(T0, PartitionState(2, 0, (2,), 1))
    cluster.kill(2)
    cluster.expire_dead_sessions()
    cluster.poll()
    assert cluster.state("t", 0).leader == leader


def test_a_partition_without_leader_gets_one_back_when_its_last_in_sync_replica_returns():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3]})
    cluster.start_controller(1)
    cluster.write_state(T0, PartitionState(2, 0, (2,), 1))
    cluster.kill(2)
    cluster.expire_dead_sessions()
    cluster.poll()
    cluster.start_broker(2)
    changes = cluster.poll()
    assert cluster.state("t", 0) == PartitionState(2, 2, (2,), 1)
    assert _leaders(changes) == {("t", 0): 2}


def test_a_new_controller_elects_leaders_for_partitions_that_lost_theirs_while_there_was_none():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [1, 2, 3], 1: [2, 3, 1]})
    cluster.start_controller(1)
    cluster.start_controller(2)
    # The controller and the leader of partition 0 die together.
    cluster.kill(1)
    cluster.expire_dead_sessions()
    changes = cluster.poll()
    assert cluster.active_controller().broker_id == 2
    assert cluster.state("t", 0) == PartitionState(2, 1, (2, 3), 2)
    assert cluster.state("t", 1) == PartitionState(2, 1, (2, 3), 2)
    assert {c.reason for c in changes} == {"offline partition leader election", "replica offline"}


def test_a_bounced_broker_loses_its_leaderships_and_its_isr_places():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3, 1]})
    cluster.start_controller(1)
    # Broker 2 restarts faster than its session times out: a new registration under a new lease.
    old_lease = cluster.leases[2]
    cluster.store.revoke_lease(old_lease)
    cluster.start_broker(2)
    cluster.poll()
    assert cluster.state("t", 0) == PartitionState(3, 1, (3, 1), 1)


def test_a_leaders_isr_change_between_decision_and_write_is_decided_again():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 3, 1]})
    cluster.start_controller(1)
    cluster.kill(2)
    cluster.expire_dead_sessions()

    def leader_shrinks_isr():
        cluster.write_state(T0, PartitionState(2, 0, (2, 1), 1))

    # The leader's last ISR shrink lands between the controller's decision (broker 3 leads) and its write.
    cluster.store.before_next_commit(leader_shrinks_isr)
    changes = cluster.poll()
    # Decided again on the fresh state: broker 3 is out of sync, so broker 1 leads.
    assert cluster.state("t", 0) == PartitionState(1, 1, (1,), 1)
    assert [c.state for c in changes] == [PartitionState(1, 1, (1,), 1)]


# --- preferred leaders ----------------------------------------------------------------------------


def _cluster_after_broker_2_returns(**config) -> FakeCluster:
    cluster = FakeCluster([1, 2, 3], **config)
    cluster.admin.create_topic("t", replica_assignment={0: [2, 1], 1: [2, 3], 2: [1, 2], 3: [3, 2]})
    cluster.start_controller(1)
    cluster.kill(2)
    cluster.expire_dead_sessions()
    cluster.poll()
    cluster.start_broker(2)
    cluster.poll()
    # The returning replica caught up and its leaders put it back in their ISRs.
    for p in range(4):
        held = cluster.zk.get_partition_state(TopicPartition("t", p))
        isr = tuple(sorted({*held.value.isr, 2}))
        cluster.zk.update_partition_state(TopicPartition("t", p), PartitionState(held.value.leader,
                                          held.value.leader_epoch, isr, held.value.controller_epoch),
                                          held.mod_revision)
    cluster.poll()
    return cluster


def test_preferred_leaders_get_their_partitions_back_at_the_imbalance_check():
    cluster = _cluster_after_broker_2_returns()
    assert (cluster.state("t", 0).leader, cluster.state("t", 1).leader) == (1, 3)
    assert cluster.active_controller().leader_imbalance()[2] == 1.0
    # The check is due leader.imbalance.check.interval.seconds after the failover; the sessions of the killed
    # broker took 11 s of that.
    cluster.advance(300_000 - 11_000 - 1_000)
    assert cluster.poll() == []
    cluster.advance(1_000)
    changes = cluster.poll()
    assert _leaders(changes) == {("t", 0): 2, ("t", 1): 2}
    assert {c.reason for c in changes} == {"preferred replica leader election"}
    assert cluster.state("t", 0).leader_epoch == 2
    assert cluster.active_controller().leader_imbalance() == {1: 0.0, 2: 0.0, 3: 0.0}


def test_no_preferred_leader_election_when_auto_leader_rebalance_is_disabled():
    cluster = _cluster_after_broker_2_returns(auto_leader_rebalance_enable=False)
    cluster.advance(600_000)
    assert cluster.poll() == []
    assert cluster.state("t", 0).leader == 1


def test_no_preferred_leader_election_at_or_below_the_imbalance_percentage():
    cluster = _cluster_after_broker_2_returns(leader_imbalance_per_broker_percentage=100)
    cluster.advance(300_000)
    assert cluster.poll() == []


def test_a_preferred_replica_out_of_the_isr_is_not_made_leader():
    cluster = FakeCluster([1, 2])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 1]})
    controller, _ = cluster.start_controller(1)
    cluster.write_state(T0, PartitionState(1, 3, (1,), 1))
    cluster.poll()
    assert controller.elect_preferred_leaders() == []
    assert cluster.state("t", 0).leader == 1


# --- controlled shutdown --------------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_off_the_broker_and_answers_no_remaining_partitions():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [3, 1, 2], 1: [1, 3, 2], 2: [2, 1, 3]})
    controller, _ = cluster.start_controller(1)
    result = controller.controlled_shutdown(3)
    assert result.remaining_partitions == ()
    assert cluster.state("t", 0) == PartitionState(1, 1, (1, 2), 1)
    # Partitions it follows: it leaves the ISR, the leader stays.
    assert cluster.state("t", 1) == PartitionState(1, 1, (1, 2), 1)
    assert cluster.state("t", 2) == PartitionState(2, 1, (2, 1), 1)
    assert {c.reason for c in result.changes} == {"controlled shutdown"}


def test_controlled_shutdown_answers_the_partitions_no_other_in_sync_replica_can_take():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [3, 1], 1: [3, 2]})
    cluster.admin.create_topic("single", replica_assignment={0: [3]})
    controller, _ = cluster.start_controller(1)
    cluster.write_state(T0, PartitionState(3, 0, (3,), 1))
    cluster.poll()
    result = controller.controlled_shutdown(3)
    # t-1 moves to broker 2; a partition with a single replica is not waited for, as in Kafka.
    assert result.remaining_partitions == (T0,)
    assert (cluster.state("t", 0).leader, cluster.state("t", 1).leader, cluster.state("single", 0).leader) == (3, 2, 3)


def test_a_shutting_down_broker_is_not_elected_leader_elsewhere():
    cluster = FakeCluster([1, 2, 3])
    cluster.admin.create_topic("t", replica_assignment={0: [1, 2, 3]})
    controller, _ = cluster.start_controller(3)
    controller.controlled_shutdown(2)
    cluster.kill(1)
    cluster.expire_dead_sessions()
    cluster.poll()
    assert cluster.state("t", 0).leader == 3


def test_controlled_shutdown_asked_of_a_broker_that_is_not_the_controller_answers_not_controller():
    cluster = FakeCluster([1, 2])
    cluster.start_controller(1)
    follower, _ = cluster.start_controller(2)
    with pytest.raises(NotControllerError, match="broker 2 is not the controller \\(the controller is broker 1\\)"):
        follower.controlled_shutdown(2)


def test_controlled_shutdown_of_an_unknown_broker_answers_broker_not_available():
    cluster = FakeCluster([1])
    controller, _ = cluster.start_controller(1)
    with pytest.raises(BrokerNotAvailableError, match="Broker id 7 does not exist."):
        controller.controlled_shutdown(7)


# --- topic deletion -------------------------------------------------------------------------------


def test_a_deleted_topics_assignment_and_states_go_and_the_changes_say_so():
    cluster = FakeCluster([1, 2])
    cluster.admin.create_topic("t", 2, 2)
    cluster.admin.create_topic("kept", 1, 1)
    cluster.start_controller(1)
    before = cluster.state("t", 1)
    cluster.admin.delete_topic("t")
    changes = cluster.poll()
    assert [(c.topic_partition, c.deleted, c.reason) for c in changes] == [
        (TopicPartition("t", 0), True, "topic deletion"), (TopicPartition("t", 1), True, "topic deletion")]
    assert changes[1].state == before
    assert cluster.zk.get_topic_assignment("t") is None
    assert cluster.zk.get_partition_state(TopicPartition("t", 0)) is None
    assert cluster.zk.get_topic_deletions() == []
    assert cluster.zk.get_partition_state(TopicPartition("kept", 0)) is not None


def test_a_deletion_requested_while_there_is_no_controller_is_carried_out_by_the_next_one():
    cluster = FakeCluster([1])
    cluster.admin.create_topic("t", 1, 1)
    cluster.admin.delete_topic("t")
    _, changes = cluster.start_controller(1)
    assert [c.deleted for c in changes] == []
    assert cluster.zk.get_topic_assignment("t") is None and cluster.zk.get_topic_deletions() == []


def test_deleting_a_topic_that_does_not_exist_answers_unknown_topic():
    cluster = FakeCluster([1])
    with pytest.raises(UnknownTopicOrPartitionError, match="Topic nope does not exist."):
        cluster.admin.delete_topic("nope")


# --- registrations and the cluster id -------------------------------------------------------------


def test_the_first_cluster_id_stored_is_the_clusters():
    cluster = FakeCluster([])
    assert cluster.zk.get_or_create_cluster_id("first") == "first"
    assert cluster.zk.get_or_create_cluster_id("second") == "first"


def test_a_second_broker_with_the_same_node_id_is_refused_while_the_first_ones_session_lives():
    cluster = FakeCluster([1])
    with pytest.raises(BrokerRegistrationConflictError, match="a broker with node.id 1 is already registered"):
        cluster.start_broker(1)
    cluster.kill(1)
    cluster.expire_dead_sessions()
    cluster.start_broker(1)
    assert sorted(cluster.zk.get_all_brokers()) == [1]


def test_after_its_watch_lost_events_the_controller_reads_the_partition_states_again():
    cluster = FakeCluster([1, 2])
    cluster.admin.create_topic("t", replica_assignment={0: [2, 1]})
    controller, _ = cluster.start_controller(1)
    cluster.write_state(T0, PartitionState(1, 1, (1,), 1))
    cluster.poll()
    # Broker 2 catches up and leader 1 puts it back in the ISR, but the controller's watch loses that event
    # (its history was compacted): all it gets is a RESYNC.
    cluster.write_state(T0, PartitionState(1, 1, (1, 2), 1))
    controller._watch.poll()
    controller._watch.events.append(WatchEvent(WatchEventType.RESYNC, "/"))
    cluster.advance(300_000)
    changes = cluster.poll()
    # Knowing broker 2 is in sync again, the imbalance check gives it back its preferred partition.
    assert [c.state for c in changes] == [PartitionState(2, 2, (1, 2), 1)]


def test_a_broker_asking_through_etcd_for_a_controlled_shutdown_has_its_leaderships_moved_to_in_sync_replicas():
    cluster = FakeCluster([1, 2, 3])
    cluster.start_controller(1)
    cluster.admin.create_topic("t", replica_assignment={0: (2, 1, 3), 1: (1, 2, 3)})
    cluster.poll()
    cluster.zk.request_controlled_shutdown(2, cluster.leases[2], attempt=1)
    changes = cluster.poll()
    moved = cluster.state("t", 0)
    assert (moved.leader, moved.leader_epoch) == (1, 1)
    assert 2 not in moved.isr and 2 not in cluster.state("t", 1).isr
    assert cluster.state("t", 1).leader == 1
    assert sorted((c.topic_partition.partition, c.reason) for c in changes) == [
        (0, "controlled shutdown"), (1, "controlled shutdown")]
