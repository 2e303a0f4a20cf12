"""The last stable offset and the aborted transactions of a partition, from its files alone."""

import os

from broker_core import Broker
from format.layout import TopicPartition
from format.log_dir import LogDirectory
from format.record_batch import iter_batches
from tests.broker_core.transactions_kit import TransactionalWriter, write_mixed_transactions

TP = TopicPartition("t", 0)


def owner_lso(broker: Broker) -> int:
    return broker.list_offsets("t", 0, "latest", isolation_level="read_committed").offset


def files_lso(log_dir) -> int:
    return LogDirectory(str(log_dir)).describe(TP, last_stable=True).last_stable_offset


def test_the_last_stable_offset_from_the_files_is_the_owners_after_every_append(tmp_path):
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("t", 1, {"segment.bytes": "250"})  # rolls (and snapshots) mid-transaction
        writer = TransactionalWriter(broker, "t")
        seen = []
        for step in [lambda: writer.plain("p0"), lambda: writer.send(1, "a0"), lambda: writer.send(2, "b0"),
                     lambda: writer.send(1, "a1", "a2"), lambda: writer.plain("p1"), lambda: writer.send(2, "b1"),
                     lambda: writer.end(1, commit=True), lambda: writer.send(3, "c0"),
                     lambda: writer.end(2, commit=False), lambda: writer.send(1, "a3"),
                     lambda: writer.end(3, commit=False), lambda: writer.end(1, commit=True),
                     lambda: writer.plain("p2")]:
            step()
            seen.append((files_lso(tmp_path), owner_lso(broker)))
        assert len(LogDirectory(str(tmp_path)).segments(TP)) > 4
    assert all(files == owner for files, owner in seen), seen
    assert [owner for _, owner in seen] == [1, 1, 1, 1, 1, 1, 2, 2, 8, 8, 10, 13, 14]


def test_without_a_producer_snapshot_the_log_is_walked_from_its_first_segment(tmp_path):
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("t", 1, {"segment.bytes": "400"})
        writer = write_mixed_transactions(TransactionalWriter(broker, "t"))
        expected = owner_lso(broker)
        assert expected == writer.last_stable_offset
    snapshots = [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".snapshot")]
    assert snapshots
    assert files_lso(tmp_path) == expected
    for name in snapshots:
        os.remove(tmp_path / "t-0" / name)
    assert files_lso(tmp_path) == expected


def test_an_abort_marker_not_yet_in_the_txnindex_holds_the_last_stable_offset_at_its_transaction(tmp_path):
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("t", 1)
        writer = TransactionalWriter(broker, "t")
        writer.plain("p0")
        writer.send(1, "a0", "a1")
        writer.end(1, commit=False)
        writer.plain("p1")
        assert files_lso(tmp_path) == owner_lso(broker) == 5
        # The owner writes the index entry just after the marker: a reader may come in between.
        os.truncate(tmp_path / "t-0" / "00000000000000000000.txnindex", 0)
        assert files_lso(tmp_path) == 1


def test_aborted_transactions_from_the_files_are_those_a_read_committed_fetch_lists(tmp_path):
    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("t", 1, {"segment.bytes": "400"})
        writer = write_mixed_transactions(TransactionalWriter(broker, "t"))
        lso = writer.last_stable_offset
        directory = LogDirectory(str(tmp_path))
        for start in (0, 5, 12, 20):
            fetched = broker.fetch("t", 0, start, max_bytes=1 << 20, isolation_level="read_committed")
            upper = list(iter_batches(fetched.records))[-1].header.next_offset
            from_files = directory.aborted_transactions(TP, start, upper)
            assert [(t.producer_id, t.first_offset) for t in from_files] == \
                [(t.producer_id, t.first_offset) for t in fetched.aborted_transactions]
        assert {t.producer_id for t in directory.aborted_transactions(TP, 0, lso)} == {2, 3}


def test_in_a_replicated_log_dir_the_last_stable_offset_never_exceeds_the_checkpointed_high_watermark(tmp_path):
    from format import layout
    from format.checkpoint import OffsetCheckpointFile

    with Broker(str(tmp_path), background=False) as broker:
        broker.create_topic("t", 1)
        writer = TransactionalWriter(broker, "t")
        writer.plain("p0")
        writer.send(1, "a0", "a1")  # offsets 1..2
        writer.end(1, commit=True)  # the marker at 3
        assert owner_lso(broker) == 4
    OffsetCheckpointFile(str(tmp_path / layout.REPLICATION_OFFSET_CHECKPOINT_FILE)).write({TP: 3})
    (tmp_path / layout.REPLICATED_MARKER_FILE).write_bytes(b"")
    info = LogDirectory(str(tmp_path)).describe(TP, last_stable=True)
    # The commit marker is above the high watermark: the transaction is still open for readers.
    assert (info.log_end_offset, info.high_watermark, info.last_stable_offset) == (4, 3, 1)
