"""``EtcdMetadataStore``: the metadata store contract on a real etcd (3.5's JSON gateway, through etcd3gw).

Every key is kept under the ``etcd.connect`` chroot, which callers never see.
Requests go to the first endpoint that answers; on a connection failure the
store moves to the next one and retries until ``request_timeout_ms`` has
passed, then raises ``MetadataStoreUnavailableError`` — this is what lets a
broker ride out an etcd restart. A retried ``commit`` whose first attempt did
reach etcd sees its own write and answers ``None`` (refused); callers of the
contract re-read after a refusal anyway.

Watches run one HTTP stream each on a daemon thread, and resume from the
revision after the last event they delivered when the stream breaks (etcd
restarted, endpoint lost); when etcd has compacted that history away they
deliver a ``RESYNC`` event instead, telling the reader to read the state again.
"""

from __future__ import annotations

import base64
import json
import logging
import queue
import socket
import threading
import time
from typing import Any, Callable, Sequence, TypeVar

import requests
from etcd3gw import exceptions as etcd_exceptions
from etcd3gw.client import Etcd3Client

from .etcd_connect import EtcdConnect
from .metadata_store import (NO_LEASE, Compare, Delete, KeyValue, LeaseNotFoundError, MetadataStoreError,
                             MetadataStoreUnavailableError, Operation, Put, WatchEvent, WatchEventType,
                             lease_ttl_seconds)

__all__ = ["EtcdMetadataStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_API_PATH = "/v3/"  # etcd 3.4 and later
_RETRY_BACKOFF_S = 0.1
# Failures that say "this endpoint cannot answer now", not "the request is wrong".
_UNAVAILABLE = (etcd_exceptions.ConnectionFailedError, etcd_exceptions.ConnectionTimeoutError,
                etcd_exceptions.InternalServerError)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _range_end(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (etcd's prefix range end)."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"  # every key


class _EtcdWatch:
    """One prefix watched over the gateway's ``/v3/watch`` stream, resumed across broken streams."""

    def __init__(self, store: EtcdMetadataStore, prefix: str) -> None:
        self._store = store
        self._prefix = prefix
        self._key = store._path(prefix)
        self._events: queue.Queue[WatchEvent] = queue.Queue()
        self._cancelled = threading.Event()
        self._created = threading.Event()
        self._response: requests.Response | None = None
        self._next_revision: int | None = None
        self._thread = threading.Thread(target=self._run, name=f"etcd-watch-{prefix}", daemon=True)
        self._thread.start()
        # Events are promised from the moment the watch exists: wait until etcd says so.
        if not self._created.wait(store.request_timeout_ms / 1000):
            self.cancel()
            raise MetadataStoreUnavailableError(f"etcd at {store.connect}: no watch on {prefix} within "
                                                f"{store.request_timeout_ms} ms")

    def poll(self, timeout_s: float = 0.0) -> list[WatchEvent]:
        if self._cancelled.is_set():
            return []
        events = []
        try:
            events.append(self._events.get(timeout=timeout_s) if timeout_s > 0 else self._events.get_nowait())
            while True:
                events.append(self._events.get_nowait())
        except queue.Empty:
            pass
        return events

    def cancel(self) -> None:
        self._cancelled.set()
        self._close_stream()

    def _close_stream(self) -> None:
        response = self._response
        if response is None:
            return
        # Closing the response does not wake a thread blocked reading it; shutting the socket down does.
        try:
            fileno = response.raw._fp.fileno()
            with socket.fromfd(fileno, socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError, ValueError):
            pass
        response.close()

    def _run(self) -> None:
        session = requests.Session()
        resumed = False
        try:
            while not self._cancelled.is_set():
                try:
                    self._stream(session, resumed)
                except Exception as exc:  # noqa: BLE001 - a watch must outlive whatever breaks its stream
                    # (cancel closes the stream under the reading thread, which can surface as any error)
                    if not self._cancelled.is_set():
                        log.info("etcd watch on %s broke (%s); resuming", self._prefix, exc)
                if self._created.is_set():
                    resumed = True
                self._cancelled.wait(_RETRY_BACKOFF_S)
                self._store._rotate_endpoint()
        finally:
            session.close()

    def _stream(self, session: requests.Session, resumed: bool) -> None:
        request: dict[str, Any] = {"key": _b64(self._key), "range_end": _b64(_range_end(self._key))}
        if self._next_revision is not None:
            request["start_revision"] = self._next_revision
        self._response = response = session.post(self._store._url("watch"), json={"create_request": request},
                                                 stream=True, timeout=(self._store.request_timeout_ms / 1000, None))
        if self._cancelled.is_set():
            self._close_stream()
            return
        if response.status_code != 200:
            raise ValueError(f"watch answered HTTP {response.status_code}: {response.text[:200]}")
        for line in response.iter_lines(chunk_size=None):
            if self._cancelled.is_set():
                return
            if not line.strip():
                continue
            message = json.loads(line)
            if "error" in message:
                raise ValueError(f"watch stream error: {message['error']}")
            result = message.get("result", {})
            revision = int(result.get("header", {}).get("revision", 0))
            if result.get("compact_revision"):
                # The history to resume from is gone: start from now and tell the reader to re-read.
                self._next_revision = None
                self._events.put(WatchEvent(WatchEventType.RESYNC, self._prefix))
                return
            if result.get("canceled"):
                raise ValueError(f"etcd cancelled the watch on {self._prefix}: {result.get('cancel_reason', '')}")
            if result.get("created"):
                if self._next_revision is None:
                    self._next_revision = revision + 1
                self._created.set()
                continue
            for event in result.get("events", []):
                kv = event["kv"]
                mod_revision = int(kv.get("mod_revision", 0))
                kind = WatchEventType.DELETE if event.get("type") == "DELETE" else WatchEventType.PUT
                self._events.put(WatchEvent(kind, self._store._unpath(_unb64(kv["key"])),
                                            _unb64(kv.get("value", "")), mod_revision))
                self._next_revision = mod_revision + 1


class EtcdMetadataStore:
    """The ``MetadataStore`` contract on etcd 3.5, under ``connect.chroot``."""

    def __init__(self, connect: EtcdConnect, request_timeout_ms: int = 10_000) -> None:
        if not connect.endpoints:
            raise ValueError("EtcdMetadataStore needs at least one endpoint")
        self.connect = connect
        self.request_timeout_ms = request_timeout_ms
        self._chroot = connect.chroot.encode()
        self._lock = threading.Lock()
        self._clients = [Etcd3Client(host=host, port=port, timeout=request_timeout_ms / 1000, api_path=_API_PATH)
                         for host, port in connect.endpoints]
        self._current = 0
        self._watches: list[_EtcdWatch] = []

    # -- plumbing --

    def _path(self, key: str) -> bytes:
        return self._chroot + key.encode()

    def _unpath(self, key: bytes) -> str:
        return key[len(self._chroot):].decode()

    def _url(self, path: str) -> str:
        with self._lock:
            return self._clients[self._current].get_url(path)

    def _rotate_endpoint(self) -> None:
        with self._lock:
            self._current = (self._current + 1) % len(self._clients)

    def _call(self, what: str, request: Callable[[Etcd3Client], T]) -> T:
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        while True:
            with self._lock:
                client = self._clients[self._current]
            try:
                return request(client)
            except _UNAVAILABLE as exc:
                if time.monotonic() >= deadline:
                    raise MetadataStoreUnavailableError(
                        f"etcd at {self.connect}: {what} got no answer within {self.request_timeout_ms} ms: "
                        f"{exc.detail_text or exc}") from None
                self._rotate_endpoint()
                time.sleep(_RETRY_BACKOFF_S)
            except etcd_exceptions.Etcd3Exception as exc:
                raise MetadataStoreError(f"etcd at {self.connect}: {what} failed: {exc.detail_text or exc}") from None

    def _post(self, what: str, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self._call(what, lambda client: client.post(client.get_url(path), json=payload))

    def _key_value(self, kv: dict[str, Any]) -> KeyValue:
        return KeyValue(self._unpath(_unb64(kv["key"])), _unb64(kv.get("value", "")),
                        int(kv.get("create_revision", 0)), int(kv.get("mod_revision", 0)), int(kv.get("lease", 0)))

    # -- reads --

    def get(self, key: str) -> KeyValue | None:
        result = self._post(f"get {key}", "kv/range", {"key": _b64(self._path(key))})
        kvs = result.get("kvs", [])
        return self._key_value(kvs[0]) if kvs else None

    def get_prefix(self, prefix: str) -> list[KeyValue]:
        start = self._path(prefix)
        result = self._post(f"get the keys under {prefix}", "kv/range",
                            {"key": _b64(start), "range_end": _b64(_range_end(start)), "sort_order": 1})
        return [self._key_value(kv) for kv in result.get("kvs", [])]

    # -- writes --

    def commit(self, compares: Sequence[Compare], operations: Sequence[Operation]) -> int | None:
        txn: dict[str, Any] = {
            "compare": [{"key": _b64(self._path(c.key)), "result": "EQUAL", "target": "MOD",
                         "mod_revision": c.mod_revision} for c in compares],
            "success": [self._request(op) for op in operations],
            "failure": [],
        }
        what = "commit to " + ", ".join(op.key for op in operations)
        try:
            result = self._call(what, lambda client: client.transaction(txn))
        except MetadataStoreError as exc:
            if "lease not found" in str(exc):
                lease = next(op.lease for op in operations if isinstance(op, Put) and op.lease != NO_LEASE)
                raise LeaseNotFoundError(lease) from None
            raise
        if not result.get("succeeded", False):
            return None
        return int(result["header"]["revision"])

    def _request(self, op: Operation) -> dict[str, Any]:
        if isinstance(op, Delete):
            return {"request_delete_range": {"key": _b64(self._path(op.key))}}
        put: dict[str, Any] = {"key": _b64(self._path(op.key)), "value": _b64(op.value)}
        if op.lease != NO_LEASE:
            put["lease"] = op.lease
        return {"request_put": put}

    def create(self, key: str, value: bytes, lease: int = NO_LEASE) -> int | None:
        return self.commit([Compare(key, 0)], [Put(key, value, lease)])

    def compare_and_set(self, key: str, value: bytes, mod_revision: int, lease: int = NO_LEASE) -> int | None:
        return self.commit([Compare(key, mod_revision)], [Put(key, value, lease)])

    def delete(self, key: str, mod_revision: int | None = None) -> bool:
        if mod_revision is None:
            result = self._post(f"delete {key}", "kv/deleterange", {"key": _b64(self._path(key))})
            return int(result.get("deleted", 0)) > 0
        txn = {"compare": [{"key": _b64(self._path(key)), "result": "EQUAL", "target": "MOD",
                            "mod_revision": mod_revision}],
               "success": [{"request_delete_range": {"key": _b64(self._path(key))}}], "failure": []}
        result = self._call(f"delete {key}", lambda client: client.transaction(txn))
        if not result.get("succeeded", False):
            return False
        responses = result.get("responses", [])
        return bool(responses) and int(responses[0].get("response_delete_range", {}).get("deleted", 0)) > 0

    # -- leases --

    def grant_lease(self, ttl_ms: int) -> int:
        result = self._post("grant a lease", "lease/grant", {"TTL": lease_ttl_seconds(ttl_ms), "ID": 0})
        if result.get("error"):
            raise MetadataStoreError(f"etcd at {self.connect}: grant a lease failed: {result['error']}")
        return int(result["ID"])

    def keep_alive(self, lease: int) -> bool:
        result = self._post(f"keep lease {lease:x} alive", "lease/keepalive", {"ID": lease})
        # An expired lease answers without a TTL (etcd's -1 is omitted as... nothing).
        return int(result.get("result", {}).get("TTL", 0)) > 0

    def revoke_lease(self, lease: int) -> None:
        try:
            self._post(f"revoke lease {lease:x}", "lease/revoke", {"ID": lease})
        except MetadataStoreError as exc:
            if "lease not found" not in str(exc):
                raise

    # -- watches --

    def watch_prefix(self, prefix: str) -> _EtcdWatch:
        watch = _EtcdWatch(self, prefix)
        with self._lock:
            self._watches.append(watch)
        return watch

    def close(self) -> None:
        with self._lock:
            watches, self._watches = self._watches, []
        for watch in watches:
            watch.cancel()
        for client in self._clients:
            client.session.close()

    def __repr__(self) -> str:
        return f"EtcdMetadataStore({self.connect})"
