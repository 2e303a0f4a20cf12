"""A coordinator's record key or value: an int16 version, then the message at that version (Kafka's
``MessageUtil.toVersionPrefixedBytes``), as ``__consumer_offsets`` and ``__transaction_state`` hold them."""

from __future__ import annotations

import struct

from .codec import decode, encode
from .errors import ProtocolError
from .schema import Message

__all__ = ["encode_versioned", "decode_versioned", "record_version"]

_VERSION = struct.Struct(">h")


def record_version(data: bytes) -> int | None:
    """The version a record starts with; None for one too short to hold it."""
    return _VERSION.unpack_from(data)[0] if len(data) >= _VERSION.size else None


def encode_versioned(message: Message, version: int, body: dict, error: type[Exception]) -> bytes:
    """``body`` as ``message`` at ``version``, version first; a body that does not fit raises ``error``."""
    if version not in message.valid:
        raise error(f"{message.name} has versions {message.valid}, not {version}")
    out: list = [_VERSION.pack(version)]
    try:
        encode(message, version, body, out)
    except ProtocolError as exc:
        raise error(str(exc)) from None
    return b"".join(bytes(part) for part in out)


def decode_versioned(message: Message, data: bytes, error: type[Exception]) -> tuple[int, dict]:
    """(version, body) of a version-prefixed ``message``; trailing bytes are left alone, as Kafka's
    readers leave them. A record too short, of a version ``message`` lacks, or malformed raises ``error``."""
    if len(data) < _VERSION.size:
        raise error(f"{message.name} of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data)
    if version not in message.valid:
        raise error(f"{message.name} version {version} is not supported (versions {message.valid} are)")
    try:
        body, _ = decode(message, version, memoryview(data), _VERSION.size)
    except ProtocolError as exc:
        raise error(str(exc)) from None
    return version, body
