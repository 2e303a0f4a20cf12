"""CPU time of the broker's fetch path, per fetch: a Fetch request for 4 partitions x 1 MiB handled
by ``KafkaApis`` (log read, CRC checks, response encoding) in this process, without sockets.

CPU time (``time.process_time``) rather than wall clock, so the figure holds on a loaded machine.
The response buffers are handed to a sink that only measures them (and closes the file slices of a
zero-copy answer, as the network thread does once it sent them); the socket write is left out.
The requests come as from a PLAINTEXT listener: zero copy unless ``--copy``
(``fetch.zero.copy.enable=false``).

    python bench/fetch_cpu_bench.py [--fetches 200] [--record-bytes 1024] [--copy]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker_core.network.request_channel import Request, release  # noqa: E402
from broker_core.protocol import ApiKey, encode_request  # noqa: E402
from broker_core.server.allocator import retain_freed_buffers  # noqa: E402
from broker_core.server.broker_server import BrokerServer  # noqa: E402
from format.layout import TopicPartition  # noqa: E402
from format.record import SimpleRecord  # noqa: E402
from format.record_batch import build_batch, iter_batches  # noqa: E402

TOPIC = "fetch-cpu"
PARTITIONS = 4
PARTITION_MAX_BYTES = 1024 * 1024
FETCH_VERSION = 12


class _Sink:
    """Takes the handler's responses in place of the network threads."""

    def __init__(self) -> None:
        self.bytes = 0

    def send_response(self, response) -> None:
        payload = response.payload
        parts = [payload] if isinstance(payload, (bytes, bytearray, memoryview)) else payload
        self.bytes += sum(len(p) for p in parts)
        release(response)


def fill(server: BrokerServer, log_bytes: int, record_bytes: int, batch_bytes: int) -> None:
    server.broker.create_topic(TOPIC, PARTITIONS)
    per_batch = max(1, batch_bytes // record_bytes)
    batch = build_batch([SimpleRecord(os.urandom(record_bytes), None, 1_700_000_000_000)] * per_batch)
    for partition in range(PARTITIONS):
        for _ in range(log_bytes // len(batch)):
            server.broker.produce_batches(TOPIC, partition, batch)


def fetch_frame(offsets: list[int], correlation_id: int) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": PARTITIONS * PARTITION_MAX_BYTES,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offsets[p], "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": PARTITION_MAX_BYTES} for p in range(PARTITIONS)]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return encode_request(ApiKey.FETCH, FETCH_VERSION, correlation_id, "bench", body)[4:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fetches", type=int, default=200)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-bytes", type=int, default=16 * 1024, help="bytes of records per batch")
    parser.add_argument("--log-mib", type=int, default=16, help="MiB per partition, fetched round and round")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--copy", action="store_true", help="fetch.zero.copy.enable=false: read and check every byte")
    parser.add_argument("--fresh-buffers", action="store_true",
                        help="leave glibc's allocator as it is, as a process other than seglog broker does")
    args = parser.parse_args()
    if not args.fresh_buffers:
        retain_freed_buffers()  # as seglog broker does
    with tempfile.TemporaryDirectory(prefix="fetch-cpu-") as log_dir:
        server = BrokerServer({"log.dirs": log_dir, "listeners": "PLAINTEXT://127.0.0.1:0",
                               "num.network.threads": 1, "num.io.threads": 1,
                               "fetch.zero.copy.enable": not args.copy}).startup()
        try:
            fill(server, args.log_mib * 1024 * 1024, args.record_bytes, args.batch_bytes)
            apis = server.apis
            sink = _Sink()
            apis.request_channel = sink
            end = [server.broker.log_manager.get_log(_tp(p)).log_end_offset for p in range(PARTITIONS)]
            requests = []
            offsets = [0] * PARTITIONS
            for n in range(args.fetches):
                requests.append(Request(0, "bench", "PLAINTEXT", ("127.0.0.1", 0), fetch_frame(offsets, n)))
                offsets = [o + _step(server, p, o) for p, o in enumerate(offsets)]
                offsets = [0 if o >= e else o for o, e in zip(offsets, end)]
            per_fetch = []
            for run in range(args.runs + 1):  # the first run warms the page cache and the code
                sink.bytes = 0
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                started = time.process_time()
                for request in requests:
                    apis.handle(request)
                cpu = time.process_time() - started
                faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
                if run:
                    per_fetch.append(cpu / args.fetches * 1000)
                    print(f"run {run}: {per_fetch[-1]:.2f} ms CPU per fetch, {faults / args.fetches:.0f} page faults, "
                          f"{sink.bytes / args.fetches / 1024 / 1024:.2f} MiB per response", flush=True)
            print(f"median {statistics.median(per_fetch):.2f} ms CPU per fetch of {PARTITIONS} x "
                  f"{PARTITION_MAX_BYTES // 1024} KiB ({args.record_bytes} B records)")
        finally:
            server.shutdown()


def _tp(partition: int) -> TopicPartition:
    return TopicPartition(TOPIC, partition)


def _step(server: BrokerServer, partition: int, offset: int) -> int:
    """How far one fetch from ``offset`` moves."""
    info = server.broker.log_manager.get_log(_tp(partition)).read(offset, PARTITION_MAX_BYTES)
    last = None
    for last in iter_batches(info.records):
        pass
    return 0 if last is None else last.header.next_offset - offset


if __name__ == "__main__":
    main()
