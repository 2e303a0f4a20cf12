"""Offsets committed inside a transaction, written into ``__consumer_offsets`` as Kafka writes them.

A transactional producer's TxnOffsetCommit becomes a transactional batch of
offset-commit records on the group's partition; the transaction coordinator
later ends it with a COMMIT or ABORT marker there. These helpers append both
straight to the broker's log, without a coordinator, so a test can place
each record where it wants it. Each transaction takes a producer id of its
own.
"""

from __future__ import annotations

from typing import Mapping

from broker_core.broker import Broker
from broker_core.coordinator.group import OffsetAndMetadata
from broker_core.coordinator.group.broker_store import ensure_offsets_topic
from broker_core.coordinator.group.store import offset_commit_record
from broker_core.log.log import Log
from broker_core.offsets_topic import OFFSETS_TOPIC, partition_for_group
from format.control import ControlRecordType, EndTransactionMarker
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, build_end_txn_marker_batch


def offsets_log(broker: Broker, group_id: str) -> Log:
    """The log of the group's ``__consumer_offsets`` partition (the topic is created if need be)."""
    partition = partition_for_group(group_id, ensure_offsets_topic(broker))
    return broker.log_manager.log_or_raise(TopicPartition(OFFSETS_TOPIC, partition))


def commit_in_transaction(broker: Broker, group_id: str, offsets: Mapping[TopicPartition, int],
                          producer_id: int) -> int:
    """The records of a TxnOffsetCommit, one transactional batch; returns the offset of its first record."""
    now = broker.clock.milliseconds()
    records = [SimpleRecord(value, key, now) for key, value in
               (offset_commit_record(group_id, tp, OffsetAndMetadata(offset, "", now))
                for tp, offset in sorted(offsets.items()))]
    batch = build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True)
    return offsets_log(broker, group_id).append(batch).first_offset


def end_transaction(broker: Broker, group_id: str, producer_id: int, *, commit: bool = True) -> int:
    """The transaction's COMMIT (or ABORT) marker on the group's partition; returns its offset."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    marker = build_end_txn_marker_batch(EndTransactionMarker(kind, 0), producer_id=producer_id, producer_epoch=0,
                                        timestamp=broker.clock.milliseconds())
    # Markers come from the transaction coordinator, not from a client.
    return offsets_log(broker, group_id).append(marker, from_client=False).first_offset
