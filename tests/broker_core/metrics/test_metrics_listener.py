"""The metrics listener on its own: its paths, readiness answers, the WSGI app mounted beside them, binding."""

from __future__ import annotations

import socket

import pytest
from prometheus_client import CollectorRegistry, Counter

from broker_core.metrics.listener_url import MetricsListenerAddress, parse_metrics_listener
from broker_core.metrics.metrics_listener import MetricsListener
from tests.broker_core.metrics.metrics_kit import get, scrape


def console(environ, start_response):
    body = f"console at {environ['PATH_INFO']}".encode()
    start_response("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))])
    return [body]


@pytest.fixture()
def registry():
    registry = CollectorRegistry(auto_describe=False)
    Counter("seglog_test_events", "events", registry=registry).inc(3)
    return registry


@pytest.fixture()
def listener(registry):
    missing: list[str] = []
    served = MetricsListener("http://127.0.0.1:0", registry, lambda: list(missing)).start()
    served.missing = missing
    try:
        yield served
    finally:
        served.stop()


def test_metrics_serve_the_registry_given(listener):
    assert scrape(listener.url).value("seglog_test_events_total") == 3


def test_readyz_is_503_naming_each_part_not_ready_then_200(listener):
    listener.missing[:] = ["group coordinator: loading __consumer_offsets", "listeners: not serving yet"]
    reply = get(listener.url + "/readyz")
    assert reply.status == 503
    assert reply.body == ("not ready: group coordinator: loading __consumer_offsets\n"
                          "not ready: listeners: not serving yet\n")
    assert get(listener.url + "/healthz").status == 200  # alive all the same
    listener.missing.clear()
    assert (get(listener.url + "/readyz").status, get(listener.url + "/readyz").body) == (200, "ready\n")


def test_every_other_path_goes_to_the_app_mounted(registry):
    served = MetricsListener("http://127.0.0.1:0", registry, lambda: [], app=console).start()
    try:
        for path in ("/", "/topics/orders"):
            reply = get(served.url + path)
            assert (reply.status, reply.body) == (200, f"console at {path}")
        assert scrape(served.url).value("seglog_test_events_total") == 3
        assert get(served.url + "/healthz").body == "ok\n"
    finally:
        served.stop()


def test_without_an_app_other_paths_are_404(listener):
    assert get(listener.url + "/").status == 404


def test_port_0_binds_a_free_port_and_stop_releases_it(registry):
    served = MetricsListener("http://127.0.0.1:0", registry, lambda: []).start()
    port = served.port
    assert port > 0 and served.url == f"http://127.0.0.1:{port}"
    served.stop()
    served.stop()  # twice is harmless
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 on this machine")
def test_an_ipv6_address_is_bound_as_ipv6(registry):
    try:
        served = MetricsListener("http://[::1]:0", registry, lambda: []).start()
    except OSError as exc:
        pytest.skip(f"::1 cannot be bound here: {exc}")
    try:
        assert served.url == f"http://[::1]:{served.port}"
        assert scrape(served.url).value("seglog_test_events_total") == 3
    finally:
        served.stop()


@pytest.mark.parametrize("value, address", [
    ("http://127.0.0.1:9404", MetricsListenerAddress("127.0.0.1", 9404)),
    ("http://:9404", MetricsListenerAddress("", 9404)),
    ("http://[::1]:0", MetricsListenerAddress("::1", 0)),
    ("http://localhost:9404/", MetricsListenerAddress("localhost", 9404)),
])
def test_metrics_listener_addresses_parse_to_host_and_port(value, address):
    assert parse_metrics_listener(value) == address


@pytest.mark.parametrize("value, reason", [
    ("127.0.0.1:9404", "must start with http://"),
    ("https://127.0.0.1:9404", "must start with http://"),
    ("http://127.0.0.1", "names no port"),
    ("http://127.0.0.1:port", "not an http://host:port address"),
    ("http://127.0.0.1:9404/metrics", "a host and a port only"),
])
def test_a_metrics_listener_address_that_is_not_http_host_port_is_refused_saying_why(value, reason):
    with pytest.raises(ValueError, match=reason):
        parse_metrics_listener(value)
