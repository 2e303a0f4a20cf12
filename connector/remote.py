"""A running broker as the connector's source of offsets and, without ``path``, of data.

With the option ``bootstrap``, partitions and their earliest/latest offsets
come from the broker (Metadata and ListOffsets): the broker knows its log end
before the files do. With ``path`` as well, tasks still read the segment files;
without it, tasks fetch over the Kafka protocol and decode the batches the same
way (``fetch_range``, which imports the decoder where it decodes: planning never
does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Mapping

from format.layout import INTERNAL_TOPICS, TopicPartition
from format.log_dir import PartitionInfo

from .client_options import open_broker
from .planning import OffsetRange

if TYPE_CHECKING:
    import pyarrow as pa

    from .read_counter import ReadCounter


class RemoteLog:
    """Metadata of the partitions served by the broker at ``bootstrap`` (``host:port``)."""

    def __init__(self, bootstrap: str, client_props: Mapping[str, str] | None = None):
        self.url = bootstrap
        self.bootstrap = bootstrap
        self.client_props = dict(client_props or {})  # kafka.security.protocol, kafka.ssl.*, kafka.sasl.*

    def _broker(self):
        return open_broker(self.bootstrap, self.client_props)

    def topics(self, include_internal: bool = False) -> dict[str, list[int]]:
        with self._broker() as broker:
            return {t: list(range(broker.partitions_for(t))) for t in broker.list_topics()
                    if include_internal or t not in INTERNAL_TOPICS}

    def partitions(self, include_internal: bool = False) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, ps in sorted(self.topics(include_internal).items()) for p in ps]

    def describe_all(self, partitions: list[TopicPartition], *, last_stable: bool = False
                     ) -> dict[TopicPartition, PartitionInfo]:
        """Log start offsets by ListOffsets ``earliest`` and where reads stop by ``latest``: the high
        watermark, which is all the broker lets a consumer read (the leader's, in a cluster); with
        ``last_stable``, the last stable offset too (``latest`` at read_committed)."""
        out = {}
        with self._broker() as broker:
            for tp in partitions:
                start = broker.list_offsets(tp.topic, tp.partition, "earliest")
                end = broker.list_offsets(tp.topic, tp.partition, "latest")
                stable = None
                if last_stable:
                    found = broker.list_offsets(tp.topic, tp.partition, "latest", isolation_level="read_committed")
                    stable = found.offset if found else 0
                committed = end.offset if end else 0
                out[tp] = PartitionInfo(tp.topic, tp.partition, "", (), start.offset if start else 0, committed,
                                        stable, committed)
        return out

    def find_by_timestamp(self, tp: TopicPartition, timestamp: int) -> int | None:
        with self._broker() as broker:
            found = broker.list_offsets(tp.topic, tp.partition, timestamp)
        return None if found is None else found.offset


def fetch_range(bootstrap: str, r: OffsetRange, *, include_headers: bool, fail_on_data_loss: bool,
                max_bytes: int, read_committed: bool = False, client_props: Mapping[str, str] | None = None,
                counter: ReadCounter | None = None) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of ``r`` fetched over the protocol, in offset order; ``read_committed``
    fetches at that isolation level and leaves out the aborted transactions the responses list;
    ``client_props``: the security options the broker is reached with; ``counter`` counts the record bytes
    fetched (the broker's segment bytes, as a read from the files counts them)."""
    from broker_core.errors import OffsetOutOfRangeError
    from format.aborted_filter import with_marker_offsets
    from format.arrow import decode_to_arrow
    from format.batch_table import walk_batches

    from .data_loss import data_loss

    position = r.from_offset
    with open_broker(bootstrap, client_props or {}) as broker:
        while position < r.until_offset:
            try:
                result = broker.fetch(r.topic, r.partition, position, max_bytes,
                                      isolation_level="read_committed" if read_committed else "read_uncommitted")
            except OffsetOutOfRangeError:
                start = broker.list_offsets(r.topic, r.partition, "earliest")
                if start is None or start.offset <= position:
                    raise
                data_loss(f"offsets {position} to {min(start.offset, r.until_offset)} of {r.topic}-{r.partition} "
                          f"are gone: the log now starts at {start.offset}", fail_on_data_loss)
                position = start.offset
                continue
            where = f"{bootstrap}/{r.topic}-{r.partition}"
            records = bytes(result.records)
            if counter is not None:
                counter.bytes_read += len(records)
            batches = walk_batches(records, path=where)
            if not len(batches):
                return  # nothing more below the high watermark
            aborted = None
            if result.aborted_transactions:
                aborted = with_marker_offsets(((t.producer_id, t.first_offset) for t in result.aborted_transactions),
                                              batches.batches())
            table = decode_to_arrow(records, topic=r.topic, partition=r.partition, from_offset=position,
                                    until_offset=r.until_offset, include_headers=include_headers,
                                    path=where, table=batches,
                                    aborted_transactions=aborted)
            if table.num_rows:
                yield table
            position = max(position, int(batches.last_offsets[-1]) + 1)
