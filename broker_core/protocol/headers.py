"""Request and response headers: their schemas, and which header version goes with which request.

Kafka's header versions follow the body's flexibility: a request header is v1
(api key, api version, correlation id, nullable client id) for a non-flexible
body and v2 (the same plus tagged fields) for a flexible one; a response header
is v0 (correlation id) or v1 (plus tagged fields). Two exceptions, both
Kafka's: ControlledShutdown v0 requests carry a v0 header without client id,
and ApiVersions responses always carry a v0 header, because a client reads the
response before it knows which versions the broker speaks. The client id stays
a classic int16-length string even in v2 headers, for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .api_keys import ApiKey, api_key_of
from .schema import F, Message, Versions

__all__ = [
    "RequestHeader",
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
    "request_header_version",
    "response_header_version",
]

REQUEST_HEADER = Message(
    "RequestHeader",
    None,
    Versions.parse("0-2"),
    Versions.parse("2+"),
    (
        F("RequestApiKey", "int16", "0+"),
        F("RequestApiVersion", "int16", "0+"),
        F("CorrelationId", "int32", "0+"),
        F("ClientId", "string", "1+", nullable="1+", flexible="none"),
    ),
)

RESPONSE_HEADER = Message(
    "ResponseHeader",
    None,
    Versions.parse("0-1"),
    Versions.parse("1+"),
    (F("CorrelationId", "int32", "0+"),),
)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The header of one request, as read off the wire.

    ``api_key`` is an ``ApiKey`` when Kafka assigns the number, a ``SeglogApiKey``
    for seglog's own admin APIs, else the raw int.
    ``header_version`` is 1 or 2 (0 only for ControlledShutdown v0); for an
    API this package does not declare it is 1, since which of its versions
    are flexible is unknown here (only the fields up to the client id are
    read from such a header, and those are the same in v1 and v2).
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def request_header_version(api_key: int, api_version: int, flexible: Versions | None) -> int:
    """The request header version for a request; ``flexible`` is the API's flexible versions, if known."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if flexible is not None and api_version in flexible else 1


def response_header_version(api_key: int, api_version: int, flexible: Versions | None) -> int:
    """The response header version for a request's answer."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if flexible is not None and api_version in flexible else 0


def header_from_body(body: dict[str, Any], header_version: int) -> RequestHeader:
    return RequestHeader(
        api_key=api_key_of(body["request_api_key"]),
        api_version=body["request_api_version"],
        correlation_id=body["correlation_id"],
        client_id=body["client_id"] if header_version >= 1 else None,
        header_version=header_version,
    )
