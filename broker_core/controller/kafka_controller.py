"""The controller: one broker of the cluster, elected through etcd, that decides every partition's leader.

Kafka's ``KafkaController`` of the ZooKeeper era, in its decisions:

* **election**: the first broker to create ``/controller`` (under its session
  lease) wins, and raises ``/controller_epoch`` by one in the same
  transaction. Every write it makes afterwards is fenced by that epoch's
  ``mod_revision``, so a controller that lost its lease (paused, partitioned)
  and was replaced has its writes refused and resigns (``NotControllerError``).
  When ``/controller`` vanishes, every broker tries again.
* **failover**: the new controller reads the brokers, assignments and partition
  states, gives leaderless partitions a leader and takes dead replicas out of
  ISRs — whatever happened while there was no controller.
* **broker failure** (its registration vanished with its lease): each
  partition it led gets a leader from the ISR (offline election; with
  ``unclean.leader.election.enable``, the topic's or the broker's, an out-of-sync replica if none is in sync,
  logged as unclean), and the broker leaves every ISR. **Broker startup**:
  partitions without a leader try again.
* **new topics and partitions** (``/brokers/topics/T`` written by
  ``AdminZkClient``): each new partition's first live replica leads, the live
  replicas form the ISR, leader epoch 0. **Deleted topics**
  (``/admin/delete_topics/T``): the assignment and states go, and the changes
  say so (``deleted``).
* **preferred leaders**: every ``leader.imbalance.check.interval.seconds`` with
  ``auto.leader.rebalance.enable``, a broker leading less than
  ``100 - leader.imbalance.per.broker.percentage`` percent of the partitions it
  is preferred for gets them back where it is in sync.
* **controlled shutdown**: a stopping broker asks (``controlled_shutdown``, or
  ``/admin/controlled_shutdown/N`` under its lease); its leaderships move to
  other in-sync replicas, it leaves the ISRs it follows in, and the answer
  lists the partitions it still leads (none in sync elsewhere).

Every decision is written by compare-and-set and returned as a list of
``PartitionStateChange``; how the brokers learn of them is not this module's
business. The controller does no I/O of its own besides the store and runs on
the caller's thread: ``poll`` handles what its watch saw and what the clock
made due, so tests drive it with an in-memory store and a ``MockTime``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Iterable

from format.layout import TopicPartition

from ..clock import SYSTEM_CLOCK, Clock
from ..config import BrokerConfig
from ..errors import BrokerNotAvailableError, NotControllerError
from . import zk_data
from .election import (ElectionResult, controlled_shutdown_partition_leader_election,
                       offline_partition_leader_election, preferred_replica_partition_leader_election,
                       remove_replica_from_isr)
from .kafka_zk_client import ControllerRegistration, KafkaZkClient, Versioned
from .metadata_store import LeaseNotFoundError, WatchEvent, WatchEventType
from .partition_state import INITIAL_LEADER_EPOCH, NO_LEADER, PartitionState, PartitionStateChange
from .zk_data import BrokerInfo

__all__ = ["ControlledShutdownResult", "KafkaController"]

log = logging.getLogger(__name__)

# A state write refused because someone else (a leader changing its ISR) wrote the partition in between
# is decided again on the fresh state; this many times before giving up until the next event.
_MAX_STATE_WRITE_ATTEMPTS = 5

OFFLINE_PARTITION = "offline partition leader election"
PREFERRED_REPLICA = "preferred replica leader election"
CONTROLLED_SHUTDOWN = "controlled shutdown"
NEW_PARTITION = "new partition"
OFFLINE_REPLICA = "replica offline"
TOPIC_DELETION = "topic deletion"

Decision = Callable[[PartitionState], "ElectionResult | None"]


@dataclass(frozen=True)
class ControlledShutdownResult:
    """The answer to a broker's ControlledShutdown: the partitions it still leads (empty: it may stop now)."""

    remaining_partitions: tuple[TopicPartition, ...]
    changes: tuple[PartitionStateChange, ...] = ()


class KafkaController:
    """The controller logic of broker ``config.node_id``: ``startup``, then ``poll`` until ``shutdown``."""

    def __init__(self, config: BrokerConfig, zk_client: KafkaZkClient, lease: int,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.broker_id = config.node_id
        self.zk_client = zk_client
        self._lease = lease
        self._clock = clock
        self._registration: ControllerRegistration | None = None
        self._watch = None
        # The controller context: what the active controller knows of the cluster.
        self._live_brokers: dict[int, Versioned[BrokerInfo]] = {}
        self._assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self._states: dict[TopicPartition, Versioned[PartitionState]] = {}
        self._shutting_down: set[int] = set()
        self._next_rebalance_check_ms = 0

    # -- public state --

    @property
    def is_active(self) -> bool:
        return self._registration is not None

    @property
    def epoch(self) -> int:
        """The controller epoch this broker holds (0 when it is not the controller)."""
        return self._registration.epoch if self._registration else 0

    @property
    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(self._live_brokers)

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        held = self._states.get(tp)
        return held.value if held else None

    # -- lifecycle --

    def startup(self) -> list[PartitionStateChange]:
        """Start watching the cluster and stand for election; the changes made if this broker won."""
        # The watch comes first: whatever changes after it exists wakes ``poll``, so nothing read below goes stale
        # unseen.
        self._watch = self.zk_client.store.watch_prefix("/")
        return self._elect()

    def on_session_renewed(self, lease: int) -> list[PartitionStateChange]:
        """The broker's session lease was replaced (the old one expired): stand for election with the new one."""
        self._lease = lease
        return self._elect() if not self.is_active else []

    def shutdown(self) -> None:
        """Stop watching, and resign if this broker is the controller (the others elect at once)."""
        if self._registration is not None:
            try:
                self.zk_client.delete_controller(self._registration)
            finally:
                self._resign("shutting down")
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def poll(self, timeout_s: float = 0.0) -> list[PartitionStateChange]:
        """Handle what changed in the store and what the clock made due; the partition state changes made."""
        assert self._watch is not None, "KafkaController.startup() first"
        events = self._watch.poll(timeout_s)
        controller_changed = brokers_changed = topics_changed = deletions_requested = resync = False
        shutdowns_requested = False
        for event in events:
            if event.type is WatchEventType.RESYNC:
                controller_changed = brokers_changed = topics_changed = deletions_requested = resync = True
                shutdowns_requested = True
            elif event.key.startswith(zk_data.CONTROLLED_SHUTDOWN_PATH):
                shutdowns_requested = shutdowns_requested or event.type is WatchEventType.PUT
            elif event.key.startswith(zk_data.DELETE_TOPICS_PATH):
                deletions_requested = deletions_requested or event.type is WatchEventType.PUT
            elif event.key == zk_data.CONTROLLER_PATH:
                controller_changed = True
            elif event.key.startswith(zk_data.BROKER_IDS_PATH):
                brokers_changed = True
            elif event.key.startswith(zk_data.TOPICS_PATH):
                if zk_data.topic_from_path(event.key) is not None:
                    topics_changed = True
                else:
                    self._on_partition_state_event(event)
        changes: list[PartitionStateChange] = []
        try:
            if controller_changed:
                changes += self._on_controller_change()
            if not self.is_active:
                return changes
            if resync:
                # Events were lost: the partition states others wrote meanwhile are read again.
                self._states = self.zk_client.get_all_partition_states()
            if brokers_changed:
                changes += self._on_broker_change()
            if topics_changed:
                changes += self._on_topic_change()
            if deletions_requested:
                changes += self._on_topic_deletion()
            if shutdowns_requested:
                changes += self._on_controlled_shutdown_requests()
            if self.config.auto_leader_rebalance_enable and self._clock.milliseconds() >= self._next_rebalance_check_ms:
                self._schedule_rebalance_check()
                changes += self._check_and_trigger_auto_leader_rebalance()
        except NotControllerError as exc:
            self._resign(str(exc))
        return changes

    def _on_partition_state_event(self, event: WatchEvent) -> None:
        """Follow the states others write (a leader shrinking or expanding its ISR), as Kafka's controller
        follows ``/isr_change_notification``; the controller's own writes are already known."""
        tp = zk_data.partition_from_state_path(event.key)
        if tp is None or not self.is_active:
            return
        held = self._states.get(tp)
        if event.type is WatchEventType.DELETE:
            if held is not None and held.mod_revision < event.mod_revision:
                del self._states[tp]
        elif held is None or held.mod_revision < event.mod_revision:
            if tp.topic in self._assignments:
                self._states[tp] = Versioned(zk_data.decode_partition_state(tp, event.value), event.mod_revision)

    # -- election --

    def _elect(self) -> list[PartitionStateChange]:
        try:
            registration = self.zk_client.register_controller_and_increment_controller_epoch(self.broker_id,
                                                                                             self._lease)
        except LeaseNotFoundError:
            log.warning("broker %d: its session lease %x has expired; not standing for controller until it "
                        "registers again", self.broker_id, self._lease)
            return []
        if registration is None:
            log.info("broker %d: broker %s is the controller", self.broker_id, self.zk_client.get_controller_id())
            return []
        self._registration = registration
        log.info("broker %d: elected controller with epoch %d", self.broker_id, registration.epoch)
        try:
            return self._on_controller_failover()
        except NotControllerError as exc:
            self._resign(str(exc))
            return []

    def _on_controller_change(self) -> list[PartitionStateChange]:
        if self._registration is not None:
            if self.zk_client.is_controller_epoch_current(self._registration) \
                    and self.zk_client.get_controller_id() == self.broker_id:
                return []
            self._resign("another broker became the controller")
        if self.zk_client.get_controller_id() is None:
            return self._elect()
        return []

    def _resign(self, reason: str) -> None:
        if self._registration is not None:
            log.info("broker %d: resigning as controller (epoch %d): %s", self.broker_id,
                     self._registration.epoch, reason)
        self._registration = None
        self._live_brokers.clear()
        self._assignments.clear()
        self._states.clear()
        self._shutting_down.clear()

    def _on_controller_failover(self) -> list[PartitionStateChange]:
        self._live_brokers = self.zk_client.get_all_brokers()
        self._assignments = {t: a.value for t, a in self.zk_client.get_all_topic_assignments().items()}
        self._states = self.zk_client.get_all_partition_states()
        self._shutting_down.clear()
        self._schedule_rebalance_check()
        changes = self._on_topic_deletion()
        changes += self._initialize_new_partitions()
        changes += self._elect_offline_partitions()
        changes += self._remove_offline_replicas_from_isr()
        changes += self._on_controlled_shutdown_requests()
        return changes

    def _schedule_rebalance_check(self) -> None:
        self._next_rebalance_check_ms = (self._clock.milliseconds()
                                         + self.config.leader_imbalance_check_interval_seconds * 1000)

    # -- brokers --

    def _online(self) -> set[int]:
        """Brokers that may hold leadership: registered and not shutting down."""
        return set(self._live_brokers) - self._shutting_down

    def _on_broker_change(self) -> list[PartitionStateChange]:
        current = self.zk_client.get_all_brokers()
        # A broker that re-registered (a new session) bounced: it died and came back.
        bounced = {b for b in current.keys() & self._live_brokers.keys()
                   if current[b].mod_revision != self._live_brokers[b].mod_revision}
        dead = (self._live_brokers.keys() - current.keys()) | bounced
        new = (current.keys() - self._live_brokers.keys()) | bounced
        if not dead and not new:
            return []
        log.info("controller %d: brokers %s gone, %s registered", self.broker_id, sorted(dead), sorted(new))
        self._live_brokers = {b: v for b, v in current.items() if b not in bounced}
        self._shutting_down -= dead
        changes = []
        if dead:
            changes += self._elect_offline_partitions()
            changes += self._remove_offline_replicas_from_isr()
        self._live_brokers = current
        if new:
            self._shutting_down -= new
            changes += self._initialize_new_partitions()
            changes += self._elect_offline_partitions()
        return changes

    def _elect_offline_partitions(self) -> list[PartitionStateChange]:
        online = self._online()
        offline = [tp for tp, held in self._states.items()
                   if held.value.leader == NO_LEADER or held.value.leader not in self._live_brokers]
        changes = []
        for tp in offline:
            change = self._update(tp, OFFLINE_PARTITION, lambda state, tp=tp: self._offline_election(tp, state, online))
            if change is not None:
                changes.append(change)
            elif tp in self._states and self._states[tp].value.leader not in online:
                log.error("controller %d: no replica of %s can lead: assigned %s, ISR %s, live brokers %s",
                          self.broker_id, tp, list(self._replicas(tp)), list(self._states[tp].value.isr),
                          sorted(online))
        return changes

    def _offline_election(self, tp: TopicPartition, state: PartitionState, online: set[int]) -> ElectionResult | None:
        if state.leader != NO_LEADER and state.leader in online:
            return None  # someone else elected a leader meanwhile
        # The topic's setting is read only when it matters: when no in-sync replica is left to lead.
        unclean = not any(r in online for r in state.isr) and self._unclean_leader_election_enable(tp.topic)
        result = offline_partition_leader_election(self._replicas(tp), state, online, unclean, self.epoch)
        if result is not None and result.unclean:
            log.warning("controller %d: unclean leader election for %s: broker %d leads although it was not in "
                        "the ISR %s; records acknowledged by the ISR may be lost (unclean.leader.election.enable "
                        "is true)", self.broker_id, tp, result.state.leader, list(state.isr))
        return result

    def _unclean_leader_election_enable(self, topic: str) -> bool:
        """The topic's ``unclean.leader.election.enable``: its override in ``/config/topics/T``, else the
        broker's."""
        value = self.zk_client.get_topic_config(topic).get("unclean.leader.election.enable")
        return self.config.unclean_leader_election_enable if value is None else value.strip().lower() == "true"

    def _remove_offline_replicas_from_isr(self) -> list[PartitionStateChange]:
        changes = []
        for tp, held in list(self._states.items()):
            for replica in [r for r in held.value.isr if r not in self._live_brokers]:
                change = self._update(tp, OFFLINE_REPLICA, lambda state, replica=replica: self._without(state, replica))
                if change is not None:
                    changes.append(change)
        return changes

    def _without(self, state: PartitionState, replica: int) -> ElectionResult | None:
        if replica in self._live_brokers:
            return None
        new_state = remove_replica_from_isr(state, replica, self.epoch)
        return ElectionResult(new_state) if new_state is not None else None

    # -- topics --

    def _on_topic_change(self) -> list[PartitionStateChange]:
        self._assignments = {t: a.value for t, a in self.zk_client.get_all_topic_assignments().items()}
        for tp in [tp for tp in self._states if tp.topic not in self._assignments]:
            del self._states[tp]
        return self._initialize_new_partitions()

    def _on_topic_deletion(self) -> list[PartitionStateChange]:
        changes = []
        for topic in self.zk_client.get_topic_deletions():
            partitions = sorted(self._assignments.get(topic, {}))
            revision = self.zk_client.delete_topic(topic, partitions, self._registration)
            log.info("controller %d: deleted topic %s (%d partitions)", self.broker_id, topic, len(partitions))
            for partition in partitions:
                tp = TopicPartition(topic, partition)
                held = self._states.pop(tp, None)
                if held is not None:
                    changes.append(PartitionStateChange(tp, held.value, self._replicas(tp), revision,
                                                        TOPIC_DELETION, deleted=True))
            self._assignments.pop(topic, None)
        return changes

    def _initialize_new_partitions(self) -> list[PartitionStateChange]:
        online = self._online()
        changes = []
        for topic, assignment in sorted(self._assignments.items()):
            for partition, replicas in assignment.items():
                tp = TopicPartition(topic, partition)
                if tp in self._states:
                    continue
                live = [r for r in replicas if r in online]
                if not live:
                    log.error("controller %d: new partition %s has no live replica (assigned %s, live brokers %s); "
                              "it stays offline", self.broker_id, tp, list(replicas), sorted(online))
                    continue
                state = PartitionState(live[0], INITIAL_LEADER_EPOCH, tuple(live), self.epoch)
                change = self._write(tp, state, 0, NEW_PARTITION, is_new=True)
                if change is None:
                    # Someone wrote a first state before us (a previous controller): learn it.
                    fresh = self.zk_client.get_partition_state(tp)
                    if fresh is not None:
                        self._states[tp] = fresh
                else:
                    changes.append(change)
        return changes

    # -- preferred leaders --

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition] | None = None
                                ) -> list[PartitionStateChange]:
        """Move leadership back to each partition's preferred (first assigned) replica where it is in sync
        (Kafka's preferred replica election; all partitions when none are named)."""
        self._check_active()
        online = self._online()
        targets = sorted(self._states) if partitions is None else sorted(partitions)
        changes = []
        try:
            for tp in targets:
                if tp not in self._states:
                    continue
                change = self._update(tp, PREFERRED_REPLICA,
                                      lambda state, tp=tp: self._preferred_election(tp, state, online))
                if change is not None:
                    changes.append(change)
        except NotControllerError as exc:
            self._resign(str(exc))
            raise
        return changes

    def _preferred_election(self, tp: TopicPartition, state: PartitionState, online: set[int]
                            ) -> ElectionResult | None:
        replicas = self._replicas(tp)
        if not replicas or state.leader == replicas[0]:
            return None
        return preferred_replica_partition_leader_election(replicas, state, online, self.epoch)

    def leader_imbalance(self) -> dict[int, float]:
        """Per preferred broker: the fraction of the partitions it is preferred for that it does not lead."""
        preferred: dict[int, list[TopicPartition]] = {}
        for tp in self._states:
            replicas = self._replicas(tp)
            if replicas:
                preferred.setdefault(replicas[0], []).append(tp)
        return {broker: sum(1 for tp in tps if self._states[tp].value.leader != broker) / len(tps)
                for broker, tps in sorted(preferred.items())}

    def _check_and_trigger_auto_leader_rebalance(self) -> list[PartitionStateChange]:
        online = self._online()
        threshold = self.config.leader_imbalance_per_broker_percentage / 100
        changes = []
        for broker, ratio in self.leader_imbalance().items():
            if ratio <= threshold or broker not in online:
                continue
            log.info("controller %d: broker %d leads too few of its preferred partitions (imbalance %.0f%% > "
                     "%d%%): moving them back", self.broker_id, broker, ratio * 100,
                     self.config.leader_imbalance_per_broker_percentage)
            candidates = [tp for tp in self._states
                          if self._replicas(tp)[:1] == (broker,) and self._states[tp].value.leader != broker]
            for tp in sorted(candidates):
                change = self._update(tp, PREFERRED_REPLICA,
                                      lambda state, tp=tp: self._preferred_election(tp, state, online))
                if change is not None:
                    changes.append(change)
        return changes

    # -- controlled shutdown --

    def controlled_shutdown(self, broker_id: int) -> ControlledShutdownResult:
        """Move leadership off ``broker_id`` before it stops; the partitions it still leads.

        Raises NotControllerError when this broker is not (or no longer) the
        controller, BrokerNotAvailableError when ``broker_id`` is not registered.
        """
        self._check_active()
        if broker_id not in self._live_brokers:
            raise BrokerNotAvailableError(f"Broker id {broker_id} does not exist.")
        self._shutting_down.add(broker_id)
        online = self._online()
        changes = []
        try:
            for tp in sorted(self._states):
                state = self._states[tp].value
                if len(self._replicas(tp)) <= 1 or broker_id not in self._replicas(tp):
                    continue
                if state.leader == broker_id:
                    change = self._update(tp, CONTROLLED_SHUTDOWN,
                                          lambda state, tp=tp: self._shutdown_election(tp, state, broker_id, online))
                elif broker_id in state.isr:
                    change = self._update(tp, CONTROLLED_SHUTDOWN,
                                          lambda state: self._shutdown_follower(state, broker_id))
                else:
                    continue
                if change is not None:
                    changes.append(change)
        except NotControllerError as exc:
            self._resign(str(exc))
            raise
        remaining = tuple(tp for tp in sorted(self._states)
                          if self._states[tp].value.leader == broker_id and len(self._replicas(tp)) > 1)
        return ControlledShutdownResult(remaining, tuple(changes))

    def _on_controlled_shutdown_requests(self) -> list[PartitionStateChange]:
        """Brokers that asked through ``/admin/controlled_shutdown/N``: each one's leaderships move away (a broker
        whose request is still there after its partitions remained asks again by rewriting it)."""
        changes: list[PartitionStateChange] = []
        for broker_id in self.zk_client.get_controlled_shutdown_requests():
            if broker_id not in self._live_brokers:
                continue
            result = self.controlled_shutdown(broker_id)
            log.info("controller %d: controlled shutdown of broker %d moved %d partitions; %d remain", self.broker_id,
                     broker_id, len(result.changes), len(result.remaining_partitions))
            changes += result.changes
        return changes

    def _shutdown_election(self, tp: TopicPartition, state: PartitionState, broker_id: int, online: set[int]
                           ) -> ElectionResult | None:
        if state.leader != broker_id:
            return None
        return controlled_shutdown_partition_leader_election(self._replicas(tp), state, online, self._shutting_down,
                                                             self.epoch)

    def _shutdown_follower(self, state: PartitionState, broker_id: int) -> ElectionResult | None:
        if state.leader == broker_id or broker_id not in state.isr:
            return None
        new_state = remove_replica_from_isr(state, broker_id, self.epoch)
        return ElectionResult(new_state) if new_state is not None else None

    # -- writing states --

    def _check_active(self) -> None:
        if self._registration is None:
            controller = self.zk_client.get_controller_id()
            raise NotControllerError(f"broker {self.broker_id} is not the controller (the controller is "
                                     f"{'none' if controller is None else f'broker {controller}'})")

    def _replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self._assignments.get(tp.topic, {}).get(tp.partition, ())

    def _update(self, tp: TopicPartition, reason: str, decide: Decision) -> PartitionStateChange | None:
        """Decide ``tp``'s next state from its current one and compare-and-set it; decided again on the fresh
        state when someone wrote the partition in between. ``None`` when ``decide`` wants no change."""
        for _ in range(_MAX_STATE_WRITE_ATTEMPTS):
            held = self._states[tp]
            result = decide(held.value)
            if result is None:
                return None
            change = self._write(tp, result.state, held.mod_revision, reason, unclean=result.unclean)
            if change is not None:
                return change
            fresh = self.zk_client.get_partition_state(tp)
            if fresh is None:
                self._states.pop(tp, None)
                return None
            self._states[tp] = fresh
        log.warning("controller %d: %s of %s kept being overtaken by other writes; trying again on the next event",
                    self.broker_id, reason, tp)
        return None

    def _write(self, tp: TopicPartition, state: PartitionState, mod_revision: int, reason: str,
               is_new: bool = False, unclean: bool = False) -> PartitionStateChange | None:
        assert self._registration is not None
        revision = self.zk_client.update_partition_state(tp, state, mod_revision, self._registration)
        if revision is None:
            return None
        self._states[tp] = Versioned(state, revision)
        return PartitionStateChange(tp, state, self._replicas(tp), revision, reason, is_new=is_new, unclean=unclean)
