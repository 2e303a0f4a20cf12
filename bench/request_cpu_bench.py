"""CPU time of the broker's work per request, without sockets: what each request costs whatever it carries.

Two parts, each in CPU microseconds (``time.process_time``, which a loaded machine disturbs far less than wall
time), the median of ``--rounds`` rounds:

* the protocol alone: reading a Fetch v12 request for 4 partitions (the frame a consumer of a 4-partition topic
  sends) and writing its response (4 partitions of 1 KiB records), reading a one-record Produce v9 request and
  writing its response;
* ``KafkaApis`` handling small requests, as ``bench/broker_bench.py --metrics-overhead`` sends them over a
  socket: a one-record Produce (acks=1) and a one-partition Fetch of at most 1 KiB, alternating, the responses
  handed to a sink that drops them (the network threads' part is left out).

``--before CHECKOUT`` measures another checkout too, in a process of its own (``PYTHONPATH``), the two taking
turns round by round; the figure to compare is the median of the per-round ratios, since this machine's speed
moves from one minute to the next.

    python bench/request_cpu_bench.py [--rounds 7] [--before ../other-checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FETCH_VERSION = 12
PRODUCE_VERSION = 9
PARTITIONS = 4
TOPIC = "request-cpu"
# Figures, in the order they are printed.
FIGURES = ("read Fetch request (4 partitions)", "write Fetch response (4 partitions)",
           "read Produce request (1 record)", "write Produce response", "handle small requests (Produce, Fetch)")


def fetch_body() -> dict:
    """A consumer's Fetch of 1 MiB from each of ``PARTITIONS`` partitions."""
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": PARTITIONS << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 1000 * p, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p in range(PARTITIONS)]}]}


def fetch_response(records: bytes) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": TOPIC, "partitions": [
            {"partition_index": p, "error_code": 0, "high_watermark": 5000, "last_stable_offset": 5000,
             "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
             "records": records} for p in range(PARTITIONS)]}]}


def produce_response() -> dict:
    return {"throttle_time_ms": 0, "responses": [{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 41, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}]}


def per_call_us(action, calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        action()
    return (time.process_time() - started) / calls * 1e6


def protocol_figures(calls: int) -> list[float]:
    from broker_bench import small_request_bodies
    from broker_core.protocol import ApiKey, encode_request, encode_response, parse_request
    from format.record import SimpleRecord
    from format.record_batch import build_batch

    fetch_frame = encode_request(ApiKey.FETCH, FETCH_VERSION, 7, "bench", fetch_body())[4:]
    produce_frame = encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 8, "bench", small_request_bodies(TOPIC)[0])[4:]
    fetch_header = parse_request(fetch_frame).header
    produce_header = parse_request(produce_frame).header
    kib = build_batch([SimpleRecord(None, b"y" * 1000, timestamp=1_767_225_600_000)])
    answer = fetch_response(kib)
    produced = produce_response()
    return [per_call_us(lambda: parse_request(fetch_frame), calls),
            per_call_us(lambda: encode_response(fetch_header, answer), calls),
            per_call_us(lambda: parse_request(produce_frame), calls),
            per_call_us(lambda: encode_response(produce_header, produced), calls)]


def handler_figure(server, requests: list) -> float:
    apis = server.apis
    started = time.process_time()
    for request in requests:
        apis.handle(request)
    return (time.process_time() - started) / len(requests) * 1e6


def child(rounds: int, calls: int) -> None:
    """Measure this process's checkout; one JSON line of figures a round."""
    from broker_bench import small_request_bodies
    from broker_core.network.request_channel import Request, release
    from broker_core.protocol import ApiKey, encode_request
    from broker_core.server.broker_server import BrokerServer

    with tempfile.TemporaryDirectory(prefix="request-cpu-") as log_dir:
        server = BrokerServer({"log.dirs": log_dir, "listeners": "PLAINTEXT://127.0.0.1:0",
                               "num.network.threads": 1, "num.io.threads": 1}).startup()
        try:
            server.broker.create_topic(TOPIC, 1)
            # In place of the network threads: each response is dropped (its file slices closed).
            server.apis.request_channel = SimpleNamespace(send_response=release)
            produce, fetch = small_request_bodies(TOPIC)  # what --metrics-overhead sends over a socket
            frames = (encode_request(ApiKey.PRODUCE, PRODUCE_VERSION, 1, "bench", produce)[4:],
                      encode_request(ApiKey.FETCH, FETCH_VERSION, 2, "bench", fetch)[4:])
            requests = [Request(0, "bench", "PLAINTEXT", ("127.0.0.1", 0), frames[i % 2]) for i in range(calls)]
            handler_figure(server, requests)  # warm up: the code, the log's first segment
            for _ in range(rounds):
                print(json.dumps([*protocol_figures(calls), handler_figure(server, requests)]), flush=True)
        finally:
            server.shutdown()


def measure(checkout: str, calls: int) -> list[float]:
    """One round of ``checkout``'s figures, in a process of its own (``PYTHONPATH``)."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    process = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--rounds", "1", "--calls",
                              str(calls)], cwd=checkout, env=env, stdout=subprocess.PIPE, text=True)
    if process.returncode:
        raise SystemExit(f"{checkout}: the measuring process failed ({process.returncode})")
    return json.loads(process.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=5000, help="calls per figure a round (default 5,000)")
    p.add_argument("--before", metavar="CHECKOUT", help="another checkout to measure, taking turns")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.rounds, args.calls)
        return 0
    checkouts = {"this checkout": ROOT, **({"before": args.before} if args.before else {})}
    figures: dict[str, list[list[float]]] = {name: [] for name in checkouts}
    for r in range(args.rounds):
        order = list(checkouts.items()) if r % 2 == 0 else list(reversed(checkouts.items()))
        for name, checkout in order:
            figures[name].append(measure(checkout, args.calls))
        print(f"round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
    print(f"CPU us per call, median of {args.rounds} rounds ({args.calls:,} calls a figure a round)")
    header = f"{'figure':<42}" + "".join(f"{name:>16}" for name in checkouts)
    print(header + (f"{'this / before':>16}" if args.before else ""))
    for i, figure in enumerate(FIGURES):
        cells = "".join(f"{statistics.median(r[i] for r in figures[name]):>16.1f}" for name in checkouts)
        if args.before:
            ratio = statistics.median(a[i] / b[i] for a, b in zip(figures["this checkout"], figures["before"]))
            cells += f"{ratio:>15.2f}x"
        print(f"{figure:<42}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
