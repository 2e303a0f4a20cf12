"""Three ``seglog broker`` processes and a real etcd on loopback: a topic replicated three times with
``min.insync.replicas=2``, its leaders killed and restarted under an idempotent ``acks=all`` producer, its
controller killed, and a write refused when too few replicas are left."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest
from confluent_kafka import Producer

from broker_core.broker import Broker
from broker_core.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from broker_core.protocol import ApiKey
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import batch_spans, build_batch, iter_batches
from tests.broker_core.cli_kit import run
from tests.broker_core.cluster.cluster_kit import ClusterKit

pytestmark = pytest.mark.slow


@pytest.fixture()
def cluster(tmp_path, etcd_server):
    kit = ClusterKit(tmp_path, etcd_server.connect("/seglog"))
    kit.start_all()
    try:
        yield kit
    finally:
        kit.close()


def _batch(*values: bytes) -> bytes:
    return build_batch([SimpleRecord(value=v) for v in values], default_timestamp=int(time.time() * 1000))


def _produce(kit: ClusterKit, node_id: int, topic: str, records: bytes, acks: int = -1,
             timeout_ms: int = 10_000) -> dict:
    with kit.client(node_id) as client:
        response = client.send(ApiKey.PRODUCE, {
            "transactional_id": None, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return response["responses"][0]["partition_responses"][0]


def _fetch(kit: ClusterKit, node_id: int, topic: str, offset: int = 0) -> dict:
    with kit.client(node_id) as client:
        response = client.send(ApiKey.FETCH, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "last_fetched_epoch": -1,
                                                        "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}]}, version=12)
    return response["responses"][0]["partitions"][0]


def _values(records: bytes) -> list[bytes]:
    return [r.value for b in iter_batches(bytes(records)) for r in b.records()]


def _committed_prefix(log_dir: str, topic: str, high_watermark: int, partition: int = 0) -> bytes:
    """The bytes of the batches below ``high_watermark`` in a (stopped) broker's log of ``topic``-``partition``."""
    with Broker(log_dir, read_only=True) as broker:
        lg = broker.log_manager.log_or_raise(TopicPartition(topic, partition))
        data = bytes(lg.read(0, 1 << 30, max_offset=lg.log_end_offset).records)
    end = 0
    for position, size, _, last_offset, _ in batch_spans(data):
        if last_offset >= high_watermark:
            break
        end = position + size
    return data[:end]


def test_a_topic_created_with_replication_factor_3_is_led_by_one_broker_with_all_three_in_sync(cluster):
    created = cluster.create_topic("orders", partitions=2, replication_factor=3)
    assert (created["error_code"], created["num_partitions"], created["replication_factor"]) == (0, 2, 3)
    for partition in (0, 1):
        view = cluster.wait_for_isr("orders", (1, 2, 3), partition)
        assert sorted(view.replicas) == [1, 2, 3]
        assert view.leader == view.replicas[0]
        assert (view.error_code, view.offline) == (0, ())
    metadata = cluster.metadata(["orders"], node_id=2)
    assert [(b["node_id"], b["port"]) for b in metadata["brokers"]] == [(n, cluster.ports[n]) for n in (1, 2, 3)]
    assert metadata["controller_id"] in (1, 2, 3)
    for node_id in (1, 2, 3):  # the topic's config reached every replica from /config/topics
        with cluster.client(node_id) as client:
            (resource,) = client.send(ApiKey.DESCRIBE_CONFIGS, {
                "resources": [{"resource_type": 2, "resource_name": "orders",
                               "configuration_keys": ["min.insync.replicas"]}],
                "include_synonyms": False, "include_documentation": False})["results"]
        assert [(c["name"], c["value"]) for c in resource["configs"]] == [("min.insync.replicas", "2")]
    with cluster.client(3) as client:
        described = client.send(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {
            "topics": [{"name": "orders"}], "response_partition_limit": 100, "cursor": None})
    (topic,) = described["topics"]
    assert [(p["partition_index"], p["leader_id"], sorted(p["replica_nodes"]), sorted(p["isr_nodes"]))
            for p in topic["partitions"]] == [(p, cluster.partition("orders", p).leader, [1, 2, 3], [1, 2, 3])
                                              for p in (0, 1)]


def test_produce_fetch_and_offsets_for_leader_epoch_at_a_follower_answer_not_leader_or_follower(cluster):
    cluster.create_topic("t")
    view = cluster.wait_for_isr("t", (1, 2, 3))
    follower = next(b for b in (1, 2, 3) if b != view.leader)
    assert _produce(cluster, follower, "t", _batch(b"x"))["error_code"] == NotLeaderOrFollowerError.code
    assert _fetch(cluster, follower, "t")["error_code"] == NotLeaderOrFollowerError.code
    with cluster.client(follower) as client:
        answer = client.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, {"replica_id": -1, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": view.leader_epoch, "leader_epoch": 0}]}]})
    assert answer["topics"][0]["partitions"][0]["error_code"] == NotLeaderOrFollowerError.code
    assert _produce(cluster, view.leader, "t", _batch(b"x"))["error_code"] == 0


def test_an_acks_all_write_is_answered_once_every_replica_has_it_and_consumers_read_up_to_the_high_watermark(cluster):
    cluster.create_topic("t")
    view = cluster.wait_for_isr("t", (1, 2, 3))
    answer = _produce(cluster, view.leader, "t", _batch(b"a", b"b", b"c"))
    assert (answer["error_code"], answer["base_offset"]) == (0, 0)
    fetched = _fetch(cluster, view.leader, "t")
    assert fetched["high_watermark"] == 3
    assert _values(fetched["records"]) == [b"a", b"b", b"c"]


def test_acks_all_with_only_one_replica_alive_answers_not_enough_replicas(cluster):
    cluster.create_topic("t")
    view = cluster.wait_for_isr("t", (1, 2, 3))
    for follower in [b for b in (1, 2, 3) if b != view.leader]:
        cluster.kill(follower)
    cluster.wait_for_isr("t", (view.leader,))
    answer = _produce(cluster, view.leader, "t", _batch(b"lonely"))
    assert answer["error_code"] == NotEnoughReplicasError.code
    assert "min.insync.replicas 2" in answer["error_message"]  # the topic's, the brokers' default is 1
    # acks=1 does not ask for the ISR.
    assert _produce(cluster, view.leader, "t", _batch(b"alone"), acks=1)["error_code"] == 0


def test_the_controllers_broker_sigkilled_another_broker_takes_over_and_elects_new_leaders(cluster):
    cluster.create_topic("t", partitions=3)
    for partition in range(3):
        cluster.wait_for_isr("t", (1, 2, 3), partition)
    controller = cluster.controller_id()
    cluster.kill(controller)
    survivors = tuple(b for b in (1, 2, 3) if b != controller)
    new_controller = cluster.wait_until(lambda: (lambda c: c if c in survivors else None)(cluster.controller_id()),
                                        "another broker became the controller")
    assert new_controller != controller
    for partition in range(3):
        view = cluster.wait_for_isr("t", survivors, partition)
        assert view.leader in survivors
        assert view.offline == (controller,)


class IdempotentWriter:
    """confluent-kafka's idempotent producer with acks=all writing numbered values to ``topic`` on a thread until
    ``stop``; ``acked`` are the values whose delivery was confirmed, ``failed`` the delivery errors."""

    def __init__(self, cluster: ClusterKit, topic: str) -> None:
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5, "message.timeout.ms": 120_000, "log_level": 0})
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, error, message) -> None:
        if error is None:
            self.acked.append(message.value())
        else:
            self.failed.append(str(error))

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            self._producer.produce(self._topic, value=b"%07d" % n, on_delivery=self._delivered)
            n += 1
            self._producer.poll(0.002)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(120) == 0
        assert self.failed == []


def _assert_nothing_lost_nor_duplicated_and_replicas_identical(cluster: ClusterKit, topic: str, partitions: int,
                                                               acked: list[bytes]) -> None:
    """Every acknowledged value is in the log once, no value twice, and, once the brokers are stopped, every
    replica's committed prefix is byte for byte the leader's."""
    fetched, high_watermarks = [], {}
    for partition in range(partitions):
        view = cluster.wait_for_isr(topic, (1, 2, 3), partition)
        offset = 0
        while True:
            with cluster.client(view.leader) as client:
                answer = client.send(ApiKey.FETCH, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                    "rack_id": "", "topics": [{"topic": topic, "partitions": [{
                        "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                        "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]},
                    version=12)["responses"][0]["partitions"][0]
            values = _values(answer["records"])
            if not values:
                break
            fetched += values
            offset += len(values)
        assert offset == answer["high_watermark"]
        high_watermarks[partition] = offset
    assert len(fetched) == len(set(fetched)), "a record was written twice"
    assert set(acked) <= set(fetched), f"acknowledged records lost: {sorted(set(acked) - set(fetched))[:5]}"
    cluster.close()
    for partition, high_watermark in high_watermarks.items():
        prefixes = {n: _committed_prefix(cluster.log_dir(n), topic, high_watermark, partition) for n in (1, 2, 3)}
        assert len(prefixes[1]) > 0 or high_watermark == 0
        assert prefixes[1] == prefixes[2] == prefixes[3], f"{topic}-{partition}: replicas differ below the HW"


def _progress(cluster: ClusterKit, writer: IdempotentWriter, what: str, records: int = 50) -> None:
    before = len(writer.acked)
    cluster.wait_until(lambda: len(writer.acked) >= before + records, f"acknowledgements {what}", timeout_s=90)


def test_an_idempotent_acks_all_producer_loses_and_duplicates_nothing_while_leaders_are_killed_and_restarted(
        cluster):
    cluster.create_topic("t")
    cluster.wait_for_isr("t", (1, 2, 3))
    writer = IdempotentWriter(cluster, "t")
    for _ in range(6):
        _progress(cluster, writer, "before the kill")
        leader = cluster.wait_for_isr("t", (1, 2, 3)).leader
        cluster.kill(leader)
        _progress(cluster, writer, f"after leader {leader} was killed")
        cluster.start(leader)
    cluster.wait_for_isr("t", (1, 2, 3))
    writer.stop()
    _assert_nothing_lost_nor_duplicated_and_replicas_identical(cluster, "t", 1, writer.acked)


def test_chaos_leaders_followers_and_the_controller_sigkilled_at_random_lose_and_duplicate_nothing(cluster):
    rng = random.Random(int(os.environ.get("SEGLOG_CHAOS_SEED", "16")))
    cluster.create_topic("t", partitions=3)
    for partition in range(3):
        cluster.wait_for_isr("t", (1, 2, 3), partition)
    writer = IdempotentWriter(cluster, "t")
    for _ in range(14):
        _progress(cluster, writer, "before the kill")
        role = rng.choice(["leader", "follower", "controller"])
        view = cluster.partition("t", rng.randrange(3))
        victim = {"leader": view.leader, "follower": rng.choice([b for b in view.replicas if b != view.leader]),
                  "controller": cluster.controller_id()}[role]
        cluster.kill(victim)
        _progress(cluster, writer, f"after broker {victim} ({role}) was killed")
        cluster.start(victim)
        for partition in range(3):
            cluster.wait_for_isr("t", (1, 2, 3), partition)
    writer.stop()
    _assert_nothing_lost_nor_duplicated_and_replicas_identical(cluster, "t", 3, writer.acked)


def test_a_follower_paused_past_replica_lag_time_max_ms_leaves_the_isr_and_rejoins_once_caught_up(
        tmp_path, etcd_server):
    # The session outlives the pause: the leader, not the controller, takes the follower out of the ISR.
    kit = ClusterKit(tmp_path, etcd_server.connect("/lag"), **{"replica.lag.time.max.ms": "1000",
                                                                "broker.session.timeout.ms": "30000",
                                                                "broker.heartbeat.interval.ms": "1000"})
    kit.start_all()
    try:
        kit.create_topic("t")
        view = kit.wait_for_isr("t", (1, 2, 3))
        follower = next(b for b in (1, 2, 3) if b != view.leader)
        others = tuple(b for b in (1, 2, 3) if b != follower)
        kit.brokers[follower].proc.send_signal(signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 30
            while kit.partition("t", node_id=view.leader).isr != tuple(sorted(others)):
                assert time.monotonic() < deadline, "the paused follower never left the ISR"
                assert _produce(kit, view.leader, "t", _batch(b"while paused"), acks=1)["error_code"] == 0
                time.sleep(0.2)
            shrunk = kit.partition("t", node_id=view.leader)
            assert (shrunk.leader, shrunk.leader_epoch) == (view.leader, view.leader_epoch)
            # acks=all needs two in-sync replicas, and has them.
            assert _produce(kit, view.leader, "t", _batch(b"acked by two"))["error_code"] == 0
            assert [line.split("\t")[1:6] for line in _under_replicated(kit, view.leader)] == [
                ["Topic: t", "Partition: 0", f"Leader: {view.leader}",
                 f"Replicas: {','.join(map(str, view.replicas))}", f"Isr: {','.join(map(str, shrunk.isr))}"]]
        finally:
            kit.brokers[follower].proc.send_signal(signal.SIGCONT)
        rejoined = kit.wait_for_isr("t", (1, 2, 3))
        assert (rejoined.leader, rejoined.leader_epoch) == (view.leader, view.leader_epoch)
        assert _under_replicated(kit, view.leader) == []
    finally:
        kit.close()


def test_a_broker_paused_past_its_session_timeout_registers_again_and_rejoins_the_isr_without_a_restart(cluster):
    cluster.create_topic("t")
    view = cluster.wait_for_isr("t", (1, 2, 3))
    paused = next(b for b in (1, 2, 3) if b not in (view.leader, cluster.controller_id()))
    process = cluster.brokers[paused].proc
    process.send_signal(signal.SIGSTOP)
    try:
        cluster.wait_until(lambda: paused not in cluster.live_brokers(), "the paused broker's session expiring")
        cluster.wait_for_isr("t", tuple(b for b in (1, 2, 3) if b != paused))
        assert _produce(cluster, view.leader, "t", _batch(b"while it slept"))["error_code"] == 0
    finally:
        process.send_signal(signal.SIGCONT)
    cluster.wait_until(lambda: cluster.live_brokers() == [1, 2, 3], "the paused broker registered again")
    cluster.wait_for_isr("t", (1, 2, 3))
    assert process.poll() is None and cluster.brokers[paused].proc is process  # the same process, not restarted
    assert _values(_fetch(cluster, view.leader, "t")["records"]) == [b"while it slept"]


def _under_replicated(kit: ClusterKit, node_id: int) -> list[str]:
    code, out, err = run("topics", "describe", "--bootstrap", f"127.0.0.1:{kit.ports[node_id]}",
                         "--under-replicated-partitions")
    assert code == 0, err
    return out.splitlines()


def test_seglog_topics_create_and_describe_show_leader_replicas_and_isr_of_a_cluster(cluster):
    bootstrap = f"127.0.0.1:{cluster.ports[2]}"
    code, out, err = run("topics", "create", "--bootstrap", bootstrap, "--topic", "events", "--partitions", "2",
                         "--replication-factor", "3")
    assert (code, out.strip()) == (0, "Created topic events."), err
    views = [cluster.wait_for_isr("events", (1, 2, 3), p) for p in (0, 1)]
    code, out, err = run("topics", "describe", "--bootstrap", bootstrap, "--topic", "events")
    assert code == 0, err
    lines = out.splitlines()
    assert "PartitionCount: 2\tReplicationFactor: 3" in lines[0]
    for p, view in enumerate(views):
        fields = dict(field.split(": ") for field in lines[1 + p].strip().split("\t"))
        assert (fields["Partition"], fields["Leader"], fields["Replicas"]) == (
            str(p), str(view.leader), ",".join(map(str, view.replicas)))
        assert sorted(int(b) for b in fields["Isr"].split(",")) == [1, 2, 3]


def test_a_topic_config_altered_at_one_broker_is_applied_by_every_replica_and_stays(cluster):
    cluster.create_topic("t")
    cluster.wait_for_isr("t", (1, 2, 3))
    code, out, err = run("topics", "alter", "--bootstrap", f"127.0.0.1:{cluster.ports[1]}", "--topic", "t",
                         "--config", "retention.ms=3600000", "--delete-config", "min.insync.replicas")
    assert (code, out.strip()) == (0, "Altered topic t."), err

    def overrides(node_id: int) -> dict[str, str]:
        with cluster.client(node_id) as client:
            response = client.send(ApiKey.DESCRIBE_CONFIGS, {"resources": [
                {"resource_type": 2, "resource_name": "t", "configuration_keys": None}]})
        return {c["name"]: c["value"] for c in response["results"][0]["configs"] if c["config_source"] == 1}

    cluster.wait_until(lambda: all(overrides(n) == {"retention.ms": "3600000"} for n in (1, 2, 3)),
                       "every broker applying the change")
    time.sleep(6)  # longer than a replica manager's full refresh from etcd: nothing reverts it
    assert [overrides(n) for n in (1, 2, 3)] == [{"retention.ms": "3600000"}] * 3


def test_seglog_cluster_lists_the_live_brokers_and_the_controller(cluster):
    code, out, err = run("cluster", "--bootstrap", f"127.0.0.1:{cluster.ports[3]}")
    assert code == 0, err
    lines = out.splitlines()
    controller = cluster.controller_id()
    assert lines[0] == f"Cluster id: {cluster.metadata([])['cluster_id']}"
    assert lines[1] == f"Controller: {controller}"
    assert [line.split() for line in lines[3:]] == [["BROKER", "HOST", "PORT", "RACK", "CONTROLLER"]] + [
        [str(n), "127.0.0.1", str(cluster.ports[n]), "-"] + (["yes"] if n == controller else []) for n in (1, 2, 3)]


def test_etcd_restarted_the_cluster_carries_on_and_still_fails_over(cluster, etcd_server):
    cluster.create_topic("t")
    view = cluster.wait_for_isr("t", (1, 2, 3))
    assert _produce(cluster, view.leader, "t", _batch(b"before"))["error_code"] == 0
    etcd_server.restart()
    # The leaders keep serving acks=all from what they know while etcd is away, and after.
    assert _produce(cluster, view.leader, "t", _batch(b"after"))["error_code"] == 0
    cluster.kill(view.leader)
    survivors = tuple(b for b in (1, 2, 3) if b != view.leader)
    new = cluster.wait_for_isr("t", survivors)
    assert new.leader_epoch > view.leader_epoch
    assert _produce(cluster, new.leader, "t", _batch(b"new leader"))["error_code"] == 0
    assert _values(_fetch(cluster, new.leader, "t")["records"]) == [b"before", b"after", b"new leader"]


def test_a_broker_stopped_with_sigterm_moves_its_leaderships_away_while_it_is_still_registered(
        cluster, etcd_server):
    from broker_core.controller import zk_data
    from broker_core.controller.etcd_connect import parse_etcd_connect
    from broker_core.controller.etcd_metadata_store import EtcdMetadataStore
    from broker_core.controller.metadata_store import WatchEventType

    cluster.create_topic("t", partitions=3)
    views = {p: cluster.wait_for_isr("t", (1, 2, 3), p) for p in range(3)}
    stopping = views[0].leader
    led = sorted(p for p, v in views.items() if v.leader == stopping)
    store = EtcdMetadataStore(parse_etcd_connect(cluster.etcd_connect))
    watch = store.watch_prefix("/")
    try:
        cluster.stop(stopping)
        events, deadline = [], time.monotonic() + 30
        while not any(e.type is WatchEventType.DELETE and e.key == zk_data.broker_path(stopping) for e in events):
            assert time.monotonic() < deadline, "the broker's registration never went"
            events += watch.poll(1.0)
    finally:
        watch.cancel()
        store.close()
    unregistered = next(e.mod_revision for e in events
                        if e.type is WatchEventType.DELETE and e.key == zk_data.broker_path(stopping))
    moved = {}
    for event in events:
        tp = zk_data.partition_from_state_path(event.key)
        if tp is not None and event.type is WatchEventType.PUT and tp.partition in led and tp.partition not in moved:
            moved[tp.partition] = (event.mod_revision, zk_data.decode_partition_state(tp, event.value))
    assert sorted(moved) == led
    for partition, (revision, state) in moved.items():
        assert revision < unregistered, f"partition {partition} moved only after the broker was gone"
        assert state.leader != stopping and state.leader_epoch == views[partition].leader_epoch + 1
