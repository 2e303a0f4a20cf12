"""A consumer of many partitions with and without fetch sessions (KIP-227): broker CPU, bytes and records per fetch.

One topic of ``--partitions`` partitions (1,000) holds a few records in each; kafka-python (which uses
sessions) reads them all from the beginning, ``--rounds`` times ("catch-up"), then keeps reading while a producer adds one
record every ``--tail-interval-ms`` to the next partition in turn ("tail"). The same run is made on a
``seglog broker`` with ``max.incremental.fetch.session.cache.slots=0`` (no sessions: every fetch names
every partition and is answered with every partition) and with the default (1000 slots).

The broker runs in its own process; its CPU time comes from ``/proc/<pid>/stat`` (user + system), so the
figure holds on a loaded machine. The consumer reaches the broker through a counting proxy in this process
(the broker advertises the proxy's port): the bytes of each Fetch request and response are counted there.
In the tail, records/s is the producer's pace; CPU and bytes per fetch are the figures to compare.

A second table isolates the request handler: ``KafkaApis`` in this process (no sockets, no purgatory:
max wait 0) answers ``--handler-fetches`` fetches of every partition with nothing new, sessionless and
incremental, and its CPU time (``time.process_time``) per fetch is reported.

    python bench/fetch_session_bench.py [--partitions 1000] [--records-per-partition 5] [--tail-seconds 10]
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Sequence

from kafka import KafkaConsumer
from kafka import TopicPartition as ConsumerPartition

from broker_core.client.protocol_client import ProtocolClient
from broker_core.network.request_channel import Request
from broker_core.protocol import ApiKey, encode_request, parse_response
from broker_core.server.broker_server import BrokerServer
from format.record import SimpleRecord
from format.record_batch import build_batch
from testbed.broker_process import BrokerProcess
from testbed.processes import free_port

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (date_and_command, environment, log, print_environment, print_header,  # noqa: E402
                          print_markdown_header, print_markdown_row)
from broker_bench import cpu_seconds  # noqa: E402

TOPIC = "many-partitions"
VALUE_BYTES = 100
_SIZE = struct.Struct(">i")
_API_KEY = struct.Struct(">h")


class FetchCountingProxy:
    """Forwards loopback connections to the broker, counting the Fetch requests and the bytes of each Fetch
    request and response (size prefix included); responses come back in request order on a connection."""

    def __init__(self, port: int, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.lock = threading.Lock()
        self.fetches = 0
        self.request_bytes = 0
        self.response_bytes = 0
        self._listener = socket.create_server(("127.0.0.1", port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def reset(self) -> tuple[int, int, int]:
        """The counts so far (fetches, request bytes, response bytes), then zero."""
        with self.lock:
            counts = (self.fetches, self.request_bytes, self.response_bytes)
            self.fetches = self.request_bytes = self.response_bytes = 0
            return counts

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            in_flight: collections.deque[bool] = collections.deque()
            threading.Thread(target=self._pump, args=(client, upstream, in_flight, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, in_flight, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, in_flight: collections.deque[bool],
              requests: bool) -> None:
        try:
            while True:
                head = _read_exactly(source, 4)
                body = _read_exactly(source, _SIZE.unpack(head)[0])
                if requests:
                    is_fetch = _API_KEY.unpack_from(body)[0] == ApiKey.FETCH
                    in_flight.append(is_fetch)
                    if is_fetch:
                        with self.lock:
                            self.fetches += 1
                            self.request_bytes += 4 + len(body)
                elif in_flight.popleft():
                    with self.lock:
                        self.response_bytes += 4 + len(body)
                sink.sendall(head + body)
        except (OSError, EOFError, IndexError):
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class Phase:
    """One phase of one run: fetches, broker CPU and bytes, records read, wall seconds."""

    fetches: int
    broker_cpu_s: float
    request_bytes: int
    response_bytes: int
    records: int
    seconds: float

    def per_fetch(self, total: float) -> float:
        return total / self.fetches if self.fetches else float("nan")


def produce(client: ProtocolClient, batches: dict[int, bytes]) -> None:
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 10_000, "topic_data": [{
        "name": TOPIC, "partition_data": [{"index": p, "records": b} for p, b in batches.items()]}]}
    response = client.send(ApiKey.PRODUCE, body)
    errors = [r["error_code"] for t in response["responses"] for r in t["partition_responses"] if r["error_code"]]
    if errors:
        raise RuntimeError(f"produce to {TOPIC} failed: error codes {sorted(set(errors))}")


def record_batch(count: int, tag: int) -> bytes:
    return build_batch([SimpleRecord(b"%08d" % tag + b"x" * (VALUE_BYTES - 8), None, int(time.time() * 1000))
                        for _ in range(count)])


def run(slots: int, args: argparse.Namespace, directory: str) -> tuple[Phase, Phase]:
    proxy_port = free_port()
    broker = BrokerProcess([directory], "--advertised-listeners", f"PLAINTEXT://127.0.0.1:{proxy_port}",
                           "--config", f"max.incremental.fetch.session.cache.slots={slots}",
                           "--config", f"num.partitions={args.partitions}")
    proxy = FetchCountingProxy(proxy_port, broker.port)
    try:
        with ProtocolClient(broker.bootstrap) as client:
            created = client.send(ApiKey.CREATE_TOPICS, {"topics": [{
                "name": TOPIC, "num_partitions": args.partitions, "replication_factor": 1, "assignments": [],
                "configs": []}], "timeout_ms": 60_000})
            if created["topics"][0]["error_code"]:
                raise RuntimeError(f"creating {TOPIC}: {created['topics'][0]}")
            produce(client, {p: record_batch(args.records_per_partition, p) for p in range(args.partitions)})
            consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{proxy_port}", group_id=None,
                                     enable_auto_commit=False, request_timeout_ms=30_000, fetch_max_wait_ms=500,
                                     max_partition_fetch_bytes=1 << 20)
            try:
                tps = [ConsumerPartition(TOPIC, p) for p in range(args.partitions)]
                consumer.assign(tps)
                consumer.seek_to_beginning(*tps)
                catch_up = measure(broker, proxy, consumer, args.partitions * args.records_per_partition,
                                   rounds=args.rounds, tps=tps)
                log(f"slots={slots} catch-up: {catch_up}")
                tail = tail_phase(broker, proxy, consumer, client, args)
                log(f"slots={slots} tail: {tail}")
            finally:
                consumer.close()
    finally:
        proxy.close()
        broker.stop()
    return catch_up, tail


def measure(broker: BrokerProcess, proxy: FetchCountingProxy, consumer: KafkaConsumer, count: int,
            *, during: threading.Thread | None = None, rounds: int = 1,
            tps: Sequence[ConsumerPartition] = ()) -> Phase:
    """Read ``count`` records ``rounds`` times (from the beginning of ``tps`` again each time), while ``during``
    runs; a fetch the consumer sent ahead when the last record came in counts, its response not."""
    proxy.reset()
    cpu0, start = cpu_seconds(broker.proc.pid), time.perf_counter()
    if during is not None:
        during.start()
    total = 0
    deadline = time.monotonic() + 300
    for round_ in range(rounds):
        if round_:
            consumer.seek_to_beginning(*tps)
        got = 0
        while (got < count or (during is not None and during.is_alive())) and time.monotonic() < deadline:
            got += sum(len(records) for records in consumer.poll(timeout_ms=100).values())
        if got < count:
            raise RuntimeError(f"read {got} of {count} records")
        total += got
    seconds = time.perf_counter() - start
    cpu = cpu_seconds(broker.proc.pid) - cpu0
    fetches, request_bytes, response_bytes = proxy.reset()
    return Phase(fetches, cpu, request_bytes, response_bytes, total, seconds)


def tail_phase(broker: BrokerProcess, proxy: FetchCountingProxy, consumer: KafkaConsumer, client: ProtocolClient,
               args: argparse.Namespace) -> Phase:
    count = int(args.tail_seconds * 1000 / args.tail_interval_ms)

    def trickle() -> None:
        for i in range(count):
            produce(client, {(i * 7) % args.partitions: record_batch(1, i)})
            time.sleep(args.tail_interval_ms / 1000)

    return measure(broker, proxy, consumer, count, during=threading.Thread(target=trickle, daemon=True))


class _Sink:
    """Takes the handler's responses in place of the network threads, keeping the last one's bytes."""

    def __init__(self) -> None:
        self.last: list = []

    def send_response(self, response) -> None:
        payload = response.payload
        self.last = [payload] if isinstance(payload, (bytes, bytearray, memoryview)) else payload


def _fetch_frame(session_id: int, epoch: int, partitions: Sequence[int], offset: int, correlation_id: int) -> bytes:
    body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in partitions]}] if partitions else [],
            "forgotten_topics_data": [], "rack_id": ""}
    return encode_request(ApiKey.FETCH, 12, correlation_id, "bench", body)[4:]


def handler_cpu_ms_per_fetch(args: argparse.Namespace) -> dict[str, float]:
    """CPU ms per fetch of every partition, all read to their end, sessionless and incremental."""
    with tempfile.TemporaryDirectory(prefix="fetch-session-handler-") as directory:
        server = BrokerServer({"log.dirs": directory, "listeners": "PLAINTEXT://127.0.0.1:0",
                               "num.network.threads": 1, "num.io.threads": 1}).startup()
        try:
            server.broker.create_topic(TOPIC, args.partitions)
            for p in range(args.partitions):
                server.broker.produce_batches(TOPIC, p, record_batch(args.records_per_partition, p))
            apis = server.apis
            sink = apis.request_channel = _Sink()
            end, every = args.records_per_partition, range(args.partitions)

            def request(frame: bytes) -> Request:
                return Request(0, "bench", "PLAINTEXT", ("127.0.0.1", 0), frame)

            sessionless = [request(_fetch_frame(0, -1, every, end, n)) for n in range(args.handler_fetches)]
            apis.handle(request(_fetch_frame(0, 0, every, end, 0)))
            session_id = parse_response(ApiKey.FETCH, 12, b"".join(bytes(b) for b in sink.last)[4:])[1]["session_id"]
            incremental = [request(_fetch_frame(session_id, n + 1, (), end, n)) for n in range(args.handler_fetches)]
            figures = {}
            for label, requests in (("sessionless", sessionless), ("incremental", incremental)):
                started = time.process_time()
                for r in requests:
                    apis.handle(r)
                figures[label] = (time.process_time() - started) / len(requests) * 1000
            return figures
        finally:
            server.shutdown()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--partitions", type=int, default=1000)
    p.add_argument("--records-per-partition", type=int, default=5)
    p.add_argument("--rounds", type=int, default=5, help="times the catch-up reads the topic from the beginning")
    p.add_argument("--tail-seconds", type=float, default=10)
    p.add_argument("--tail-interval-ms", type=float, default=20)
    p.add_argument("--handler-fetches", type=int, default=200)
    p.add_argument("--markdown", action="store_true", help="also print rows ready for BENCHMARKS.md")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = environment([("client", "kafka-python (fetch sessions), through a counting proxy"),
                       ("topic", f"{args.partitions} partitions, {args.records_per_partition} x {VALUE_BYTES} B "
                                 f"records each, then 1 record / {args.tail_interval_ms:g} ms for "
                                 f"{args.tail_seconds:g} s")])
    handler = handler_cpu_ms_per_fetch(args)
    log(f"handler CPU ms per fetch: {handler}")
    results: dict[str, tuple[Phase, Phase]] = {}
    for label, slots in (("without sessions (slots 0)", 0), ("with sessions (slots 1000)", 1000)):
        with tempfile.TemporaryDirectory(prefix="fetch-session-bench-") as directory:
            results[label] = run(slots, args, directory)
    print_environment(env)
    print()
    header = (f"{'run':<28} {'phase':<9} {'fetches':>7} {'CPU ms/fetch':>12} {'req B/fetch':>11} "
              f"{'resp B/fetch':>12} {'records/s':>10} {'fetches/s':>9}")
    print_header(header)
    rows = []
    for label, phases in results.items():
        for name, phase in zip(("catch-up", "tail"), phases):
            cells = [label, name, str(phase.fetches), f"{phase.per_fetch(phase.broker_cpu_s * 1000):.2f}",
                     f"{phase.per_fetch(phase.request_bytes):,.0f}", f"{phase.per_fetch(phase.response_bytes):,.0f}",
                     f"{phase.records / phase.seconds:,.0f}", f"{phase.fetches / phase.seconds:,.1f}"]
            rows.append(cells)
            print(f"{cells[0]:<28} {cells[1]:<9} {cells[2]:>7} {cells[3]:>12} {cells[4]:>11} {cells[5]:>12} "
                  f"{cells[6]:>10} {cells[7]:>9}")
    print(f"\nKafkaApis alone, a fetch of {args.partitions} partitions with nothing new: "
          f"{handler['sessionless']:.1f} ms CPU sessionless, {handler['incremental']:.1f} ms incremental")
    if args.markdown:
        date, command = date_and_command(env)
        print_markdown_header(["run", "phase", "fetches", "broker CPU ms / fetch", "request B / fetch",
                               "response B / fetch", "records/s", "fetches/s"])
        for cells in rows:
            print_markdown_row(cells)
        print_markdown_header(["KafkaApis alone, every partition read to its end", "CPU ms / fetch"])
        print_markdown_row(["sessionless", f"{handler['sessionless']:.1f}"])
        print_markdown_row(["incremental", f"{handler['incremental']:.1f}"])
        print(f"\n{date}, `{command}`, revision {dict(env)['revision']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
