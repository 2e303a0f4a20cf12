"""The console as a WSGI application: pages (one shell, ``static/page.html``, each page's title and name filled
in; the page's script draws the rest) and assets from the package's ``static/`` files, the JSON API
under ``/api/``. Read-only: anything but GET and HEAD answers 405.

``console_app(view)`` builds it and starts its lag sampler; ``close()`` stops the sampler. Pages link
relatively, so the app works at the root of a listener or mounted below a prefix (``SCRIPT_NAME``).
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from importlib import resources
from string import Template
from typing import Callable, Iterable
from urllib.parse import parse_qsl

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import KafkaError
from . import api
from .lag_sampler import DEFAULT_INTERVAL_MS, WINDOW_MS, LagSampler
from .server_view import ServerView

log = logging.getLogger(__name__)

#: Each page's path, its name (``data-page``, what console.js draws) and its title.
PAGES = {"/": ("cluster", "Cluster"), "/topics": ("topics", "Topics"), "/topic": ("topic", "Topic"),
         "/partition": ("partition", "Partition"), "/groups": ("groups", "Consumer groups"),
         "/group": ("group", "Consumer group"), "/records": ("records", "Records")}
#: What a page holds besides its content, by name: before it (the record browser's form), after it (the lag chart).
_BEFORE = {"records": "records-form.html"}
_AFTER = {"groups": "lag-chart.html", "group": "lag-chart.html"}
#: The assets served under /static/ (the page shell and forms are not).
_CONTENT_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                  ".svg": "image/svg+xml"}
_HTML = "text/html; charset=utf-8"

StartResponse = Callable[..., object]


def _static_files() -> dict[str, bytes]:
    root = resources.files(__package__).joinpath("static")
    return {entry.name: entry.read_bytes() for entry in root.iterdir() if entry.is_file()}


def _pages(files: dict[str, bytes]) -> dict[str, bytes]:
    """Each page's HTML: the shell with its name, title and what it holds beside its content."""
    def part(parts: dict[str, str], name: str) -> str:
        return files[parts[name]].decode() if name in parts else ""

    shell = Template(files["page.html"].decode())
    return {path: shell.substitute(page=name, title=title, form=part(_BEFORE, name), after=part(_AFTER, name)).encode()
            for path, (name, title) in PAGES.items()}


class ConsoleApp:
    """The WSGI callable; holds the view, the lag sampler and the static files (read once)."""

    def __init__(self, view: ServerView, sampler: LagSampler) -> None:
        self.view = view
        self.sampler = sampler
        self._files = _static_files()
        self._pages = _pages(self._files)

    def close(self) -> None:
        self.sampler.close()

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO") or "/"
        if method not in ("GET", "HEAD"):
            status, headers, body = self._json(405, {"error": "METHOD_NOT_ALLOWED",
                                                     "message": f"{method} {path}: the console is read-only"})
            headers.append(("Allow", "GET, HEAD"))
        elif path.startswith("/api/"):
            status, headers, body = self._api(path, environ.get("QUERY_STRING", ""))
        elif path in self._pages:
            status, headers, body = "200 OK", [("Content-Type", _HTML), ("Cache-Control", "no-cache")], \
                self._pages[path]
        elif path.startswith("/static/") and path[path.rfind("."):] in _CONTENT_TYPES \
                and path[len("/static/"):] in self._files:
            status, headers, body = self._file(path[len("/static/"):])
        else:
            status, headers, body = self._json(404, {"error": "NOT_FOUND", "message": f"no console page {path}"})
        headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [b"" if method == "HEAD" else body]

    def _api(self, path: str, query: str) -> tuple[str, list, bytes]:
        handler = api.ROUTES.get(path)
        if handler is None:
            return self._json(404, {"error": "NOT_FOUND", "message": f"no API {path}"})
        params = dict(parse_qsl(query, keep_blank_values=True))
        try:
            return self._json(200, handler(self.view, self.sampler, params))
        except (api.ApiError, KafkaError) as exc:
            error = exc if isinstance(exc, api.ApiError) else api.ApiError.of(exc)
            return self._json(error.status, {"error": error.error, "message": str(error)})
        except Exception as exc:
            log.exception("console API %s?%s failed", path, query)
            return self._json(500, {"error": "UNKNOWN_SERVER_ERROR", "message": f"{path}: {exc}"})

    def _file(self, name: str) -> tuple[str, list, bytes]:
        suffix = name[name.rfind("."):]
        return "200 OK", [("Content-Type", _CONTENT_TYPES[suffix]),
                          ("Cache-Control", "no-cache")], self._files[name]

    @staticmethod
    def _json(status: int, body: object) -> tuple[str, list, bytes]:
        return (f"{status} {HTTPStatus(status).phrase}",
                [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                json.dumps(body).encode())


def console_app(view: ServerView, *, lag_interval_ms: int = DEFAULT_INTERVAL_MS, lag_window_ms: int = WINDOW_MS,
                clock: Clock = SYSTEM_CLOCK, start: bool = True) -> ConsoleApp:
    """The console over ``view`` (``ServerView.of(server)`` for a running ``BrokerServer``), its lag sampler
    reading every ``lag_interval_ms`` and keeping ``lag_window_ms``; ``start=False`` leaves the sampler to
    the caller (``app.sampler.sample()``)."""
    sampler = LagSampler(view.group_lag, interval_ms=lag_interval_ms, window_ms=lag_window_ms, clock=clock)
    if start:
        sampler.start()
    return ConsoleApp(view, sampler)
