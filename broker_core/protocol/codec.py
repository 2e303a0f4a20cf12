"""The one codec: reads and writes any declared message at any of its versions.

``decode(message, version, buf, pos)`` and ``encode(message, version, body,
out)`` walk the declaration from ``schema``; nothing here knows a particular
API. The first use of a (struct, version) pair compiles the declaration into
a reader and a writer, closures over the primitive codecs of ``types``, and
caches them, so the per-request cost is the walk over the values, not over
the schema's version arithmetic.

Body dicts follow the contract of the package:

* decoding fills every declared key: fields absent from the version take
  their default, so a handler reads ``body["rack_id"]`` whatever the version;
* encoding takes fields missing from the dict at their default and refuses
  keys the struct does not declare (a misspelt key would otherwise vanish
  silently into a default);
* tagged fields of flexible versions are read into the dict when their tag is
  declared and skipped otherwise; they are written, in tag order, only when
  they differ from their default, as Kafka does.

Failures come out as ``ProtocolError`` naming the message, version and the
path of the field (``ProduceRequest v9: ... at topic_data[0].partition_data[1].records``);
``struct.error``, ``IndexError`` and ``UnicodeDecodeError`` never escape.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Callable, Mapping, NamedTuple

from .errors import ProtocolError
from .schema import Field, Message
from .types import FIXED_SIZE, Malformed, Reader, Writer, length_codec, primitive_codec, read_uvarint, uvarint

__all__ = ["decode", "encode", "StructCodec"]

_MISSING: Any = object()

# Errors a primitive read or write can raise on bad input; each becomes a
# Malformed with the path of the field it happened in.
_READ_ERRORS = (struct.error, IndexError, UnicodeDecodeError, OverflowError, ValueError)
_WRITE_ERRORS = (struct.error, TypeError, AttributeError, OverflowError, ValueError, UnicodeEncodeError)


def _read_failure(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "string is not valid UTF-8"
    if isinstance(exc, (struct.error, IndexError)):
        return "frame ends before the field does"
    return str(exc)


class StructCodec(NamedTuple):
    read: Reader
    write: Writer


# --- public entry points --------------------------------------------------------


def decode(message: Message, version: int, buf: Any, pos: int = 0) -> tuple[dict, int]:
    """Read ``message`` at ``version`` from ``buf`` at ``pos``: (body dict, position after it)."""
    codec = _struct_codec(message, version, message.is_flexible(version))
    try:
        return codec.read(buf, pos)
    except Malformed as exc:
        raise ProtocolError(_describe(message, version, exc)) from None
    except _READ_ERRORS as exc:
        raise ProtocolError(f"{message.name} v{version}: {_read_failure(exc)}") from None


def encode(message: Message, version: int, body: Mapping[str, Any], out: list) -> None:
    """Append the parts of ``body`` written as ``message`` at ``version`` to ``out``."""
    codec = _struct_codec(message, version, message.is_flexible(version))
    try:
        codec.write(body, out)
    except Malformed as exc:
        raise ProtocolError(_describe(message, version, exc)) from None


def _describe(message: Message, version: int, exc: Malformed) -> str:
    where = exc.where()
    return f"{message.name} v{version}: {exc.reason}" + (f" at {where}" if where else "")


# --- compilation ----------------------------------------------------------------


@lru_cache(maxsize=None)
def _struct_codec(owner: Message | Field, version: int, flexible: bool) -> StructCodec:
    # Message and Field compare by identity, so the cache key is cheap to hash.
    return _compile_struct(owner.fields, version, flexible)


def _field_codec(f: Field, version: int, flexible: bool) -> tuple[Reader, Writer]:
    compact = flexible if f.flexible is None else version in f.flexible
    nullable = version in f.nullable
    if f.is_array:
        if f.is_struct:
            element: tuple[Reader, Writer] = _struct_codec(f, version, flexible)
        else:
            # Elements of a primitive array are never null in Kafka's schemas.
            element = primitive_codec(f.element, compact=compact, nullable=False)
        return _array_codec(f.element, element, compact, nullable)
    if f.is_struct:
        codec = _struct_codec(f, version, flexible)
        return _nullable_struct_codec(codec) if nullable else codec
    return primitive_codec(f.element, compact=compact, nullable=nullable)


def _nullable_struct_codec(codec: StructCodec) -> tuple[Reader, Writer]:
    """A struct that may be null: an int8 marker before it, -1 for null and 1 for present (Kafka's)."""
    read_struct, write_struct = codec

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise Malformed("frame ends before the struct's null marker")
        marker = struct.unpack_from(">b", buf, pos)[0]
        if marker < 0:
            return None, pos + 1
        return read_struct(buf, pos + 1)

    def write(value: Any, out: list) -> None:
        if value is None:
            out.append(b"\xff")
            return
        out.append(b"\x01")
        write_struct(value, out)

    return read, write


def _array_codec(element_type: str, element: tuple[Reader, Writer], compact: bool, nullable: bool) -> tuple[Reader, Writer]:
    read_length, write_length = length_codec("array", compact)
    read_element, write_element = element
    fixed = FIXED_SIZE.get(element_type)

    def read(buf: Any, pos: int) -> tuple[Any, int]:
        n, pos = read_length(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise Malformed(f"array length {n}" + (" (null) but the field is not nullable" if n == -1 else ""))
        left = len(buf) - pos
        # Every element takes at least a byte, so a count past the bytes left
        # is garbage; checking it first bounds the loop below (as Kafka does).
        if n > left:
            raise Malformed(f"array of {n} elements but only {left} bytes left")
        if fixed is not None:
            code, size = fixed
            end = pos + n * size
            if end > len(buf):
                raise Malformed(f"array of {n} {element_type} runs past the end of the frame")
            return list(struct.unpack_from(f">{n}{code}", buf, pos)), end
        items = []
        append = items.append
        i = 0
        try:
            for i in range(n):
                value, pos = read_element(buf, pos)
                append(value)
        except Malformed as exc:
            exc.path.append(f"[{i}]")
            raise
        except _READ_ERRORS as exc:
            raise Malformed(_read_failure(exc), [f"[{i}]"]) from None
        return items, pos

    def write(value: Any, out: list) -> None:
        if value is None:
            if not nullable:
                raise Malformed("None for an array that is not nullable in this version")
            write_length(-1, out)
            return
        write_length(len(value), out)
        if fixed is not None:
            try:
                out.append(struct.pack(f">{len(value)}{fixed[0]}", *value))
            except _WRITE_ERRORS as exc:
                raise Malformed(f"cannot write {_short(value)} as []{element_type}: {exc}") from None
            return
        i = 0
        try:
            for i, item in enumerate(value):
                write_element(item, out)
        except Malformed as exc:
            exc.path.append(f"[{i}]")
            raise
        except _WRITE_ERRORS as exc:
            raise Malformed(f"cannot write {_short(value[i])} as {element_type}: {exc}", [f"[{i}]"]) from None

    return read, write


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _compile_struct(fields: tuple[Field, ...], version: int, flexible: bool) -> StructCodec:
    readers: list[tuple[str, Reader]] = []
    writers: list[tuple[str, Writer, Callable[[], Any], str]] = []
    tagged: list[tuple[int, str, Reader, Writer, Any, str]] = []
    const_defaults: dict[str, Any] = {}
    mutable_defaults: list[tuple[str, Callable[[], Any]]] = []
    all_keys = frozenset(f.key for f in fields)

    for f in fields:
        present = version in f.versions
        is_tagged = present and flexible and version in f.tagged
        if not present or is_tagged:
            # Filled in before reading, so the dict holds every declared key;
            # a tagged field present on the wire overwrites its default.
            if f.has_mutable_default:
                mutable_defaults.append((f.key, f.make_default))
            else:
                const_defaults[f.key] = f.default
        if not present:
            continue
        read, write = _field_codec(f, version, flexible)
        if is_tagged:
            assert f.tag is not None
            tagged.append((f.tag, f.key, read, write, f.make_default(), f.type))
        else:
            readers.append((f.key, read))
            default = f.make_default if f.has_mutable_default else _constant(f.default)
            writers.append((f.key, write, default, f.type))
    tagged.sort(key=lambda entry: entry[0])
    tag_readers = {tag: (key, read) for tag, key, read, _w, _d, _t in tagged}

    def read_struct(buf: Any, pos: int) -> tuple[dict, int]:
        body = dict(const_defaults) if const_defaults else {}
        for key, make in mutable_defaults:
            body[key] = make()
        for key, read in readers:
            try:
                body[key], pos = read(buf, pos)
            except Malformed as exc:
                exc.path.append(key)
                raise
            except _READ_ERRORS as exc:
                raise Malformed(_read_failure(exc), [key]) from None
        if flexible:
            pos = _read_tagged_fields(buf, pos, body, tag_readers)
        return body, pos

    def write_struct(value: Any, out: list) -> None:
        try:
            get = value.get
        except AttributeError:
            raise Malformed(f"expected a dict for a struct, got {type(value).__name__}") from None
        if not all_keys.issuperset(value):
            unknown = sorted(set(value) - all_keys)
            raise Malformed(f"unknown field(s) {unknown}; this struct declares {sorted(all_keys)}")
        for key, write, default, type_name in writers:
            item = get(key, _MISSING)
            if item is _MISSING:
                item = default()
            try:
                write(item, out)
            except Malformed as exc:
                exc.path.append(key)
                raise
            except _WRITE_ERRORS as exc:
                raise Malformed(f"cannot write {_short(item)} as {type_name}: {exc}", [key]) from None
        if flexible:
            if not tagged:
                out.append(b"\x00")
                return
            chosen: list[tuple[int, bytes]] = []
            for tag, key, _read, write, default_value, type_name in tagged:
                item = get(key, _MISSING)
                if item is _MISSING or item == default_value:
                    continue
                parts: list = []
                try:
                    write(item, parts)
                except Malformed as exc:
                    exc.path.append(key)
                    raise
                except _WRITE_ERRORS as exc:
                    raise Malformed(f"cannot write {_short(item)} as {type_name}: {exc}", [key]) from None
                chosen.append((tag, b"".join(parts)))
            out.append(uvarint(len(chosen)))
            for tag, data in chosen:
                out.append(uvarint(tag))
                out.append(uvarint(len(data)))
                out.append(data)

    return StructCodec(read_struct, write_struct)


def _read_tagged_fields(buf: Any, pos: int, body: dict, tag_readers: dict[int, tuple[str, Reader]]) -> int:
    try:
        count, pos = read_uvarint(buf, pos)
    except IndexError:
        raise Malformed("frame ends before the tagged fields") from None
    for _ in range(count):
        try:
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
        except IndexError:
            raise Malformed("frame ends inside the tagged fields") from None
        end = pos + size
        if end > len(buf):
            raise Malformed(f"tagged field {tag} of {size} bytes runs past the end of the frame")
        entry = tag_readers.get(tag)
        if entry is not None:
            key, read = entry
            try:
                body[key], used_to = read(buf, pos)
            except Malformed as exc:
                exc.path.append(key)
                raise
            except _READ_ERRORS as exc:
                raise Malformed(_read_failure(exc), [key]) from None
            if used_to != end:
                raise Malformed(f"tagged field {tag} declares {size} bytes but its value takes {used_to - pos}", [key])
        # Unknown tags are skipped: they belong to versions newer than ours.
        pos = end
    return pos


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
