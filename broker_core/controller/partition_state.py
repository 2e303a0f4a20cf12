"""One partition's leadership as the controller writes it: leader, leader epoch, ISR, controller epoch.

Kafka's ``LeaderIsrAndControllerEpoch``, the content of
``/brokers/topics/T/partitions/P/state``. The key's ``mod_revision`` plays the
znode version (Kafka's ``zkVersion``, later the partition epoch): every write of
a state is a compare-and-set against it.

``PartitionStateChange`` is what the controller decides: the new state of one
partition with its replicas and why. A list of them is the controller's whole
output, for whatever carries it to the brokers (``LeaderAndIsr`` requests or
brokers watching etcd).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from format.layout import TopicPartition

__all__ = ["NO_LEADER", "INITIAL_LEADER_EPOCH", "PartitionState", "PartitionStateChange"]

#: Kafka's ``LeaderAndIsr.NoLeader``: no replica can lead the partition now.
NO_LEADER = -1
INITIAL_LEADER_EPOCH = 0


@dataclass(frozen=True)
class PartitionState:
    """Leader (or ``NO_LEADER``), leader epoch, in-sync replicas and the epoch of the controller that wrote it."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))
        if self.leader_epoch < 0:
            raise ValueError(f"PartitionState: leader epoch {self.leader_epoch} is negative")
        if self.leader != NO_LEADER and self.leader not in self.isr:
            raise ValueError(f"PartitionState: leader {self.leader} is not in the ISR {list(self.isr)}")

    def new_leader_and_isr(self, leader: int, isr: tuple[int, ...] | list[int], controller_epoch: int
                           ) -> PartitionState:
        """The next state: a new leader and ISR under the next leader epoch (Kafka's ``newLeaderAndIsr``)."""
        return replace(self, leader=leader, leader_epoch=self.leader_epoch + 1, isr=tuple(isr),
                       controller_epoch=controller_epoch)


@dataclass(frozen=True)
class PartitionStateChange:
    """A partition's new state as written to the store, with its assigned replicas.

    ``partition_epoch`` is the state key's ``mod_revision`` after the write (the
    ``zkVersion`` a ``LeaderAndIsr`` request carries); ``is_new`` marks a
    partition's first state; ``unclean`` marks a leader elected from outside
    the ISR; ``deleted`` marks a partition whose topic was deleted (``state`` is
    its last one: its replicas stop and delete their logs).
    """

    topic_partition: TopicPartition
    state: PartitionState
    replicas: tuple[int, ...]
    partition_epoch: int
    reason: str
    is_new: bool = False
    unclean: bool = False
    deleted: bool = False
