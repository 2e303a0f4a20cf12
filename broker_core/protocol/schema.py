"""The small language the message declarations are written in.

A message is a list of fields, each carrying the facts of Kafka's message
JSON: its name, its type, the versions it exists in, the versions in which
it may be null, its tag and tagged versions for flexible versions, its
default. A declaration reads like the JSON it comes from::

    F("Topics", "[]MetadataRequestTopic", "0+", nullable="1+", fields=(
        F("TopicId", "uuid", "10+"),
        F("Name", "string", "0+", nullable="10+"),
    ))

Types are Kafka's spellings: ``int8`` ... ``int64``, ``uint16``, ``uint32``,
``float64``, ``bool``, ``string``, ``bytes``, ``records``, ``uuid``, ``[]T``
for arrays, and any other name for a struct, whose fields follow. Version
ranges are Kafka's too: ``"3+"``, ``"0-12"``, ``"7"``, ``"none"``.

This module only describes; ``codec`` reads and writes. Declarations are
checked when they are built (unknown types, tags outside flexible versions,
fields that exist in no valid version), so a mistake fails at import, not
on the first client that sends that version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .api_keys import ApiKey, SeglogApiKey
from .types import PRIMITIVE_TYPES, ZERO_UUID

__all__ = ["Versions", "Field", "Message", "Api", "F", "api", "snake_case", "SchemaError"]

#: Kafka's versions are int16; "N+" means up to the largest one.
MAX_VERSION = 0x7FFF

_UNSET: Any = object()


class SchemaError(ValueError):
    """A declaration that contradicts itself (raised at import time)."""


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive range of versions; empty when ``low > high``."""

    low: int
    high: int

    @classmethod
    def parse(cls, spec: str | Versions | None) -> Versions:
        if isinstance(spec, Versions):
            return spec
        if spec is None or spec == "none":
            return NO_VERSIONS
        spec = spec.strip()
        if spec.endswith("+"):
            return cls(int(spec[:-1]), MAX_VERSION)
        if "-" in spec:
            low, high = spec.split("-")
            return cls(int(low), int(high))
        return cls(int(spec), int(spec))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __bool__(self) -> bool:
        return self.low <= self.high

    def intersects(self, other: Versions) -> bool:
        return max(self.low, other.low) <= min(self.high, other.high)

    def __str__(self) -> str:
        if not self:
            return "none"
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = Versions(0, -1)


def snake_case(name: str) -> str:
    """Kafka's CamelCase field name as the body dict key: ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _kafka_default(type_name: str) -> Any:
    """The value a field takes when its declaration names no default (as Kafka's generator)."""
    if type_name == "bool":
        return False
    if type_name == "float64":
        return 0.0
    if type_name.startswith("int") or type_name.startswith("uint"):
        return 0
    if type_name == "string":
        return ""
    if type_name == "bytes":
        return b""
    if type_name == "records":
        return None
    if type_name == "uuid":
        return ZERO_UUID
    raise SchemaError(f"no default for type {type_name!r}")


@dataclass(frozen=True, eq=False)
class Field:
    """One field of a struct, with the facts of its line in Kafka's message JSON."""

    name: str
    type: str
    versions: Versions
    fields: tuple[Field, ...] = ()
    nullable: Versions = NO_VERSIONS
    tag: int | None = None
    tagged: Versions = NO_VERSIONS
    #: The Python value of Kafka's default. Arrays use () for "empty" and None
    #: for "null"; structs ignore it (their default is built from their fields,
    #: or is null for a nullable struct).
    default: Any = None
    #: Overrides the message's flexible versions for this field's own encoding
    #: (Kafka uses it once: the request header's ClientId is never compact).
    flexible: Versions | None = None
    # Derived in __post_init__:
    key: str = field(init=False)
    is_array: bool = field(init=False)
    element: str = field(init=False)
    is_struct: bool = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        is_array = self.type.startswith("[]")
        element = self.type[2:] if is_array else self.type
        is_struct = element not in PRIMITIVE_TYPES
        set_(self, "key", snake_case(self.name))
        set_(self, "is_array", is_array)
        set_(self, "element", element)
        set_(self, "is_struct", is_struct)
        where = f"field {self.name} ({self.type})"
        if is_struct and not self.fields:
            raise SchemaError(f"{where}: a struct type needs fields (or a primitive type name)")
        if not is_struct and self.fields:
            raise SchemaError(f"{where}: a primitive type takes no fields")
        if not self.versions:
            raise SchemaError(f"{where}: exists in no version")
        if self.nullable and not (is_array or is_struct or element in ("string", "bytes", "records")):
            raise SchemaError(f"{where}: only strings, bytes, records, arrays and structs can be nullable")
        if not is_array and not is_struct and self.default is None and not self.nullable:
            raise SchemaError(f"{where}: a null default needs nullable versions")
        if (self.tag is None) != (not self.tagged):
            raise SchemaError(f"{where}: a tag and tagged versions go together")
        if self.tagged and not (self.versions.low <= self.tagged.low and self.tagged.high <= self.versions.high):
            raise SchemaError(f"{where}: tagged versions {self.tagged} outside versions {self.versions}")
        keys = [f.key for f in self.fields]
        if len(set(keys)) != len(keys):
            raise SchemaError(f"{where}: duplicate field names")

    def make_default(self) -> Any:
        """A fresh default value (lists and struct dicts are new objects each time)."""
        if self.is_array:
            # An array's declared default is () for "empty" or None for "null".
            return None if self.default is None else []
        if self.is_struct:
            # A nullable struct defaults to null (Kafka's JSON says so for each one it has).
            return None if self.nullable else {f.key: f.make_default() for f in self.fields}
        return self.default

    @property
    def has_mutable_default(self) -> bool:
        return self.is_struct or (self.is_array and self.default is not None)


def F(
    name: str,
    type: str,
    versions: str,
    *,
    fields: Iterable[Field] = (),
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
    default: Any = _UNSET,
    flexible: str | None = None,
) -> Field:
    """Declare a field the way Kafka's JSON does; ``tagged`` defaults to ``versions`` when a tag is given.

    ``default`` is a Python value (``None`` for Kafka's ``"null"``); left out,
    it is Kafka's implicit default for the type (0, false, "", empty, zero uuid).
    """
    version_range = Versions.parse(versions)
    tagged_range = Versions.parse(tagged) if tagged is not None else (version_range if tag is not None else NO_VERSIONS)
    is_array = type.startswith("[]")
    element = type[2:] if is_array else type
    if is_array:
        if default is not _UNSET and default is not None:
            raise SchemaError(f"field {name}: an array's only explicit default is None (null)")
        value = () if default is _UNSET else None
    elif element not in PRIMITIVE_TYPES:
        if default is not _UNSET:
            raise SchemaError(f"field {name}: a struct's default comes from its fields")
        value = None
    else:
        value = _kafka_default(element) if default is _UNSET else default
    return Field(
        name=name,
        type=type,
        versions=version_range,
        fields=tuple(fields),
        nullable=Versions.parse(nullable),
        tag=tag,
        tagged=tagged_range,
        default=value,
        flexible=Versions.parse(flexible) if flexible is not None else None,
    )


@dataclass(frozen=True, eq=False)
class Message:
    """A request, response or header schema: the top-level struct and its version facts."""

    name: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        _check_struct(self.name, self.fields, self.valid, self.flexible)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


def _check_struct(where: str, fields: tuple[Field, ...], valid: Versions, flexible: Versions) -> None:
    keys = [f.key for f in fields]
    if len(set(keys)) != len(keys):
        raise SchemaError(f"{where}: duplicate field names {keys}")
    tags = [f.tag for f in fields if f.tag is not None]
    if len(set(tags)) != len(tags):
        raise SchemaError(f"{where}: duplicate tags {tags}")
    for f in fields:
        if not f.versions.intersects(valid):
            raise SchemaError(f"{where}.{f.name}: versions {f.versions} are outside the valid {valid}")
        if f.tagged and not (flexible.low <= f.tagged.low):
            raise SchemaError(f"{where}.{f.name}: tagged in {f.tagged} but flexible only from {flexible}")
        if f.fields:
            _check_struct(f"{where}.{f.name}", f.fields, valid, flexible)


@dataclass(frozen=True, eq=False)
class Api:
    """One API (Kafka's, or one of seglog's own): its key, the versions seglog declares, and its
    request and response schemas."""

    key: ApiKey | SeglogApiKey
    request: Message
    response: Message

    @property
    def versions(self) -> Versions:
        return self.request.valid


def api(key: ApiKey | SeglogApiKey, valid: str, flexible: str, *, request: Iterable[Field],
        response: Iterable[Field]) -> Api:
    """Declare an API; request and response share valid and flexible versions, as in Kafka."""
    valid_range, flexible_range = Versions.parse(valid), Versions.parse(flexible)
    stem = key.message_name
    return Api(
        key=key,
        request=Message(f"{stem}Request", int(key), valid_range, flexible_range, tuple(request)),
        response=Message(f"{stem}Response", int(key), valid_range, flexible_range, tuple(response)),
    )
