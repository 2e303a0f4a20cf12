"""A follower's fetcher from one leader broker (Kafka's ``ReplicaFetcherThread``).

One thread per leader broker fetches every partition this broker follows from
it, over the Kafka protocol as a replica (Fetch v12 with ``replica_id`` = this
broker's id): the leader answers from its log end, not only below the high
watermark, and counts each fetch as the follower's position. The thread keeps a
fetch session with its leader (KIP-227, ``FetchSessionHandler``): after the
first full fetch it names only the partitions whose fetch offset moved.

A partition handed to the thread first truncates by leader epoch (KIP-101,
``truncate_by_leader_epoch``, asking the leader's OffsetsForLeaderEpoch), then
fetches from its log end, naming the epoch of its last batch; an answer with
a DivergingEpoch truncates there (KIP-320) and fetches again. Records are
appended as the leader wrote them (``Log.append_as_follower``: its offsets and
epochs), and the follower's high watermark follows the leader's, never past
its own log end. A partition whose leader answers OFFSET_MOVED_TO_TIERED_STORAGE (its local log starts
past this log's end, the rest in the remote tier) starts at the leader's local log start offset with the
leader epochs and producer state of the remote segment below it (KIP-405). A fenced or refused partition
(the leader has not taken in the new epoch yet) starts over from truncation after
``replica.fetch.backoff.ms``, as does a connection that fails.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from format.layout import TopicPartition

from ..client.client_security import PLAINTEXT_CLIENT, ClientSecurity
from ..client.protocol_client import ProtocolClient
from ..cluster.partition import Partition
from ..errors import NONE, KafkaError, OffsetMovedToTieredStorageError, SaslAuthenticationFailedError, error_for_code
from ..log.leader_epoch_file_cache import EpochEndOffset
from ..log.log import EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP
from ..log.remote.remote_log_reader import RemoteLogReader
from ..network.endpoint import EndPoint
from ..protocol import ApiKey, ProtocolError
from .fetch_session import PartitionData
from .fetch_session_handler import FetchSessionHandler
from .offset_truncation import truncate_by_leader_epoch, truncate_to_diverging_epoch

__all__ = ["ReplicaFetcherThread"]

log = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
# The first version answering earliest-local (-4).
LIST_OFFSETS_VERSION = 8
# Kafka's defaults.
REPLICA_FETCH_WAIT_MAX_MS = 500
REPLICA_FETCH_MIN_BYTES = 1
REPLICA_FETCH_MAX_BYTES = 1024 * 1024
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024
REPLICA_FETCH_BACKOFF_MS = 1000


class _FetchState:
    """A partition the thread fetches: whether it must truncate first, and the leader epoch it follows."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.truncating = True
        # While refused (the leader has not taken the new epoch in yet, or another broker leads now): retried
        # from truncation after replica.fetch.backoff.ms (monotonic seconds).
        self.retry_at = 0.0


class ReplicaFetcherThread:
    """Fetches the partitions ``add_partition`` hands it from ``leader_id`` until ``shutdown``."""

    def __init__(self, broker_id: int, leader_id: int, leader_endpoint: Callable[[int], EndPoint | None],
                 on_appended: Callable[[TopicPartition], None] = lambda tp: None,
                 remote_log_reader: RemoteLogReader | None = None,
                 security: ClientSecurity = PLAINTEXT_CLIENT) -> None:
        self.broker_id = broker_id
        self._security = security
        #: The remote tier, where a follower finds what it needs to start at its leader's local log start.
        self._remote = remote_log_reader
        self.leader_id = leader_id
        self._leader_endpoint = leader_endpoint
        self._on_appended = on_appended
        self._partitions: dict[TopicPartition, _FetchState] = {}
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._closed = threading.Event()
        self._client: ProtocolClient | None = None
        #: The fetch session with the leader (KIP-227), as followers keep one.
        self._session = FetchSessionHandler()
        self._thread = threading.Thread(target=self._run, name=f"ReplicaFetcherThread-{broker_id}-from-{leader_id}",
                                        daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"ReplicaFetcherThread(broker {self.broker_id} from leader {self.leader_id})"

    # --- partitions ----------------------------------------------------------------

    def add_partition(self, partition: Partition) -> None:
        with self._lock:
            self._partitions[partition.topic_partition] = _FetchState(partition)
        self._wakeup.set()

    def remove_partitions(self, tps) -> None:
        with self._lock:
            for tp in tps:
                self._partitions.pop(tp, None)

    @property
    def partition_count(self) -> int:
        with self._lock:
            return len(self._partitions)

    def shutdown(self) -> None:
        self._closed.set()
        self._wakeup.set()
        self._thread.join(timeout=10)
        self._close_client()

    # --- the loop ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                now = time.monotonic()
                states = [s for s in self._partitions.values() if s.retry_at <= now]
            if not states:
                self._wakeup.wait(0.1)
                self._wakeup.clear()
                continue
            try:
                client = self._connect()
                if client is None:
                    self._closed.wait(REPLICA_FETCH_BACKOFF_MS / 1000)
                    continue
                for state in states:
                    if state.truncating:
                        self._truncate(client, state)
                self._fetch(client, [s for s in states if not s.truncating and s.retry_at <= time.monotonic()])
            except (OSError, ConnectionError, ProtocolError, SaslAuthenticationFailedError) as exc:
                log.info("%s: %s; connecting again in %d ms", self, exc, REPLICA_FETCH_BACKOFF_MS)
                self._close_client()
                self._closed.wait(REPLICA_FETCH_BACKOFF_MS / 1000)
            except Exception:  # noqa: BLE001 - one bad answer must not end the replication
                log.exception("%s: fetching failed", self)
                self._closed.wait(REPLICA_FETCH_BACKOFF_MS / 1000)

    def _connect(self) -> ProtocolClient | None:
        if self._client is None:
            endpoint = self._leader_endpoint(self.leader_id)
            if endpoint is None:
                return None
            self._client = ProtocolClient(f"{endpoint.host or '127.0.0.1'}:{endpoint.port}",
                                          client_id=f"broker-{self.broker_id}-fetcher-{self.leader_id}",
                                          timeout_s=30, security=self._security)
        return self._client

    def _close_client(self) -> None:
        self._session.handle_error()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _fail(self, state: _FetchState, error: KafkaError | str) -> None:
        """Back off the partition and start it over from truncation (Kafka's partitions in failed state)."""
        named = f"{error.kafka_error_name}: {error}" if isinstance(error, KafkaError) else error
        log.warning("%s: %s: %s; trying again in %d ms", self, state.partition.topic_partition, named,
                    REPLICA_FETCH_BACKOFF_MS)
        state.truncating = True
        state.retry_at = time.monotonic() + REPLICA_FETCH_BACKOFF_MS / 1000

    def _current(self, state: _FetchState) -> bool:
        """Still this thread's, and still following this leader in the same epoch."""
        partition = state.partition
        with self._lock:
            ours = self._partitions.get(partition.topic_partition) is state
        return ours and partition.leader_id == self.leader_id and partition.leader_epoch == state.leader_epoch

    # --- truncation ----------------------------------------------------------------

    def _truncate(self, client: ProtocolClient, state: _FetchState) -> None:
        tp = state.partition.topic_partition

        def ask_leader(epoch: int) -> EpochEndOffset:
            response = client.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, {
                "replica_id": self.broker_id,
                "topics": [{"topic": tp.topic, "partitions": [{"partition": tp.partition,
                                                                "current_leader_epoch": state.leader_epoch,
                                                                "leader_epoch": epoch}]}]},
                version=OFFSET_FOR_LEADER_EPOCH_VERSION)
            answer = response["topics"][0]["partitions"][0]
            if answer["error_code"] != NONE:
                raise error_for_code(answer["error_code"])(f"OffsetsForLeaderEpoch of {tp} from broker "
                                                           f"{self.leader_id}")
            return EpochEndOffset(answer["leader_epoch"], answer["end_offset"])

        if not self._current(state):
            return
        try:
            offset = truncate_by_leader_epoch(state.partition.log, ask_leader)
        except KafkaError as exc:
            self._fail(state, exc)
            return
        state.truncating = False
        log.info("%s: %s fetches from offset %d in leader epoch %d", self, tp, offset, state.leader_epoch)

    # --- fetching ------------------------------------------------------------------

    def _fetch(self, client: ProtocolClient, states: list[_FetchState]) -> None:
        if not states:
            return
        by_tp = {s.partition.topic_partition: s for s in states}
        wanted = []
        for tp, state in by_tp.items():
            lg = state.partition.log
            latest = lg.latest_epoch
            wanted.append((tp, PartitionData(lg.log_end_offset, lg.log_start_offset, REPLICA_FETCH_MAX_BYTES,
                                             state.leader_epoch, -1 if latest is None else latest)))
        request = self._session.build(wanted)
        topics: dict[str, list[dict]] = {}
        for tp, data in request.to_send:
            topics.setdefault(tp.topic, []).append({
                "partition": tp.partition, "current_leader_epoch": data.current_leader_epoch,
                "fetch_offset": data.fetch_offset, "last_fetched_epoch": data.last_fetched_epoch,
                "log_start_offset": data.log_start_offset, "partition_max_bytes": data.max_bytes})
        forgotten: dict[str, list[int]] = {}
        for tp in request.to_forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        response = client.send(ApiKey.FETCH, {
            "replica_id": self.broker_id, "max_wait_ms": REPLICA_FETCH_WAIT_MAX_MS,
            "min_bytes": REPLICA_FETCH_MIN_BYTES, "max_bytes": REPLICA_FETCH_RESPONSE_MAX_BYTES,
            "isolation_level": 0, "session_id": request.metadata.session_id,
            "session_epoch": request.metadata.epoch,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
            "rack_id": ""}, version=FETCH_VERSION)
        if not self._session.handle_response(response["error_code"], response["session_id"]):
            # A session error carries no partitions: the next fetch is a full one, at once.
            log.info("%s: fetch session %d answered error %d; fetching in full", self, request.metadata.session_id,
                     response["error_code"])
            return
        for topic in response["responses"]:
            for answer in topic["partitions"]:
                state = by_tp.get(TopicPartition(topic["topic"], answer["partition_index"]))
                if state is not None and self._current(state):
                    self._process(client, state, answer)

    def _process(self, client: ProtocolClient, state: _FetchState, answer: dict) -> None:
        lg = state.partition.log
        tp = state.partition.topic_partition
        if answer["error_code"] == OffsetMovedToTieredStorageError.code:
            self._start_at_leader_local_log(client, state)
            return
        if answer["error_code"] != NONE:
            self._fail(state, error_for_code(answer["error_code"])(f"fetch of {tp} from broker {self.leader_id}"))
            return
        diverging = answer.get("diverging_epoch") or {}
        if diverging.get("end_offset", -1) >= 0 or diverging.get("epoch", -1) >= 0:
            truncation = truncate_to_diverging_epoch(lg, EpochEndOffset(diverging["epoch"], diverging["end_offset"]))
            state.truncating = not truncation.truncation_completed
            return
        records = answer.get("records")
        if records:
            lg.append_as_follower(bytes(records))
            self._on_appended(tp)
        lg.update_high_watermark(answer["high_watermark"])

    # --- tiered storage ----------------------------------------------------------------

    def _start_at_leader_local_log(self, client: ProtocolClient, state: _FetchState) -> None:
        """The leader's local log starts past this log's end, the offsets between only in the remote tier:
        start this log past the remote segment holding the offset below the leader's local log start, with
        the leader epochs and producer state of that segment (Kafka's ReplicaFetcherTierStateMachine), then
        fetch from there."""
        lg = state.partition.log
        tp = state.partition.topic_partition
        moved = f"fetch of {tp} at offset {lg.log_end_offset} from broker {self.leader_id}"
        if self._remote is None or not lg.config.remote_storage_enable:
            self._fail(state, OffsetMovedToTieredStorageError(f"{moved}; this broker names no remote tier to "
                                                              f"build the partition's state from"))
            return
        try:
            local_start = self._list_offset(client, state, EARLIEST_LOCAL_TIMESTAMP)
            log_start = self._list_offset(client, state, EARLIEST_TIMESTAMP)
            start, epochs, snapshot = self._remote.remote_log_aux_state(tp, local_start - 1)
        except KafkaError as exc:
            self._fail(state, exc)
            return
        lg.build_remote_log_aux_state(start, log_start, epochs, snapshot)
        log.info("%s: %s: %s answered OFFSET_MOVED_TO_TIERED_STORAGE; fetching from offset %d, past the remote "
                 "segment below the leader's local log start offset %d", self, tp, moved, start, local_start)

    def _list_offset(self, client: ProtocolClient, state: _FetchState, timestamp: int) -> int:
        tp = state.partition.topic_partition
        response = client.send(ApiKey.LIST_OFFSETS, {
            "replica_id": self.broker_id, "isolation_level": 0, "topics": [{"name": tp.topic, "partitions": [{
                "partition_index": tp.partition, "current_leader_epoch": state.leader_epoch,
                "timestamp": timestamp}]}]}, version=LIST_OFFSETS_VERSION)
        answer = response["topics"][0]["partitions"][0]
        if answer["error_code"] != NONE:
            raise error_for_code(answer["error_code"])(f"ListOffsets {timestamp} of {tp} from broker "
                                                       f"{self.leader_id}")
        return answer["offset"]
