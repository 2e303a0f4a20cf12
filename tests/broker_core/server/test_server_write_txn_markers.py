"""WriteTxnMarkers over a real socket: a transaction coordinator's markers ending transactions in the
partitions this broker leads, and the error each partition gets."""

from __future__ import annotations

import threading
import time

from broker_core.client.protocol_client import ProtocolClient
from broker_core.protocol import ApiKey
from format.record_batch import iter_batches

from server_kit import create_topic, fetch

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_COORDINATOR_FENCED = 52
READ_COMMITTED = 1


def write_transaction(server, topic: str, partition: int, producer_id: int, value: bytes, epoch: int = 0) -> None:
    """An open transaction of ``producer_id`` with one record (as a transactional producer writes it)."""
    server.broker.produce(topic, [value], partition, producer_id=producer_id, producer_epoch=epoch, base_sequence=0,
                          transactional=True)


def marker(producer_id: int, commit: bool, partitions: dict[str, list[int]], *, epoch: int = 0,
           coordinator_epoch: int = 0) -> dict:
    return {"producer_id": producer_id, "producer_epoch": epoch, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]}


def write_txn_markers(client, *markers: dict) -> dict[tuple[int, str, int], int]:
    """WriteTxnMarkers; the error code of each (producer id, topic, partition)."""
    response = client.send(ApiKey.WRITE_TXN_MARKERS, {"markers": list(markers)})
    return {(m["producer_id"], t["name"], p["partition_index"]): p["error_code"]
            for m in response["markers"] for t in m["topics"] for p in t["partitions"]}


def committed_values(client, topic: str, partition: int) -> list[bytes]:
    data = fetch(client, [(topic, partition, 0, 1 << 20)], isolation_level=READ_COMMITTED)[(topic, partition)]
    aborted = {a["producer_id"] for a in data["aborted_transactions"] or ()}
    return [r.value for b in iter_batches(bytes(data["records"] or b""))
            if not b.header.is_control and b.header.producer_id not in aborted for r in b.records()]


def test_markers_commit_and_abort_what_a_read_committed_fetch_sees_and_wake_a_waiting_fetch(broker_server, client):
    create_topic(client, "t", 2)
    write_transaction(broker_server, "t", 0, 1000, b"kept")
    write_transaction(broker_server, "t", 1, 1001, b"dropped")
    assert committed_values(client, "t", 0) == [] and committed_values(client, "t", 1) == []
    # A read_committed fetch waits for a stable record; the marker must wake it, not its timeout.
    woken: list[dict] = []
    with ProtocolClient(broker_server.bootstrap_servers) as waiting:
        waiter = threading.Thread(target=lambda: woken.append(fetch(
            waiting, [("t", 0, 0, 1 << 20)], max_wait_ms=20_000, min_bytes=1, isolation_level=READ_COMMITTED)))
        waiter.start()
        time.sleep(0.3)  # parked in the purgatory
        started = time.monotonic()
        assert write_txn_markers(client, marker(1000, True, {"t": [0]}), marker(1001, False, {"t": [1]})) == {
            (1000, "t", 0): NONE, (1001, "t", 1): NONE}
        waiter.join(timeout=10)
        assert not waiter.is_alive() and time.monotonic() - started < 10
    assert woken[0][("t", 0)]["last_stable_offset"] == 2  # the record and its COMMIT marker
    assert committed_values(client, "t", 0) == [b"kept"]
    assert committed_values(client, "t", 1) == []
    assert broker_server.broker.fetch("t", 1, 0, isolation_level="read_committed").last_stable_offset == 2


def test_each_bad_partition_gets_kafkas_error_and_the_others_are_written(broker_server, client):
    create_topic(client, "t", 1)
    write_transaction(broker_server, "t", 0, 8, b"other")
    assert write_txn_markers(client, marker(8, True, {"t": [0, 3], "missing": [0]})) == {
        (8, "t", 0): NONE, (8, "t", 3): UNKNOWN_TOPIC_OR_PARTITION, (8, "missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert committed_values(client, "t", 0) == [b"other"]


def test_an_obsolete_marker_is_refused_with_invalid_producer_epoch_or_transaction_coordinator_fenced(
        broker_server, client):
    create_topic(client, "t", 1)
    # Producer 7 wrote at epoch 1, and coordinator epoch 5 ended its transaction.
    write_transaction(broker_server, "t", 0, 7, b"first", epoch=1)
    assert write_txn_markers(client, marker(7, True, {"t": [0]}, epoch=1, coordinator_epoch=5)) == {
        (7, "t", 0): NONE}
    broker_server.broker.produce("t", [b"second"], 0, producer_id=7, producer_epoch=1, base_sequence=1,
                                 transactional=True)
    assert write_txn_markers(client, marker(7, True, {"t": [0]}, epoch=0, coordinator_epoch=5)) == {
        (7, "t", 0): INVALID_PRODUCER_EPOCH}  # a marker of a fenced producer epoch
    assert write_txn_markers(client, marker(7, True, {"t": [0]}, epoch=1, coordinator_epoch=4)) == {
        (7, "t", 0): TRANSACTION_COORDINATOR_FENCED}  # from a coordinator that lost the transaction
    assert committed_values(client, "t", 0) == [b"first"]
