"""A transaction coordinator on simulated time over a real embedded Broker, and the markers'
destinations of a cluster as a test controls them.

``Harness`` builds the Broker on a ``MockTime`` and its ``TransactionCoordinator``
with an ``InlineExecutor`` and no reaper: timers run only when a test calls
``advance``. With ``elected_partitions_only`` it is a cluster's coordinator,
owning the partitions of ``__transaction_state`` a test elects it for.
``ClusterDestinations`` is the ``MarkerDestinations`` of such a cluster: the
leader of each partition as the test sets it (this broker by default), and
the WriteTxnMarkers requests it was given, answered as the test says.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker_core import Broker
from broker_core.clock import MockTime
from broker_core.coordinator.transaction import (AddPartitionsToTxnRequest, EndTxnRequest, InitProducerIdRequest,
                                                 MarkerDestinations, TransactionCoordinator, TransactionMetadata,
                                                 TransactionState, TxnMarker)
from broker_core.errors import KafkaError, UnknownTopicOrPartitionError
from broker_core.timer import InlineExecutor
from format.layout import TopicPartition

NONE = 0
CONCURRENT_TRANSACTIONS = 51
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
PRODUCER_FENCED = 90
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16
TRANSACTIONAL_ID_NOT_FOUND = 105
START_MS = 1_700_000_000_000
TIMEOUT_MS = 10_000
ABORT_INTERVAL_MS = 1_000
NODE_ID = 1
S = TransactionState
TP0, TP1 = TopicPartition("out", 0), TopicPartition("out", 1)


@dataclass
class ClusterDestinations(MarkerDestinations):
    """Leaders as a test sets them; each WriteTxnMarkers it is given, answered with ``errors`` (by
    partition) or, for every partition of a broker in ``down``, with that broker's error."""

    local_id: int = NODE_ID
    leaders: dict[TopicPartition, int | None] = field(default_factory=dict)
    deleted: set[TopicPartition] = field(default_factory=set)
    errors: dict[TopicPartition, KafkaError] = field(default_factory=dict)
    down: dict[int, KafkaError] = field(default_factory=dict)
    requests: list[tuple[int, list[TxnMarker]]] = field(default_factory=list)

    def leader_of(self, tp: TopicPartition) -> int | None:
        if tp in self.deleted:
            raise UnknownTopicOrPartitionError(f"{tp} was deleted")
        return self.leaders.get(tp, self.local_id)

    def write_remote(self, node_id: int, markers: list[TxnMarker]) -> dict[TopicPartition, KafkaError]:
        self.requests.append((node_id, list(markers)))
        if node_id in self.down:
            return {m.topic_partition: self.down[node_id] for m in markers}
        return {m.topic_partition: self.errors[m.topic_partition] for m in markers
                if m.topic_partition in self.errors}


class Harness:
    """A Broker on a MockTime and its transaction coordinator with an inline timer and no reaper."""

    def __init__(self, path, clock: MockTime | None = None, *, load: bool = True,
                 elected_partitions_only: bool = False, destinations: MarkerDestinations | None = None) -> None:
        self.clock = clock or MockTime(current_time_ms=START_MS)
        self.broker = Broker(str(path), {"node.id": NODE_ID, "transaction.state.log.num.partitions": 2,
                                         "transaction.abort.timed.out.transaction.cleanup.interval.ms":
                                             ABORT_INTERVAL_MS,
                                         "transactional.id.expiration.ms": 3_600_000},
                             clock=self.clock, background=False)
        for topic in ("out", "far"):
            if self.broker.topics.get(topic) is None:
                self.broker.create_topic(topic, 2)
        self.coordinator = TransactionCoordinator.for_broker(self.broker, executor=InlineExecutor(),
                                                             reaper_enabled=False, destinations=destinations)
        self.broker.transaction_coordinator = self.coordinator
        self.coordinator.startup(load=load, elected_partitions_only=elected_partitions_only)

    def init(self, transactional_id: str = "tx", timeout_ms: int = TIMEOUT_MS, producer_id: int = -1,
             producer_epoch: int = -1):
        return self.coordinator.init_producer_id(InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=timeout_ms, producer_id=producer_id,
            producer_epoch=producer_epoch))

    def add(self, producer_id: int, epoch: int, *partitions: TopicPartition, transactional_id: str = "tx"):
        return self.coordinator.add_partitions_to_transaction(AddPartitionsToTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
            partitions=partitions))

    def end(self, producer_id: int, epoch: int, commit: bool, transactional_id: str = "tx") -> int:
        return self.coordinator.end_transaction(EndTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, committed=commit))

    def write(self, producer_id: int, epoch: int, tp: TopicPartition, value: bytes, sequence: int = 0) -> None:
        self.broker.produce(tp.topic, [value], tp.partition, producer_id=producer_id, producer_epoch=epoch,
                            base_sequence=sequence, transactional=True)

    def committed_values(self, tp: TopicPartition) -> list[bytes]:
        return [r.value for r in self.broker.fetch(tp.topic, tp.partition, 0,
                                                   isolation_level="read_committed").decoded()]

    def state(self, transactional_id: str = "tx") -> TransactionMetadata:
        return self.coordinator.transaction(transactional_id)

    def described_error(self, transactional_id: str = "tx") -> int:
        (described,) = self.coordinator.describe_transactions([transactional_id])
        return described.error_code

    def advance(self, ms: int) -> None:
        self.clock.sleep(ms)
        self.coordinator.advance_clock(0)

    def close(self) -> None:
        self.broker.close()
