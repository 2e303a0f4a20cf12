"""``BrokerApi``: what a broker answers, whether embedded (``Broker``, on log dirs in this process)
or running elsewhere (``RemoteBroker``, over the Kafka protocol). The ``seglog`` commands are
written against it and do not ask which one they hold."""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol

from format.compression import CompressionType
from format.layout import TopicPartition
from format.record import SimpleRecord

from .broker import (DEFAULT_FETCH_MAX_BYTES, FetchResult, OffsetAndTimestamp, RecordMetadata,
                     TopicDescription)
from .coordinator.group.offset_and_metadata import OffsetAndMetadata
from .group_offsets import GroupDescription
from .log.producer_state_manager import ActiveProducer


class BrokerApi(Protocol):
    """Topics, records and consumer groups, as Kafka's admin, producer and consumer clients see them."""

    def __enter__(self) -> BrokerApi: ...

    def __exit__(self, *exc) -> None: ...

    def close(self) -> None: ...

    # topics
    def list_topics(self) -> list[str]: ...

    def partitions_for(self, topic: str) -> int: ...

    def create_topic(self, name: str, partitions: int | None = None,
                     config: Mapping[str, object] | None = None, *,
                     replication_factor: int | None = None) -> TopicDescription: ...

    def create_partitions(self, name: str, total: int) -> TopicDescription: ...

    def delete_topic(self, name: str) -> None: ...

    def describe_topic(self, name: str) -> TopicDescription: ...

    def alter_topic_config(self, name: str, set_configs: Mapping[str, object] | None = None,
                           delete_configs: Iterable[str] = ()) -> dict[str, str]: ...

    # records
    def produce(self, topic: str, records: Iterable[SimpleRecord], partition: int | None = None,
                compression: CompressionType | str = CompressionType.NONE, *, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False) -> list[RecordMetadata]: ...

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
              isolation_level: str | int = "read_uncommitted") -> FetchResult: ...

    def list_offsets(self, topic: str, partition: int, spec: str | int,
                     isolation_level: str | int = "read_uncommitted") -> OffsetAndTimestamp | None: ...

    # consumer groups
    def list_groups(self) -> list[str]: ...

    def describe_group(self, group_id: str) -> GroupDescription: ...

    def committed_offsets(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]: ...

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None: ...

    def reset_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None: ...

    def delete_group(self, group_id: str) -> None: ...

    # producers and transactions
    def describe_producers(self, topic: str, partition: int) -> list[ActiveProducer]: ...
