"""The broker's HTTP listener (``metrics.listener``): Prometheus's ``/metrics`` and the health endpoints.

A WSGI application on the standard library's ``wsgiref`` server, one thread
per request, so a slow scraper holds up nobody else:

* ``/metrics`` — the registry in Prometheus's text exposition format, by
  ``prometheus_client``'s own WSGI app (OpenMetrics when the scraper's Accept
  header asks for it, gzip when it accepts it, ``name[]=`` filters);
* ``/healthz`` — 200 while the process serves;
* ``/readyz`` — 200 once ``readiness()`` names nothing missing; else 503 with
  one line per missing part;
* any other path goes to ``app`` (a WSGI application mounted beside them),
  or is 404 when there is none.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Callable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from .listener_url import parse_metrics_listener

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict, Callable], Iterable[bytes]]

_POLL_INTERVAL_S = 0.2  # how soon serve_forever notices a shutdown


class _ThreadingWSGIServerV6(ThreadingWSGIServer):
    address_family = socket.AF_INET6


def _server_class(host: str, port: int) -> type[ThreadingWSGIServer]:
    """The server for the family ``host`` resolves to (an IPv6 address or name, or IPv4)."""
    family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    return _ThreadingWSGIServerV6 if family == socket.AF_INET6 else ThreadingWSGIServer


class _QuietHandler(WSGIRequestHandler):
    """Access lines go to the debug log, not to standard error."""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        log.debug("metrics listener: %s - %s", self.address_string(), format % args)


def _text(start_response: Callable, status: str, body: str) -> list[bytes]:
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))])
    return [data]


class MetricsListener:
    """Binds ``url`` (``http://host:port``; port 0 picks one) at construction; ``start`` serves, ``stop`` ends."""

    def __init__(self, url: str, registry: CollectorRegistry, readiness: Callable[[], list[str]], *,
                 app: WsgiApp | None = None) -> None:
        address = parse_metrics_listener(url)
        self.registry = registry
        self.readiness = readiness
        self.app = app
        self._metrics_app = make_wsgi_app(registry)
        try:
            self._server = make_server(address.host, address.port, self,
                                       server_class=_server_class(address.host, address.port),
                                       handler_class=_QuietHandler)
        except OSError as exc:
            raise OSError(exc.errno, f"metrics.listener {url}: cannot listen there: {exc.strerror}") from exc
        self.host = address.host
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port bound (the system's pick when ``url`` said 0)."""
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        host = self.host or "127.0.0.1"
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def start(self) -> MetricsListener:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, args=(_POLL_INTERVAL_S,),
                                            name="metrics-listener", daemon=True)
            self._thread.start()
            log.info("Serving metrics and health on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe to call twice, or without ``start``."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    # --- the WSGI application ---------------------------------------------------------

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            return self._metrics_app(environ, start_response)
        if path == "/healthz":
            return _text(start_response, "200 OK", "ok\n")
        if path == "/readyz":
            missing = self.readiness()
            if missing:
                return _text(start_response, "503 Service Unavailable", "".join(f"not ready: {m}\n" for m in missing))
            return _text(start_response, "200 OK", "ready\n")
        if self.app is not None:
            return self.app(environ, start_response)
        return _text(start_response, "404 Not Found", f"{path}: not found (try /metrics, /healthz or /readyz)\n")
