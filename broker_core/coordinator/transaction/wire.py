"""The transaction APIs' request and response bodies, per version, to and from the coordinator's records.

Where versions differ only in what they may answer, the difference lives
here: PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to InitProducerId
v0-3 and to AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v0-1, as Kafka's
KafkaApis does for clients that predate the code.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from format.layout import TopicPartition

from ...errors import InvalidProducerEpochError, ProducerFencedError
from ..group.requests import OffsetCommitPartition, TxnOffsetCommitRequest
from .transaction_marker_channel_manager import TxnMarker
from .transaction_state import TransactionState
from .requests import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                       InitProducerIdResult, ListTransactionsRequest, TransactionDescription, TransactionListing)

__all__ = [
    "parse_init_producer_id", "init_producer_id_response",
    "parse_add_partitions_to_txn", "add_partitions_to_txn_response",
    "parse_add_offsets_to_txn", "add_offsets_to_txn_response",
    "parse_end_txn", "end_txn_response",
    "parse_txn_offset_commit", "txn_offset_commit_response",
    "parse_describe_transactions", "describe_transactions_response",
    "parse_list_transactions", "list_transactions_response",
    "write_txn_markers_request", "parse_write_txn_markers", "write_txn_markers_response",
    "parse_write_txn_markers_response",
]


def _fenced_for(version: int, first_fenced_version: int, error: int) -> int:
    if error == ProducerFencedError.code and version < first_fenced_version:
        return InvalidProducerEpochError.code
    return error


def _by_topic(errors: Mapping[TopicPartition, int], partition_key: str, error_key: str) -> dict[str, list[dict]]:
    topics: dict[str, list[dict]] = {}
    for tp, error in errors.items():
        topics.setdefault(tp.topic, []).append({partition_key: tp.partition, error_key: error})
    return topics


# --- InitProducerId ---------------------------------------------------------------------


def parse_init_producer_id(body: Mapping[str, Any], version: int) -> InitProducerIdRequest:
    return InitProducerIdRequest(transactional_id=body.get("transactional_id"),
                                 transaction_timeout_ms=body["transaction_timeout_ms"],
                                 producer_id=body.get("producer_id", -1) if version >= 3 else -1,
                                 producer_epoch=body.get("producer_epoch", -1) if version >= 3 else -1)


def init_producer_id_response(result: InitProducerIdResult, version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": _fenced_for(version, 4, result.error_code),
            "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}


# --- AddPartitionsToTxn ---------------------------------------------------------------------


def parse_add_partitions_to_txn(body: Mapping[str, Any], version: int) -> list[AddPartitionsToTxnRequest]:
    """v0-3 carry one transaction (a client's), v4+ several (a broker's)."""
    def partitions(topics: Sequence[Mapping[str, Any]] | None) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(t["name"], p) for t in topics or () for p in t["partitions"] or ())

    if version >= 4:
        return [AddPartitionsToTxnRequest(transactional_id=t["transactional_id"], producer_id=t["producer_id"],
                                          producer_epoch=t["producer_epoch"], partitions=partitions(t["topics"]),
                                          verify_only=bool(t["verify_only"]))
                for t in body["transactions"] or ()]
    return [AddPartitionsToTxnRequest(transactional_id=body["v3_and_below_transactional_id"],
                                      producer_id=body["v3_and_below_producer_id"],
                                      producer_epoch=body["v3_and_below_producer_epoch"],
                                      partitions=partitions(body["v3_and_below_topics"]))]


def add_partitions_to_txn_response(version: int, requests: Sequence[AddPartitionsToTxnRequest],
                                   results: Sequence[Mapping[TopicPartition, int]]) -> dict:
    def topic_results(errors: Mapping[TopicPartition, int]) -> list[dict]:
        fenced = {tp: _fenced_for(version, 2, e) for tp, e in errors.items()}
        return [{"name": name, "results_by_partition": parts}
                for name, parts in _by_topic(fenced, "partition_index", "partition_error_code").items()]

    if version >= 4:
        return {"throttle_time_ms": 0, "error_code": 0, "results_by_transaction": [
            {"transactional_id": r.transactional_id, "topic_results": topic_results(errors)}
            for r, errors in zip(requests, results, strict=True)]}
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": topic_results(results[0])}


# --- AddOffsetsToTxn and EndTxn ---------------------------------------------------------------


def parse_add_offsets_to_txn(body: Mapping[str, Any], version: int) -> AddOffsetsToTxnRequest:
    return AddOffsetsToTxnRequest(transactional_id=body["transactional_id"], producer_id=body["producer_id"],
                                  producer_epoch=body["producer_epoch"], group_id=body["group_id"])


def add_offsets_to_txn_response(error: int, version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": _fenced_for(version, 2, error)}


def parse_end_txn(body: Mapping[str, Any], version: int) -> EndTxnRequest:
    return EndTxnRequest(transactional_id=body["transactional_id"], producer_id=body["producer_id"],
                         producer_epoch=body["producer_epoch"], committed=bool(body["committed"]))


def end_txn_response(error: int, version: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": _fenced_for(version, 2, error)}


# --- TxnOffsetCommit (answered by the group coordinator) -------------------------------------------


def parse_txn_offset_commit(body: Mapping[str, Any], version: int) -> TxnOffsetCommitRequest:
    offsets: dict[TopicPartition, OffsetCommitPartition] = {}
    for topic in body["topics"] or ():
        for p in topic["partitions"] or ():
            epoch = p.get("committed_leader_epoch", -1) if version >= 2 else -1
            offsets[TopicPartition(topic["name"], p["partition_index"])] = OffsetCommitPartition(
                offset=p["committed_offset"], metadata=p.get("committed_metadata") or "",
                leader_epoch=None if epoch is None or epoch < 0 else epoch)
    return TxnOffsetCommitRequest(
        transactional_id=body["transactional_id"], group_id=body["group_id"], producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        generation_id=body.get("generation_id", -1) if version >= 3 else -1,
        member_id=(body.get("member_id") or "") if version >= 3 else "",
        group_instance_id=body.get("group_instance_id") if version >= 3 else None, offsets=offsets)


def txn_offset_commit_response(request: TxnOffsetCommitRequest, errors: Mapping[TopicPartition, int]) -> dict:
    """Every partition of ``request`` with its error, grouped by topic in request order."""
    ordered = {tp: errors[tp] for tp in request.offsets}
    return {"throttle_time_ms": 0, "topics": [{"name": name, "partitions": parts} for name, parts in
                                              _by_topic(ordered, "partition_index", "error_code").items()]}


# --- DescribeTransactions and ListTransactions -------------------------------------------------


def parse_describe_transactions(body: Mapping[str, Any], version: int) -> list[str]:
    return list(body["transactional_ids"] or ())


def describe_transactions_response(described: Sequence[TransactionDescription]) -> dict:
    states = []
    for d in described:
        topics: dict[str, list[int]] = {}
        for tp in d.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        states.append({"error_code": d.error_code, "transactional_id": d.transactional_id,
                       "transaction_state": d.state, "transaction_timeout_ms": d.transaction_timeout_ms,
                       "transaction_start_time_ms": d.transaction_start_time_ms, "producer_id": d.producer_id,
                       "producer_epoch": d.producer_epoch,
                       "topics": [{"topic": n, "partitions": p} for n, p in topics.items()]})
    return {"throttle_time_ms": 0, "transaction_states": states}


def parse_list_transactions(body: Mapping[str, Any], version: int) -> ListTransactionsRequest:
    return ListTransactionsRequest(state_filters=tuple(body["state_filters"] or ()),
                                   producer_id_filters=tuple(body["producer_id_filters"] or ()),
                                   duration_filter_ms=body.get("duration_filter", -1) if version >= 1 else -1)


def list_transactions_response(request: ListTransactionsRequest, error: int,
                               listings: Sequence[TransactionListing]) -> dict:
    unknown = [s for s in request.state_filters if TransactionState.parse(s) is None]
    return {"throttle_time_ms": 0, "error_code": error, "unknown_state_filters": unknown, "transaction_states": [
        {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "transaction_state": t.state}
        for t in listings]}


# --- WriteTxnMarkers (between brokers: the coordinator to the partitions' leaders) --------------


def write_txn_markers_request(markers: Sequence[TxnMarker]) -> dict:
    """One WritableTxnMarker per producer transaction (id, epoch, result, coordinator epoch), its
    partitions grouped by topic."""
    entries: dict[tuple[int, int, bool, int], dict[str, list[int]]] = {}
    for m in markers:
        key = (m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch)
        entries.setdefault(key, {}).setdefault(m.topic_partition.topic, []).append(m.topic_partition.partition)
    return {"markers": [
        {"producer_id": pid, "producer_epoch": epoch, "transaction_result": commit, "coordinator_epoch": coordinator,
         "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        for (pid, epoch, commit, coordinator), topics in entries.items()]}


def parse_write_txn_markers(body: Mapping[str, Any]) -> list[TxnMarker]:
    return [TxnMarker(TopicPartition(topic["name"], partition), m["producer_id"], m["producer_epoch"],
                      m["coordinator_epoch"], m["transaction_result"])
            for m in body["markers"] for topic in m["topics"] for partition in topic["partition_indexes"]]


def write_txn_markers_response(errors: Mapping[TxnMarker, int]) -> dict:
    """The error code of each marker, grouped by producer id and topic as Kafka answers."""
    by_producer: dict[int, dict[TopicPartition, int]] = {}
    for marker, error in errors.items():
        by_producer.setdefault(marker.producer_id, {})[marker.topic_partition] = error
    return {"markers": [
        {"producer_id": pid, "topics": [{"name": t, "partitions": ps} for t, ps in
                                        _by_topic(partitions, "partition_index", "error_code").items()]}
        for pid, partitions in by_producer.items()]}


def parse_write_txn_markers_response(body: Mapping[str, Any]) -> dict[tuple[int, TopicPartition], int]:
    """The error code answered for each (producer id, partition)."""
    return {(m["producer_id"], TopicPartition(topic["name"], p["partition_index"])): p["error_code"]
            for m in body["markers"] for topic in m["topics"] for p in topic["partitions"]}
