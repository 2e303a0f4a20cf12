"""Replicas of one partition in one process: each broker's real ``Log`` in its own directory and its
``Partition``, on one simulated clock; a follower's fetch is the leader's read handed to the
follower's log, as the replica fetcher does it, without the network."""

from __future__ import annotations

from broker_core.clock import MockTime
from broker_core.cluster.partition import LeaderAndIsr, Partition
from broker_core.config import LogConfig
from broker_core.log.leader_epoch_file_cache import UNDEFINED_EPOCH_END_OFFSET, EpochEndOffset
from broker_core.log.log import Log
from format.layout import TopicPartition
from format.record import SimpleRecord
from format.record_batch import build_batch, iter_batches

T0 = 1_800_000_000_000
TP = TopicPartition("t", 0)


def open_replica(root, broker_id: int, clock: MockTime, *, min_insync_replicas: int = 1,
                 replica_lag_time_max_ms: int = 30_000, had_clean_shutdown: bool = True,
                 high_watermark: int | None = None) -> Partition:
    """Broker ``broker_id``'s replica of t-0 under ``root`` (opened again after a crash with
    ``had_clean_shutdown=False`` and its checkpointed ``high_watermark``); its log commits only what
    the ISR holds."""
    config = LogConfig.from_props({"min.insync.replicas": min_insync_replicas})
    log = Log.open(log_dir(root, broker_id), config, clock=clock, sole_replica=False,
                   had_clean_shutdown=had_clean_shutdown, high_watermark=high_watermark)
    return Partition(TP, broker_id, log, clock, replica_lag_time_max_ms=replica_lag_time_max_ms)


def log_dir(root, broker_id: int) -> str:
    return str(root / f"broker-{broker_id}" / str(TP))


def records(*values: bytes) -> bytes:
    return build_batch([SimpleRecord(v, None, T0 + i) for i, v in enumerate(values)])


def fetch(leader: Partition, follower: Partition, max_bytes: int = 1 << 20):
    """One fetch of ``follower`` from its log end: the leader learns where the follower is, the follower
    appends what the leader serves up to the leader's log end and takes the leader's high watermark."""
    offset = follower.log.log_end_offset
    served = leader.log.read(offset, max_bytes, max_offset=leader.log.log_end_offset)
    result = leader.update_follower_fetch_state(follower.local_broker_id, offset)
    if served.records:
        follower.log.append_as_follower(served.records)
    follower.log.update_high_watermark(leader.log.high_watermark)
    return result


def catch_up(leader: Partition, follower: Partition) -> None:
    """Fetch until the follower holds the leader's log, then once more: the leader counts it caught up
    and the follower learns the high watermark that moved."""
    for _ in range(1000):
        fetch(leader, follower)
        if follower.log.log_end_offset == leader.log.log_end_offset:
            fetch(leader, follower)
            return
    raise AssertionError(f"{follower.log} did not catch up with {leader.log}")


def elect(leader: Partition, followers: list[Partition], epoch: int, isr: list[int], partition_epoch: int = 0
          ) -> LeaderAndIsr:
    """What the controller's election does to the replicas: ``leader`` leads in ``epoch``, the rest follow."""
    state = LeaderAndIsr(leader.local_broker_id, epoch, tuple(isr), partition_epoch)
    replicas = sorted([leader.local_broker_id] + [f.local_broker_id for f in followers])
    leader.make_leader(state, replicas)
    for follower in followers:
        follower.make_follower(state, replicas)
    return state


def offsets_for_leader_epoch(leader: Partition):
    """The leader's OffsetsForLeaderEpoch answer, as the follower's fetcher asks for it."""
    def ask(epoch: int) -> EpochEndOffset:
        found = leader.last_offset_for_leader_epoch(leader.leader_epoch, epoch)
        return UNDEFINED_EPOCH_END_OFFSET if found is None else found
    return ask


def committed_bytes(log: Log, end: int) -> bytes:
    """The stored bytes of every batch below offset ``end`` (the committed prefix)."""
    data = log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).records
    return b"".join(bytes(b.buffer) for b in iter_batches(bytes(data)) if b.header.last_offset < end)


def values(log: Log) -> list[tuple[int, bytes]]:
    data = log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset).records
    return [(r.offset, r.value) for b in iter_batches(bytes(data)) for r in b.records()]
