"""Records inside a v2 batch: Kafka's zigzag-varint record layout.

    length: varint            (bytes that follow)
    attributes: int8          (unused, 0)
    timestampDelta: varlong   (from the batch's baseTimestamp)
    offsetDelta: varint       (from the batch's baseOffset)
    keyLength: varint, key    (-1: null key)
    valueLength: varint, value (-1: null value)
    headers: varint count, then per header
        headerKeyLength: varint, headerKey (UTF-8, never null)
        headerValueLength: varint, headerValue (-1: null value)

This module encodes records for builders and decodes them one by one for the
broker's own needs; bulk decoding for Spark lives in ``arrow``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import CorruptRecordError
from .varint import decode_varint, decode_varlong, encode_varint, encode_varlong

_NULL_LENGTH = encode_varint(-1)
# One- and two-byte varints cover nearly every length and delta; caching them
# keeps the encoder out of the general loop.
_SMALL_VARINTS = tuple(encode_varint(i) for i in range(-1, 8192))


def _varint(value: int) -> bytes:
    if -1 <= value < 8191:
        return _SMALL_VARINTS[value + 1]
    return encode_varint(value)


@dataclass(frozen=True, slots=True)
class Header:
    """A record header: a UTF-8 key and a nullable binary value."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to be written: what a producer supplies (Kafka's SimpleRecord)."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int | None = None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class Record:
    """A record read back from a batch, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0

    @property
    def has_key(self) -> bool:
        return self.key is not None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


def _nullable_bytes(data: bytes | None) -> bytes:
    if data is None:
        return _NULL_LENGTH
    return _varint(len(data)) + data


def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: tuple[Header, ...] | list[Header] = (), attributes: int = 0) -> bytes:
    """One record, length prefix included."""
    parts = [bytes((attributes & 0xFF,)), encode_varlong(timestamp_delta), _varint(offset_delta),
             _nullable_bytes(key), _nullable_bytes(value), _varint(len(headers))]
    for header in headers:
        if header.key is None:
            raise ValueError("a record header key cannot be null")
        key_bytes = header.key.encode("utf-8")
        parts.append(_varint(len(key_bytes)))
        parts.append(key_bytes)
        parts.append(_nullable_bytes(header.value))
    body = b"".join(parts)
    return _varint(len(body)) + body


def _read_nullable(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid negative {what} length {length}", position=pos)
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"{what} of {length} bytes runs past the end of its record", position=pos)
    return bytes(buf[pos:pos + length]), pos + length


def decode_record(buf, pos: int, base_offset: int, base_timestamp: int,
                  log_append_time: int | None = None) -> tuple[Record, int]:
    """Decode the record whose length prefix starts at ``pos``.

    Returns the record and the position after it. ``log_append_time``, when the
    batch uses LogAppendTime, replaces every record's timestamp, as in Kafka.
    """
    start = pos
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 0 or end > len(buf):
        raise CorruptRecordError(f"record length {length} runs past the end of the records", position=start)
    try:
        attributes = buf[pos]
        timestamp_delta, pos = decode_varlong(buf, pos + 1)
        offset_delta, pos = decode_varint(buf, pos)
        key, pos = _read_nullable(buf, pos, end, "key")
        value, pos = _read_nullable(buf, pos, end, "value")
        header_count, pos = decode_varint(buf, pos)
        if header_count < 0:
            raise CorruptRecordError(f"invalid negative header count {header_count}", position=pos)
        headers = []
        for _ in range(header_count):
            key_length, pos = decode_varint(buf, pos)
            if key_length < 0 or pos + key_length > end:
                raise CorruptRecordError(f"invalid header key length {key_length}", position=pos)
            header_key = bytes(buf[pos:pos + key_length]).decode("utf-8")
            header_value, pos = _read_nullable(buf, pos + key_length, end, "header value")
            headers.append(Header(header_key, header_value))
    except CorruptRecordError as exc:
        raise CorruptRecordError(exc.reason, position=start) from None
    except (IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecordError(f"malformed record: {exc}", position=start) from None
    if pos != end:
        raise CorruptRecordError(f"record declares {length} bytes but its fields use {pos - (end - length)}",
                                 position=start)
    timestamp = log_append_time if log_append_time is not None else base_timestamp + timestamp_delta
    return Record(base_offset + offset_delta, timestamp, key, value, tuple(headers), attributes), end
