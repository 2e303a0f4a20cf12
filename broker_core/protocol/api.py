"""Whole frames: request in, response out (and the reverse, for clients and tests).

This is the surface the socket server uses. A frame here is what follows the
int32 size prefix on the wire; functions that produce bytes to send return the
complete frame, size prefix included, built with a single join so that records
bytes handed in by a handler are copied once.

Version rules that are Kafka's and not a schema's live here: what counts as an
unsupported request (an API seglog does not declare, or a version outside the
declared range), and the ApiVersions fallback a client gets when it asks with
a version newer than the broker's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from . import codec
from .api_keys import ApiKey, SeglogApiKey, api_key_name, api_key_of
from .errors import ProtocolError, UnsupportedVersionError
from .headers import (
    REQUEST_HEADER,
    RESPONSE_HEADER,
    RequestHeader,
    header_from_body,
    request_header_version,
    response_header_version,
)
from .messages import APIS
from .schema import Api

__all__ = [
    "Request",
    "SUPPORTED_VERSIONS",
    "UNSUPPORTED_VERSION",
    "supported_apis",
    "parse_request",
    "encode_response",
    "encode_request",
    "parse_response",
    "api_versions_fallback_response",
]

#: Kafka's error code UNSUPPORTED_VERSION.
UNSUPPORTED_VERSION = UnsupportedVersionError.error_code

#: The (min, max) version seglog reads and writes, per API (seglog's own admin APIs included).
SUPPORTED_VERSIONS: dict[ApiKey | SeglogApiKey, tuple[int, int]] = {
    key: (a.versions.low, a.versions.high) for key, a in APIS.items()
}

_SIZE = struct.Struct(">i")
# A response part this large (a fetch's records) is written from where it lies rather than copied into the
# frame: copying megabytes per fetch costs more than one more buffer in a gathering write.
GATHER_MIN_BYTES = 64 * 1024
_KEY_AND_VERSION = struct.Struct(">hh")


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed request: its header and its body as a dict of snake_case keys."""

    header: RequestHeader
    body: dict[str, Any]


def supported_apis(keys: Iterable[ApiKey]) -> list[dict[str, int]]:
    """ApiVersions response entries (``api_key``, ``min_version``, ``max_version``) for ``keys``, by key.

    The server passes the APIs it has handlers for, so it never advertises an
    API it would answer by closing the connection. seglog's own admin APIs are
    refused: a Kafka client must never see them, and seglog's client asks for
    them by version without negotiating.
    """
    entries = []
    for key in sorted(set(keys)):
        if isinstance(api_key_of(int(key)), SeglogApiKey):
            raise ValueError(f"API {_api_name(key)} is seglog's own and is never advertised")
        if key not in SUPPORTED_VERSIONS:
            raise ValueError(f"API {_api_name(key)} is not declared in the protocol package")
        low, high = SUPPORTED_VERSIONS[key]
        entries.append({"api_key": int(key), "min_version": low, "max_version": high})
    return entries


def parse_request(frame: bytes) -> Request:
    """Read one request frame (without its size prefix).

    Raises ``UnsupportedVersionError`` carrying the header when the API or the
    version is not declared, and ``ProtocolError`` for anything malformed.
    """
    buf: Any = frame if isinstance(frame, bytes) else memoryview(frame)
    if len(buf) < _KEY_AND_VERSION.size:
        raise ProtocolError(f"request frame of {len(buf)} bytes is too short for a request header")
    api_key, api_version = _KEY_AND_VERSION.unpack_from(buf, 0)
    declared = APIS.get(api_key)  # type: ignore[call-overload]
    header_version = request_header_version(api_key, api_version, declared.request.flexible if declared else None)
    if declared is None or api_version not in declared.versions:
        # The header is still read, for its correlation id; its tagged fields
        # (v2) are not, since nothing after the client id matters any more.
        header_body, _ = codec.decode(REQUEST_HEADER, min(header_version, 1), buf)
        header = header_from_body(header_body, header_version)
        if declared is None:
            reason = f"API key {_api_name(api_key)} is not supported"
        else:
            low, high = SUPPORTED_VERSIONS[declared.key]
            reason = f"{declared.key.name} v{api_version} is not supported (supported: v{low}-v{high})"
        raise UnsupportedVersionError(header, reason)
    header_body, pos = codec.decode(REQUEST_HEADER, header_version, buf)
    header = header_from_body(header_body, header_version)
    # Bytes after the declared fields are ignored, as Kafka's broker ignores them:
    # librdkafka's Metadata request (v9+) for all topics leaves 3 spare bytes.
    body, _ = codec.decode(declared.request, api_version, buf, pos)
    return Request(header, body)


def encode_response(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    """The complete response frame (size prefix, response header, body) answering ``header``."""
    return b"".join(encode_response_buffers(header, body))


def encode_response_buffers(header: RequestHeader, body: Mapping[str, Any]) -> list:
    """``encode_response``'s frame as buffers to be written in order (a gathering write).

    Large fields (a fetch's records) stay the objects they are instead of being
    copied into one frame; the small fields between them are joined. A records
    value that is no buffer (a ``FileSlice`` of a segment file, which the
    network layer sends from the file) is always a buffer of its own.
    """
    declared = _declared(header.api_key, header.api_version)
    return _gather(_frame_parts(
        header.correlation_id,
        response_header_version(declared.key, header.api_version, declared.response.flexible),
        declared.response,
        header.api_version,
        body,
    ))


def api_versions_fallback_response(header: RequestHeader, api_keys: Iterable[ApiKey] | None = None) -> bytes:
    """Kafka's answer to an ApiVersions request of a version newer than the broker's.

    A v0 response (v0 header) with error UNSUPPORTED_VERSION, which every
    client can read; as in Kafka, it lists the ApiVersions range so the client
    retries at the highest version both sides speak. ``api_keys`` widens the
    list to more APIs.
    """
    keys = {ApiKey.API_VERSIONS, *(api_keys or ())}
    declared = APIS[ApiKey.API_VERSIONS]
    body = {"error_code": UNSUPPORTED_VERSION, "api_keys": supported_apis(keys)}
    return _frame(header.correlation_id, 0, declared.response, 0, body)


def encode_request(
    api_key: ApiKey | SeglogApiKey | int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
) -> bytes:
    """The complete request frame (size prefix, request header, body), as a client sends it."""
    declared = _declared(api_key, api_version)
    header_version = request_header_version(declared.key, api_version, declared.request.flexible)
    parts: list = [b""]
    header = {
        "request_api_key": int(declared.key),
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    codec.encode(REQUEST_HEADER, header_version, header, parts)
    codec.encode(declared.request, api_version, body, parts)
    return _join(parts)


def parse_response(api_key: ApiKey | SeglogApiKey | int, api_version: int, frame: bytes) -> tuple[int, dict[str, Any]]:
    """Read a response frame (without its size prefix) to a request of ``api_key`` at ``api_version``."""
    declared = _declared(api_key, api_version)
    buf: Any = frame if isinstance(frame, bytes) else memoryview(frame)
    header_version = response_header_version(declared.key, api_version, declared.response.flexible)
    header, pos = codec.decode(RESPONSE_HEADER, header_version, buf)
    version = api_version
    if declared.key == ApiKey.API_VERSIONS and version > 0 and _peek_error_code(buf, pos) == UNSUPPORTED_VERSION:
        # A broker older than the request answers in v0 (see api_versions_fallback_response).
        version = 0
    body, end = codec.decode(declared.response, version, buf, pos)
    if end != len(buf):
        raise ProtocolError(f"{declared.response.name} v{version}: {len(buf) - end} bytes left after the body")
    return header["correlation_id"], body


# --- helpers --------------------------------------------------------------------


def _declared(api_key: ApiKey | SeglogApiKey | int, api_version: int) -> Api:
    declared = APIS.get(api_key)  # type: ignore[call-overload]
    if declared is None:
        raise ProtocolError(f"API key {_api_name(api_key)} is not declared in the protocol package")
    if api_version not in declared.versions:
        low, high = SUPPORTED_VERSIONS[declared.key]
        raise ProtocolError(f"{declared.key.name} v{api_version} is outside the declared v{low}-v{high}")
    return declared


def _frame(correlation_id: int, header_version: int, message: Any, version: int, body: Mapping[str, Any]) -> bytes:
    return b"".join(_frame_parts(correlation_id, header_version, message, version, body))


def _frame_parts(correlation_id: int, header_version: int, message: Any, version: int, body: Mapping[str, Any]
                 ) -> list:
    """A response frame's encoded parts, the size prefix first."""
    parts: list = [b""]
    codec.encode(RESPONSE_HEADER, header_version, {"correlation_id": correlation_id}, parts)
    codec.encode(message, version, body, parts)
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return parts


def _gather(parts: list) -> list:
    """``parts`` with each run of small ones joined; a part of ``GATHER_MIN_BYTES`` or more, or one that is no
    buffer, stays as it is."""
    buffers: list = []
    run: list = []
    for part in parts:
        if len(part) >= GATHER_MIN_BYTES or not isinstance(part, (bytes, bytearray, memoryview)):
            if run:
                buffers.append(b"".join(run))
                run = []
            buffers.append(part)
        else:
            run.append(part)
    if run:
        buffers.append(b"".join(run))
    return buffers


def _join(parts: list) -> bytes:
    # parts[0] is a placeholder for the size prefix, so the frame is built by
    # one join: the only copy of large parts such as records.
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


def _peek_error_code(buf: Any, pos: int) -> int | None:
    if len(buf) - pos < 2:
        return None
    return struct.unpack_from(">h", buf, pos)[0]


def _api_name(api_key: int) -> str:
    return api_key_name(api_key)
