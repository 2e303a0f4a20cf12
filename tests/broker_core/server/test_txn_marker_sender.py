"""``WriteTxnMarkersSender`` against real brokers on loopback: markers written by the partition's
leader, each partition's error back as a KafkaError, unreachable brokers failing every marker until a
later round reconnects — and a transaction coordinator committing a transaction whose partition
another broker leads."""

from __future__ import annotations

import socket

import pytest

from broker_core.controller.partition_state import NO_LEADER, PartitionState
from broker_core.controller.zk_data import BrokerInfo
from broker_core.coordinator.transaction import TxnMarker
from broker_core.errors import BrokerNotAvailableError, NetworkExceptionError, UnknownTopicOrPartitionError
from broker_core.network.endpoint import EndPoint
from broker_core.server.metadata_cache import ClusterSnapshot, MetadataCache, PartitionMetadata
from broker_core.server.txn_marker_sender import WriteTxnMarkersSender
from format.layout import TopicPartition

from server_kit import create_topic, start_broker
from tests.broker_core.coordinator.transaction_kit import NODE_ID, NONE, TP0, Harness, S

REMOTE = TopicPartition("remote", 0)
SERVER_ID = 0


def address_of(server) -> tuple[str, int]:
    endpoint = server.bound_endpoints[0]
    return endpoint.host, endpoint.port


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_transaction(server, producer_id: int, value: bytes, tp: TopicPartition = REMOTE) -> None:
    server.broker.produce(tp.topic, [value], tp.partition, producer_id=producer_id, producer_epoch=0,
                          base_sequence=0, transactional=True)


def committed_values(server, tp: TopicPartition = REMOTE) -> list[bytes]:
    return [r.value for r in server.broker.fetch(tp.topic, tp.partition, 0,
                                                 isolation_level="read_committed").decoded()]


@pytest.fixture()
def endpoints():
    return {}


@pytest.fixture()
def sender(endpoints):
    """The sender of broker NODE_ID, to whom the broker at ``endpoints[SERVER_ID]`` leads topic "remote"."""
    s = WriteTxnMarkersSender(NODE_ID, lambda tp: SERVER_ID if tp.topic == REMOTE.topic else NODE_ID, endpoints.get,
                              request_timeout_ms=5_000)
    yield s
    s.close()


def test_markers_are_written_by_the_broker_asked_and_each_partitions_error_comes_back(broker_server, client, sender,
                                                                                     endpoints):
    endpoints[SERVER_ID] = address_of(broker_server)
    create_topic(client, "remote", 1)
    open_transaction(broker_server, 500, b"x")
    missing = TopicPartition("missing", 0)
    failed = sender.write_remote(SERVER_ID, [TxnMarker(REMOTE, 500, 0, 3, True), TxnMarker(missing, 500, 0, 3, True)])
    assert list(failed) == [missing] and isinstance(failed[missing], UnknownTopicOrPartitionError)
    assert committed_values(broker_server) == [b"x"]
    (producer,) = broker_server.broker.describe_producers("remote", 0)
    assert producer.coordinator_epoch == 3


def test_an_unreachable_broker_fails_every_marker_and_a_later_round_connects_again(tmp_path, sender, endpoints):
    markers = [TxnMarker(REMOTE, 600, 0, 0, False), TxnMarker(TopicPartition("remote", 1), 600, 0, 0, False)]
    failed = sender.write_remote(SERVER_ID, markers)
    assert {type(e) for e in failed.values()} == {BrokerNotAvailableError} and len(failed) == 2
    endpoints[SERVER_ID] = ("127.0.0.1", unused_port())
    failed = sender.write_remote(SERVER_ID, markers)
    assert {type(e) for e in failed.values()} == {NetworkExceptionError} and len(failed) == 2
    server = start_broker(tmp_path / "logs")
    try:
        server.broker.create_topic("remote", 2)
        endpoints[SERVER_ID] = address_of(server)
        assert sender.write_remote(SERVER_ID, markers) == {}
    finally:
        server.shutdown(timeout_ms=10_000)
    # The connection it kept is broken now: dropped, and the marker fails.
    failed = sender.write_remote(SERVER_ID, markers)
    assert {type(e) for e in failed.values()} == {NetworkExceptionError}
    server = start_broker(tmp_path / "logs")
    try:
        endpoints[SERVER_ID] = address_of(server)
        assert sender.write_remote(SERVER_ID, markers) == {}
    finally:
        server.shutdown(timeout_ms=10_000)


def test_a_coordinator_commits_a_transaction_whose_partition_another_broker_leads(tmp_path, sender, endpoints):
    server = start_broker(tmp_path / "remote-broker")
    coordinator_side = Harness(tmp_path / "coordinator", elected_partitions_only=True, destinations=sender)
    try:
        server.broker.create_topic("remote", 1)
        coordinator_side.coordinator.on_election(coordinator_side.coordinator.partition_for("tx"), 4)
        pid = coordinator_side.init().producer_id
        assert coordinator_side.add(pid, 0, REMOTE, TP0) == {REMOTE: NONE, TP0: NONE}
        open_transaction(server, pid, b"remote")
        coordinator_side.write(pid, 0, TP0, b"local")
        # The other broker is unreachable: the commit waits, prepared, for a retry.
        endpoints[SERVER_ID] = ("127.0.0.1", unused_port())
        assert coordinator_side.end(pid, 0, commit=True) == NONE
        assert coordinator_side.state().state is S.PREPARE_COMMIT
        assert coordinator_side.committed_values(TP0) == [b"local"] and committed_values(server) == []
        endpoints[SERVER_ID] = address_of(server)
        coordinator_side.advance(100)
        assert coordinator_side.state().state is S.COMPLETE_COMMIT
        assert committed_values(server) == [b"remote"]
        (producer,) = server.broker.describe_producers("remote", 0)
        assert producer.coordinator_epoch == 4
    finally:
        coordinator_side.close()
        server.shutdown(timeout_ms=10_000)


def test_a_cluster_brokers_sender_takes_leaders_and_addresses_from_its_metadata_cache():
    cache = MetadataCache()
    cache.update(ClusterSnapshot(
        brokers={2: BrokerInfo(2, (EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9093),))},
        topics={"remote": {
            0: PartitionMetadata(REMOTE, (2,), PartitionState(2, 5, (2,), 1)),
            1: PartitionMetadata(TopicPartition("remote", 1), (3,), PartitionState(NO_LEADER, 6, (), 1))}}))
    sender = WriteTxnMarkersSender.for_metadata(NODE_ID, cache, "PLAINTEXT")
    assert sender.leader_of(REMOTE) == 2
    assert sender.leader_of(TopicPartition("remote", 1)) is None  # no leader now: retried later
    with pytest.raises(UnknownTopicOrPartitionError):
        sender.leader_of(TopicPartition("deleted", 0))  # needs no marker
    assert (sender.endpoint_of(2), sender.endpoint_of(3)) == (("127.0.0.1", 9093), None)
    failed = sender.write_remote(3, [TxnMarker(TopicPartition("remote", 1), 1, 0, 0, True)])
    assert isinstance(failed[TopicPartition("remote", 1)], BrokerNotAvailableError)
