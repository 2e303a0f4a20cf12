"""Kafka's wire protocol as pure code: bytes in, values out, no sockets.

Each request and response is declared once, as data (``messages/``, written
in the small language of ``schema``), and one generic ``codec`` reads and
writes all of them, flexible versions included. ``api`` turns whole frames
into ``Request`` objects and body dicts back into response frames; the socket
server is the only part of seglog that touches the network.

Module map: ``types`` (primitive encodings), ``schema`` (the declaration
language), ``messages`` (the declarations), ``codec`` (the generic reader and
writer), ``headers`` (request/response headers and their version rules),
``api`` (frames and version negotiation), ``errors``.
"""

from .api import (
    SUPPORTED_VERSIONS,
    Request,
    api_versions_fallback_response,
    encode_request,
    encode_response,
    encode_response_buffers,
    parse_request,
    parse_response,
    supported_apis,
)
from .api_keys import ApiKey, SeglogApiKey
from .errors import ProtocolError, UnsupportedVersionError
from .headers import RequestHeader

__all__ = [
    "ApiKey",
    "SeglogApiKey",
    "RequestHeader",
    "Request",
    "parse_request",
    "encode_response",
    "encode_response_buffers",
    "encode_request",
    "parse_response",
    "api_versions_fallback_response",
    "ProtocolError",
    "UnsupportedVersionError",
    "SUPPORTED_VERSIONS",
    "supported_apis",
]
