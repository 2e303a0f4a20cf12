"""Test helpers for the protocol package: sample bodies built from the declarations,
and a bridge to kafka-python's own message classes for cross-checks.

The bridge converts between our body dicts and kafka-python's objects by
walking *our* declaration, so a field kafka-python names or types differently
shows up as a failed conversion or comparison, not as a silent skip.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import uuid
from functools import lru_cache
from typing import Any

from broker_core.protocol.messages import APIS, KAFKA_APIS
from broker_core.protocol.schema import Field, Message
from broker_core.protocol.types import ZERO_UUID

def _cases(apis) -> list[tuple]:
    return [
        (api.key, kind, version)
        for api in apis.values()
        for kind in ("request", "response")
        for version in range(api.versions.low, api.versions.high + 1)
    ]


#: Every declared message version, seglog's own admin APIs included (round trips, fuzzing).
ALL_CASES = _cases(APIS)
#: Kafka's message versions only: what kafka-python and Kafka's JSON can be compared with.
KAFKA_CASES = _cases(KAFKA_APIS)


def case_id(case: tuple) -> str:
    key, kind, version = case
    return f"{key.name}-{kind}-v{version}"


def message_of(key: Any, kind: str) -> Message:
    api = APIS[key]
    return api.request if kind == "request" else api.response


# --- sample bodies ----------------------------------------------------------------


def _sample_value(f: Field, version: int, path: str, nulls: bool) -> Any:
    """A value unlike the field's default, so a dropped field cannot pass by luck."""
    seed = sum(path.encode()) % 97
    if nulls and version in f.nullable:
        return None
    if f.is_array:
        if f.is_struct:
            return [sample_body(f.fields, version, f"{path}[{i}]", nulls) for i in range(2)]
        return [_primitive_sample(f.element, seed + i, path) for i in range(3)]
    if f.is_struct:
        return sample_body(f.fields, version, path, nulls)
    return _primitive_sample(f.element, seed, path)


def _primitive_sample(kind: str, seed: int, path: str) -> Any:
    if kind == "bool":
        return True
    if kind == "int8":
        return 3 + seed % 50
    if kind == "int16":
        return 300 + seed
    if kind == "uint16":
        return 60000 + seed
    if kind == "int32":
        return 70000 + seed
    if kind == "uint32":
        return 3_000_000_000 + seed
    if kind == "int64":
        return 1_700_000_000_000 + seed
    if kind == "float64":
        return 0.5 + seed
    if kind == "string":
        # Long enough that compact lengths need two varint bytes, non-ASCII so
        # lengths count bytes, not characters.
        return f"{path}-ä-" + "x" * 130
    if kind == "bytes":
        return bytes(range(seed, seed + 140))
    if kind == "records":
        return b"\x00" * 12 + bytes(range(200)) + b"\xff" * 100
    if kind == "uuid":
        return bytes(range(1 + seed % 10, 17 + seed % 10))
    raise AssertionError(kind)


def sample_body(fields: Any, version: int, path: str = "", nulls: bool = False) -> dict:
    """A body with every field of ``version`` set (fields of other versions left out)."""
    if isinstance(fields, Message):
        fields = fields.fields
    return {
        f.key: _sample_value(f, version, f"{path}.{f.key}", nulls)
        for f in fields
        if version in f.versions
    }


def complete(fields: Any, version: int, body: dict) -> dict:
    """``body`` as decoding returns it: every declared key, defaults where the version lacks the field."""
    if isinstance(fields, Message):
        fields = fields.fields
    out = {}
    for f in fields:
        if f.key not in body:
            out[f.key] = f.make_default()
            continue
        value = body[f.key]
        if f.is_struct and value is not None:
            value = [complete(f.fields, version, v) for v in value] if f.is_array else complete(f.fields, version, value)
        out[f.key] = value
    return out


def project(fields: Any, version: int, body: dict) -> dict:
    """Only the keys of fields that exist in ``version`` (for comparing with a decoder that fills nothing)."""
    if isinstance(fields, Message):
        fields = fields.fields
    out = {}
    for f in fields:
        if version not in f.versions:
            continue
        value = body[f.key]
        if f.is_struct and value is not None:
            value = [project(f.fields, version, v) for v in value] if f.is_array else project(f.fields, version, value)
        out[f.key] = value
    return out


# --- kafka-python bridge ----------------------------------------------------------


@lru_cache(maxsize=None)
def _kp_classes() -> dict:
    import kafka.protocol as kp
    from kafka.protocol.api_message import ApiMessage

    found = {}
    for info in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".schemas" in info.name or info.name.endswith("generate_stubs"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and getattr(obj, "_json", None):
                found[(obj.API_KEY, obj.type)] = obj
    return found


def kp_class(key: int, kind: str) -> Any:
    return _kp_classes()[(int(key), kind)]


def to_kp(message: Message, version: int, body: dict) -> Any:
    """A kafka-python message object (of the versioned class) holding ``body``."""
    cls = kp_class(message.api_key, "request" if message.name.endswith("Request") else "response")
    kwargs = _to_kp_fields(message.fields, cls._struct, version, body)
    return cls[version](**kwargs)


def _kp_name(f: Field, kp_fields: dict) -> str:
    if f.key in kp_fields:
        return f.key
    # kafka-python renames the int32 *AuthorizedOperations fields to
    # authorized_operations and reads them as sets of bit positions.
    if f.key.endswith("authorized_operations") and kp_fields["authorized_operations"].type_str == "bitfield":
        return "authorized_operations"
    raise KeyError(f"kafka-python has no field {f.key}")


def _to_kp_fields(fields: tuple[Field, ...], kp_struct: Any, version: int, body: dict) -> dict:
    kwargs = {}
    for f in fields:
        if version not in f.versions or f.key not in body:
            continue
        name = _kp_name(f, kp_struct.fields)
        kwargs[name] = _to_kp_value(f, kp_struct.fields[name], version, body[f.key])
    return kwargs


def _to_kp_value(f: Field, kp_field: Any, version: int, value: Any) -> Any:
    if value is None:
        return None
    if kp_field.type_str == "bitfield":
        return None if value == -(1 << 31) else {bit for bit in range(32) if value >> bit & 1}
    if f.is_struct:
        make = kp_field.data_class
        if f.is_array:
            return [make(**_to_kp_fields(f.fields, kp_field, version, v)) for v in value]
        return make(**_to_kp_fields(f.fields, kp_field, version, value))
    if f.element == "uuid":
        return None if value == ZERO_UUID else uuid.UUID(bytes=value)
    return value


def from_kp(message: Message, version: int, obj: Any) -> dict:
    """A kafka-python decoded object as our body dict, restricted to the fields of ``version``."""
    return _from_kp_fields(message.fields, version, obj)


def _from_kp_fields(fields: tuple[Field, ...], version: int, obj: Any) -> dict:
    out = {}
    kp_fields = obj._struct.fields
    for f in fields:
        if version not in f.versions:
            continue
        name = _kp_name(f, kp_fields)
        value = getattr(obj, name)
        if kp_fields[name].type_str == "bitfield":
            value = -(1 << 31) if value is None else sum(1 << bit for bit in value)
        out[f.key] = _from_kp_value(f, version, value)
    return out


def _from_kp_value(f: Field, version: int, value: Any) -> Any:
    if f.is_struct:
        if value is None:
            # kafka-python leaves an absent tagged struct as None; ours is its default.
            return None if f.is_array and version in f.nullable else project(f.fields, version, f.make_default())
        if f.is_array:
            return [_from_kp_fields(f.fields, version, v) for v in value]
        return _from_kp_fields(f.fields, version, value)
    if f.element == "uuid":
        return ZERO_UUID if value is None else value.bytes
    if f.element in ("bytes", "records") and value is not None:
        return bytes(value)
    if f.is_array and value is not None:
        return list(value)
    return value
