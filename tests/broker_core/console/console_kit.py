"""The web console under test: served on a metrics listener on 127.0.0.1 (``serve``), asked through its JSON API
(``get``), over a running broker with a known workload (``console_workload``), and looked at in headless
Chromium driven by Selenium (``chromium``)."""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Iterator

from prometheus_client import CollectorRegistry

from broker_core.console import ConsoleApp, ServerView, console_app
from broker_core.metrics.metrics_listener import MetricsListener
from broker_core.server.broker_server import BrokerServer
from format.record import Header, SimpleRecord
from testbed.chromium import browser_unavailable, headless_chromium
from tests.broker_core.server.server_kit import start_broker

#: The workload every console test reads (figures the tests assert).
ORDERS = "orders"  # 2 partitions, small segments, its own retention.ms
ORDERS_P0 = 30  # records on orders-0
ORDERS_P1 = 10  # records on orders-1
EVENTS = "events"  # 1 partition, 5 records, defaults
EVENTS_RECORDS = 5
GROUP = "billing"  # one kafka-python member on orders, committed orders-0 at 12 and orders-1 at 10
COMMITTED = {0: 12, 1: 10}
GROUP_LAG = {0: ORDERS_P0 - 12, 1: ORDERS_P1 - 10}
ORDERS_RETENTION_MS = 3_600_000
BASE_TIMESTAMP = 1_700_000_000_000  # orders-0 record i has timestamp BASE_TIMESTAMP + i seconds
LAG_INTERVAL_MS = 200


@contextlib.contextmanager
def serve(app) -> Iterator[str]:
    """``app`` mounted on a metrics listener, as ``seglog broker`` mounts the console, on 127.0.0.1 (a port the
    OS picks); yields its base URL."""
    listener = MetricsListener("http://127.0.0.1:0", CollectorRegistry(), list, app=app).start()
    try:
        yield listener.url
    finally:
        listener.stop()


def get(base: str, path: str, method: str = "GET", **query) -> tuple[int, object]:
    """``method`` ``path`` with ``query``: the status and the decoded JSON body (bytes when not JSON)."""
    url = base + path + ("?" + urllib.parse.urlencode(query) if query else "")
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, body, kind = response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, body, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    return status, json.loads(body) if kind.startswith("application/json") and method != "HEAD" else body


@dataclass
class ConsoleWorkload:
    server: BrokerServer
    app: ConsoleApp
    base_url: str
    member_client_id: str


def _produce(server: BrokerServer) -> None:
    broker = server.broker
    broker.create_topic(ORDERS, 2, {"segment.bytes": 1024, "index.interval.bytes": 1,
                                    "retention.ms": ORDERS_RETENTION_MS})
    broker.create_topic(EVENTS, 1)
    for i in range(ORDERS_P0):
        # One batch per record, so the small segments roll and every batch is indexed.
        broker.produce(ORDERS, [SimpleRecord(json.dumps({"id": i, "item": f"item-{i}"}).encode(), f"k{i}".encode(),
                                             BASE_TIMESTAMP + i * 1000, (Header("source", b"shop"),))], partition=0)
    broker.produce(ORDERS, [SimpleRecord(f"late-{i}".encode(), None, BASE_TIMESTAMP + i)
                            for i in range(ORDERS_P1)], partition=1)
    broker.produce(EVENTS, [SimpleRecord(b"\x00\xffbinary", b"e") for _ in range(EVENTS_RECORDS)], partition=0)


def _join_group(bootstrap: str):
    """A kafka-python member of GROUP owning both orders partitions, with COMMITTED committed."""
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False,
                             client_id="billing-app", auto_offset_reset="earliest", max_poll_records=1,
                             session_timeout_ms=30_000, heartbeat_interval_ms=1000, request_timeout_ms=40_000)
    consumer.subscribe([ORDERS])
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < 2:
        assert time.monotonic() < deadline, f"{GROUP}: no assignment after 30 s"
        consumer.poll(200)
    consumer.commit({TopicPartition(ORDERS, p): OffsetAndMetadata(o, "", -1) for p, o in COMMITTED.items()})
    return consumer


@contextlib.contextmanager
def console_workload() -> Iterator[ConsoleWorkload]:
    """A broker with the workload above, a live consumer group and the console over it, served."""
    with tempfile.TemporaryDirectory(prefix="console-") as tmp:
        server = start_broker(f"{tmp}/logs")
        consumer = app = None
        try:
            _produce(server)
            consumer = _join_group(server.bootstrap_servers)
            app = console_app(ServerView.of(server), lag_interval_ms=LAG_INTERVAL_MS)
            with serve(app) as base:
                yield ConsoleWorkload(server, app, base, "billing-app")
        finally:
            if app is not None:
                app.close()
            if consumer is not None:
                consumer.close(autocommit=False)
            server.shutdown(timeout_ms=10_000)


@contextlib.contextmanager
def chromium(downloads: str):
    """Headless Chromium under Selenium with a fresh profile in ``downloads``; pytest.skip when it is not
    installed."""
    import pytest

    reason = browser_unavailable()
    if reason is not None:
        pytest.skip(reason)
    with headless_chromium(f"{downloads}/profile") as driver:
        yield driver


def png_pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and the RGB pixels (row by row) of a PNG as Chromium writes screenshots: 8-bit RGB or
    RGBA, not interlaced. Pillow does this where installed; the suite does not depend on it."""
    import struct
    import zlib

    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"PNG kind {header} not read here"
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    pixels = []
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = previous[i]
            c = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        pixels.extend(tuple(line[i:i + 3]) for i in range(0, stride, channels))
        previous = line
    return width, height, pixels
