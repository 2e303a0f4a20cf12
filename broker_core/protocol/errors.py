"""The two exceptions the protocol package raises.

``ProtocolError`` means bytes (or a body dict) that do not fit the schema:
a truncated frame, a bad length, a null where the version allows none, a
body key the message does not declare. ``UnsupportedVersionError`` means the
frame's header was readable but names an API or version this package does not
declare; it carries that header, because Kafka answers an ApiVersions request
of a too-new version (with a v0 response) and closes the connection for any
other API, and both need the correlation id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .headers import RequestHeader

__all__ = ["ProtocolError", "UnsupportedVersionError"]


class ProtocolError(Exception):
    """Bytes or a body that do not fit the Kafka schema they were read or written with."""


class UnsupportedVersionError(ProtocolError):
    """A request whose API key or version is outside ``SUPPORTED_VERSIONS``."""

    #: Kafka's UNSUPPORTED_VERSION error code.
    error_code = 35

    def __init__(self, header: "RequestHeader", message: str) -> None:
        super().__init__(message)
        self.header = header
        self.message = message
