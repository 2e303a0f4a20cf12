"""A bounded chaos run of one consumer group: members join, leave and crash at random while records are produced.

Members are kafka-python consumers in their own processes (``group_member.py``),
committing synchronously after each poll; a crash is SIGKILL (no LeaveGroup,
the last poll's records uncommitted). Afterwards:

* at-least-once: every offset produced was consumed by some member;
* one owner per partition per generation, checked twice: from what the
  members were handed (generation, member id, partitions, as each client
  reports it) and from every generation the coordinator stored in
  ``__consumer_offsets`` — which must also agree with each other.

The schedule comes from a seeded random generator (a fixed seed by default); the seed is in the
failure message, and ``SEGLOG_CHAOS_SEED`` replays a run.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from format.layout import TopicPartition
from group_kit import MemberProcess, stored_generations
from server_kit import start_broker
from tests.broker_core.wait_kit import wait_until

pytestmark = pytest.mark.slow

PARTITIONS = 6
SESSION_TIMEOUT_MS = 3000
CHAOS_S = 18  # the random schedule; draining afterwards is bounded by DRAIN_S
DRAIN_S = 20
MAX_MEMBERS = 4
BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": 500, "group.min.session.timeout.ms": 1000}


class Producer(threading.Thread):
    """Writes numbered records round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=10_000)
        self.topic = topic
        self.sent = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            for _ in range(PARTITIONS):
                self.producer.send(self.topic, b"%d" % self.sent, partition=self.sent % PARTITIONS)
                self.sent += 1
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(10)
        self.producer.flush(10)
        self.producer.close()


def test_members_joining_leaving_and_crashing_lose_no_record_and_never_share_a_partition(tmp_path):
    seed = int(os.environ.get("SEGLOG_CHAOS_SEED", "20261122"))  # a fixed schedule unless asked otherwise
    rng = random.Random(seed)
    server = start_broker(tmp_path / "logs", **BROKER_SETTINGS)
    bootstrap = server.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    admin.create_topics([NewTopic("chaos", PARTITIONS, 1)])
    admin.close()
    members: list[MemberProcess] = []
    actions: list[str] = []

    def join() -> None:
        members.append(MemberProcess("kafka-python", bootstrap, "chaos", "app", SESSION_TIMEOUT_MS))
        actions.append("join")

    producer = Producer(bootstrap, "chaos")
    try:
        for _ in range(3):
            join()
        producer.start()
        deadline = time.monotonic() + CHAOS_S
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.5, 2.0))
            alive = [m for m in members if m.alive]
            action = rng.choice(["join", "leave", "crash"])
            if len(alive) <= 1:
                action = "join"  # someone must be left to consume
            elif action == "join" and len(alive) >= MAX_MEMBERS:
                action = rng.choice(["leave", "crash"])
            if action == "join":
                join()
            elif action == "leave":
                rng.choice(alive).stop()
                actions.append("leave")
            else:
                rng.choice(alive).kill()
                actions.append("crash")
        producer.stop()
        if not any(m.alive for m in members):
            join()
        end_offsets = {p: server.broker.list_offsets("chaos", p, "latest").offset for p in range(PARTITIONS)}
        produced = {(p, o) for p, end in end_offsets.items() for o in range(end)}

        def missing() -> set[tuple[int, int]]:
            consumed = {record for m in members for record in list(m.consumed)}
            return produced - consumed

        wait_until(lambda: not missing(), DRAIN_S, interval_s=0.2)
        context = (f"seed {seed}, actions {actions}, produced {len(produced)} records "
                   f"(SEGLOG_CHAOS_SEED={seed} replays the schedule)")
        assert {"join", "leave", "crash"} <= set(actions), context
        lost = missing()
        assert not lost, f"{len(lost)} records never consumed, e.g. {sorted(lost)[:10]}; {context}"

        # What the members were handed, by generation.
        reported: dict[int, dict[str, tuple[int, ...]]] = defaultdict(dict)
        for member in members:
            for a in member.assignments:
                reported[a.generation][a.member_id] = a.partitions
        for generation, assignment in reported.items():
            owned = [p for partitions in assignment.values() for p in partitions]
            assert len(owned) == len(set(owned)), f"generation {generation} shared partitions: {assignment}; {context}"

        # What the coordinator stored: every generation, each partition to at most one member.
        stored = stored_generations(server.broker, "app")
        assert len(stored) >= len(reported), context
        generations = [g.generation for g in stored]
        assert generations == sorted(generations) and len(set(generations)) == len(generations), context
        for g in stored:
            owned = [tp for partitions in g.assignment.values() for tp in partitions]
            assert len(owned) == len(set(owned)), f"stored generation {g.generation} shared partitions; {context}"
            assert all(tp.topic == "chaos" for tp in owned)
        by_generation = {g.generation: g for g in stored}
        for generation, assignment in reported.items():
            for member_id, partitions in assignment.items():
                stored_partitions = by_generation[generation].assignment[member_id]
                assert stored_partitions == tuple(TopicPartition("chaos", p) for p in partitions), context
    finally:
        if producer.is_alive():
            producer.stop()
        for member in members:
            member.stop()
        server.shutdown(timeout_ms=10_000)
