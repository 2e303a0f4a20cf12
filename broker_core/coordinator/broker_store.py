"""``BrokerGroupStore``: the coordinator's records in the broker's own ``__consumer_offsets`` topic.

Writes go through ``Broker.produce_batches`` as one batch per call into the
group's partition, exactly as ``group_offsets.commit_offsets`` writes them, so
the CLI, the Spark connector's lag views and Kafka's tools read what the
coordinator stored. Loading reads every partition through the broker's logs
from the log start offset to the high watermark; offsets written inside a
transaction count once its COMMIT marker is read, as in Kafka's loader.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Iterator

from format.control import ControlRecordType
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

from ..group_offsets import OFFSETS_TOPIC, ensure_offsets_topic
from ..offsets_topic import InvalidOffsetsRecordError, UnknownRecordTypeError, partition_for_group
from .store import GroupRecordWriter, LoadedGroups, OffsetsTopicReplay

if TYPE_CHECKING:
    from ..broker import Broker

__all__ = ["BrokerGroupStore"]

log = logging.getLogger(__name__)

# How much of a partition one read brings in while loading (Kafka's offsets.load.buffer.size).
LOAD_BUFFER_SIZE = 5 * 1024 * 1024


class BrokerGroupStore(GroupRecordWriter):
    """A GroupStore over a Broker; creates ``__consumer_offsets`` with Kafka's settings on the first write.

    Like Kafka, a broker whose clients never use groups has no offsets topic.
    """

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._lock = threading.Lock()
        self._num_partitions: int | None = None

    @property
    def num_partitions(self) -> int:
        # An existing topic keeps its partition count whatever the configuration
        # says now: moving groups to other partitions would lose their offsets.
        if self._num_partitions is None:
            if self.broker.topics.get(OFFSETS_TOPIC) is None:
                return self.broker.config.offsets_topic_num_partitions  # what it is created with
            self._num_partitions = self.broker.partitions_for(OFFSETS_TOPIC)
        return self._num_partitions

    def _ensure_topic(self) -> int:
        if self._num_partitions is None:
            with self._lock:
                if self._num_partitions is None:
                    self._num_partitions = ensure_offsets_topic(self.broker)
        return self._num_partitions

    # -- writing -------------------------------------------------------------------

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        if not records:
            return
        now = self.broker.clock.milliseconds()
        batch = build_batch([SimpleRecord(value, key, now) for key, value in records], default_timestamp=now)
        self.broker.produce_batches(OFFSETS_TOPIC, partition_for_group(group_id, self._ensure_topic()), batch)

    # -- loading -------------------------------------------------------------------

    def load(self) -> LoadedGroups:
        replay = OffsetsTopicReplay()
        if self.broker.topics.get(OFFSETS_TOPIC) is None:
            return replay.result()  # no group has stored anything yet
        for partition in range(self.num_partitions):
            for key, value in self._partition_records(partition):
                try:
                    replay.apply(key, value)
                except UnknownRecordTypeError:
                    continue  # records of Kafka's newer coordinators (consumer and share groups)
                except InvalidOffsetsRecordError as exc:
                    log.warning("%s-%d: skipping a record that cannot be decoded: %s", OFFSETS_TOPIC, partition, exc)
        return replay.result()

    def _partition_records(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        """The keyed records of one partition in log order, transactional ones at their COMMIT marker."""
        lg = self.broker.log_manager.log_or_raise(TopicPartition(OFFSETS_TOPIC, partition))
        offset, end = lg.log_start_offset, lg.high_watermark
        pending: dict[int, list[tuple[bytes, bytes | None]]] = {}
        while offset < end:
            fetched = self.broker.fetch(OFFSETS_TOPIC, partition, offset, LOAD_BUFFER_SIZE)
            next_offset = offset
            for batch in iter_batches(fetched.records):
                header = batch.header
                next_offset = header.next_offset
                if header.is_control:
                    marker = batch.end_txn_marker()
                    if marker is not None:
                        done = pending.pop(header.producer_id, [])
                        if marker.control_type == ControlRecordType.COMMIT:
                            yield from done
                    continue
                records = [(r.key, r.value) for r in batch.records() if r.key is not None and r.offset >= offset]
                if header.is_transactional:
                    pending.setdefault(header.producer_id, []).extend(records)
                else:
                    yield from records
            if next_offset <= offset:
                break  # nothing more to read below the high watermark
            offset = next_offset
