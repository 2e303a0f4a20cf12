"""Primitive wire types of the Kafka protocol: how one value becomes bytes and back.

Every reader has the shape ``read(buf, pos) -> (value, new_pos)`` and every
writer ``write(value, out)``, appending ``bytes``-like parts to the list
``out``; the codec joins the parts once at the end of a frame, so a records
payload handed in by a handler is copied exactly once, into the frame.

``buf`` is ``bytes`` or a ``memoryview`` of bytes. Fixed-size reads go through
``struct.unpack_from`` (no slicing); on a truncated buffer they raise
``struct.error`` or ``IndexError``, which the codec turns into a
``ProtocolError`` with the field's path. Variable-length reads check their
length against the buffer themselves, because a slice past the end would
silently come back short.

Kafka has two encodings of strings, bytes and arrays: the classic one (int16
or int32 length, -1 for null) and the compact one of flexible versions
(unsigned varint of length + 1, 0 for null). ``primitive_codec`` picks the
reader and writer for a type name, encoding and nullability.
"""

from __future__ import annotations

import base64
import struct
import uuid as _uuid
from typing import Any, Callable, NamedTuple

from .errors import ProtocolError

__all__ = [
    "Reader",
    "Writer",
    "PRIMITIVE_TYPES",
    "FIXED_SIZE",
    "ZERO_UUID",
    "topic_id_bytes",
    "topic_id_text",
    "Malformed",
    "read_uvarint",
    "uvarint",
    "primitive_codec",
    "length_codec",
    "PrimitiveCodec",
]

Reader = Callable[[Any, int], "tuple[Any, int]"]
Writer = Callable[[Any, list], None]

#: The all-zero uuid: Kafka's null / unset topic id.
ZERO_UUID = bytes(16)


def topic_id_bytes(topic_id: str) -> bytes:
    """A stored topic id (URL-safe base64 text) as the 16 bytes the wire carries."""
    return base64.urlsafe_b64decode(topic_id + "==")


def topic_id_text(raw: bytes) -> str:
    """The 16 bytes of a topic id on the wire as its stored text (Kafka's ``Uuid.toString``)."""
    return base64.urlsafe_b64encode(bytes(raw)).decode("ascii").rstrip("=")


class Malformed(ProtocolError):
    """A read or write that failed inside a message; ``path`` grows outward as it propagates."""

    def __init__(self, reason: str, path: list[str] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        # Innermost first: each enclosing struct or array appends its own step.
        self.path: list[str] = path if path is not None else []

    def where(self) -> str:
        text = ""
        for step in reversed(self.path):
            text += step if step.startswith("[") or not text else "." + step
        return text


_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_FLOAT64 = struct.Struct(">d")

#: struct format character and size of each fixed-size type (arrays of these are read in one call).
FIXED_SIZE: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
}

PRIMITIVE_TYPES = frozenset(
    ["bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes", "records", "uuid"]
)


# --- unsigned varints (lengths, counts and tags of flexible versions) ---------

_SMALL_UVARINTS = [bytes([n]) for n in range(0x80)]


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint: 7 bits a byte, least significant group first."""
    if 0 <= value < 0x80:
        return _SMALL_UVARINTS[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise Malformed(f"{value} does not fit an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        # Kafka reads at most 5 bytes for a 32-bit varint; more is garbage, and
        # stopping here keeps a run of 0xff bytes from looping to the end.
        if shift > 28:
            raise Malformed("unsigned varint longer than 5 bytes")


# --- lengths: classic int16/int32 or compact uvarint(n + 1) ---------------------


class LengthCodec(NamedTuple):
    read: Callable[[Any, int], tuple[int, int]]  # -1 means null
    write: Callable[[int, list], None]


def _read_int16_length(buf: Any, pos: int) -> tuple[int, int]:
    return _INT16.unpack_from(buf, pos)[0], pos + 2


def _read_int32_length(buf: Any, pos: int) -> tuple[int, int]:
    return _INT32.unpack_from(buf, pos)[0], pos + 4


def _read_compact_length(buf: Any, pos: int) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos)
    return raw - 1, pos


def _write_int16_length(n: int, out: list) -> None:
    if n > 0x7FFF:
        raise Malformed(f"length {n} does not fit an int16 length prefix")
    out.append(_INT16.pack(n))


def _write_int32_length(n: int, out: list) -> None:
    out.append(_INT32.pack(n))


def _write_compact_length(n: int, out: list) -> None:
    out.append(uvarint(n + 1))


_STRING_LENGTH = LengthCodec(_read_int16_length, _write_int16_length)
_BYTES_LENGTH = LengthCodec(_read_int32_length, _write_int32_length)
_COMPACT_LENGTH = LengthCodec(_read_compact_length, _write_compact_length)


def length_codec(kind: str, compact: bool) -> LengthCodec:
    """The length prefix of a ``string`` (int16), ``bytes``/``records``/array (int32), or compact."""
    if compact:
        return _COMPACT_LENGTH
    return _STRING_LENGTH if kind == "string" else _BYTES_LENGTH


# --- fixed-size types ---------------------------------------------------------


def _fixed(st: struct.Struct) -> tuple[Reader, Writer]:
    unpack_from, pack, size = st.unpack_from, st.pack, st.size

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        return unpack_from(buf, pos)[0], pos + size

    def write(value: Any, out: list) -> None:
        out.append(pack(value))

    return read, write


def _read_bool(buf: Any, pos: int) -> tuple[bool, int]:
    return _INT8.unpack_from(buf, pos)[0] != 0, pos + 1


def _write_bool(value: Any, out: list) -> None:
    out.append(b"\x01" if value else b"\x00")


def _read_uuid(buf: Any, pos: int) -> tuple[bytes, int]:
    end = pos + 16
    if end > len(buf):
        raise Malformed("uuid runs past the end of the frame")
    return bytes(buf[pos:end]), end


def _write_uuid(value: Any, out: list) -> None:
    if value is None:
        out.append(ZERO_UUID)
        return
    if isinstance(value, _uuid.UUID):
        value = value.bytes
    if len(value) != 16:
        raise Malformed(f"a uuid is 16 bytes, got {len(value)}")
    out.append(value)


_FIXED_CODECS: dict[str, tuple[Reader, Writer]] = {
    "bool": (_read_bool, _write_bool),
    "int8": _fixed(_INT8),
    "int16": _fixed(_INT16),
    "uint16": _fixed(_UINT16),
    "int32": _fixed(_INT32),
    "uint32": _fixed(_UINT32),
    "int64": _fixed(_INT64),
    "float64": _fixed(_FLOAT64),
    "uuid": (_read_uuid, _write_uuid),
}


# --- variable-length types ----------------------------------------------------


def _variable(kind: str, compact: bool, nullable: bool) -> tuple[Reader, Writer]:
    read_length, write_length = length_codec(kind, compact)
    is_string = kind == "string"

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise Malformed(f"{kind} length {n}" + (" (null) but the field is not nullable" if n == -1 else ""))
        end = pos + n
        if end > len(buf):
            raise Malformed(f"{kind} of {n} bytes runs past the end of the frame ({len(buf) - pos} bytes left)")
        if is_string:
            return str(buf[pos:end], "utf-8"), end
        value = buf[pos:end]
        # One copy out of the frame: a bytes frame slices to bytes; a
        # memoryview slices without copying and is copied here once.
        return (value if type(value) is bytes else bytes(value)), end

    def write(value: Any, out: list) -> None:
        if value is None:
            if not nullable:
                raise Malformed(f"None for a {kind} field that is not nullable in this version")
            write_length(-1, out)
            return
        if is_string:
            value = value.encode("utf-8")
        # Records are appended by reference: the frame join is their only copy.
        write_length(len(value), out)
        out.append(value)

    return read, write


class PrimitiveCodec(NamedTuple):
    read: Reader
    write: Writer


def primitive_codec(kind: str, *, compact: bool, nullable: bool) -> PrimitiveCodec:
    """Reader and writer for one primitive type in one encoding."""
    if kind in _FIXED_CODECS:
        return PrimitiveCodec(*_FIXED_CODECS[kind])
    if kind in ("string", "bytes", "records"):
        return PrimitiveCodec(*_variable(kind, compact, nullable))
    raise ValueError(f"unknown primitive type {kind!r}")
