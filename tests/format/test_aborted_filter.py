"""Which batches read_committed leaves out, and decoding without them."""

import numpy as np

from format.aborted_filter import NO_MARKER_YET, aborted_batch_mask, with_marker_offsets
from format.arrow import decode_to_arrow
from format.compression import CompressionType
from format.control import ControlRecordType, EndTransactionMarker
from format.record import SimpleRecord
from format.record_batch import build_batch, build_end_txn_marker_batch, iter_batches
from format.txn_index import AbortedTxn


def txn(pid, offset, values, compression=CompressionType.NONE, transactional=True):
    return build_batch([SimpleRecord(v, None, 1) for v in values], base_offset=offset, producer_id=pid,
                       producer_epoch=0, base_sequence=0, is_transactional=transactional, compression=compression)


def marker(pid, offset, commit):
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker_batch(EndTransactionMarker(kind, 0), producer_id=pid, producer_epoch=0,
                                      base_offset=offset, timestamp=2)


def test_a_batch_is_aborted_only_inside_an_aborted_transaction_of_its_own_producer():
    pids = np.array([1, 1, 1, 2, 1, 1])
    bases = np.array([0, 5, 9, 6, 12, 20])
    transactional = np.array([True, True, True, True, False, True])
    aborted = [AbortedTxn(1, 5, 10, -1), AbortedTxn(1, 20, NO_MARKER_YET, -1)]
    mask = aborted_batch_mask(pids, bases, transactional, aborted)
    # 0: before the transaction; 6: another producer; 12: not transactional
    assert mask.tolist() == [False, True, True, False, False, True]


def test_fetched_aborted_transactions_end_at_their_producers_next_marker():
    data = txn(1, 0, [b"a"]) + marker(1, 1, commit=False) + txn(1, 2, [b"b"]) + txn(2, 3, [b"c"])
    ended = with_marker_offsets([(1, 0), (2, 3)], list(iter_batches(data)))
    assert ended == [AbortedTxn(1, 0, 1, -1), AbortedTxn(2, 3, NO_MARKER_YET, -1)]


def test_read_committed_decoding_leaves_out_aborted_batches_and_every_marker():
    for codec in (CompressionType.NONE, CompressionType.ZSTD):
        data = (txn(1, 0, [b"aborted-0", b"aborted-1"], codec) + txn(2, 2, [b"committed-2"], codec)
                + build_batch([SimpleRecord(b"plain-3", None, 1)], base_offset=3, compression=codec)
                + marker(1, 4, commit=False) + marker(2, 5, commit=True) + txn(1, 6, [b"committed-6"], codec)
                + marker(1, 7, commit=True))
        everything = decode_to_arrow(data, topic="t", partition=0)
        assert everything.column("value").to_pylist() == [b"aborted-0", b"aborted-1", b"committed-2", b"plain-3",
                                                          b"committed-6"]
        committed = decode_to_arrow(data, topic="t", partition=0, aborted_transactions=[AbortedTxn(1, 0, 4, 5)])
        assert committed.column("value").to_pylist() == [b"committed-2", b"plain-3", b"committed-6"]
        assert committed.column("offset").to_pylist() == [2, 3, 6]
