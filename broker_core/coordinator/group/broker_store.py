"""``BrokerGroupStore``: the coordinator's records in the broker's own ``__consumer_offsets`` topic.

Writes go through ``Broker.produce_batches`` as one batch per call into the
group's partition; the embedded broker's own commits and deletions
(``group_offsets``) go through this store too, so the CLI, the Spark
connector's lag views and Kafka's tools read what the coordinator stored.
Loading reads every partition through the broker's logs from the log start
offset to the high watermark into the one ``OffsetsTopicReplay``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterable

from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

from ...errors import TopicAlreadyExistsError
from ...log.log import FetchIsolation
from ...offsets_topic import OFFSETS_TOPIC, partition_for_group
from .store import GroupRecordWriter, LoadedGroups, OffsetsTopicReplay

if TYPE_CHECKING:
    from ...broker import Broker
    from ...config import BrokerConfig

__all__ = ["BrokerGroupStore", "ensure_offsets_topic", "offsets_topic_config"]

# How much of a partition one read brings in while loading (Kafka's offsets.load.buffer.size).
LOAD_BUFFER_SIZE = 5 * 1024 * 1024


def offsets_topic_config(config: BrokerConfig) -> dict[str, object]:
    """The settings ``__consumer_offsets`` is created with (Kafka's ``offsetsTopicConfigs``)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": config.offsets_topic_segment_bytes,
        # Commits are stored as their writer compressed them, as Kafka does for this topic.
        "compression.type": "producer",
    }


def ensure_offsets_topic(broker: Broker) -> int:
    """Create ``__consumer_offsets`` with Kafka's settings unless it exists; returns its partition count."""
    if broker.topics.get(OFFSETS_TOPIC) is None:
        config = broker.config
        try:
            broker.create_topic(OFFSETS_TOPIC, config.offsets_topic_num_partitions, offsets_topic_config(config))
        except TopicAlreadyExistsError:
            pass  # created by a concurrent commit
    # An existing topic keeps its partition count whatever the configuration
    # says now: moving groups to other partitions would lose their offsets.
    return broker.partitions_for(OFFSETS_TOPIC)


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

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> int | None:
        if not records:
            return None
        now = self.broker.clock.milliseconds()
        partition = partition_for_group(group_id, self._ensure_topic())
        if producer is None:
            batch = build_batch([SimpleRecord(value, key, now) for key, value in records], default_timestamp=now)
            return self.broker.produce_batches(OFFSETS_TOPIC, partition, batch).first_offset
        # As Kafka's coordinator writes it: the producer's id and epoch, no sequence, checked as the
        # coordinator's append (the epoch fences a zombie; sequences are the client's business).
        producer_id, producer_epoch = producer
        batch = build_batch([SimpleRecord(value, key, now) for key, value in records], default_timestamp=now,
                            producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True)
        return self.broker.produce_batches(OFFSETS_TOPIC, partition, batch, from_client=False).first_offset

    # -- loading -------------------------------------------------------------------

    def load(self, partitions: Iterable[int] | None = None) -> LoadedGroups:
        replay = OffsetsTopicReplay()
        if self.broker.topics.get(OFFSETS_TOPIC) is None:
            return replay.result()  # no group has stored anything yet
        for partition in range(self.num_partitions) if partitions is None else partitions:
            self._replay_partition(partition, replay)
        return replay.result()

    def _replay_partition(self, partition: int, replay: OffsetsTopicReplay) -> None:
        """Replay the partition up to its log end, as Kafka's coordinator loads: a replica just elected
        leader holds every acknowledged record, though its high watermark may not show them yet."""
        lg = self.broker.log_manager.log_or_raise(TopicPartition(OFFSETS_TOPIC, partition))
        offset, end = lg.log_start_offset, lg.log_end_offset
        while offset < end:
            fetched = lg.read(offset, LOAD_BUFFER_SIZE, isolation=FetchIsolation.LOG_END)
            next_offset = offset
            for batch in iter_batches(fetched.records):
                replay.replay_batch(partition, batch, offset)
                next_offset = batch.header.next_offset
            if next_offset <= offset:
                break  # nothing more to read below the high watermark
            offset = next_offset
